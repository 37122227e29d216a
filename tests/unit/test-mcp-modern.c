/* The 2026-07-28 era through mcp_serve(): classification, the checks in the
 * specification's order, server/discover, result decoration, sandbox
 * handles (create, reuse, resources, another token, close_sandbox), the
 * `sandbox` argument over a 2025 session, streams without ids (and a call
 * with nothing to stream answered as JSON), and a client that goes away
 * cancelling its call. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "fcgi/stream.h"
#include "mcp-harness.h"
#include "tap.h"

#define V "2026-07-28"
#define META                                                                                                           \
  "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"" V "\",\"io.modelcontextprotocol/"                        \
  "clientCapabilities\":{}}"
#define OTHER_TOKEN "other-token"

static struct harness h;

/* The headers a 2026-07-28 client sends for this body. */
static struct http_request modern(const char *body, const char *method, const char *name) {
  struct http_request req = post_request(body, NULL);
  req.protocol_version = V;
  req.mcp_method = method;
  req.mcp_name = name;
  return req;
}

static void rpc(const char *method, const char *params, struct response *r) {
  char body[4096];
  snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"%s\",\"params\":{%s%s" META "}}", method,
           params ? params : "", params ? "," : "");
  struct http_request req = modern(body, method, NULL);
  serve(&h, &req, r);
}

/* tools/call of execute_python with these arguments (sandbox: mirrored). */
static void call(const char *token, const char *args, const char *sandbox, const char *extra_meta, struct response *r) {
  char body[8192];
  snprintf(body, sizeof(body),
           "{\"jsonrpc\":\"2.0\",\"id\":\"c\",\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\","
           "\"arguments\":%s,\"_meta\":{%s\"io.modelcontextprotocol/protocolVersion\":\"" V "\","
           "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
           args, extra_meta ? extra_meta : "");
  struct http_request req = modern(body, "tools/call", "execute_python");
  req.token_id = token;
  req.param_sandbox = sandbox;
  serve(&h, &req, r);
}

static void discover_tests(void) {
  struct response r;
  rpc("server/discover", NULL, &r);
  const cJSON *res = rpc_result(&r, "server/discover");
  is_str(jstr(res, "supportedVersions.0"), V, "discover: 2026-07-28 first in supportedVersions");
  is_str(jstr(res, "resultType"), "complete", "discover: resultType");
  ok(cJSON_IsObject(jget(res, "capabilities.tools")), "discover: capabilities.tools");
  const cJSON *info = cJSON_GetObjectItemCaseSensitive(jget(res, "_meta"), "io.modelcontextprotocol/serverInfo");
  is_str(jstr(info, "name"), "mcp-sandbox", "discover: serverInfo in _meta");
  ok(jnum(res, "ttlMs") > 0, "discover: ttlMs");
  is_str(jstr(res, "cacheScope"), "public", "discover: cacheScope");
  like(jstr(res, "instructions"), "close_sandbox", "discover: instructions");
  ok(header(&r, "Mcp-Session-Id") == NULL, "discover: no session is issued");
  response_free(&r);
}

struct check_case {
  const char *what;
  const char *body;
  const char *version, *method, *name;
  int status, code;
  const char *message;
};

#define DISCOVER(meta) "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{" meta "}}"
#define CAPS "\"io.modelcontextprotocol/clientCapabilities\":{}"
#define CALL_BODY(args)                                                                                                \
  "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"                                                                  \
  "call\",\"params\":{\"name\":\"execute_python\",\"arguments\":" args "," META "}}"

static const struct check_case checks[] = {
    {"no MCP-Protocol-Version header", DISCOVER(META), NULL, "server/discover", NULL, 400, -32020,
     "MCP-Protocol-Version header is required"},
    {"no _meta", DISCOVER(""), V, "server/discover", NULL, 400, -32602, "_meta is required"},
    {"_meta without protocolVersion", DISCOVER("\"_meta\":{" CAPS "}"), V, "server/discover", NULL, 400, -32602,
     "protocolVersion is required"},
    {"_meta without clientCapabilities", DISCOVER("\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"" V "\"}"),
     V, "server/discover", NULL, 400, -32602, "clientCapabilities is required"},
    {"an unknown logLevel",
     DISCOVER("\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"" V "\"," CAPS
              ",\"io.modelcontextprotocol/logLevel\":\"loud\"}"),
     V, "server/discover", NULL, 400, -32602, "logLevel"},
    {"header and _meta versions differ",
     DISCOVER("\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"v9\"," CAPS "}"), V, "server/discover", NULL,
     400, -32020, "does not match"},
    {"an unknown version", DISCOVER("\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"v9\"," CAPS "}"), "v9",
     "server/discover", NULL, 400, -32022, "Unsupported protocol version"},
    {"a 2025 version in _meta",
     DISCOVER("\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2025-11-25\"," CAPS "}"), "2025-11-25",
     "server/discover", NULL, 400, -32022, "initialize"},
    {"no Mcp-Method", DISCOVER(META), V, NULL, NULL, 400, -32020, "Mcp-Method header is required"},
    {"another Mcp-Method", DISCOVER(META), V, "tools/list", NULL, 400, -32020, "does not match"},
    {"an Mcp-Method in another case", DISCOVER(META), V, "SERVER/DISCOVER", NULL, 400, -32020, "does not match"},
    {"tools/call without Mcp-Name", CALL_BODY("{\"code\":\"1\"}"), V, "tools/call", NULL, 400, -32020,
     "Mcp-Name header is required"},
    {"tools/call with another Mcp-Name", CALL_BODY("{\"code\":\"1\"}"), V, "tools/call", "execute_js", 400, -32020,
     "does not match"},
    {"Mcp-Name with bad base64", CALL_BODY("{\"code\":\"1\"}"), V, "tools/call", "=?base64?ZXhlY3V0ZV9weXRob24?=", 400,
     -32020, "malformed"},
    {"an unknown method", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"unknown/method\",\"params\":{" META "}}", V,
     "unknown/method", NULL, 404, -32601, "Method not found"},
    {"ping", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{" META "}}", V, "ping", NULL, 404, -32601,
     "removed"},
    {"initialize with a modern claim", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{" META "}}",
     V, "initialize", NULL, 404, -32601, "removed"},
    {"logging/setLevel",
     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\",\"params\":{\"level\":\"info\"," META "}}", V,
     "logging/setLevel", NULL, 404, -32601, "removed"},
    {"resources/subscribe",
     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"x\"," META "}}", V,
     "resources/subscribe", NULL, 404, -32601, "removed"},
};

static void check_tests(void) {
  for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
    const struct check_case *k = &checks[i];
    struct http_request req = modern(k->body, k->method, k->name);
    req.protocol_version = k->version;
    struct response r;
    serve(&h, &req, &r);
    is_rpc_error(&r, k->status, k->code, k->message, k->what);
    if (k->code != -32600)
      is_int(jnum(r.json, "id"), 1, "%s: the error carries the request id", k->what);
    if (k->code == -32022) {
      is_str(jstr(r.json, "error.data.supported.0"), V, "%s: data.supported", k->what);
      ok(jstr(r.json, "error.data.requested") != NULL, "%s: data.requested", k->what);
    }
    response_free(&r);
  }
}

/* Header values: OWS trimmed, the base64 sentinel decoded. */
static void header_value_tests(void) {
  struct response r;
  struct http_request req = modern(DISCOVER(META), "  server/discover\t", NULL);
  serve(&h, &req, &r);
  is_int(r.status, 200, "Mcp-Method with spaces and a tab around it is accepted");
  response_free(&r);
  req = modern(CALL_BODY("{}"), "tools/call", "=?base64?ZXhlY3V0ZV9weXRob24=?=");
  serve(&h, &req, &r);
  ok(r.status == 200 && cJSON_IsTrue(jget(r.json, "result.isError")),
     "Mcp-Name in base64 is decoded (the call itself is refused: no code)");
  response_free(&r);
  /* Only Mcp-Name and Mcp-Param-* may be encoded: Mcp-Method as base64 of
   * "server/discover" is not that method (a proxy routes on it as sent). */
  req = modern(DISCOVER(META), "=?base64?c2VydmVyL2Rpc2NvdmVy?=", NULL);
  serve(&h, &req, &r);
  is_rpc_error(&r, 400, -32020, "does not match", "Mcp-Method in base64 is not decoded");
  response_free(&r);
  req = modern(DISCOVER(META), "server/discover", NULL);
  req.protocol_version = "=?base64?MjAyNi0wNy0yOA==?=";
  serve(&h, &req, &r);
  is_rpc_error(&r, 400, -32020, "does not match", "MCP-Protocol-Version in base64 is not decoded");
  response_free(&r);
  call(TEST_TOKEN, "{\"code\":\"1\",\"sandbox\":\"abc\"}", NULL, NULL, &r);
  is_rpc_error(&r, 400, -32020, "Mcp-Param-Sandbox header is required", "sandbox in the body, no header");
  response_free(&r);
  call(TEST_TOKEN, "{\"code\":\"1\",\"sandbox\":\"abc\"}", "abd", NULL, &r);
  is_rpc_error(&r, 400, -32020, "does not match", "Mcp-Param-Sandbox differs from the body");
  response_free(&r);
  call(TEST_TOKEN, "{\"code\":\"1\"}", "abc", NULL, &r);
  is_rpc_error(&r, 400, -32020, "no value", "Mcp-Param-Sandbox without a sandbox in the body");
  response_free(&r);
  call(TEST_TOKEN, "{\"code\":\"1\",\"sandbox\":\"Hello\"}", "=?base64?SGVsbG8?=", NULL, &r);
  is_rpc_error(&r, 400, -32020, "malformed", "Mcp-Param-Sandbox with base64 lacking its padding");
  response_free(&r);
  call(TEST_TOKEN, "{\"code\":\"1\",\"sandbox\":\"Hello\"}", "=?base64?SGVsbG8=?=", NULL, &r);
  ok(r.status == 200 && cJSON_IsTrue(jget(r.json, "result.isError")), "Mcp-Param-Sandbox in base64 matches the body");
  like(jstr(r.json, "result.content.0.text"), "Omit `sandbox` to start a new one", "an unknown sandbox is an isError");
  response_free(&r);
}

static void transport_tests(void) {
  struct response r;
  struct http_request req = modern("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{}}",
                                   "notifications/cancelled", NULL);
  serve(&h, &req, &r);
  is_int(r.status, 202, "a modern notification gets 202");
  response_free(&r);
  req = (struct http_request){.method = "GET", .accept = ACCEPT_BOTH, .token_id = TEST_TOKEN, .protocol_version = V};
  serve(&h, &req, &r);
  is_int(r.status, 405, "GET from a modern client: 405");
  response_free(&r);
  req.method = "DELETE";
  serve(&h, &req, &r);
  is_int(r.status, 405, "DELETE from a modern client: 405");
  response_free(&r);
}

static void list_tests(void) {
  struct response r, r2;
  rpc("tools/list", NULL, &r);
  const cJSON *res = rpc_result(&r, "tools/list");
  int n = cJSON_GetArraySize(jget(res, "tools"));
  is_str(jstr(res, "tools.0.name"), "execute_python", "tools/list: execute_python first");
  char path[64];
  snprintf(path, sizeof(path), "tools.%d.name", n - 1);
  is_str(jstr(res, path), "close_sandbox", "tools/list: close_sandbox last");
  is_str(jstr(res, "tools.0.inputSchema.properties.sandbox.x-mcp-header"), "Sandbox", "sandbox carries x-mcp-header");
  like(jstr(res, "tools.0.description"), "minutes without a call", "the description states the idle lifetime");
  is_str(jstr(res, "cacheScope"), "public", "tools/list: cacheScope");
  ok(jnum(res, "ttlMs") > 0, "tools/list: ttlMs");
  rpc("tools/list", NULL, &r2);
  ok(r.body_len == r2.body_len && memcmp(r.body, r2.body, r.body_len) == 0, "tools/list is the same every time");
  response_free(&r);
  response_free(&r2);
  static const char *const lists[] = {"resources/list", "resources/templates/list", "prompts/list"};
  for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
    rpc(lists[i], NULL, &r);
    res = rpc_result(&r, lists[i]);
    ok(jnum(res, "ttlMs") >= 0 && jstr(res, "cacheScope") != NULL, "%s: cache hints", lists[i]);
    response_free(&r);
  }
  rpc("resources/templates/list", NULL, &r);
  is_str(jstr(r.json, "result.resourceTemplates.0.uriTemplate"), "sandbox://{sandbox}/{path}", "the template");
  response_free(&r);
}

static void read_resource(const char *token, const char *uri, struct response *r) {
  char body[1024];
  snprintf(body, sizeof(body),
           "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"resources/read\",\"params\":{\"uri\":\"%s\"," META "}}", uri);
  struct http_request req = modern(body, "resources/read", uri);
  req.token_id = token;
  serve(&h, &req, r);
}

static void handle_tests(void) {
  struct response r;
  call(TEST_TOKEN, "{\"code\":\"open('data.txt','w').write('kept'); print('made')\"}", NULL, NULL, &r);
  const char *hd = jstr(r.json, "result.structuredContent.sandbox");
  char handle[SESSION_ID_MAX] = "";
  snprintf(handle, sizeof(handle), "%s", hd ? hd : "");
  ok(session_id_valid(handle), "a call without sandbox makes one: structuredContent.sandbox (%s)", handle);
  is_str(jstr(r.json, "result.resultType"), "complete", "the call's result has resultType");
  int n = cJSON_GetArraySize(jget(r.json, "result.content"));
  char path[64];
  snprintf(path, sizeof(path), "result.content.%d.text", n - 1);
  like(jstr(r.json, path), handle, "the text names the handle");
  response_free(&r);

  char args[256];
  snprintf(args, sizeof(args), "{\"code\":\"print(open('data.txt').read())\",\"sandbox\":\"%s\"}", handle);
  call(TEST_TOKEN, args, handle, NULL, &r);
  is_str(jstr(r.json, "result.structuredContent.stdout"), "kept\n", "a second call in the sandbox reads the file");
  is_str(jstr(r.json, "result.structuredContent.sandbox"), handle, "and names the same sandbox");
  response_free(&r);

  char uri[128];
  snprintf(uri, sizeof(uri), "sandbox://%s/data.txt", handle);
  read_resource(TEST_TOKEN, uri, &r);
  is_str(jstr(r.json, "result.contents.0.text"), "kept", "resources/read of sandbox://<handle>/data.txt");
  is_str(jstr(r.json, "result.cacheScope"), "private", "a read is private");
  response_free(&r);
  read_resource(OTHER_TOKEN, uri, &r);
  is_rpc_error(&r, 200, -32602, "Resource not found", "another token's sandbox file");
  is_str(jstr(r.json, "error.data.uri"), uri, "the error names the uri");
  response_free(&r);

  call(OTHER_TOKEN, args, handle, NULL, &r);
  ok(cJSON_IsTrue(jget(r.json, "result.isError")), "another token's handle is refused");
  like(jstr(r.json, "result.content.0.text"), "Omit `sandbox`", "with the way out");
  response_free(&r);

  char close_body[1024];
  snprintf(close_body, sizeof(close_body),
           "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"close_sandbox\","
           "\"arguments\":{\"sandbox\":\"%s\"}," META "}}",
           handle);
  struct http_request req = modern(close_body, "tools/call", "close_sandbox");
  req.param_sandbox = handle;
  req.token_id = OTHER_TOKEN;
  serve(&h, &req, &r);
  ok(cJSON_IsTrue(jget(r.json, "result.isError")), "close_sandbox with another token is refused");
  response_free(&r);
  req.token_id = TEST_TOKEN;
  serve(&h, &req, &r);
  ok(cJSON_IsFalse(jget(r.json, "result.isError")) && cJSON_IsTrue(jget(r.json, "result.structuredContent.closed")),
     "close_sandbox ends it");
  response_free(&r);
  call(TEST_TOKEN, args, handle, NULL, &r);
  ok(cJSON_IsTrue(jget(r.json, "result.isError")), "the closed handle is unknown");
  response_free(&r);
  is_int(processes_after_delete(&h, handle, 5000), 0, "its processes are gone");
}

static void output_uri_tests(void) {
  struct response r;
  call(TEST_TOKEN,
       "{\"code\":\"import os; os.makedirs('output', exist_ok=True); open('output/a.txt','w').write('x')\"}", NULL,
       NULL, &r);
  const char *hd = jstr(r.json, "result.structuredContent.sandbox");
  char handle[SESSION_ID_MAX] = "";
  snprintf(handle, sizeof(handle), "%s", hd ? hd : "");
  char want[128];
  snprintf(want, sizeof(want), "sandbox://%s/output/a.txt", handle);
  bool found = false;
  const cJSON *b;
  cJSON_ArrayForEach(b, jget(r.json, "result.content")) {
    const char *u = jstr(b, "resource.uri");
    found = found || (u != NULL && strcmp(u, want) == 0);
  }
  ok(found, "an output file's URI names the handle (%s)", want);
  response_free(&r);
  read_resource(TEST_TOKEN, want, &r);
  is_str(jstr(r.json, "result.contents.0.text"), "x", "and resources/read reads it");
  response_free(&r);
}

/* 2025: the session is the sandbox; a `sandbox` argument must name it. */
static void legacy_tests(void) {
  char sid[SESSION_ID_MAX];
  if (!ok(initialize(&h, TEST_TOKEN, sid), "a 2025 session"))
    return;
  char body[512];
  snprintf(body, sizeof(body),
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\","
           "\"arguments\":{\"code\":\"print(1)\",\"sandbox\":\"0123456789abcdef0123456789abcdef\"}}}");
  struct response r;
  post(&h, sid, body, &r);
  ok(cJSON_IsTrue(jget(r.json, "result.isError")), "2025: a sandbox other than the session's is refused");
  like(jstr(r.json, "result.content.0.text"), "not this MCP session's sandbox", "2025: saying so");
  response_free(&r);
  snprintf(body, sizeof(body),
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\","
           "\"arguments\":{\"code\":\"print(1)\",\"sandbox\":\"%s\"}}}",
           sid);
  post(&h, sid, body, &r);
  is_str(jstr(r.json, "result.structuredContent.stdout"), "1\n", "2025: the session's own sandbox runs the call");
  ok(jget(r.json, "result.resultType") == NULL, "2025: results as before (no resultType)");
  response_free(&r);
  is_int(delete_session(&h, TEST_TOKEN, sid), 204, "2025: DELETE still ends the session");
}

static void stream_tests(void) {
  struct response r;
  call(TEST_TOKEN,
       "{\"code\":\"import time\\nfor i in range(3):\\n  print('line', i, flush=True); time.sleep(0.8)\","
       "\"timeout_seconds\":20}",
       NULL, "\"progressToken\":\"p\",", &r);
  ok(r.sse && r.sse_valid, "a modern tools/call streams");
  ok(strstr(r.body, "id:") == NULL, "no event ids, no priming event");
  ok(strstr(r.body, ":\n\n") != NULL, "keep-alive comments");
  int progress = 0, logs = 0, requests = 0;
  const cJSON *e;
  bool line_in_message = false;
  cJSON_ArrayForEach(e, r.events) {
    const char *m = jstr(e, "method");
    /* Only notifications and the one response: the server never sends a
     * request of its own on a stream (sep-2575). */
    requests += m == NULL || strncmp(m, "notifications/", 14) != 0 || cJSON_HasObjectItem(e, "id");
    progress += m && strcmp(m, "notifications/progress") == 0;
    logs += m && strcmp(m, "notifications/message") == 0;
    const char *msg = jstr(e, "params.message");
    line_in_message = line_in_message || (msg && strstr(msg, "stdout: line") != NULL);
  }
  is_int(requests, 0, "no request from the server on the stream");
  ok(r.json != NULL && jget(r.json, "method") == NULL,
     "the stream ends with the call's response (and nothing after it)");
  ok(progress >= 1, "progress notifications (%d)", progress);
  ok(line_in_message, "progress messages carry output lines");
  is_int(logs, 0, "no notifications/message without a logLevel in _meta");
  char hd[SESSION_ID_MAX];
  snprintf(hd, sizeof(hd), "%s", jstr(r.json, "result.structuredContent.sandbox") ?: "");
  response_free(&r);
  char args[256];
  snprintf(args, sizeof(args), "{\"code\":\"print('a'); print('b')\",\"sandbox\":\"%s\"}", hd);
  call(TEST_TOKEN, args, hd, "\"io.modelcontextprotocol/logLevel\":\"info\",", &r);
  logs = 0;
  cJSON_ArrayForEach(e, r.events) logs += jstr(e, "method") && strcmp(jstr(e, "method"), "notifications/message") == 0;
  is_int(logs, 2, "with logLevel info, stdout lines as notifications/message");
  response_free(&r);

  /* Nothing to stream (no progressToken, no logLevel): a call over within
   * MODERN_STREAM_AFTER_S is one JSON object, so that a cell lost before
   * its answer gives the client nginx's error rather than a broken
   * stream; a longer one streams from then on, kept alive. */
  snprintf(args, sizeof(args), "{\"code\":\"print('plain')\",\"sandbox\":\"%s\"}", hd);
  call(TEST_TOKEN, args, hd, NULL, &r);
  ok(r.status == 200 && !r.sse, "a short call with nothing to stream is answered as JSON, though SSE is accepted");
  like(header(&r, "Content-Type"), "application/json", "its Content-Type");
  is_str(jstr(r.json, "result.structuredContent.stdout"), "plain\n", "with its result");
  response_free(&r);
  snprintf(args, sizeof(args), "{\"code\":\"import time; time.sleep(%d); print('late')\",\"sandbox\":\"%s\"}",
           MODERN_STREAM_AFTER_S + 2, hd);
  call(TEST_TOKEN, args, hd, NULL, &r);
  ok(r.sse && r.sse_valid, "a call that runs longer than %d s streams", MODERN_STREAM_AFTER_S);
  int comments = 0;
  for (size_t i = 0; i < r.body_len; i++)
    comments += r.body[i] == ':' && (i == 0 || r.body[i - 1] == '\n');
  ok(comments >= 2 && comments <= 4, "kept alive from %d s on, about once a second (%d comments in %d s)",
     MODERN_STREAM_AFTER_S, comments, MODERN_STREAM_AFTER_S + 2);
  is_str(jstr(r.json, "result.structuredContent.stdout"), "late\n", "the stream ends with the result");
  response_free(&r);

  /* The client goes away 1.5 s into a call that would sleep 30 s. */
  snprintf(args, sizeof(args),
           "{\"code\":\"import os,time; open('pid','w').write(str(os.getpid())); time.sleep(30)\",\"sandbox\":\"%s\","
           "\"timeout_seconds\":60}",
           hd);
  h.peer_gone_after_ms = 1500;
  int64_t t0 = now_ms();
  call(TEST_TOKEN, args, hd, NULL, &r);
  int64_t took = now_ms() - t0;
  h.peer_gone_after_ms = 0;
  /* Noticed within CALL_TICK_MS, every process killed within a second:
   * the call ends within 1.25 s of the client leaving, and half a second
   * for a busy machine. */
  ok(took < 1500 + 1750, "a client that leaves cancels the call within a second (%lld ms after it left)",
     (long long)(took - 1500));
  ok(r.json == NULL, "and nothing more is sent");
  response_free(&r);
  snprintf(args, sizeof(args), "{\"code\":\"print(open('pid').read())\",\"sandbox\":\"%s\"}", hd);
  call(TEST_TOKEN, args, hd, NULL, &r);
  int pid = jstr(r.json, "result.structuredContent.stdout") ? atoi(jstr(r.json, "result.structuredContent.stdout")) : 0;
  char p[64];
  snprintf(p, sizeof(p), "/proc/%d/cmdline", pid);
  bool alive = true;
  for (int i = 0; i < 100 && alive; i++) {
    FILE *f = fopen(p, "r");
    alive = f != NULL && fgetc(f) != EOF;
    if (f)
      fclose(f);
    if (alive)
      usleep(20000);
  }
  ok(pid > 0 && !alive, "the cancelled code is no longer running");
  response_free(&r);
}

int main(void) {
  harness_setup(&h);
  discover_tests();
  check_tests();
  header_value_tests();
  transport_tests();
  list_tests();
  handle_tests();
  output_uri_tests();
  legacy_tests();
  stream_tests();
  harness_teardown(&h);
  return done_testing();
}
