/* Drive mcp_serve() end to end, as the FastCGI responder does, with the
 * response written to a buffer.
 *
 * The harness makes a private state folder (mkdtemp) and a libexec folder
 * holding links to the built mcp-sandboxd and to the executor/ folder, and
 * configures backend = direct: each session's supervisor runs the executor
 * as a plain host process, so the whole responder -> supervisor -> executor
 * path runs without root or gVisor.  The supervisors read the same settings
 * from MCP_* variables that the harness exports.
 *
 * The test process is a child subreaper, as the master is in the service,
 * so the double-forked supervisors stay findable; teardown ends every
 * session, then reports (as a failed test) and kills any process whose
 * command line still names the temporary folder. */
#ifndef MCP_TEST_HARNESS_H
#define MCP_TEST_HARNESS_H

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "fcgi/mcp.h"

#define TEST_TOKEN "test-token"
#define ACCEPT_BOTH "application/json, text/event-stream"

struct harness {
  char root[1024]; /* short enough that every path below it fits */
  char state[PATH_MAX];
  char libexec[PATH_MAX];
  struct mcp_config cfg;
  struct store store;
  struct mcp_ctx ctx;
  /* > 0: serve() reports the client gone (http_peer_gone) this long after
   * a request starts, as the responder does when nginx closes the
   * connection of a client that left. */
  int peer_gone_after_ms;
  /* > 0: the response's writes fail this long after a request starts, as
   * they do once a client's connection is gone. */
  int writes_fail_after_ms;
};

struct response {
  int status;
  char *raw; /* the whole response as written */
  size_t raw_len;
  const char *body; /* inside raw */
  size_t body_len;
  cJSON *json; /* the JSON body, or the response event of a stream; NULL: none */
  /* text/event-stream answers (MCP allows either for a request): */
  bool sse;
  bool sse_primed; /* the first event has an id and empty data */
  bool sse_valid;  /* every event parsed; exactly one response, last */
  cJSON *events;   /* the messages before the response (notifications) */
  char value[512]; /* last header value looked up */
};

/* Skips the whole program when python3 or the built supervisor is missing. */
void harness_setup(struct harness *h);
/* End every session, check that no process is left, remove the folder. */
void harness_teardown(struct harness *h);

/* A POST with the headers a well-behaved client sends. */
struct http_request post_request(const char *body, const char *session_id);
void serve(struct harness *h, const struct http_request *req, struct response *r);
/* POST body on session (NULL: none) with the defaults. */
void post(struct harness *h, const char *session_id, const char *body, struct response *r);
void response_free(struct response *r);
/* The value of a response header (case-insensitive name), or NULL. */
const char *header(struct response *r, const char *name);

/* initialize with the given version; returns the session id (static
 * storage per call is not used: the caller passes out[37]). */
bool initialize(struct harness *h, const char *token, char out[SESSION_ID_MAX]);
/* DELETE the session; returns the status. */
int delete_session(struct harness *h, const char *token, const char *id);

/* Processes whose command line contains needle, after waiting up to
 * wait_ms for them to go away (children are reaped meanwhile). */
int processes_with(const char *needle, int wait_ms);
/* How many there are now (children reaped first), without a word. */
int processes_now(const char *needle);
/* The same, with their pids (up to max of them). */
int processes_pids(const char *needle, pid_t *pids, int max);

/* Processes of a session just DELETEd, once they had the time to stop.
 * When some still run after wait_ms, one keeper pass (which the service
 * runs every second: it finishes removals left in trash/) gets its chance
 * first, and a diagnostic says so: DELETE then raced with a supervisor that
 * was still starting. */
int processes_after_delete(struct harness *h, const char *id, int wait_ms);

/* Assertions on a JSON-RPC error response. */
void is_rpc_error(struct response *r, int status, int code, const char *message_part, const char *what);
/* The result object of a 200 response, or NULL (with a failed test). */
const cJSON *rpc_result(struct response *r, const char *what);

/* Shortcuts for JSON lookups in tests. */
const cJSON *jget(const cJSON *o, const char *path); /* "a.b.0.c" */
const char *jstr(const cJSON *o, const char *path);
double jnum(const cJSON *o, const char *path);

#endif
