/* A cell's shared state: draining, the calls it is running, requests it
 * forwarded to other cells (README.md, "Cells and the router").
 *
 * It lives in the service's counters (metrics.h: one mapping shared by the
 * master, the responders, the keeper and the supervisors), so that the
 * master's SIGTERM is seen by every responder at once:
 *
 *   field               written by                   read by
 *   draining_since_ms   the master (first SIGTERM)    responders (refuse new work), /healthz, /cell
 *   calls_in_flight[i]  responder i (tools/call)      the master (drain: waits for 0; zeroes
 *                                                     a responder's when it restarts one that
 *                                                     died, whose calls died with it), /metrics
 *   forwarded           responders (forward.c)        /metrics
 *
 * Draining: /healthz answers 503 "draining" (a load balancer or Kubernetes
 * stops sending new work), new sessions and new calls get 503 with
 * Retry-After (a router sends new work elsewhere; a client retries its
 * session's call once the cell is back), calls already running go on; the
 * master exits when none runs, or after drain_timeout. */
#ifndef MCP_CELL_H
#define MCP_CELL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/settings.h"
#include "common/util.h"

/* Master: the service starts draining now (idempotent). */
void cell_drain_begin(void);
/* True once the master started draining. */
bool cell_draining(void);
/* Responder i: its calls are counted in its own slot (set once, before
 * its threads start). */
void cell_responder_index(int i);
/* Master: responder i died, and the calls and requests it counted with
 * it. */
void cell_responder_reset(int i);
/* Thread `thread` of this responder (0 to responder_threads: the
 * endpoints' thread is one more) starts serving a request of the token
 * named `token`: 0 when the token then has at most `share` requests in
 * progress in this cell (its responders' threads), or when `share` is 0
 * (no bound: nothing counted), else -1 and nothing counted.  Two requests
 * that start at once may both be refused at the edge, never both admitted
 * beyond it.  So one tenant cannot hold every
 * responder thread, whose requests (calls waiting in line, streams,
 * resumes) would leave the others' in nginx's queue. */
int cell_request_begin(const struct mcp_config *cfg, int thread, const char *token, int share);
void cell_request_end(int thread);
/* A tools/call starts or ends in a responder. */
void cell_call_begin(void);
void cell_call_end(void);
/* Calls running now (0 when the counters are not mapped). */
int64_t cell_calls_in_flight(void);
/* A request went to the cell that owns it (forward.c). */
void cell_forwarded(void);
/* The seconds a drain may last: drain_timeout, or timeout_max + 10. */
/* metrics_health(), after the cell's own rule: a draining cell is not healthy. */
int cell_health(const struct mcp_config *cfg, const char **reason);
int cell_drain_seconds(const struct mcp_config *cfg);
/* Prometheus lines of the cell (its name, draining, calls in flight,
 * forwarded requests), appended to b. */
void cell_metrics_render(const struct mcp_config *cfg, struct buf *b, int live_sessions);
/* The cell's status for a router (the metrics listener's /cell): one JSON
 * object {cell, sessions, draining, healthy, calls} and a newline. */
void cell_status_json(const struct mcp_config *cfg, int live_sessions, bool healthy, char *out, size_t size);

#endif
