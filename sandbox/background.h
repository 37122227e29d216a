/* Background runs, the supervisor's side: a session's supervisor owns the
 * runs of its sandbox, so that they outlive the responder that started
 * them (fcgi/runs.h is the responders' side, which reads what is here).
 *
 * A run is a call whose request says "background": true (common/frame.h):
 * the supervisor takes one of the token's run slots (common/slots.h),
 * keeps at most runs_per_session active, writes the run's record, answers
 * the responder at once with D {"run": "<run id>"}, and hands the request
 * to the executor as a G frame (once the sandbox is ready).  From then on
 * the run's output and end come as o, e, d frames, which go to files; its
 * wall clock is the executor's to enforce, with a hard deadline here (a
 * run that overruns it costs the sandbox, as a call does).
 *
 * On disk, in the session folder (outside the workspace, never seen by the
 * sandbox):
 *
 *   runs/<r + 16 hex>/          one folder per run (mode 0700, root's)
 *       run.json                token, language, started (ms since the epoch), timeout_s
 *       lock                    an OFD lock the owning supervisor holds while the run is active
 *       stdout, stderr          its output, at most run_output_max bytes each (appended)
 *       done.json               once it ended: the executor's result and
 *                               "status": finished | timed_out | cancelled | lost
 *
 * A run is running while its lock is held; ended once done.json exists; lost
 * when neither (its supervisor died with the service: a SIGKILL or a stop
 * that did not wait for it).  done.json is written before the lock goes.
 * The run id a client sees is `<session id>.<folder name>`. */
#ifndef MCP_SANDBOX_BACKGROUND_H
#define MCP_SANDBOX_BACKGROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/frame.h"
#include "common/settings.h"
#include "common/util.h"

#define RUNS_DIR "runs"
#define RUN_RECORD "run.json"
#define RUN_LOCK "lock"
#define RUN_STDOUT_FILE "stdout"
#define RUN_STDERR_FILE "stderr"
#define RUN_DONE_FILE "done.json"
#define RUN_NAME_LEN 17 /* r + 16 hex */
#define RUNS_MAX 16     /* runs_per_session's ceiling */

struct bg_run {
  bool active;
  bool sent;                   /* the executor has its G frame */
  int n;                       /* its number between supervisor and executor (1-255) */
  char name[RUN_NAME_LEN + 1]; /* the folder: r<16 hex> */
  int dirfd, lock_fd, slot_fd, out_fd, err_fd;
  uint64_t out_bytes, err_bytes;
  struct buf request; /* the G frame's JSON */
  int64_t deadline;   /* now_ms() based: the executor should have ended it by then */
  bool cancelled;
  char package_dir[24]; /* the host's folder of its resolved packages (removed at its end) */
};

struct bg_runs {
  const struct mcp_config *cfg;
  int dirfd; /* the session folder */
  struct bg_run r[RUNS_MAX];
  int last_n;
};

void bg_runs_init(struct bg_runs *rs, const struct mcp_config *cfg, int session_dirfd);
/* Start a run for request req (its JSON): record, slot, the answer for the
 * responder (D {"run":...}) in *answer (a frame type and its payload).
 * The run waits for bg_runs_send() if the sandbox is not ready. */
void bg_run_start(struct bg_runs *rs, const char *session_id, const char *token, const char *req, size_t len,
                  int *answer_type, char *answer, size_t size);
/* Send the G frames of the runs that wait for the executor (a persistent
 * one of a language in *interpreters_lost: see bg_mark_interpreter_lost). */
void bg_runs_send(struct bg_runs *rs, int exec_in, unsigned *interpreters_lost);
/* An o, e or d frame of the executor. */
void bg_runs_on_frame(struct bg_runs *rs, const struct frame *f);
/* cancel_run: end the run named (its folder name) within a second. */
void bg_run_cancel(struct bg_runs *rs, const char *name, size_t len, int exec_in);
/* The sandbox died: every run it held ends as lost (memory_exceeded: the
 * backstop killed it); runs not yet handed over wait for the next sandbox. */
void bg_runs_lost(struct bg_runs *rs, bool memory_exceeded);
/* The earliest hard deadline of an active run (0: none); true from
 * bg_runs_overran when one has passed it (the executor is wedged). */
int64_t bg_runs_deadline(const struct bg_runs *rs);
bool bg_runs_overran(const struct bg_runs *rs, int64_t now);
int bg_runs_active(const struct bg_runs *rs);

/* The persistent interpreters, by language: 1 Python, 2 JavaScript (the
 * bit of a request's "language", or of a language's name). */
unsigned bg_lang_bit(const cJSON *req);
unsigned bg_lang_bit_of(const char *language);
/* A persistent request whose language's interpreter died with an earlier
 * sandbox (its bit in *lost): the request gets "interpreter_lost": true, so
 * that its result says the state was lost, and the bit goes.  True when
 * req changed. */
bool bg_mark_interpreter_lost(cJSON *req, unsigned *lost);
/* *b becomes the text of o (unchanged when memory runs out). */
void buf_replace_json(struct buf *b, const cJSON *o);

#endif
