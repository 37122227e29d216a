/* A cell's part of routing (README.md, "Cells and the router"): requests
 * that name another cell's session or sandbox go to that cell, and new work
 * is refused while this cell drains (common/cell.h).
 *
 * Who owns a request: the cell named before the dot of
 *   2025 era       the Mcp-Session-Id header (POST, DELETE)
 *   2026-07-28     tools/call's arguments.sandbox, or resources/read's
 *                  sandbox://<handle>/... URI: the body, which is what the
 *                  cell acts on (headers can be missing or base64-encoded:
 *                  a router that cannot read them sends the request here)
 * The owner is not checked here: it checks the token, the headers and the
 * handle itself, exactly as if the router had sent the request straight to
 * it.
 *
 * How: the responder answers with X-Accel-Redirect: /.mcp-forward/<cell>/
 * <method>, and nginx (nginx/nginx.conf.in) replays the request, body and
 * headers as the client sent them, to that cell's address from its cells
 * map, with Mcp-Forwarded-By: <this cell>.  No HTTP client runs in the
 * responder; ordinary requests cost one comparison of a prefix.  A request
 * that was forwarded once and still names another cell is misrouted (two
 * cells disagree about names): 503, never a second hop.  An owner that
 * cannot be reached is nginx's 503 with Retry-After. */
#ifndef MCP_FORWARD_H
#define MCP_FORWARD_H

#include <cjson/cJSON.h>

#include "fcgi/http.h"
#include "fcgi/rpc.h"

/* POST (msg: the parsed body), DELETE or GET (msg NULL): 1 when the request was
 * answered here (forwarded, or misrouted), 0 when this cell serves it. */
int forward_route(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink, const cJSON *msg);
/* tools/call of either era: refused with 503 and Retry-After while the cell
 * drains, else counted in the calls in flight around tools_call(). */
int forward_tools_call(struct rpc_call *c);
/* initialize: -1 with c's error set (503) while the cell drains, else 0. */
int forward_refuse_new_session(struct rpc_call *c);

#endif
