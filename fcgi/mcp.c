#include "config.h"

#include "fcgi/mcp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/cell.h"
#include "common/metrics.h"
#include "common/util.h"
#include "fcgi/forward.h"
#include "fcgi/json_scan.h"
#include "fcgi/modern.h"
#include "fcgi/resources.h"
#include "fcgi/sse.h"
#include "fcgi/stream.h"
#include "fcgi/tools.h"

#define MAX_JSON_DEPTH 64
#define MAX_STRING_ID 256

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

bool mcp_version_supported(const char *v) {
  for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
    if (strcmp(v, versions[i]) == 0)
      return true;
  return false;
}

/* ---- responses ---- */

static int send_json(struct http_sink *sink, int status, cJSON *body, const char *session_id) {
  cleanup_free char *text = body ? cJSON_PrintUnformatted(body) : NULL;
  char hdr[SESSION_ID_MAX + 32];
  const char *headers[3] = {NULL, NULL, NULL};
  if (session_id != NULL) {
    snprintf(hdr, sizeof(hdr), "Mcp-Session-Id: %s", session_id);
    headers[0] = hdr;
  }
  if (text == NULL) {
    static const char oom[] =
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"Internal error\"}}";
    return http_send(sink, 500, "application/json", NULL, oom, sizeof(oom) - 1);
  }
  return http_send(sink, status, "application/json", headers, text, strlen(text));
}

static cJSON *rpc_envelope(const cJSON *id) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return NULL;
  cJSON_AddStringToObject(o, "jsonrpc", "2.0");
  cJSON_AddItemToObject(o, "id", rpc_id_copy(id));
  return o;
}

/* A JSON-RPC error response with HTTP status `status`; 503 (capacity)
 * says when to come back. */
static int send_rpc_error(struct http_sink *sink, int status, const cJSON *id, int code, const char *message) {
  metrics_reject(status);
  cleanup_cjson cJSON *o = rpc_envelope(id);
  if (o != NULL) {
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddNumberToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", message);
  }
  if (status == 503) {
    cleanup_free char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    static const char *const retry[] = {"Retry-After: 10", NULL};
    return http_send(sink, 503, "application/json", retry, text ? text : "", text ? strlen(text) : 0);
  }
  return send_json(sink, status, o, NULL);
}

static int send_empty(struct http_sink *sink, int status, const char *const *headers) {
  return http_send(sink, status, NULL, headers, NULL, 0);
}

/* ---- methods ---- */

static int handle_initialize(struct rpc_call *c) {
  const cJSON *pv = cJSON_GetObjectItemCaseSensitive(c->params, "protocolVersion");
  if (c->params != NULL && !cJSON_IsObject(c->params))
    return rpc_fail(c, RPC_INVALID_PARAMS, "initialize: params must be an object");
  if (!cJSON_IsString(pv))
    return rpc_fail(c, RPC_INVALID_PARAMS, "initialize: params.protocolVersion must be a string");
  const char *version = mcp_version_supported(pv->valuestring) ? pv->valuestring : MCP_LATEST_VERSION;
  if (forward_refuse_new_session(c) < 0)
    return -1;

  struct session s;
  mcp_error_t err = NULL;
  if (session_create(c->ctx->store, c->http->token_id, &s, &err) < 0) {
    bool full = err->kind == MCP_ERR_CAPACITY;
    rpc_fail(c, RPC_INTERNAL_ERROR, "%s", mcp_error_public(err));
    c->http_status = full ? 503 : 500;
    if (!full)
      mcp_error_log_release(&err, "initialize");
    mcp_error_release(&err);
    return -1;
  }
  memcpy(c->new_session, s.id, sizeof(c->new_session));
  session_close(&s);
  METRIC_INC(sessions_created);

  cJSON *r = cJSON_CreateObject();
  c->result = r;
  cJSON_AddStringToObject(r, "protocolVersion", version);
  cJSON *caps = cJSON_AddObjectToObject(r, "capabilities");
  cJSON *tools = cJSON_AddObjectToObject(caps, "tools");
  cJSON_AddBoolToObject(tools, "listChanged", 0);
  /* stdout and stderr lines stream as notifications/message. */
  cJSON_AddObjectToObject(caps, "logging");
  /* Output files come back as embedded resources and stay readable. */
  cJSON *res = cJSON_AddObjectToObject(caps, "resources");
  cJSON_AddBoolToObject(res, "listChanged", 0);
  cJSON_AddBoolToObject(res, "subscribe", 0);
  /* No prompts: an empty list, as in the 2026-07-28 era. */
  cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "prompts"), "listChanged", 0);
  cJSON *info = cJSON_AddObjectToObject(r, "serverInfo");
  cJSON_AddStringToObject(info, "name", MCP_SERVER_NAME);
  cJSON_AddStringToObject(info, "title", "Python sandbox");
  cJSON_AddStringToObject(info, "version", PACKAGE_VERSION);
  cJSON_AddStringToObject(
      r, "instructions",
      "Each session has its own gVisor sandbox with a persistent working directory /work: files written in "
      "one call are there in the next call of the same session. Every call runs in a fresh Python process "
      "(variables do not persist; save state to files). There is no network access.");
  return 0;
}

static int handle_ping(struct rpc_call *c) {
  c->result = cJSON_CreateObject();
  return 0;
}

static int handle_tools_list(struct rpc_call *c) {
  if (c->params != NULL && !cJSON_IsObject(c->params))
    return rpc_fail(c, RPC_INVALID_PARAMS, "tools/list: params must be an object");
  c->result = tools_list(c->ctx->cfg, false);
  return c->result ? 0 : rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error");
}

static int handle_tools_call(struct rpc_call *c) { return forward_tools_call(c); }

int mcp_prompts_list(struct rpc_call *c) {
  c->result = cJSON_CreateObject();
  cJSON_AddArrayToObject(c->result, "prompts");
  return c->result ? 0 : rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error");
}

struct method {
  const char *name;
  rpc_handler fn;
};

static const struct method methods[] = {
    {"initialize", handle_initialize},
    {"ping", handle_ping},
    {"tools/list", handle_tools_list},
    {"tools/call", handle_tools_call},
    {"resources/list", resources_list},
    {"resources/read", resources_read},
    {"resources/templates/list", resources_templates_list},
    {"prompts/list", mcp_prompts_list},
    {"logging/setLevel", logging_set_level},
};

/* ---- request checks ---- */

/* ids are strings or integers (MCP forbids null); huge numbers would not
 * survive the round trip through a double, so they are refused. */
static bool id_valid(const cJSON *id) {
  if (cJSON_IsString(id))
    return strlen(id->valuestring) <= MAX_STRING_ID;
  if (!cJSON_IsNumber(id))
    return false;
  /* Range first: converting an out-of-range double is undefined. */
  double d = id->valuedouble;
  return d <= 9007199254740991.0 && d >= -9007199254740991.0 && d == (double)(int64_t)d;
}

static int cmp_keys(const void *a, const void *b) {
  const cJSON *const *x = a, *const *y = b;
  return strcmp((*x)->string, (*y)->string);
}

/* Objects with a repeated key are ambiguous (cJSON would take the first
 * occurrence, another parser the last): refuse them anywhere. */
static bool has_duplicate_keys(const cJSON *node) {
  for (; node != NULL; node = node->next) {
    if (cJSON_IsObject(node)) {
      size_t n = 0;
      for (const cJSON *c = node->child; c; c = c->next)
        n++;
      if (n > 1) {
        /* An array of pointers: sizeof(*keys) is a pointer's size. */
        cleanup_free const cJSON **keys = malloc(n * sizeof(*keys)); // NOLINT(bugprone-sizeof-expression)
        if (keys == NULL)
          return true;
        size_t i = 0;
        for (const cJSON *c = node->child; c; c = c->next)
          keys[i++] = c;
        qsort(keys, n, sizeof(*keys), cmp_keys); // NOLINT(bugprone-sizeof-expression)
        for (i = 1; i < n; i++)
          if (strcmp(keys[i - 1]->string, keys[i]->string) == 0)
            return true;
      }
    }
    if ((cJSON_IsObject(node) || cJSON_IsArray(node)) && has_duplicate_keys(node->child))
      return true;
  }
  return false;
}

static int check_post_headers(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink) {
  if (!http_is_json(req->content_type))
    return send_rpc_error(sink, 415, NULL, RPC_INVALID_REQUEST,
                          "Unsupported Media Type: Content-Type must be application/json"),
           -1;
  if (!http_accepts(req->accept, "application/json") && !http_accepts(req->accept, "text/event-stream"))
    return send_rpc_error(sink, 406, NULL, RPC_INVALID_REQUEST,
                          "Not Acceptable: Accept must include application/json and text/event-stream"),
           -1;
  if (req->body_too_large) {
    char msg[128];
    snprintf(msg, sizeof(msg), "The request body is larger than the limit of %llu bytes",
             (unsigned long long)ctx->cfg->max_body);
    return send_rpc_error(sink, 413, NULL, RPC_INVALID_REQUEST, msg), -1;
  }
  return 0;
}

/* A \u0000 escape is valid JSON that cannot reach the sandbox (cJSON
 * strings end at NUL).  Answered with the request's id, so that clients
 * match the answer to their request, and the place of the escape; 0 when
 * it was, -1 when the id cannot be found (then it is a parse error). */
static int answer_nul(const struct http_request *req, struct http_sink *sink) {
  struct json_nul_site site;
  if (json_locate_nul(req->body, req->body_len, MAX_JSON_DEPTH, MCP_MAX_JSON_VALUES, &site) != JSON_OK ||
      site.id == NULL || strcmp(site.path, "id") == 0)
    return -1;
  cleanup_cjson cJSON *id = cJSON_ParseWithLength(site.id, site.id_len);
  if (!id_valid(id))
    return -1;
  static const char nul[] = "contains a NUL character (\\u0000)";
  char msg[JSON_PATH_MAX + 160];
  if (strncmp(site.path, "params", 6) != 0 || (site.path[6] != '\0' && site.path[6] != '.')) {
    snprintf(msg, sizeof(msg), "Invalid Request: %s%s %s", site.in_key ? "a key in " : "",
             site.path[0] ? site.path : "the message", nul);
    return send_rpc_error(sink, 400, id, RPC_INVALID_REQUEST, msg), 0;
  }
  const char *rel = site.path[6] == '.' ? site.path + 7 : "";
  const char *why =
      strncmp(rel, "arguments", 9) == 0 ? "which cannot be passed to the sandbox" : "which this server does not accept";
  if (site.in_key)
    snprintf(msg, sizeof(msg), "Invalid params: a key of %s %s, %s", rel[0] ? rel : "params", nul, why);
  else
    snprintf(msg, sizeof(msg), "Invalid params: %s %s, %s", rel[0] ? rel : "params", nul, why);
  return send_rpc_error(sink, 200, id, RPC_INVALID_PARAMS, msg), 0;
}

/* Parse and validate the body; NULL after an error response was sent. */
static cJSON *parse_body(const struct http_request *req, struct http_sink *sink) {
  size_t off = 0;
  int r = json_scan(req->body ? req->body : "", req->body_len, MAX_JSON_DEPTH, MCP_MAX_JSON_VALUES, &off);
  if (r == JSON_ERR_NUL && req->body != NULL && answer_nul(req, sink) == 0)
    return NULL;
  if (r == JSON_ERR_VALUES) {
    char msg[160];
    snprintf(msg, sizeof(msg), "Invalid Request: the body has more than %d JSON values (at byte %zu)",
             MCP_MAX_JSON_VALUES, off);
    send_rpc_error(sink, 400, NULL, RPC_INVALID_REQUEST, msg);
    return NULL;
  }
  if (r != JSON_OK) {
    char msg[160];
    snprintf(msg, sizeof(msg), "Parse error: %s (at byte %zu)", json_scan_strerror(r), off);
    send_rpc_error(sink, 400, NULL, RPC_PARSE_ERROR, msg);
    return NULL;
  }
  cJSON *msg = cJSON_ParseWithLength(req->body, req->body_len);
  if (msg == NULL) {
    send_rpc_error(sink, 400, NULL, RPC_PARSE_ERROR, "Parse error: the body is not valid JSON");
    return NULL;
  }
  if (cJSON_IsArray(msg)) {
    send_rpc_error(sink, 400, NULL, RPC_INVALID_REQUEST,
                   "Invalid Request: batches are not supported; send one JSON-RPC message per request");
  } else if (!cJSON_IsObject(msg)) {
    send_rpc_error(sink, 400, NULL, RPC_INVALID_REQUEST, "Invalid Request: the body must be a JSON-RPC object");
  } else if (has_duplicate_keys(msg)) {
    send_rpc_error(sink, 400, NULL, RPC_INVALID_REQUEST, "Invalid Request: an object has a duplicate key");
  } else {
    return msg;
  }
  cJSON_Delete(msg);
  return NULL;
}

/* Look up the session a non-initialize message names; sends 400/404. */
static int open_session(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink, const cJSON *id,
                        struct session *s) {
  if (req->session_id == NULL || *req->session_id == '\0')
    return send_rpc_error(sink, 400, id, RPC_INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required"), -1;
  if (req->protocol_version != NULL && !mcp_version_supported(req->protocol_version)) {
    char msg[200];
    snprintf(msg, sizeof(msg), "Bad Request: unsupported MCP-Protocol-Version; supported: %s, %s, %s", versions[0],
             versions[1], versions[2]);
    return send_rpc_error(sink, 400, id, RPC_INVALID_REQUEST, msg), -1;
  }
  mcp_error_t err = NULL;
  if (session_open(ctx->store, req->session_id, req->token_id, s, &err) < 0) {
    bool missing = err->kind == MCP_ERR_NOT_FOUND;
    if (!missing)
      mcp_error_log_release(&err, "session");
    mcp_error_release(&err);
    return send_rpc_error(sink, missing ? 404 : 500, id, missing ? MCP_SESSION_NOT_FOUND : RPC_INTERNAL_ERROR,
                          missing ? "Session not found: it has ended or expired; initialize a new session"
                                  : "Internal error"),
           -1;
  }
  if (session_touch(ctx->store, s, &err) < 0)
    mcp_error_log_release(&err, "session touch");
  return 0;
}

static int dispatch(struct rpc_call *c) {
  for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
    if (strcmp(methods[i].name, c->method) == 0) {
      c->http_status = 200;
      int r = methods[i].fn(c);
      if (r < 0 && c->error_code == 0)
        rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error");
      return r;
    }
  }
  return rpc_fail(c, RPC_METHOD_NOT_FOUND, "Method not found: %s", c->method);
}

/* Answer a handled call unless the handler already streamed its answer. */
static int finish_call(struct rpc_call *c, bool streamed) {
  if (streamed)
    return 0;
  if (c->result == NULL)
    return send_rpc_error(c->sink, c->http_status ? c->http_status : 200, c->id, c->error_code, c->error_message);
  cleanup_cjson cJSON *o = rpc_envelope(c->id);
  if (o == NULL)
    return send_json(c->sink, 500, NULL, NULL);
  cJSON_AddItemToObject(o, "result", steal_pointer(&c->result));
  if (!http_accepts(c->http->accept, "application/json")) {
    /* The client takes only streams: one event. */
    struct sse s;
    char hdr[SESSION_ID_MAX + 32];
    snprintf(hdr, sizeof(hdr), "Mcp-Session-Id: %s", c->new_session);
    const char *headers[] = {hdr, NULL};
    if (sse_begin_with(&s, c->sink, false, c->new_session[0] ? headers : NULL) < 0)
      return -1;
    return sse_send(&s, o);
  }
  return send_json(c->sink, 200, o, c->new_session[0] ? c->new_session : NULL);
}

static int handle_request(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink, cJSON *msg) {
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
  const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
  const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
  if (!id_valid(id))
    return send_rpc_error(sink, 400, NULL, RPC_INVALID_REQUEST,
                          "Invalid Request: id must be a string (at most 256 bytes) or an integer");
  if (params != NULL && !cJSON_IsObject(params) && !cJSON_IsNull(params))
    return send_rpc_error(sink, 200, id, RPC_INVALID_PARAMS, "Invalid params: params must be an object");
  struct rpc_call c = {.ctx = ctx,
                       .http = req,
                       .sink = sink,
                       .id = id,
                       .method = method->valuestring,
                       .params = cJSON_IsNull(params) ? NULL : params};
  struct session s = {.dirfd = -1, .lock_fd = -1};
  if (strcmp(c.method, "initialize") != 0) {
    if (open_session(ctx, req, sink, id, &s) < 0)
      return 0;
    c.session = &s;
  }
  int r = dispatch(&c);
  bool streamed = r > 0;
  if (c.session != NULL) {
    mcp_error_t err = NULL;
    if (strcmp(c.method, "tools/call") == 0 && session_touch(ctx->store, &s, &err) < 0)
      mcp_error_log_release(&err, "session touch");
    session_close(&s);
  }
  int ret = finish_call(&c, streamed);
  cJSON_Delete(c.result);
  cJSON_Delete(c.error_data);
  return ret;
}

static int handle_post(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink) {
  if (check_post_headers(ctx, req, sink) < 0)
    return 0;
  cleanup_cjson cJSON *msg = parse_body(req, sink);
  if (msg == NULL)
    return 0;
  const cJSON *jsonrpc = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");
  if (!cJSON_IsString(jsonrpc) || strcmp(jsonrpc->valuestring, "2.0") != 0)
    return send_rpc_error(sink, 400, NULL, RPC_INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"");
  const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
  bool has_id = cJSON_GetObjectItemCaseSensitive(msg, "id") != NULL;
  if (method != NULL && !cJSON_IsString(method))
    return send_rpc_error(sink, 400, NULL, RPC_INVALID_REQUEST, "Invalid Request: method must be a string");
  if (method != NULL && has_id && !id_valid(cJSON_GetObjectItemCaseSensitive(msg, "id")))
    return send_rpc_error(sink, 400, NULL, RPC_INVALID_REQUEST,
                          "Invalid Request: id must be a string (at most 256 bytes) or an integer");
  /* Another cell's session or sandbox: that cell answers (forward.h). */
  if (forward_route(ctx, req, sink, msg))
    return 0;
  /* The 2026-07-28 era, decided per request (modern.h). */
  if (modern_request(req, msg))
    return modern_post(ctx, req, sink, msg);
  if (method != NULL && has_id)
    return handle_request(ctx, req, sink, msg);
  bool is_response =
      method == NULL && has_id && (cJSON_HasObjectItem(msg, "result") || cJSON_HasObjectItem(msg, "error"));
  if (method == NULL && !is_response)
    return send_rpc_error(sink, 400, NULL, RPC_INVALID_REQUEST,
                          "Invalid Request: not a JSON-RPC request, notification or response");
  /* Notifications and responses: acknowledged once the session is known. */
  struct session s;
  if (open_session(ctx, req, sink, NULL, &s) < 0)
    return 0;
  if (method != NULL)
    tools_notification(ctx, &s, method->valuestring, cJSON_GetObjectItemCaseSensitive(msg, "params"));
  session_close(&s);
  return send_empty(sink, 202, NULL);
}

/* 2026-07-28 has no GET stream and no sessions to end: 405. */
static int modern_not_allowed(struct http_sink *sink) {
  metrics_reject(405);
  static const char *const allow[] = {"Allow: POST", NULL};
  static const char body[] = "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":"
                             "\"Method Not Allowed: 2026-07-28 has no sessions and no GET stream; use POST\"}}";
  return http_send(sink, 405, "application/json", allow, body, sizeof(body) - 1);
}

static int handle_delete(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink) {
  if (modern_by_headers(req))
    return modern_not_allowed(sink);
  if (forward_route(ctx, req, sink, NULL))
    return 0;
  struct session s;
  if (open_session(ctx, req, sink, NULL, &s) < 0)
    return 0;
  session_close(&s);
  mcp_error_t err = NULL;
  METRIC_INC(sessions_ended);
  if (session_destroy(ctx->store, req->session_id, &err) < 0) {
    bool missing = err->kind == MCP_ERR_NOT_FOUND;
    if (!missing && err->kind != MCP_ERR_BUSY)
      mcp_error_log_release(&err, "delete");
    mcp_error_release(&err);
    if (missing)
      return send_rpc_error(sink, 404, NULL, MCP_SESSION_NOT_FOUND, "Session not found");
  }
  return send_empty(sink, 204, NULL);
}

static int handle_get(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink) {
  if (modern_by_headers(req))
    return modern_not_allowed(sink);
  if (!http_accepts(req->accept, "text/event-stream"))
    return send_rpc_error(sink, 406, NULL, RPC_INVALID_REQUEST,
                          "Not Acceptable: Accept must include text/event-stream");
  /* A client whose stream of a call broke comes back for its answer. */
  if (req->last_event_id != NULL && *req->last_event_id != '\0') {
    if (forward_route(ctx, req, sink, NULL))
      return 0;
    struct session s;
    if (open_session(ctx, req, sink, NULL, &s) < 0)
      return 0;
    /* As long as the longest call may take, the responder's bound too. */
    int64_t wait_ms = call_budget_s(ctx->cfg, ctx->cfg->timeout_max, true, true) * 1000;
    http_set_deadline(sink, now_ms() + wait_ms + 10000);
    const char *why = NULL;
    int status = stream_resume(s.dirfd, req->last_event_id, sink, wait_ms, &why);
    session_close(&s);
    return status == 0 ? 0 : send_rpc_error(sink, status, NULL, RPC_INVALID_REQUEST, why);
  }
  /* No server-initiated messages exist in this server: every notification
   * belongs to a request and travels on that request's stream. */
  static const char *const allow[] = {"Allow: POST, DELETE", NULL};
  return http_send(sink, 405, "application/json", allow,
                   "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":"
                   "\"Method Not Allowed: this server has no standalone SSE stream; use POST\"}}",
                   strlen("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":"
                          "\"Method Not Allowed: this server has no standalone SSE stream; use POST\"}}"));
}

/* /metrics and /healthz: nginx marks them; no token, no Origin rules
 * (nginx restricts /metrics to loopback). */
static int serve_endpoint(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink) {
  if (strcmp(req->endpoint, "metrics") == 0) {
    cleanup_buf struct buf b = {0};
    if (metrics_render(ctx->cfg, &b) < 0)
      return http_send(sink, 503, "text/plain", NULL, "counters unavailable\n", 21);
    cell_metrics_render(ctx->cfg, &b, metrics_live_sessions(ctx->cfg));
    return http_send(sink, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, b.data ? b.data : "", b.len);
  }
  if (strcmp(req->endpoint, "cell") == 0) {
    /* The metrics listener's /cell, for a router: name, load, state. */
    const char *reason = "ok";
    bool healthy = cell_health(ctx->cfg, &reason) == 0;
    char body[256];
    cell_status_json(ctx->cfg, metrics_live_sessions(ctx->cfg), healthy, body, sizeof(body));
    return http_send(sink, 200, "application/json", NULL, body, strlen(body));
  }
  if (strcmp(req->endpoint, "healthz") == 0) {
    const char *reason = "the state folder's disk is below disk_floor (counting what the workspaces may still take): "
                         "no new sessions";
    METRIC_INC(health_checks);
    int r = session_disk_low(ctx->store, NULL, NULL) ? -1 : cell_health(ctx->cfg, &reason);
    char body[256];
    int n =
        snprintf(body, sizeof(body), "{\"status\":\"%s\",\"reason\":\"%s\"}\n", r == 0 ? "ok" : "unavailable", reason);
    return http_send(sink, r == 0 ? 200 : 503, "application/json", NULL, body, (size_t)n);
  }
  return http_send(sink, 404, "application/json", NULL, "{\"error\":\"not_found\"}\n", 22);
}

int mcp_serve(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink) {
  if (req->endpoint != NULL && *req->endpoint != '\0')
    return serve_endpoint(ctx, req, sink);
  if (!http_origin_allowed(ctx->cfg, req->origin))
    return send_rpc_error(sink, 403, NULL, RPC_INVALID_REQUEST, "Forbidden: Origin not allowed");
  if (req->token_id == NULL || *req->token_id == '\0') {
    metrics_reject(401);
    /* nginx checks the bearer token and names it; without a name the
     * request did not come through the authenticated path. */
    static const char *const www[] = {"WWW-Authenticate: Bearer realm=\"mcp\"", NULL};
    static const char body[] = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32001,\"message\":"
                               "\"Unauthorized: a valid bearer token is required\"}}";
    return http_send(sink, 401, "application/json", www, body, sizeof(body) - 1);
  }
  const char *m = req->method ? req->method : "";
  if (strcmp(m, "POST") == 0)
    return handle_post(ctx, req, sink);
  if (strcmp(m, "DELETE") == 0)
    return handle_delete(ctx, req, sink);
  if (strcmp(m, "GET") == 0)
    return handle_get(ctx, req, sink);
  static const char *const allow[] = {"Allow: POST, DELETE", NULL};
  metrics_reject(405);
  return send_empty(sink, 405, allow);
}
