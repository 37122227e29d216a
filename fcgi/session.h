/* The session store: all session state lives on disk under the state folder,
 * so any responder serves any session and a responder that dies loses
 * nothing.
 *
 *   <state>/sessions/<session-id>/   one folder per session (mode 0700); ids are
 *                                    [<cell>.]<32 hex> (common/util.h)
 *       meta.json     created, last used, owner token id, sandbox id;
 *                     replaced atomically (write + rename)
 *       sandbox       the 32-hex sandbox id (container "mcp<id>")
 *       call.lock     flock held by the responder running a call
 *       sup.lock      flock held by the session's supervisor for its life
 *       ctl.sock      the supervisor's socket
 *       bundle/       the OCI bundle (config.json)
 *       work/         the workspace, /work inside, owned by the sandbox uid
 *       hibernated/   the image of a hibernated sandbox (sandbox/hibernate.h);
 *                     hibernate.new/ one being written, state-lost a failed
 *                     restore's note for the next result
 *   <state>/owners/t-<token>/<id>    one empty file per live session of a token
 *   <state>/sessions.lock            held while a session is counted and made
 *   <state>/pool/<sandbox-id>/       pre-started sandboxes, claimed by rename
 *   <state>/pool/.new-<sandbox-id>/  being prepared
 *   <state>/trash/<name>/            being destroyed
 *   <state>/runsc/                   runsc --root
 *   <state>/rootfs/                  the skeleton root (bundle.h)
 *
 * A session exists exactly while sessions/<id>/meta.json exists.  Ending a
 * session renames its folder into trash/ first (atomic: every later request
 * gets 404), then stops the supervisor and removes the folder. */
#ifndef MCP_SESSION_H
#define MCP_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/settings.h"
#include "common/util.h"
#include "sandbox/client.h"

#define SESSION_META "meta.json"
#define TOKEN_ID_MAX 64
/* last_used is rewritten at most this often; expiry waits this much longer
 * so that a session never expires before idle_timeout after its last request. */
#define TOUCH_EVERY_MS 1000

struct store {
  const struct mcp_config *cfg;
  int state_fd;
  int sessions_fd;
  int pool_fd;
  int trash_fd;
};

struct session {
  char id[SESSION_ID_MAX];
  int dirfd;
  char sandbox_id[33];
  char token_id[TOKEN_ID_MAX + 1];
  int64_t created_ms;
  int64_t last_used_ms;
  int lock_fd; /* call.lock while held, else -1 */
};

/* Create the state folders with their modes (the master, at start). */
int store_prepare(const struct mcp_config *cfg, mcp_error_t *err);
int store_open(const struct mcp_config *cfg, struct store *st, mcp_error_t *err);
void store_close(struct store *st);

/* New session owned by token_id: claims a pre-started sandbox when one is
 * ready, else prepares a folder whose sandbox starts on demand.  Fails with
 * MCP_ERR_CAPACITY at max_sessions or the token's max_sessions (exactly,
 * whatever runs at the same time). */
int session_create(struct store *st, const char *token_id, struct session *out, mcp_error_t *err);
/* Open a live session; MCP_ERR_NOT_FOUND when the id is malformed, unknown,
 * ended, expired, or owned by another token. */
int session_open(struct store *st, const char *id, const char *token_id, struct session *out, mcp_error_t *err);
/* Record activity now. */
int session_touch(struct store *st, struct session *s, mcp_error_t *err);
/* Serialize calls: wait up to wait_ms for call.lock; MCP_ERR_BUSY after. */
int session_lock(struct session *s, int64_t wait_ms, mcp_error_t *err);
void session_unlock(struct session *s);
void session_close(struct session *s);
/* End a session: 404 from now on, sandbox stopped, folder removed. */
int session_destroy(struct store *st, const char *id, mcp_error_t *err);
int session_count(struct store *st);
/* Whether a new session would leave less than disk_floor (and its own
 * workspace_quota) free, counting what the workspace images that exist may
 * still take (they are sparse) as used; the figures when asked. */
bool session_disk_low(struct store *st, int64_t *free_bytes, uint64_t *committed);
/* Remove the owner entries of sessions that are gone (the keeper). */
void session_owners_mend(struct store *st);

/* Prepare pool/.new-<id> with its workspace and sandbox id. */
int slot_prepare(struct store *st, char id_out[33], mcp_error_t *err);
/* Move a prepared folder under a new name in dst_fd. */
int slot_publish(struct store *st, const char *id, mcp_error_t *err);

/* Remove trash/<name> after stopping its supervisor. */
int trash_remove(struct store *st, const char *name, mcp_error_t *err);
/* The sandbox id a folder names (its SANDBOX_ID_FILE, 32 hex digits):
 * false when it has none that is valid. */
bool folder_sandbox_id(int dfd, char id[33]);

/* Whether a background run of the session in that folder is active, and
 * (*last_ms, wall clock) when its runs last started or ended (the keeper's
 * expiry and session_open's own). */
bool session_runs_active(int session_dirfd, int64_t *last_ms);

#endif
