/* The responder's side of a call: lock the session, reach (or start) its
 * supervisor, send the request (the supervisor takes the execution slots),
 * collect the bounded output and the result.
 * Everything that comes back originates in the sandbox and is bounded and
 * type-checked here before anyone else sees it. */
#ifndef MCP_CALL_H
#define MCP_CALL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/settings.h"
#include "common/util.h"
#include "fcgi/egress.h"
#include "fcgi/session.h"

struct call_request {
  const char *code;
  const cJSON *env;                 /* object of strings, already validated; may be NULL */
  const cJSON *files;               /* [{path, text|base64}], already validated; may be NULL */
  const cJSON *packages;            /* requirement strings, validated and downloaded; may be NULL */
  const char *rpc_id;               /* the JSON-RPC id (as JSON text): notifications/cancelled names it */
  const char *token;                /* the token's name: its share of the execution slots */
  const char *language;             /* "python" (NULL) or "javascript" */
  const char *npm_stage;            /* javascript: the name of the set of specs (npm_set_key), or NULL */
  const char *package_dir;          /* what the host resolved for this call: /opt/mcp/packages/<this>, or NULL */
  const struct egress_plan *egress; /* the call's network by policy (fcgi/egress.h), or NULL */
  int timeout_s;
  bool persistent; /* in the sandbox's persistent interpreter of the language */
  bool reset;      /* end that interpreter first */
  bool background; /* a background run (fcgi/runs.h): the answer names it at once */
};

struct call_result {
  struct buf out, err; /* at most output_limit bytes each */
  uint64_t out_total, err_total;
  int exit_code;
  bool timed_out;
  bool cancelled;
  bool truncated;
  bool memory_error;       /* the code raised MemoryError */
  bool cpu_exceeded;       /* killed by the CPU time limit */
  bool processes_exceeded; /* stopped near the sandbox's host-task backstop (supervisor) */
  bool workspace_full;     /* /work had no room left when the call ended */
  bool input_error;        /* the input files could not be written: the code did not run */
  bool install_error;      /* the packages could not be installed: the code did not run */
  bool packages_missing;   /* ... because the session no longer had them (none were fetched) */
  bool sandbox_lost;       /* the sandbox stopped during the call */
  bool memory_exceeded;    /* ... because the sandbox's memory backstop was hit */
  bool restored;           /* the sandbox was restored from its hibernation image for this call */
  bool egress_limited;     /* an egress limit ended or refused a connection ... */
  char egress_limit[32];   /* ... this one (bytes_out, bytes_in, connections, connection_time) */
  int64_t duration_ms;
  int64_t cpu_ms;
  int64_t max_rss_kb;
  int timeout_s;                 /* the limit the call ran with */
  uint64_t files_bytes;          /* output file bytes returned with it */
  bool persistent;               /* it ran in the persistent interpreter ... */
  bool state_lost;               /* what lived in memory is gone: its interpreter's state (killed, out of memory,
                                    the sandbox restarted), or the sandbox's, which hibernated and could not be
                                    restored (a new one ran the call) */
  char *value;                   /* a persistent cell's value (its repr), at most VALUE_MAX bytes, or NULL */
  char refused[32];              /* the executor's reason not to run the call ("interpreter-busy"), or "" */
  char run[SESSION_ID_MAX + 24]; /* a background start: the run's id */
};

#define VALUE_MAX 65536 /* bytes of a persistent cell's value kept */

/* Called for each stdout ('O') or stderr ('E') chunk as it arrives, and
 * four times a second while the call runs ('T', len = elapsed ms). */
#define CALL_TICK 'T'
typedef void (*call_event_fn)(void *opaque, int type, const char *data, size_t len);

int sandbox_call(const struct mcp_config *cfg, struct session *s, const struct call_request *req, call_event_fn ev,
                 void *opaque, struct call_result *res, mcp_error_t *err);
void call_result_free(struct call_result *res);
/* Ask the session's supervisor to cancel the call with this JSON-RPC id. */
int sandbox_cancel(int session_dirfd, const char *rpc_id, mcp_error_t *err);
/* Parse a D payload into res (exposed for tests and the fuzzer). */
int call_result_parse(const char *json, size_t len, struct call_result *res);
/* The JSON request frame for req (exposed for tests). */
char *call_request_json(const struct mcp_config *cfg, const struct call_request *req);

#endif
