/* Background runs, the responders' side: start a run from a tools/call,
 * open a run by its id (bound to its token and sandbox), read its status,
 * output and result, wait for it, cancel it.  The supervisor owns the runs
 * and writes everything this module reads (sandbox/background.h has the
 * on-disk layout); nothing here changes a run but cancel, so any responder
 * (and any number at once) may serve a run, and a responder that dies
 * loses nothing.  get_run and cancel_run (run_tools.c) are thin tools over
 * these functions; so is anything else that shows runs to a client (the
 * tasks extension).
 *
 * A run id is `<session id>.<r + 16 hex>`: the session id (a sandbox
 * handle, with the cell's name first when there is one) and the run's
 * folder in that session.  Opening a run opens its session for the caller's
 * token: a run of another token, of a sandbox that ended or expired, or a
 * malformed id, is MCP_ERR_NOT_FOUND alike.
 *
 * Status: running while the supervisor holds the run's lock; finished,
 * timed_out or cancelled (done.json says which; a run a limit stopped, its
 * CPU time or the host-task guard, is finished with cpu_exceeded or
 * processes_exceeded in done.json); lost when the sandbox died under it
 * (or was replaced after the guard stopped another activity) or when
 * neither is there (its supervisor died with the service).
 *
 * Errors follow common/error.h: -1 with err set; client sentences for
 * MCP_ERR_NOT_FOUND and MCP_ERR_INVALID. */
#ifndef MCP_RUNS_H
#define MCP_RUNS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/settings.h"
#include "common/util.h"
#include "fcgi/call.h"
#include "fcgi/session.h"
#include "sandbox/background.h"

#define RUN_ID_MAX (SESSION_ID_MAX + RUN_NAME_LEN + 2)

enum run_status { RUN_RUNNING, RUN_FINISHED, RUN_TIMED_OUT, RUN_CANCELLED, RUN_LOST };

struct run {
  char id[RUN_ID_MAX];
  char name[RUN_NAME_LEN + 1]; /* its folder in the session's runs/ */
  struct session session;      /* its sandbox's session, open (not locked) */
  int dirfd;                   /* runs/<name> */
};

/* Start a run of req (its request, as for sandbox_call) in session s: the
 * supervisor takes it and answers at once; res->run holds the new run's
 * id.  The session lock is held only while it is handed over. */
int run_start(const struct mcp_config *cfg, struct session *s, const struct call_request *req, struct call_result *res,
              mcp_error_t *err);
/* Open run id for token; with session_id set (a 2025 session), only a run
 * of that session. */
int run_open(struct store *st, const char *id, const char *token, const char *session_id, struct run *out,
             mcp_error_t *err);
void run_close(struct run *r);
/* Its status now; *done (when not NULL) gets done.json's object once it
 * ended (NULL for a lost run that left none; the caller frees it). */
int run_status(struct run *r, enum run_status *status, cJSON **done, mcp_error_t *err);
/* The same, once it ended or at deadline_ms (now_ms() based), whichever
 * comes first. */
int run_wait(struct run *r, int64_t deadline_ms, enum run_status *status, cJSON **done, mcp_error_t *err);
/* Up to max bytes of its stdout (or stderr) from offset on; *size: how
 * many bytes the file holds now. */
int run_output(struct run *r, bool stderr_stream, uint64_t offset, size_t max, struct buf *out, uint64_t *size,
               mcp_error_t *err);
/* Ask its supervisor to end it (every process, within a second); a run
 * that has ended already is left as it is. */
int run_cancel(const struct mcp_config *cfg, struct run *r, mcp_error_t *err);
const char *run_status_name(enum run_status status);

#endif
