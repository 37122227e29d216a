/* Hibernation of a session's sandbox (README.md, "Hibernation"): the
 * supervisor's side.  A session's sandbox that stayed idle for
 * hibernate_after seconds is checkpointed to disk (the backend's
 * checkpoint(): runsc checkpoint) and stopped, and its supervisor exits, so
 * that nothing of the session is left in memory.  The next call starts a
 * supervisor as for any session without one; it finds the image, restores
 * the sandbox from it (restore()) instead of booting a new one, and wakes
 * the executor (frame W) before the call goes in.
 *
 * In the session folder (the names are in sandbox/client.h):
 *   hibernate.new/  an image being written (runsc's checkpoint.img); a
 *                   supervisor that finds one removes it (alone, it is a
 *                   checkpoint the service's end interrupted: state_lost)
 *   hibernated/     a complete image: checkpoint.img and info.json (format,
 *                   version of the service, when, the last call's token name,
 *                   its size, how long the checkpoint took).  Published by a
 *                   rename once the image and the workspace's image are on
 *                   disk (fsync), so that a restore after a restart of the
 *                   service or of the host finds all it needs in the folder:
 *                   this, work.img, packages/ and egress/ (the bundle is
 *                   written again with the folder's current paths)
 *   state-lost      a restore failed: the next call's result says state_lost;
 *                   removed once a result said it
 *
 * Consistency.  An image is written only while nothing runs and nothing can
 * start: no call, nothing waiting (supervisor.c: sandbox_busy()), and the
 * supervisor holds the session's call.lock, which every responder takes
 * before it talks to the supervisor (fcgi/call.c, fcgi/resources.c) and
 * the keeper takes before it expires a session.  call.lock is released
 * only after sup.lock, once the supervisor has let go of the folder: the
 * responder that waited for it then starts the next supervisor.  The
 * workspace is unmounted (and so flushed) before the image is published
 * and mounted again before the restore: the restored processes find the
 * files they had open.
 *
 * An image restores at most once: it is removed as soon as the restored
 * executor answers the wake (from then on the sandbox moves on from it), so
 * no random state is ever replayed; the executor also reseeds and replaces
 * the processes it forked before the checkpoint (its spares).  Nothing that
 * fails loses the session: a restore that fails, an image that is corrupt,
 * of another version of the service, or whose executor does not answer the
 * wake in RESTORE_WAKE_MS, gives a new sandbox with the same workspace and a
 * result that says state_lost.  A checkpoint that fails leaves the sandbox
 * running (and it is not tried again) or, when the sandbox did not survive
 * it, ends it with state_lost for the next call.
 *
 * Never hibernated: a pre-started sandbox (pool/: only a folder in
 * sessions/ is), a busy one, a backend without checkpoint(), and nothing
 * while the state folder's disk is below disk_floor. */
#ifndef MCP_HIBERNATE_H
#define MCP_HIBERNATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/policy.h"
#include "common/settings.h"
#include "sandbox/backend.h"

#define RESTORE_WAKE_MS 20000 /* a restored executor answers the wake within this, or the restore failed */

struct hibernation {
  const struct mcp_config *cfg;
  const struct sandbox_ops *ops;
  int dirfd;          /* the sandbox's folder (borrowed) */
  dev_t sessions_dev; /* <state>/sessions: a folder below it belongs to a session */
  ino_t sessions_ino;
  int call_lock;      /* the session's call.lock, held from the checkpoint to exit; -1: not held */
  int64_t idle_since; /* now_ms() since when the sandbox is idle; 0: not ready yet */
  bool failed;        /* a checkpoint failed: not tried again */
  bool restoring;     /* restored, the executor not awake yet */
  int64_t restore_started;
  bool state_lost;                 /* the next result says state_lost (STATE_LOST_FILE on disk too) */
  bool restored;                   /* the next result says restored (for the audit log) */
  char token[POLICY_NAME_MAX + 1]; /* the last call's token name, for the audit log */
};

void hibernate_init(struct hibernation *h, const struct mcp_config *cfg, const struct sandbox_ops *ops, int dirfd);
/* The sandbox is idle from now (ready, or a call ended; token: that call's, or NULL). */
void hibernate_idle(struct hibernation *h, const char *token);
/* Milliseconds until the sandbox is due to hibernate (for poll), or -1. */
int hibernate_timeout_ms(struct hibernation *h, int64_t now);
/* The folder is a session's (in sessions/, by its parent's inode), not a
 * sandbox pre-started in pool/ that no session has claimed yet. */
bool hibernate_in_sessions(const struct hibernation *h);
/* Idle long enough, in a session's folder, with a backend that can. */
bool hibernate_due(struct hibernation *h, int64_t now);
/* Whether the due sandbox may go now: true once the supervisor holds
 * call.lock; false when a responder holds it or the disk is below
 * disk_floor (then the sandbox counts as idle from now: try again later). */
bool hibernate_begin(struct hibernation *h);
/* After hibernate_begin (and the executor's H): checkpoint the idle
 * sandbox sb into the folder and stop it.  0: done (the supervisor exits).
 * -1: it failed (*err) and the sandbox is not tried again; it may have
 * survived or not.  Either way call.lock stays held until hibernate_release
 * (the supervisor's exit, or its going on with a sandbox that survived). */
int hibernate_save(struct hibernation *h, struct sandbox_ctx *sb, mcp_error_t *err);
/* Start the sandbox: restore it when the folder holds an image, else (or
 * when that fails: state_lost) boot a new one.  1: restored (wake it with
 * hibernate_wake), 0: booted, -1: no sandbox (*err). */
int hibernate_start(struct hibernation *h, struct sandbox_ctx *sb, int stdin_fd, int stdout_fd, mcp_error_t *err);
/* Send the restored executor its wake frame (fresh entropy from the host). */
int hibernate_wake(struct hibernation *h, int exec_in);
/* The restored executor answered: the image goes, the restore counts. */
void hibernate_woke(struct hibernation *h, const struct sandbox_ctx *sb);
/* The restored sandbox died or did not answer the wake: the image goes, the
 * next result says state_lost; the supervisor starts a new sandbox. */
void hibernate_restore_failed(struct hibernation *h, const struct sandbox_ctx *sb, const char *why);
/* The sandbox's memory is gone for good (why: for the log): the next
 * result says state_lost. */
void hibernate_state_lost(struct hibernation *h, const struct sandbox_ctx *sb, const char *why);
/* Append what the next call's result must say (`"state_lost":true`, ...) to
 * the comma-separated members in extra; then hibernate_result_sent() once a
 * client got that result. */
void hibernate_result_extra(const struct hibernation *h, char *extra, size_t size);
void hibernate_result_sent(struct hibernation *h);
/* At exit, after sup.lock: let responders in again. */
void hibernate_release(struct hibernation *h);

#endif
