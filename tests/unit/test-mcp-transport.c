/* Streamable HTTP through mcp_serve(): authentication, Origin, methods,
 * header rules, body validation, JSON-RPC envelopes and the session
 * lifecycle.  See mcp-harness.h for the setup (backend = direct). */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "mcp-harness.h"
#include "tap.h"

static struct harness h;
static char sid[SESSION_ID_MAX]; /* a live session of TEST_TOKEN */

#define PING "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}"

static void auth_tests(void) {
  struct response r;
  struct http_request req = post_request(PING, sid);
  req.token_id = NULL;
  serve(&h, &req, &r);
  is_int(r.status, 401, "no token id: 401");
  like(header(&r, "WWW-Authenticate"), "Bearer", "with a Bearer challenge");
  is_int(jnum(r.json, "error.code"), -32001, "and a JSON-RPC error body");
  response_free(&r);
  req.token_id = "";
  serve(&h, &req, &r);
  is_int(r.status, 401, "an empty token id: 401");
  response_free(&r);

  req = post_request(PING, sid);
  req.origin = "https://evil.example";
  serve(&h, &req, &r);
  is_rpc_error(&r, 403, -32600, "Origin", "a foreign Origin");
  response_free(&r);
  req.origin = "http://localhost:6274";
  serve(&h, &req, &r);
  is_int(r.status, 200, "a localhost Origin is served");
  response_free(&r);
  h.cfg.allowed_origins[0] = '\0';
  snprintf(h.cfg.allowed_origins, sizeof(h.cfg.allowed_origins), "https://app.example");
  req.origin = "https://app.example";
  serve(&h, &req, &r);
  is_int(r.status, 200, "a listed Origin is served");
  response_free(&r);
  h.cfg.allowed_origins[0] = '\0';
}

static void method_tests(void) {
  struct response r;
  struct http_request req = {.method = "GET", .accept = "text/event-stream", .token_id = TEST_TOKEN, .session_id = sid};
  serve(&h, &req, &r);
  is_int(r.status, 405, "GET for a stream: 405 (no standalone stream)");
  is_str(header(&r, "Allow"), "POST, DELETE", "Allow lists POST and DELETE");
  response_free(&r);
  req.accept = "application/json";
  serve(&h, &req, &r);
  is_rpc_error(&r, 406, -32600, "text/event-stream", "GET without text/event-stream in Accept");
  response_free(&r);

  static const char *const others[] = {"PUT", "PATCH", "HEAD", "OPTIONS", "post", ""};
  for (size_t i = 0; i < ARRAY_SIZE(others); i++) {
    req = post_request(PING, sid);
    req.method = others[i];
    serve(&h, &req, &r);
    is_int(r.status, 405, "method '%s': 405", others[i]);
    is_str(header(&r, "Allow"), "POST, DELETE", "method '%s': Allow header", others[i]);
    is_int(r.body_len, 0, "method '%s': no body", others[i]);
    response_free(&r);
  }
  req = post_request(PING, sid);
  req.method = NULL;
  serve(&h, &req, &r);
  is_int(r.status, 405, "no method at all: 405");
  response_free(&r);
}

static void header_tests(void) {
  struct response r;
  static const char *const bad_types[] = {NULL, "", "text/plain", "application/x-www-form-urlencoded",
                                          "application/jsonl"};
  for (size_t i = 0; i < ARRAY_SIZE(bad_types); i++) {
    struct http_request req = post_request(PING, sid);
    req.content_type = bad_types[i];
    serve(&h, &req, &r);
    char what[128];
    snprintf(what, sizeof(what), "Content-Type '%s'", bad_types[i] ? bad_types[i] : "(none)");
    is_rpc_error(&r, 415, -32600, "Content-Type must be application/json", what);
    response_free(&r);
  }
  struct http_request req = post_request(PING, sid);
  req.content_type = "application/json; charset=utf-8";
  serve(&h, &req, &r);
  is_int(r.status, 200, "Content-Type with a charset is served");
  response_free(&r);

  static const char *const bad_accepts[] = {NULL, "", "text/html", "application/json;q=0, text/event-stream;q=0"};
  for (size_t i = 0; i < ARRAY_SIZE(bad_accepts); i++) {
    req = post_request(PING, sid);
    req.accept = bad_accepts[i];
    serve(&h, &req, &r);
    char what[128];
    snprintf(what, sizeof(what), "Accept '%s'", bad_accepts[i] ? bad_accepts[i] : "(none)");
    is_rpc_error(&r, 406, -32600, "Not Acceptable", what);
    response_free(&r);
  }
  /* A client that accepts only text/event-stream cannot take an
   * application/json body: it gets 406 (what the error sentence and the
   * SDK's server say: both types are required) or the answer as a stream. */
  req = post_request(PING, sid);
  req.accept = "text/event-stream";
  serve(&h, &req, &r);
  if (!ok(r.status == 406 || (r.status == 200 && r.sse && r.sse_valid),
          "Accept 'text/event-stream' alone: 406, or the answer as an event stream"))
    diag("got: %.300s", r.raw);
  response_free(&r);
  req = post_request(PING, sid);
  req.accept = "*/*";
  serve(&h, &req, &r);
  is_int(r.status, 200, "Accept */* is served");
  response_free(&r);

  req = post_request(PING, sid);
  req.body_too_large = true;
  serve(&h, &req, &r);
  char msg[128];
  snprintf(msg, sizeof(msg), "larger than the limit of %llu bytes", (unsigned long long)h.cfg.max_body);
  is_rpc_error(&r, 413, -32600, msg, "a body over max_body");
  response_free(&r);

  static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", NULL};
  for (size_t i = 0; i < ARRAY_SIZE(versions); i++) {
    req = post_request(PING, sid);
    req.protocol_version = versions[i];
    serve(&h, &req, &r);
    is_int(r.status, 200, "MCP-Protocol-Version %s is served", versions[i] ? versions[i] : "(absent)");
    response_free(&r);
  }
  static const char *const bad_versions[] = {"1999-01-01", "2024-11-05", "", "2025-11-25 "};
  for (size_t i = 0; i < ARRAY_SIZE(bad_versions); i++) {
    req = post_request(PING, sid);
    req.protocol_version = bad_versions[i];
    serve(&h, &req, &r);
    char what[128];
    snprintf(what, sizeof(what), "MCP-Protocol-Version '%s'", bad_versions[i]);
    is_rpc_error(&r, 400, -32600, "unsupported MCP-Protocol-Version", what);
    response_free(&r);
  }
}

struct body_case {
  const char *name;
  const char *body;
  size_t len; /* 0: strlen */
  int status;
  int code;
  const char *message;
};

#define B(name, body, status, code, msg)                                                                               \
  { name, body, 0, status, code, msg }
static const struct body_case bodies[] = {
    B("an empty body", "", 400, -32700, "Parse error: the body is not valid JSON (at byte 0)"),
    B("truncated JSON", "{\"jsonrpc\":\"2.0\"", 400, -32700, "Parse error: the body is not valid JSON"),
    B("invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xFFng\"}", 400, -32700,
      "Parse error: the body is not valid UTF-8 (at byte 35)"),
    {"a raw NUL", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\0", 41, 400, -32700,
     "Parse error: NUL characters are not accepted"},
    B("a lone surrogate", "{\"jsonrpc\":\"2.0\",\"id\":\"\\ud800\",\"method\":\"ping\"}", 400, -32700,
      "Parse error: the body is not valid UTF-8"),
    B("a JSON array (batch)", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", 400, -32600,
      "batches are not supported"),
    B("an empty array", "[]", 400, -32600, "batches are not supported"),
    B("a number", "3", 400, -32600, "the body must be a JSON-RPC object"),
    B("a string", "\"ping\"", 400, -32600, "the body must be a JSON-RPC object"),
    B("null", "null", 400, -32600, "the body must be a JSON-RPC object"),
    B("a duplicate top-level key", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"method\":\"tools/list\"}", 400,
      -32600, "duplicate key"),
    B("a duplicate nested key",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\","
      "\"arguments\":{\"code\":\"print(1)\",\"code\":\"print(2)\"}}}",
      400, -32600, "duplicate key"),
    B("a duplicate key inside an array",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"l\":[1,{\"a\":1,\"a\":2}]}}", 400, -32600,
      "duplicate key"),
    B("no jsonrpc member", "{\"id\":1,\"method\":\"ping\"}", 400, -32600, "jsonrpc must be \"2.0\""),
    B("jsonrpc 1.0", "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", 400, -32600, "jsonrpc must be \"2.0\""),
    B("jsonrpc as a number", "{\"jsonrpc\":2.0,\"id\":1,\"method\":\"ping\"}", 400, -32600, "jsonrpc must be \"2.0\""),
    B("a method that is not a string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", 400, -32600,
      "method must be a string"),
    B("neither request nor response", "{\"jsonrpc\":\"2.0\",\"id\":1}", 400, -32600,
      "not a JSON-RPC request, notification or response"),
    B("an empty message", "{\"jsonrpc\":\"2.0\"}", 400, -32600, "not a JSON-RPC request, notification or response"),
    B("a null id", "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", 400, -32600, "id must be a string"),
    B("a fractional id", "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", 400, -32600, "id must be a string"),
    B("a huge id", "{\"jsonrpc\":\"2.0\",\"id\":1e300,\"method\":\"ping\"}", 400, -32600, "id must be a string"),
    B("an infinite id", "{\"jsonrpc\":\"2.0\",\"id\":1e999,\"method\":\"ping\"}", 400, -32600, "id must be a string"),
    B("id 2^53", "{\"jsonrpc\":\"2.0\",\"id\":9007199254740992,\"method\":\"ping\"}", 400, -32600,
      "id must be a string"),
    B("id -2^53", "{\"jsonrpc\":\"2.0\",\"id\":-9007199254740992,\"method\":\"ping\"}", 400, -32600,
      "id must be a string"),
    B("an object id", "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", 400, -32600, "id must be a string"),
    B("an array id", "{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}", 400, -32600, "id must be a string"),
    B("a boolean id", "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", 400, -32600, "id must be a string"),
    B("params that are an array", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[1]}", 200, -32602,
      "params must be an object"),
    B("params that are a string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":\"x\"}", 200,
      -32602, "params must be an object"),
};

static void body_tests(void) {
  struct response r;
  for (size_t i = 0; i < ARRAY_SIZE(bodies); i++) {
    const struct body_case *c = &bodies[i];
    struct http_request req = post_request(c->body, sid);
    if (c->len)
      req.body_len = c->len;
    serve(&h, &req, &r);
    is_rpc_error(&r, c->status, c->code, c->message, c->name);
    if (c->status == 400)
      ok(cJSON_IsNull(jget(r.json, "id")), "%s: id is null", c->name);
    response_free(&r);
  }

  /* Too deep for the scanner: refused before cJSON recurses. */
  struct buf b = {0};
  static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":";
  buf_append(&b, head, sizeof(head) - 1);
  for (int i = 0; i < 200; i++)
    buf_append(&b, "[", 1);
  for (int i = 0; i < 200; i++)
    buf_append(&b, "]", 1);
  buf_append(&b, "}}", 2);
  post(&h, sid, b.data, &r);
  is_rpc_error(&r, 400, -32700, "nested too deeply", "200 nested arrays");
  response_free(&r);
  buf_free(&b);
}

/* A \u0000 escape cannot reach the sandbox (cJSON strings end at NUL): the
 * answer carries the request's id, so that clients match it to their
 * request, and names the argument. */
static void nul_tests(void) {
  struct response r;
  post(&h, sid,
       "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\","
       "\"arguments\":{\"code\":\"print(1)\\u0000import os\"}}}",
       &r);
  is_rpc_error(
      &r, 200, -32602,
      "Invalid params: arguments.code contains a NUL character (\\u0000), which cannot be passed to the sandbox",
      "\\u0000 in code");
  is_int(jnum(r.json, "id"), 42, "the answer has the request's id");
  response_free(&r);

  post(&h, sid,
       "{\"jsonrpc\":\"2.0\",\"id\":\"c-1\",\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\","
       "\"arguments\":{\"code\":\"1\",\"files\":[{\"path\":\"a\",\"text\":\"x\"},{\"path\":\"b\",\"text\":\"\\u0000\"}]"
       "}}}",
       &r);
  is_rpc_error(&r, 200, -32602, "arguments.files[1].text contains a NUL character", "\\u0000 in a file");
  is_str(jstr(r.json, "id"), "c-1", "a string id comes back");
  response_free(&r);

  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":{\"a\\u0000b\":1}}", &r);
  is_rpc_error(&r, 200, -32602, "Invalid params: a key of params contains a NUL character", "\\u0000 in a key");
  is_int(jnum(r.json, "id"), 3, "with the id");
  response_free(&r);

  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\\u0000\"}", &r);
  is_rpc_error(&r, 400, -32600, "Invalid Request: method contains a NUL character", "\\u0000 in the method");
  is_int(jnum(r.json, "id"), 1, "with the id");
  response_free(&r);

  /* Without a usable id: a parse error, id null, as before. */
  static const char *const no_id[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":\"\\u0000\",\"method\":\"ping\"}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":{\"a\":\"\\u0000\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\",\"params\":{\"a\":\"\\u0000\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\",\"params\":{\"a\":\"\\u0000\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"a\":\"\\u0000\",\"b\":\"\xFF\"}}",
  };
  for (size_t i = 0; i < ARRAY_SIZE(no_id); i++) {
    post(&h, sid, no_id[i], &r);
    is_rpc_error(&r, 400, -32700, "Parse error", no_id[i]);
    ok(cJSON_IsNull(jget(r.json, "id")), "id null: %s", no_id[i]);
    response_free(&r);
  }
}

/* A body of many tiny values would be a tree of many cJSON nodes: refused
 * before cJSON parses, past MCP_MAX_JSON_VALUES. */
static void value_tests(void) {
  struct response r;
  struct buf b = {0};
  static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":[";
  buf_append(&b, head, sizeof(head) - 1);
  /* The message, its three strings, params and x: 6 values besides x's elements. */
  for (int i = 0; i < MCP_MAX_JSON_VALUES - 9; i++)
    buf_append(&b, i ? ",[]" : "[]", i ? 3 : 2);
  buf_append(&b, "]}}", 3);
  post(&h, sid, b.data, &r);
  is_int(r.status, 200, "a ping of %d values is served", MCP_MAX_JSON_VALUES - 3);
  response_free(&r);
  b.len -= 3;
  for (int i = 0; i < 7; i++)
    buf_append(&b, ",[]", 3);
  buf_append(&b, "]}}", 3);
  post(&h, sid, b.data, &r);
  is_rpc_error(&r, 400, -32600, "more than 100000 JSON values", "one value over the limit");
  response_free(&r);
  b.len = 0;
  buf_append(&b, head, sizeof(head) - 1);
  while (b.len < (size_t)9 << 20)
    buf_append(&b, "[],[],[],[],[],[],[],[],", 24);
  buf_append(&b, "[]]}}", 5);
  post(&h, sid, b.data, &r);
  is_rpc_error(&r, 400, -32600, "Invalid Request: the body has more than 100000 JSON values", "9 MiB of empty arrays");
  response_free(&r);
  buf_free(&b);
}

struct id_case {
  const char *id;   /* as sent */
  const char *echo; /* as it must come back */
};

static void id_tests(void) {
  char long_id[300], body[700];
  memset(long_id, 'i', 256);
  long_id[256] = '\0';
  const struct id_case ids[] = {
      {"0", "0"},
      {"-1", "-1"},
      {"9007199254740991", "9007199254740991"},
      {"-9007199254740991", "-9007199254740991"},
      {"\"\"", "\"\""},
      {"\"abc-1\"", "\"abc-1\""},
      {"\"\\u00e9\"", "\"\xC3\xA9\""},
  };
  struct response r;
  for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
    snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}", ids[i].id);
    post(&h, sid, body, &r);
    is_int(r.status, 200, "id %s is served", ids[i].id);
    char want[128];
    snprintf(want, sizeof(want), "\"id\":%s,", ids[i].echo);
    like(r.body, want, "id %s is echoed exactly", ids[i].id);
    response_free(&r);
  }
  snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"ping\"}", long_id);
  post(&h, sid, body, &r);
  is_int(r.status, 200, "a 256-byte string id is served");
  is_str(jstr(r.json, "id"), long_id, "and echoed");
  response_free(&r);
  memcpy(long_id + 256, "i", 2);
  snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"ping\"}", long_id);
  post(&h, sid, body, &r);
  is_rpc_error(&r, 400, -32600, "at most 256 bytes", "a 257-byte string id");
  response_free(&r);
}

/* Rewrite a session's last use, as if it had been idle. */
static void age_session(const char *id, int64_t last_used_ms) {
  char name[128];
  snprintf(name, sizeof(name), "sessions/%s/meta.json", id);
  char *text = NULL;
  size_t len = 0;
  mcp_error_t err = NULL;
  if (read_file_at(h.store.state_fd, name, 1 << 16, &text, &len, &err) < 0)
    bail_out("read %s", name);
  cJSON *m = cJSON_Parse(text);
  cJSON_ReplaceItemInObject(m, "last_used_ms", cJSON_CreateNumber((double)last_used_ms));
  char *out = cJSON_PrintUnformatted(m);
  if (write_file_atomic(h.store.state_fd, name, out, strlen(out), 0600, &err) < 0)
    bail_out("write %s", name);
  free(out);
  free(text);
  cJSON_Delete(m);
}

static void session_tests(void) {
  struct response r;
  struct http_request req = post_request(PING, NULL);
  serve(&h, &req, &r);
  is_rpc_error(&r, 400, -32600, "Mcp-Session-Id header is required", "a request without a session");
  is_int(jnum(r.json, "id"), 7, "the error echoes the request id");
  response_free(&r);
  req = post_request(PING, "");
  serve(&h, &req, &r);
  is_int(r.status, 400, "an empty session header: 400");
  response_free(&r);
  req = post_request("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", NULL);
  serve(&h, &req, &r);
  is_int(r.status, 400, "a notification without a session: 400");
  response_free(&r);

  char upper[SESSION_ID_MAX];
  for (int i = 0; i < SESSION_ID_MAX; i++)
    upper[i] = (char)(sid[i] >= 'a' && sid[i] <= 'f' ? sid[i] - 32 : sid[i]);
  char longer[SESSION_ID_MAX + 8];
  snprintf(longer, sizeof(longer), "%sx", sid);
  char slash[SESSION_ID_MAX + 8];
  snprintf(slash, sizeof(slash), "%s/", sid);
  const char *unknown[] = {"00000000-0000-4000-8000-000000000000",
                           "00000000000000000000000000000000",
                           "abc",
                           "../../etc",
                           "..",
                           ".",
                           "sessions",
                           upper,
                           longer,
                           slash,
                           "00000000-0000-4000-8000-00000000000%"};
  for (size_t i = 0; i < ARRAY_SIZE(unknown); i++) {
    char what[128];
    snprintf(what, sizeof(what), "session id '%s'", unknown[i]);
    post(&h, unknown[i], PING, &r);
    is_rpc_error(&r, 404, -32001, "Session not found", what);
    response_free(&r);
  }
  req = post_request(PING, sid);
  req.token_id = "another-token";
  serve(&h, &req, &r);
  is_rpc_error(&r, 404, -32001, "Session not found", "the session of another token");
  response_free(&r);
  is_int(delete_session(&h, "another-token", sid), 404, "another token cannot DELETE it");
  post(&h, sid, PING, &r);
  is_int(r.status, 200, "the session still works for its owner");
  response_free(&r);

  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &r);
  is_int(r.status, 202, "a notification: 202");
  is_int(r.body_len, 0, "with no body");
  response_free(&r);
  post(&h, "00000000-0000-4000-8000-000000000000", "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
       &r);
  is_int(r.status, 404, "a notification for an unknown session: 404");
  response_free(&r);
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}", &r);
  is_int(r.status, 202, "a JSON-RPC response from the client: 202");
  response_free(&r);
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":99,\"error\":{\"code\":-1,\"message\":\"no\"}}", &r);
  is_int(r.status, 202, "a JSON-RPC error response from the client: 202");
  response_free(&r);

  /* Folders that are not live sessions: no metadata, metadata that is a
   * symlink or not JSON, a session folder that is a symlink. */
  static const char *const fakes[] = {"11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
                                      "33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444"};
  char p[PATH_MAX + 128], target[PATH_MAX + 128];
  for (size_t i = 0; i < 3; i++) {
    snprintf(p, sizeof(p), "%s/sessions/%s", h.state, fakes[i]);
    mkdir(p, 0700);
  }
  snprintf(p, sizeof(p), "%s/sessions/%s/meta.json", h.state, fakes[1]);
  snprintf(target, sizeof(target), "%s/sessions/%s/meta.json", h.state, sid);
  if (symlink(target, p) < 0)
    bail_out("symlink");
  snprintf(p, sizeof(p), "%s/sessions/%s/meta.json", h.state, fakes[2]);
  FILE *f = fopen(p, "w");
  fputs("{\"token_id\":", f);
  fclose(f);
  snprintf(p, sizeof(p), "%s/sessions/%s", h.state, fakes[3]);
  snprintf(target, sizeof(target), "%s/sessions/%s", h.state, sid);
  if (symlink(target, p) < 0)
    bail_out("symlink");
  static const char *const fake_what[] = {"a folder without meta.json", "meta.json that is a symlink to a live one",
                                          "meta.json that is not JSON",
                                          "a session folder that is a symlink to a live one"};
  for (size_t i = 0; i < ARRAY_SIZE(fakes); i++) {
    post(&h, fakes[i], PING, &r);
    is_rpc_error(&r, 404, -32001, "Session not found", fake_what[i]);
    response_free(&r);
  }
  for (size_t i = 0; i < ARRAY_SIZE(fakes); i++) {
    mcp_error_t err = NULL;
    remove_tree_at(h.store.sessions_fd, fakes[i], &err);
    mcp_error_release(&err);
  }

  /* Expiry: a session idle longer than idle_timeout is gone. */
  char old[SESSION_ID_MAX];
  if (!initialize(&h, TEST_TOKEN, old))
    bail_out("initialize");
  age_session(old, wall_ms() - (int64_t)h.cfg.idle_timeout * 1000 - TOUCH_EVERY_MS - 1000);
  post(&h, old, PING, &r);
  is_rpc_error(&r, 404, -32001, "Session not found", "an expired session");
  response_free(&r);

  /* DELETE */
  char gone[SESSION_ID_MAX];
  if (!initialize(&h, TEST_TOKEN, gone))
    bail_out("initialize");
  post(&h, gone, PING, &r);
  is_int(r.status, 200, "a new session answers");
  response_free(&r);
  req = (struct http_request){.method = "DELETE", .token_id = TEST_TOKEN};
  serve(&h, &req, &r);
  is_rpc_error(&r, 400, -32600, "Mcp-Session-Id header is required", "DELETE without a session");
  response_free(&r);
  req.session_id = gone;
  serve(&h, &req, &r);
  is_int(r.status, 204, "DELETE ends the session: 204");
  is_int(r.body_len, 0, "with no body");
  response_free(&r);
  is_int(processes_after_delete(&h, gone, 3000), 0, "its supervisor and executor are gone");
  char path[PATH_MAX + 128];
  snprintf(path, sizeof(path), "%s/sessions/%s", h.state, gone);
  ok(access(path, F_OK) < 0, "its folder is gone");
  post(&h, gone, PING, &r);
  is_rpc_error(&r, 404, -32001, "Session not found", "a request after DELETE");
  response_free(&r);
  post(&h, gone, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &r);
  is_int(r.status, 404, "a notification after DELETE: 404");
  response_free(&r);
  is_int(delete_session(&h, TEST_TOKEN, gone), 404, "a second DELETE: 404");
  is_int(delete_session(&h, TEST_TOKEN, "../../etc"), 404, "DELETE of a path-like id: 404");

  /* DELETE at once, while the supervisor that initialize spawned may still
   * be starting: it must not survive the session either. */
  for (int i = 0; i < 5; i++) {
    char quick[SESSION_ID_MAX];
    if (!initialize(&h, TEST_TOKEN, quick))
      bail_out("initialize");
    is_int(delete_session(&h, TEST_TOKEN, quick), 204, "DELETE right after initialize (%d)", i + 1);
    is_int(processes_after_delete(&h, quick, 3000), 0, "leaves no process behind (%d)", i + 1);
    snprintf(path, sizeof(path), "%s/sessions/%s", h.state, quick);
    ok(access(path, F_OK) < 0, "nor its folder (%d)", i + 1);
  }
}

static void capacity_tests(void) {
  struct response r;
  int saved = h.cfg.max_sessions;
  h.cfg.max_sessions = session_count(&h.store);
  post(&h, NULL,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\"}}", &r);
  is_rpc_error(&r, 503, -32603, "maximum number of sessions", "initialize at max_sessions");
  ok(header(&r, "Mcp-Session-Id") == NULL, "announces no session");
  response_free(&r);
  h.cfg.max_sessions = saved;
}

int main(void) {
  harness_setup(&h);
  if (!initialize(&h, TEST_TOKEN, sid))
    bail_out("initialize does not work; nothing else can be tested");
  auth_tests();
  method_tests();
  header_tests();
  body_tests();
  nul_tests();
  value_tests();
  id_tests();
  session_tests();
  capacity_tests();
  is_int(delete_session(&h, TEST_TOKEN, sid), 204, "DELETE the main session");
  harness_teardown(&h);
  return done_testing();
}
