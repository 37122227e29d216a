/* The 2026-07-28 era: classification, the checks in the specification's
 * order, server/discover, the method table and result decoration (see
 * modern.h). */
#include "config.h"

#include "fcgi/modern.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/metrics.h"
#include "common/util.h"
#include "fcgi/json_scan.h"
#include "fcgi/mcp.h"
#include "fcgi/resources.h"
#include "fcgi/sse.h"
#include "fcgi/tools.h"

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_INFO "io.modelcontextprotocol/clientInfo"
#define META_LEVEL "io.modelcontextprotocol/logLevel"
#define META_SERVER "io.modelcontextprotocol/serverInfo"
/* Lists change only with the configuration (a restart). */
#define LIST_TTL_MS 300000
#define B64_OPEN "=?base64?"
#define B64_CLOSE "?="

/* Versions of the 2025 era: served through initialize (mcp.c). */
static const char *const legacy_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
/* What server/discover and -32022 list: this era's version first, then
 * the 2025 ones a client reaches through initialize. */
static const char *const supported_versions[] = {MCP_MODERN_VERSION, "2025-11-25", "2025-06-18", "2025-03-26"};

static const cJSON *get(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

bool modern_by_headers(const struct http_request *req) {
  const char *v = req->protocol_version;
  if (v == NULL || *v == '\0' || (req->session_id != NULL && *req->session_id != '\0'))
    return false;
  for (size_t i = 0; i < ARRAY_SIZE(legacy_versions); i++)
    if (strcmp(v, legacy_versions[i]) == 0)
      return false;
  return true;
}

bool modern_request(const struct http_request *req, const cJSON *msg) {
  if (get(get(get(msg, "params"), "_meta"), META_VERSION) != NULL)
    return true;
  return modern_by_headers(req);
}

/* ---- header values ---- */

static bool header_char_ok(unsigned char ch) { return ch == '\t' || (ch >= 0x20 && ch <= 0x7e); }

char *modern_header_value(const char *raw, bool decode, size_t *len) {
  size_t n = strlen(raw);
  while (n > 0 && (*raw == ' ' || *raw == '\t'))
    raw++, n--;
  while (n > 0 && (raw[n - 1] == ' ' || raw[n - 1] == '\t'))
    n--;
  for (size_t i = 0; i < n; i++)
    if (!header_char_ok((unsigned char)raw[i]))
      return NULL;
  size_t open = strlen(B64_OPEN), close = strlen(B64_CLOSE);
  if (!decode || n < open + close || strncmp(raw, B64_OPEN, open) != 0 ||
      strncmp(raw + n - close, B64_CLOSE, close) != 0) {
    *len = n;
    return xstrndup(raw, n);
  }
  size_t b64 = n - open - close;
  char *out = malloc(base64_decoded_max(b64) + 1);
  ssize_t got = out ? base64_decode(raw + open, b64, (unsigned char *)out, base64_decoded_max(b64)) : -1;
  if (got < 0) {
    free(out);
    return NULL;
  }
  out[got] = '\0';
  *len = (size_t)got;
  return out;
}

/* ---- failures ---- */

struct failure {
  int status;
  int code;
  char message[320];
  cJSON *data; /* owned */
};

__attribute__((format(printf, 4, 5))) static int fail(struct failure *f, int status, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->message, sizeof(f->message), fmt, ap);
  va_end(ap);
  f->message[utf8_valid_prefix(f->message, strlen(f->message))] = '\0';
  f->status = status;
  f->code = code;
  return -1;
}

/* A JSON-RPC error response; data is taken.  An unknown id is left out
 * (the 2026-07-28 schema has no null id). */
static int send_error(struct http_sink *sink, int status, const cJSON *id, int code, const char *message, cJSON *data) {
  if (status == 400)
    metrics_reject(400);
  cleanup_cjson cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "jsonrpc", "2.0");
  if (id != NULL)
    cJSON_AddItemToObject(o, "id", rpc_id_copy(id));
  cJSON *e = cJSON_AddObjectToObject(o, "error");
  cJSON_AddNumberToObject(e, "code", code);
  cJSON_AddStringToObject(e, "message", message);
  if (data != NULL)
    cJSON_AddItemToObject(e, "data", data);
  cleanup_free char *text = cJSON_PrintUnformatted(o);
  if (text == NULL)
    return http_send(sink, 500, "application/json", NULL, "", 0);
  return http_send(sink, status, "application/json", NULL, text, strlen(text));
}

static int send_failure(struct http_sink *sink, const cJSON *id, struct failure *f) {
  return send_error(sink, f->status, id, f->code, f->message, steal_pointer(&f->data));
}

/* ---- checks 1 to 4: the version and _meta ---- */

static int check_meta(const cJSON *meta, struct failure *f) {
  if (!cJSON_IsObject(meta))
    return fail(f, 400, RPC_INVALID_PARAMS,
                "Invalid params: params._meta is required, with " META_VERSION " and " META_CAPS);
  const cJSON *v = get(meta, META_VERSION), *caps = get(meta, META_CAPS);
  const cJSON *info = get(meta, META_INFO), *level = get(meta, META_LEVEL);
  if (!cJSON_IsString(v) || v->valuestring[0] == '\0')
    return fail(f, 400, RPC_INVALID_PARAMS, "Invalid params: _meta." META_VERSION " is required (a string)");
  if (!cJSON_IsObject(caps))
    return fail(f, 400, RPC_INVALID_PARAMS, "Invalid params: _meta." META_CAPS " is required (an object)");
  if (info != NULL && !cJSON_IsObject(info))
    return fail(f, 400, RPC_INVALID_PARAMS, "Invalid params: _meta." META_INFO " must be an object");
  if (level != NULL && (!cJSON_IsString(level) || log_level_index(level->valuestring) < 0))
    return fail(f, 400, RPC_INVALID_PARAMS,
                "Invalid params: _meta." META_LEVEL " must be one of debug, info, notice, warning, error, critical, "
                "alert, emergency");
  return 0;
}

static int unsupported(const char *requested, struct failure *f) {
  f->data = cJSON_CreateObject();
  cJSON *list = cJSON_AddArrayToObject(f->data, "supported");
  for (size_t i = 0; i < ARRAY_SIZE(supported_versions); i++)
    cJSON_AddItemToArray(list, cJSON_CreateString(supported_versions[i]));
  cJSON_AddStringToObject(f->data, "requested", requested);
  return fail(f, 400, UNSUPPORTED_PROTOCOL_VERSION,
              "Unsupported protocol version: requests with per-request _meta use " MCP_MODERN_VERSION
              "; the 2025 versions are served through initialize");
}

static int check_version(const struct http_request *req, const cJSON *meta, struct failure *f) {
  if (req->protocol_version == NULL || req->protocol_version[0] == '\0')
    return fail(f, 400, HEADER_MISMATCH, "Header mismatch: the MCP-Protocol-Version header is required");
  if (check_meta(meta, f) < 0)
    return -1;
  const cJSON *version = get(meta, META_VERSION);
  const char *v = version != NULL ? version->valuestring : "";
  size_t n = 0;
  cleanup_free char *header = modern_header_value(req->protocol_version, false, &n);
  if (header == NULL || strlen(v) != n || strcmp(header, v) != 0)
    return fail(f, 400, HEADER_MISMATCH,
                "Header mismatch: MCP-Protocol-Version header value '%.40s' does not match _meta value '%.40s'",
                req->protocol_version, v);
  return strcmp(v, MCP_MODERN_VERSION) == 0 ? 0 : unsupported(v, f);
}

/* ---- checks 5, 6 and 8: headers that mirror the body ---- */

/* body: the body's value (NULL: absent); raw: the header (NULL: absent).
 * Only Mcp-Name and Mcp-Param-* may carry the base64 form (`decode`): a
 * proxy that routes on Mcp-Method must see what the server acts on. */
static int check_mirror(const char *name, const char *raw, const char *body, bool decode, struct failure *f) {
  if (raw == NULL)
    return body != NULL ? fail(f, 400, HEADER_MISMATCH, "Header mismatch: the %s header is required", name) : 0;
  size_t n = 0;
  cleanup_free char *value = modern_header_value(raw, decode, &n);
  if (value == NULL)
    return fail(f, 400, HEADER_MISMATCH, "Header mismatch: the %s header value is malformed", name);
  if (body == NULL)
    return fail(f, 400, HEADER_MISMATCH, "Header mismatch: %s is set but the body has no value for it", name);
  if (strlen(body) != n || memcmp(value, body, n) != 0)
    return fail(f, 400, HEADER_MISMATCH, "Header mismatch: %s header value '%.80s' does not match body value '%.80s'",
                name, raw, body);
  return 0;
}

static const char *string_of(const cJSON *v) { return v != NULL && cJSON_IsString(v) ? v->valuestring : NULL; }

/* The `sandbox` argument (x-mcp-header "Sandbox"); a value of another
 * type without the header is left to the tool, which refuses it. */
static int check_sandbox_mirror(const struct http_request *req, const cJSON *params, struct failure *f) {
  const cJSON *sandbox = get(get(params, "arguments"), "sandbox");
  if (sandbox != NULL && !cJSON_IsNull(sandbox) && !cJSON_IsString(sandbox) && req->param_sandbox == NULL)
    return 0;
  return check_mirror("Mcp-Param-Sandbox", req->param_sandbox, string_of(sandbox), true, f);
}

static int check_mirrors(const struct http_request *req, const char *method, const cJSON *params, struct failure *f) {
  if (req->mcp_method == NULL)
    return fail(f, 400, HEADER_MISMATCH, "Header mismatch: the Mcp-Method header is required");
  if (check_mirror("Mcp-Method", req->mcp_method, method, false, f) < 0)
    return -1;
  bool by_name = strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0;
  bool by_uri = strcmp(method, "resources/read") == 0;
  if (!by_name && !by_uri)
    return 0;
  const char *name = string_of(get(params, by_uri ? "uri" : "name"));
  if (req->mcp_name == NULL)
    return fail(f, 400, HEADER_MISMATCH, "Header mismatch: the Mcp-Name header is required for %s", method);
  if (check_mirror("Mcp-Name", req->mcp_name, name, true, f) < 0)
    return -1;
  return strcmp(method, "tools/call") == 0 ? check_sandbox_mirror(req, params, f) : 0;
}

/* ---- methods ---- */

static cJSON *server_info(void) {
  cJSON *info = cJSON_CreateObject();
  cJSON_AddStringToObject(info, "name", MCP_SERVER_NAME);
  cJSON_AddStringToObject(info, "title", "Python sandbox");
  cJSON_AddStringToObject(info, "version", PACKAGE_VERSION);
  return info;
}

static int discover(struct rpc_call *c) {
  cJSON *r = cJSON_CreateObject();
  c->result = r;
  cJSON *list = cJSON_AddArrayToObject(r, "supportedVersions");
  for (size_t i = 0; i < ARRAY_SIZE(supported_versions); i++)
    cJSON_AddItemToArray(list, cJSON_CreateString(supported_versions[i]));
  cJSON *caps = cJSON_AddObjectToObject(r, "capabilities");
  cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "tools"), "listChanged", 0);
  cJSON *res = cJSON_AddObjectToObject(caps, "resources");
  cJSON_AddBoolToObject(res, "listChanged", 0);
  cJSON_AddBoolToObject(res, "subscribe", 0);
  cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "prompts"), "listChanged", 0);
  /* stdout and stderr lines, for a request whose _meta sets logLevel */
  cJSON_AddObjectToObject(caps, "logging");
  char text[900];
  snprintf(text, sizeof(text),
           "Code runs in gVisor sandboxes without network access. execute_python and execute_javascript without "
           "`sandbox` make a new sandbox and return its handle as structuredContent.sandbox; pass it back as "
           "`sandbox` to run later calls in the same persistent /work (files and installed packages stay; "
           "variables do not: each call is a fresh process). A sandbox ends after %d minutes without a call, or "
           "with close_sandbox. Its files are readable as resources sandbox://<handle>/<path below /work>.",
           (c->ctx->cfg->idle_timeout + 59) / 60);
  cJSON_AddStringToObject(r, "instructions", text);
  return 0;
}

static int tools_list_modern(struct rpc_call *c) {
  c->result = tools_list(c->ctx->cfg, true);
  return c->result ? 0 : rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error");
}

struct method {
  const char *name;
  rpc_handler fn;
  int ttl_ms;       /* cache hints; -1: not cacheable */
  bool public_hint; /* cacheScope "public": the same for every token */
};

static const struct method methods[] = {
    {"server/discover", discover, LIST_TTL_MS, true},
    {"tools/list", tools_list_modern, LIST_TTL_MS, true},
    {"tools/call", tools_call, -1, false},
    {"resources/list", resources_list_modern, LIST_TTL_MS, true},
    {"resources/templates/list", resources_templates_modern, LIST_TTL_MS, true},
    {"resources/read", resources_read_modern, 0, false},
    {"prompts/list", mcp_prompts_list, LIST_TTL_MS, true}, /* empty: cacheable like the others */
};

static const struct method *method_of(const char *name) {
  for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
    if (strcmp(methods[i].name, name) == 0)
      return &methods[i];
  return NULL;
}

void modern_decorate(struct rpc_call *c) {
  cJSON *r = c->result;
  if (!cJSON_IsObject(r))
    return;
  if (!cJSON_HasObjectItem(r, "resultType"))
    cJSON_AddStringToObject(r, "resultType", "complete");
  cJSON *meta = cJSON_GetObjectItemCaseSensitive(r, "_meta");
  if (meta == NULL)
    meta = cJSON_AddObjectToObject(r, "_meta");
  if (cJSON_IsObject(meta) && !cJSON_HasObjectItem(meta, META_SERVER))
    cJSON_AddItemToObject(meta, META_SERVER, server_info());
  const struct method *m = method_of(c->method);
  if (m == NULL || m->ttl_ms < 0 || cJSON_HasObjectItem(r, "ttlMs"))
    return;
  cJSON_AddNumberToObject(r, "ttlMs", m->ttl_ms);
  cJSON_AddStringToObject(r, "cacheScope", m->public_hint ? "public" : "private");
}

/* ---- answers ---- */

static int finish(struct rpc_call *c, bool streamed) {
  if (streamed)
    return 0;
  if (c->result == NULL)
    return send_error(c->sink, c->http_status ? c->http_status : 200, c->id, c->error_code, c->error_message,
                      steal_pointer(&c->error_data));
  modern_decorate(c);
  cleanup_cjson cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "jsonrpc", "2.0");
  cJSON_AddItemToObject(o, "id", rpc_id_copy(c->id));
  cJSON_AddItemToObject(o, "result", steal_pointer(&c->result));
  if (!http_accepts(c->http->accept, "application/json")) {
    struct sse s;
    if (sse_begin_modern(&s, c->sink) < 0)
      return -1;
    return sse_send(&s, o);
  }
  cleanup_free char *text = cJSON_PrintUnformatted(o);
  if (text == NULL)
    return send_error(c->sink, 500, c->id, RPC_INTERNAL_ERROR, "Internal error", NULL);
  return http_send(c->sink, 200, "application/json", NULL, text, strlen(text));
}

static const char *const removed[] = {"initialize",
                                      "ping",
                                      "logging/setLevel",
                                      "resources/subscribe",
                                      "resources/unsubscribe",
                                      "notifications/initialized",
                                      "notifications/roots/list_changed"};

static int method_not_found(struct http_sink *sink, const cJSON *id, const char *method) {
  bool was = false;
  for (size_t i = 0; i < ARRAY_SIZE(removed); i++)
    was = was || strcmp(method, removed[i]) == 0;
  char msg[200];
  snprintf(msg, sizeof(msg), "Method not found: %.100s%s", method, was ? " (removed in " MCP_MODERN_VERSION ")" : "");
  msg[utf8_valid_prefix(msg, strlen(msg))] = '\0';
  return send_error(sink, 404, id, RPC_METHOD_NOT_FOUND, msg, NULL);
}

static int serve_request(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink, const cJSON *msg,
                         const struct method *m) {
  const cJSON *params = get(msg, "params");
  const cJSON *level = get(get(params, "_meta"), META_LEVEL);
  struct rpc_call c = {.ctx = ctx,
                       .http = req,
                       .sink = sink,
                       .id = get(msg, "id"),
                       .method = m->name,
                       .params = params,
                       .modern = true,
                       .log_level = cJSON_IsString(level) ? log_level_index(level->valuestring) : -1,
                       .http_status = 200};
  int r = m->fn(&c);
  if (r < 0 && c.error_code == 0)
    rpc_fail(&c, RPC_INTERNAL_ERROR, "Internal error");
  int ret = finish(&c, r > 0);
  cJSON_Delete(c.result);
  cJSON_Delete(c.error_data);
  return ret;
}

int modern_post(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink, const cJSON *msg) {
  const cJSON *method = get(msg, "method"), *id = get(msg, "id"), *params = get(msg, "params");
  if (method == NULL)
    return send_error(sink, 400, NULL, RPC_INVALID_REQUEST,
                      "Invalid Request: a client sends no JSON-RPC responses in " MCP_MODERN_VERSION, NULL);
  if (id == NULL)
    return http_send(sink, 202, NULL, NULL, NULL, 0); /* a notification: nothing to do */
  struct failure f = {0};
  if (check_version(req, get(params, "_meta"), &f) < 0 || check_mirrors(req, method->valuestring, params, &f) < 0)
    return send_failure(sink, id, &f);
  const struct method *m = method_of(method->valuestring);
  if (m == NULL)
    return method_not_found(sink, id, method->valuestring);
  return serve_request(ctx, req, sink, msg, m);
}
