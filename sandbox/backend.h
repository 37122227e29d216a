/* How a session's sandbox is started and destroyed: an ops table, after
 * crun's struct libcrun_cgroup_manager.  The supervisor (mcp-sandboxd) is the
 * only user.  Two backends share the interface:
 *   runsc  - gVisor, what the service runs;
 *   direct - the executor as a plain host process, with no isolation at all,
 *            so unit tests exercise the whole call path without root or
 *            gVisor.  Never configure it for a service that runs untrusted code.
 *
 * start() connects the executor's stdin and stdout to the given fds and
 * returns once the executor process exists (it reports readiness itself).
 * destroy() kills every process of the sandbox, releases its resources and
 * may be called any number of times.
 *
 * checkpoint() writes the whole state of the running sandbox (memory, every
 * process, open files) into the folder image_dir and stops it (destroy() it
 * next).  restore() starts a sandbox from such a folder with the executor's
 * stdin and stdout on the given fds, as start() does; the executor carries on
 * where it was and says nothing until it is woken (frame W, hibernate.h).  A
 * backend that cannot do this leaves both NULL: its sandboxes never
 * hibernate (direct: a host process has no checkpoint). */
#ifndef MCP_BACKEND_H
#define MCP_BACKEND_H

#include <limits.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/proc.h"
#include "common/settings.h"

struct sandbox_ctx {
  const struct mcp_config *cfg;
  char id[33];           /* 32 hex: the sandbox id */
  char container_id[40]; /* "mcp" + id: fixed length, never ambiguous for runsc */
  char dir[PATH_MAX];    /* the session folder, as a host path */
  pid_t pid;             /* direct backend: the executor's pid */
  uint64_t cpu_shares;   /* runsc: the weight its cgroup is created with, 0: the default */
};

struct sandbox_ops {
  const char *name;
  int (*start)(struct sandbox_ctx *ctx, int stdin_fd, int stdout_fd, mcp_error_t *err);
  int (*destroy)(struct sandbox_ctx *ctx, mcp_error_t *err);
  int (*checkpoint)(struct sandbox_ctx *ctx, const char *image_dir, mcp_error_t *err);
  int (*restore)(struct sandbox_ctx *ctx, const char *image_dir, int stdin_fd, int stdout_fd, mcp_error_t *err);
};

extern const struct sandbox_ops sandbox_runsc_ops;
extern const struct sandbox_ops sandbox_direct_ops;

const struct sandbox_ops *sandbox_ops_for(const char *name);
int sandbox_ctx_init(struct sandbox_ctx *ctx, const struct mcp_config *cfg, const char *id, const char *dir,
                     mcp_error_t *err);

/* The runsc command line shared by every runsc call of this service:
 * identical global flags for every subcommand (sandbox/GVISOR.md).  The
 * vector borrows from c and cfg; argv_free(&c->argv) releases it. */
struct runsc_cmdline {
  struct argv argv;
  char root[PATH_MAX + 16];
  char platform[64];
};
int runsc_cmdline_init(struct runsc_cmdline *c, const struct mcp_config *cfg);
/* Call in a subreaper that owns no other children: runsc commands then
 * also reap the sandbox processes as soon as they exit. */
void runsc_set_reaper(bool on);
/* The runsc sandbox process of a container, from its state file; -1 when
 * it is not known (yet). */
pid_t runsc_sandbox_pid(const struct mcp_config *cfg, const char *container_id);
/* Whether runsc keeps a container of that id (its state file). */
bool runsc_container_exists(const struct mcp_config *cfg, const char *container_id);
/* Remove a container left behind, whatever its state. */
int runsc_remove(const struct mcp_config *cfg, const char *container_id, mcp_error_t *err);
/* At the service's start, before any supervisor or keeper: runsc's state
 * (<state>/runsc) of an earlier boot or an earlier PID namespace (the
 * container of a cell that was killed and started again) names PIDs that
 * are other processes' now, which `runsc kill` and `delete` would signal.
 * None of those sandboxes can still run: their state is removed without a
 * signal.  <state>/RUNSC_INCARNATION says which boot and namespace wrote
 * the state (the boot id, the namespace's inode and its PID 1's start). */
#define RUNSC_INCARNATION "runsc.incarnation"
int runsc_forget_stale(const struct mcp_config *cfg, mcp_error_t *err);

#endif
