/* A cell's part of routing (see forward.h). */
#include "config.h"

#include "fcgi/forward.h"

#include <stdio.h>
#include <string.h>

#include "common/cell.h"
#include "common/metrics.h"
#include "common/util.h"
#include "fcgi/modern.h"
#include "fcgi/tools.h"

#define SANDBOX_SCHEME "sandbox://"
#define DRAINING_MESSAGE                                                                                               \
  "Service temporarily unavailable: this cell is restarting and takes no new sessions or calls; retry in a few "       \
  "seconds (sessions and their files are kept)"

static const cJSON *get(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

/* The handle a 2026-07-28 body names, copied into out ("" when none). */
static void modern_owner_handle(const cJSON *msg, char out[SESSION_ID_MAX]) {
  const cJSON *params = get(msg, "params");
  const cJSON *sandbox = get(get(params, "arguments"), "sandbox");
  const cJSON *uri = get(params, "uri");
  out[0] = '\0';
  if (cJSON_IsString(sandbox)) {
    snprintf(out, SESSION_ID_MAX, "%s", sandbox->valuestring);
  } else if (cJSON_IsString(uri) && strncmp(uri->valuestring, SANDBOX_SCHEME, strlen(SANDBOX_SCHEME)) == 0) {
    const char *h = uri->valuestring + strlen(SANDBOX_SCHEME);
    size_t n = strcspn(h, "/");
    if (n < SESSION_ID_MAX)
      snprintf(out, SESSION_ID_MAX, "%.*s", (int)n, h);
  }
}

/* The cell that owns the request ("" when it names none, or this one's). */
static void owner_cell(const struct http_request *req, const cJSON *msg, char cell[CELL_NAME_MAX + 1]) {
  char handle[SESSION_ID_MAX] = "";
  if (msg != NULL && modern_request(req, msg))
    modern_owner_handle(msg, handle);
  else if (req->session_id != NULL)
    snprintf(handle, sizeof(handle), "%s", req->session_id);
  cell[0] = '\0';
  if (session_id_valid(handle))
    session_id_cell(handle, cell);
}

static int misrouted(const struct mcp_config *cfg, const struct http_request *req, struct http_sink *sink,
                     const char *owner) {
  fprintf(stderr, "mcp-server: request %s for cell %s came from cell %s to cell %s: misrouted (check the cells map)\n",
          req->request_id ? req->request_id : "-", owner, req->forwarded_by, cfg->cell);
  static const char *const retry[] = {"Retry-After: 10", NULL};
  static const char body[] = "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"Service temporarily "
                             "unavailable: the cell that owns this session could not be reached; retry\"}}";
  return http_send(sink, 503, "application/json", retry, body, sizeof(body) - 1), 1;
}

int forward_route(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink, const cJSON *msg) {
  const struct mcp_config *cfg = ctx->cfg;
  if (cfg->cell[0] == '\0')
    return 0;
  char owner[CELL_NAME_MAX + 1];
  owner_cell(req, msg, owner);
  if (owner[0] == '\0' || strcmp(owner, cfg->cell) == 0)
    return 0;
  if (req->forwarded_by != NULL && *req->forwarded_by != '\0')
    return misrouted(cfg, req, sink, owner);
  char location[CELL_NAME_MAX + 64];
  const char *method = req->method != NULL && (strcmp(req->method, "DELETE") == 0 || strcmp(req->method, "GET") == 0)
                           ? req->method
                           : "POST";
  snprintf(location, sizeof(location), "X-Accel-Redirect: /.mcp-forward/%s/%s", owner, method);
  const char *headers[] = {location, NULL};
  cell_forwarded();
  http_send(sink, 200, NULL, headers, NULL, 0);
  return 1;
}

int forward_refuse_new_session(struct rpc_call *c) {
  if (!cell_draining())
    return 0;
  metrics_reject_reason(REJECT_DRAINING);
  c->http_status = 503;
  return rpc_fail(c, RPC_INTERNAL_ERROR, DRAINING_MESSAGE);
}

/* Counted before the check: a master that saw no call in flight after it
 * began to drain has this call see the drain (both are sequentially
 * consistent atomics), so no call starts after the master decided to stop. */
int forward_tools_call(struct rpc_call *c) {
  cell_call_begin();
  if (forward_refuse_new_session(c) < 0) {
    cell_call_end();
    return -1;
  }
  int r = tools_call(c);
  cell_call_end();
  return r;
}
