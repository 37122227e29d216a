/* MCP methods through mcp_serve(): initialize, ping, tools/list and
 * tools/call running real Python in the direct backend's executor. */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "mcp-harness.h"
#include "tap.h"

static struct harness h;
static char sid[SESSION_ID_MAX];
static cJSON *output_schema; /* from tools/list */

/* 128 random bits in 32 lowercase hex (the harness runs without a cell). */
static bool id_shaped(const char *s) {
  if (s == NULL || strlen(s) != 32)
    return false;
  for (int i = 0; i < 32; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

/* The process has exited (a zombie waiting for its reaper counts). */
static bool gone_or_zombie(int pid) {
  char p[64], st[256] = "";
  snprintf(p, sizeof(p), "/proc/%d/stat", pid);
  FILE *f = fopen(p, "r");
  if (f == NULL)
    return true;
  bool zombie = fgets(st, sizeof(st), f) != NULL && strstr(st, ") Z ") != NULL;
  fclose(f);
  return zombie;
}

static void init_request(const char *params, struct response *r) {
  char body[512];
  snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":\"init-1\",\"method\":\"initialize\"%s%s}",
           params ? ",\"params\":" : "", params ? params : "");
  post(&h, NULL, body, r);
}

static void initialize_tests(void) {
  static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};
  char seen[3][SESSION_ID_MAX];
  for (size_t i = 0; i < ARRAY_SIZE(versions); i++) {
    char params[256];
    snprintf(params, sizeof(params),
             "{\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"unit\",\"version\":\"1\"}}",
             versions[i]);
    struct response r;
    init_request(params, &r);
    const cJSON *res = rpc_result(&r, versions[i]);
    is_str(jstr(res, "protocolVersion"), versions[i], "initialize %s: the version is echoed", versions[i]);
    is_str(jstr(r.json, "id"), "init-1", "initialize %s: the id is echoed", versions[i]);
    is_str(header(&r, "Content-Type"), "application/json", "initialize %s: JSON response", versions[i]);
    const char *s = header(&r, "Mcp-Session-Id");
    ok(id_shaped(s), "initialize %s: Mcp-Session-Id is 128 random bits in hex (%s)", versions[i], s ? s : "none");
    snprintf(seen[i], sizeof(seen[i]), "%s", s ? s : "");
    if (i == 0) {
      ok(cJSON_IsObject(jget(res, "capabilities.tools")), "capabilities.tools");
      is_str(jstr(res, "serverInfo.name"), "mcp-sandbox", "serverInfo.name");
      is_str(jstr(res, "serverInfo.version"), PACKAGE_VERSION, "serverInfo.version");
      ok(jstr(res, "instructions") != NULL, "instructions");
    }
    response_free(&r);
  }
  ok(strcmp(seen[0], seen[1]) != 0 && strcmp(seen[1], seen[2]) != 0 && strcmp(seen[0], seen[2]) != 0,
     "every initialize makes a new session");
  for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
    is_int(delete_session(&h, TEST_TOKEN, seen[i]), 204, "DELETE the session of %s", versions[i]);

  static const char *const unsupported[] = {"1999-01-01", "2024-11-05", "2026-01-01", ""};
  for (size_t i = 0; i < ARRAY_SIZE(unsupported); i++) {
    char params[128];
    snprintf(params, sizeof(params), "{\"protocolVersion\":\"%s\",\"capabilities\":{}}", unsupported[i]);
    struct response r;
    init_request(params, &r);
    const cJSON *res = rpc_result(&r, unsupported[i]);
    is_str(jstr(res, "protocolVersion"), MCP_LATEST_VERSION, "initialize '%s': the latest version is offered",
           unsupported[i]);
    const char *s = header(&r, "Mcp-Session-Id");
    char id[SESSION_ID_MAX];
    snprintf(id, sizeof(id), "%s", s ? s : "");
    response_free(&r);
    is_int(delete_session(&h, TEST_TOKEN, id), 204, "DELETE it");
  }

  int before = session_count(&h.store);
  static const char *const bad[] = {NULL, "{}", "{\"protocolVersion\":20251125}", "{\"protocolVersion\":null}",
                                    "[\"2025-11-25\"]"};
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    struct response r;
    init_request(bad[i], &r);
    char what[128];
    snprintf(what, sizeof(what), "initialize with params %s", bad[i] ? bad[i] : "(absent)");
    is_rpc_error(&r, 200, -32602, "params", what);
    is_str(jstr(r.json, "id"), "init-1", "%s: the id is echoed", what);
    ok(header(&r, "Mcp-Session-Id") == NULL, "%s: no session is announced", what);
    response_free(&r);
  }
  is_int(session_count(&h.store), before, "and none is created");
}

static void basic_tests(void) {
  struct response r;
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &r);
  is_int(r.status, 202, "notifications/initialized: 202");
  is_int(r.body_len, 0, "with an empty body");
  ok(header(&r, "Content-Type") == NULL, "and no Content-Type");
  response_free(&r);

  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"ping\"}", &r);
  const cJSON *res = rpc_result(&r, "ping");
  ok(cJSON_IsObject(res) && res->child == NULL, "ping answers {}");
  is_int(jnum(r.json, "id"), 42, "ping echoes the id");
  ok(header(&r, "Mcp-Session-Id") == NULL, "only initialize announces a session");
  response_free(&r);

  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"no/such_method\"}", &r);
  is_rpc_error(&r, 200, -32601, "Method not found: no/such_method", "an unknown method");
  is_int(jnum(r.json, "id"), 1, "its error echoes the id");
  response_free(&r);
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", &r);
  is_rpc_error(&r, 200, -32601, "Method not found", "an empty method name");
  response_free(&r);
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"notifications/initialized\"}", &r);
  is_rpc_error(&r, 200, -32601, "Method not found", "a notification sent as a request");
  response_free(&r);

  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{}}", &r);
  res = rpc_result(&r, "tools/list");
  const cJSON *tools = jget(res, "tools");
  /* execute_javascript joins it where Node.js is installed. */
  /* One per language available, then get_run and cancel_run. */
  is_int(cJSON_GetArraySize(tools), access(h.cfg.node, X_OK) == 0 ? 4 : 3,
         "one tool per language available, and the run tools");
  if (cJSON_GetArraySize(tools) == 2)
    is_str(jstr(cJSON_GetArrayItem(tools, 1), "name"), "execute_javascript", "execute_javascript second");
  const cJSON *t = cJSON_GetArrayItem(tools, 0);
  is_str(jstr(t, "name"), "execute_python", "execute_python");
  ok(jstr(t, "description") != NULL && strlen(jstr(t, "description")) > 20, "with a description");
  is_str(jstr(t, "inputSchema.type"), "object", "inputSchema is an object schema");
  is_str(jstr(t, "inputSchema.properties.code.type"), "string", "code is a string");
  is_str(jstr(t, "inputSchema.required.0"), "code", "code is required");
  ok(cJSON_IsFalse(jget(t, "inputSchema.additionalProperties")), "no other arguments");
  is_str(jstr(t, "inputSchema.properties.timeout_seconds.type"), "integer", "timeout_seconds is an integer");
  is_int(jnum(t, "inputSchema.properties.timeout_seconds.maximum"), h.cfg.timeout_max, "bounded by timeout_max");
  is_str(jstr(t, "inputSchema.properties.env_variables.additionalProperties.type"), "string", "env values are strings");
  is_str(jstr(t, "outputSchema.type"), "object", "outputSchema is an object schema");
  /* The fields every client relies on; the rest is checked against each
   * real result below (call_result). */
  static const char *const base[] = {"stdout", "stderr", "exit_code", "timed_out", "duration_ms", "truncated"};
  for (size_t i = 0; i < ARRAY_SIZE(base); i++) {
    bool listed = false;
    const cJSON *it;
    cJSON_ArrayForEach(it, jget(t, "outputSchema.required")) listed |=
        cJSON_IsString(it) && !strcmp(it->valuestring, base[i]);
    ok(listed, "outputSchema requires %s", base[i]);
  }
  cJSON_Delete(output_schema);
  output_schema = cJSON_Duplicate(jget(t, "outputSchema"), 1);
  ok(jget(res, "nextCursor") == NULL, "no pagination");
  cleanup_cjson cJSON *first = cJSON_Duplicate(tools, 1);
  response_free(&r);
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}", &r);
  res = rpc_result(&r, "tools/list without params");
  /* The responder prints the tools once and answers later requests with
   * that text (fcgi/schema.c): the same tools, and a changed setting a
   * schema shows is not answered from the old text. */
  ok(cJSON_Compare(jget(res, "tools"), first, 1), "a second tools/list answers the same tools");
  response_free(&r);
  int timeout_max = h.cfg.timeout_max;
  h.cfg.timeout_max = timeout_max + 7;
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\"}", &r);
  res = rpc_result(&r, "tools/list after timeout_max changed");
  is_int(jnum(cJSON_GetArrayItem(jget(res, "tools"), 0), "inputSchema.properties.timeout_seconds.maximum"),
         timeout_max + 7, "the changed timeout_max is in the schema");
  response_free(&r);
  h.cfg.timeout_max = timeout_max;
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\"}", &r);
  res = rpc_result(&r, "tools/list with timeout_max back");
  ok(cJSON_Compare(jget(res, "tools"), first, 1), "and back: the first tools again");
  response_free(&r);
}

/* tools/call execute_python with these arguments (a JSON object text). */
static void call(const char *session, const char *arguments, struct response *r) {
  struct buf b = {0};
  static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":"
                             "{\"name\":\"execute_python\",\"arguments\":";
  buf_append(&b, head, sizeof(head) - 1);
  buf_append(&b, arguments, strlen(arguments));
  buf_append(&b, "}}", 2);
  post(&h, session, b.data, r);
  buf_free(&b);
}

/* structuredContent has every required field, and only described fields
 * of the described types (MCP: it must match the tool's outputSchema). */
static bool conforms(const cJSON *sc, const char *what) {
  const cJSON *props = jget(output_schema, "properties");
  const cJSON *it;
  bool good = cJSON_IsObject(sc) && cJSON_IsObject(props);
  cJSON_ArrayForEach(it, jget(output_schema, "required")) {
    if (cJSON_GetObjectItemCaseSensitive(sc, it->valuestring) == NULL) {
      diag("%s: required field %s is missing", what, it->valuestring);
      good = false;
    }
  }
  cJSON_ArrayForEach(it, sc) {
    const char *type = jstr(cJSON_GetObjectItemCaseSensitive(props, it->string), "type");
    bool fits =
        type != NULL &&
        ((strcmp(type, "string") == 0 && cJSON_IsString(it)) || (strcmp(type, "boolean") == 0 && cJSON_IsBool(it)) ||
         (strcmp(type, "array") == 0 && cJSON_IsArray(it)) || (strcmp(type, "object") == 0 && cJSON_IsObject(it)) ||
         (strcmp(type, "integer") == 0 && cJSON_IsNumber(it) && it->valuedouble == (double)(long long)it->valuedouble));
    if (!fits) {
      diag("%s: field %s is not described as its type", what, it->string);
      good = false;
    }
  }
  return good;
}

/* The structuredContent of a finished call, after checking the result shape. */
static const cJSON *call_result(struct response *r, const char *what, bool is_error) {
  const cJSON *res = rpc_result(r, what);
  const cJSON *sc = jget(res, "structuredContent");
  ok(cJSON_IsBool(jget(res, "isError")) && cJSON_IsTrue(jget(res, "isError")) == is_error, "%s: isError is %s", what,
     is_error ? "true" : "false");
  cJSON *text = cJSON_Parse(jstr(res, "content.0.text") ? jstr(res, "content.0.text") : "");
  ok(text != NULL && cJSON_Compare(text, sc, 1), "%s: the text block is structuredContent serialized", what);
  cJSON_Delete(text);
  ok(conforms(sc, what), "%s: structuredContent matches the outputSchema", what);
  return sc;
}

static void call_tests(void) {
  struct response r;
  bool res_ok;
  call(sid, "{\"code\":\"print('hello')\"}", &r);
  const cJSON *sc = call_result(&r, "print", false);
  is_str(jstr(sc, "stdout"), "hello\n", "stdout");
  is_str(jstr(sc, "stderr"), "", "no stderr");
  is_int(jnum(sc, "exit_code"), 0, "exit code 0");
  ok(cJSON_IsFalse(jget(sc, "timed_out")) && cJSON_IsFalse(jget(sc, "truncated")), "not timed out, not truncated");
  ok(jnum(sc, "duration_ms") >= 0 && jnum(sc, "duration_ms") < 30000, "a duration");
  response_free(&r);

  call(sid, "{\"code\":\"def f():\\n    raise ValueError('boom')\\nf()\"}", &r);
  sc = call_result(&r, "raise", true);
  is_int(jnum(sc, "exit_code"), 1, "an exception exits 1");
  like(jstr(sc, "stderr"), "Traceback (most recent call last):", "with a traceback");
  like(jstr(sc, "stderr"), "line 2, in f", "that names the user's lines");
  like(jstr(sc, "stderr"), "ValueError: boom", "and the exception");
  ok(jstr(sc, "stderr") && strstr(jstr(sc, "stderr"), "mcp_executor") == NULL, "without the executor's own frame");
  response_free(&r);

  call(sid, "{\"code\":\"import sys; print('out'); sys.exit(3)\"}", &r);
  sc = call_result(&r, "sys.exit(3)", true);
  is_int(jnum(sc, "exit_code"), 3, "sys.exit(3) exits 3");
  is_str(jstr(sc, "stdout"), "out\n", "output before the exit is kept");
  response_free(&r);

  call(sid, "{\"code\":\"open('state.txt','w').write('kept')\"}", &r);
  call_result(&r, "write a file", false);
  response_free(&r);
  call(sid, "{\"code\":\"print(open('state.txt').read())\"}", &r);
  sc = call_result(&r, "read it in the next call", false);
  is_str(jstr(sc, "stdout"), "kept\n", "the workspace persists between calls");
  response_free(&r);

  char other[SESSION_ID_MAX];
  if (!initialize(&h, TEST_TOKEN, other))
    bail_out("initialize");
  call(other, "{\"code\":\"import os; print(os.path.exists('state.txt'))\"}", &r);
  sc = call_result(&r, "another session", false);
  is_str(jstr(sc, "stdout"), "False\n", "does not see the first session's files");
  response_free(&r);
  is_int(delete_session(&h, TEST_TOKEN, other), 204, "DELETE the other session");
  is_int(processes_after_delete(&h, other, 3000), 0, "its supervisor and executor are gone");

  call(sid, "{\"code\":\"import os; print(os.environ['GREETING'])\",\"env_variables\":{\"GREETING\":\"hi there\"}}",
       &r);
  sc = call_result(&r, "env_variables", false);
  is_str(jstr(sc, "stdout"), "hi there\n", "env_variables reach the code");
  response_free(&r);
  call(sid, "{\"code\":\"import os; print(os.environ.get('GREETING'))\"}", &r);
  sc = call_result(&r, "env_variables are per call", false);
  is_str(jstr(sc, "stdout"), "None\n", "and do not persist");
  response_free(&r);

  call(sid, "{\"code\":\"import sys; sys.stdout.buffer.write(b'a\\\\xffb\\\\x00c')\"}", &r);
  sc = call_result(&r, "binary output", false);
  is_str(jstr(sc, "stdout"),
         "a\xEF\xBF\xBD"
         "b\xEF\xBF\xBD"
         "c",
         "invalid UTF-8 and NUL arrive as U+FFFD");
  response_free(&r);

  uint64_t saved = h.cfg.output_limit;
  h.cfg.output_limit = 4096;
  call(sid, "{\"code\":\"print('x' * 100000)\"}", &r);
  sc = call_result(&r, "output over output_limit", false);
  is_int(jstr(sc, "stdout") ? strlen(jstr(sc, "stdout")) : 0, 4096, "stdout is cut at output_limit");
  ok(cJSON_IsTrue(jget(sc, "truncated")), "and marked truncated");
  response_free(&r);
  h.cfg.output_limit = saved;

  int64_t t0 = now_ms();
  call(sid, "{\"code\":\"while True: pass\",\"timeout_seconds\":1}", &r);
  int64_t took = now_ms() - t0;
  sc = call_result(&r, "timeout_seconds 1", true);
  ok(cJSON_IsTrue(jget(sc, "timed_out")), "the loop times out");
  is_int(jnum(sc, "exit_code"), 137, "killed (128 + SIGKILL)");
  ok(jnum(sc, "duration_ms") >= 1000 && took < 15000, "after about a second (%.0f ms, call took %lld ms)",
     jnum(sc, "duration_ms"), (long long)took);
  response_free(&r);
  call(sid, "{\"code\":\"print(open('state.txt').read())\"}", &r);
  sc = call_result(&r, "a call after a timeout", false);
  is_str(jstr(sc, "stdout"), "kept\n", "runs, and the files are still there");
  response_free(&r);

  /* A process the call leaves running is killed when the call ends. */
  call(sid, "{\"code\":\"import subprocess; print(subprocess.Popen(['sleep', '60']).pid)\"}", &r);
  sc = call_result(&r, "a background process", false);
  int bg = jstr(sc, "stdout") ? atoi(jstr(sc, "stdout")) : 0;
  ok(bg > 0, "the call started one (pid %d)", bg);
  response_free(&r);
  bool alive = bg > 0;
  for (int i = 0; i < 100 && alive; i++) {
    alive = gone_or_zombie(bg) == false;
    if (alive)
      usleep(20000);
  }
  ok(bg > 0 && !alive, "it does not outlive the call");

  /* The code kills the executor itself: the call ends, its processes with
   * it (backend.h: destroy() kills every process of the sandbox), and the
   * next call gets a new executor and the same files. */
  call(sid,
       "{\"code\":\"import os, signal, time; open('victim.pid', 'w').write(str(os.getpid())); "
       "os.kill(os.getppid(), signal.SIGKILL); time.sleep(30)\"}",
       &r);
  res_ok = rpc_result(&r, "the code kills its executor") != NULL;
  sc = jget(r.json, "result.structuredContent");
  ok(res_ok && cJSON_IsTrue(jget(r.json, "result.isError")), "the call is an error");
  ok(jnum(sc, "duration_ms") < 20000, "that ends without waiting for the sleep");
  response_free(&r);
  call(sid, "{\"code\":\"print(open('victim.pid').read())\"}", &r);
  sc = call_result(&r, "the pid of the call that killed its executor", false);
  int victim = jstr(sc, "stdout") ? atoi(jstr(sc, "stdout")) : 0;
  response_free(&r);
  alive = victim > 0;
  for (int i = 0; i < 100 && alive; i++) {
    alive = gone_or_zombie(victim) == false;
    if (alive)
      usleep(20000);
  }
  ok(victim > 0 && !alive, "the call's process (pid %d) does not outlive its executor", victim);
  if (victim > 0 && alive)
    kill(victim, SIGKILL); /* so that the checks below see only their own leftovers */
  call(sid, "{\"code\":\"print(open('state.txt').read())\"}", &r);
  sc = call_result(&r, "a call after the executor died", false);
  is_str(jstr(sc, "stdout"), "kept\n", "runs in a new executor with the same files");
  response_free(&r);
}

struct bad_args {
  const char *args;
  const char *sentence;
};

static const struct bad_args bad_args[] = {
    {"{}", "Invalid arguments: code is required and must be a string."},
    {"null", "Invalid arguments: code is required and must be a string."},
    {"\"print(1)\"", "Invalid arguments: arguments must be an object."},
    {"{\"code\":42}", "Invalid arguments: code is required and must be a string."},
    {"{\"code\":\"1\",\"timeout_seconds\":\"5\"}",
     "Invalid arguments: timeout_seconds must be an integer from 1 to 300."},
    {"{\"code\":\"1\",\"env_variables\":[]}",
     "Invalid arguments: env_variables must be an object whose values are strings."},
    {"{\"code\":\"1\",\"env_variables\":{\"A\":1}}",
     "Invalid arguments: env_variables: the value of A must be a string."},
    {"{\"code\":\"1\",\"lang\":\"py\"}", "Invalid arguments: unknown argument `lang`; expected code, "},
    {"{\"code\":\"1\",\"env_variables\":{\"BAD-NAME\":\"v\"}}",
     "Invalid arguments: env_variables: `BAD-NAME` is not a valid name ([A-Za-z_][A-Za-z0-9_]*)."},
    {"{\"code\":\"1\",\"timeout_seconds\":0}", "Invalid arguments: timeout_seconds must be an integer from 1 to 300."},
    {"{\"code\":\"1\",\"timeout_seconds\":100000}",
     "Invalid arguments: timeout_seconds must be an integer from 1 to 300."},
    {"{\"code\":\"1\",\"timeout_seconds\":1e300}",
     "Invalid arguments: timeout_seconds must be an integer from 1 to 300."},
    {"{\"code\":\"1\",\"timeout_seconds\":2.5}",
     "Invalid arguments: timeout_seconds must be an integer from 1 to 300."},
    {"{\"code\":\"1\",\"packages\":\"numpy\"}", "Invalid arguments: packages must be an array of strings."},
};

static void invalid_tests(void) {
  struct response r;
  for (size_t i = 0; i < ARRAY_SIZE(bad_args); i++) {
    call(sid, bad_args[i].args, &r);
    const cJSON *res = rpc_result(&r, bad_args[i].args);
    ok(cJSON_IsTrue(jget(res, "isError")), "arguments %s: isError", bad_args[i].args);
    const char *text = jstr(res, "content.0.text");
    /* The list of accepted arguments grows with the tool: its start is enough. */
    if (strstr(bad_args[i].sentence, "unknown argument") != NULL)
      like(text, bad_args[i].sentence, "arguments %s: one sentence", bad_args[i].args);
    else
      is_str(text, bad_args[i].sentence, "arguments %s: one sentence", bad_args[i].args);
    response_free(&r);
  }

  static const struct {
    const char *params;
    const char *message;
  } proto[] = {
      {"{\"name\":\"run_shell\",\"arguments\":{}}", "Unknown tool: run_shell"},
      {"{\"name\":\"\"}", "Unknown tool: "},
      {"{\"name\":5}", "params.name must be a string"},
      {"{\"arguments\":{\"code\":\"1\"}}", "params.name must be a string"},
      {NULL, "params must be an object"},
  };
  for (size_t i = 0; i < ARRAY_SIZE(proto); i++) {
    char body[256];
    snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\"%s%s}",
             proto[i].params ? ",\"params\":" : "", proto[i].params ? proto[i].params : "");
    post(&h, sid, body, &r);
    char what[128];
    snprintf(what, sizeof(what), "tools/call with params %s", proto[i].params ? proto[i].params : "(absent)");
    is_rpc_error(&r, 200, -32602, proto[i].message, what);
    is_int(jnum(r.json, "id"), 9, "%s: the id is echoed", what);
    response_free(&r);
  }
}

struct background_call {
  pthread_t thread;
  const char *args;
  struct response r;
};

static void *run_call(void *opaque) {
  struct background_call *b = opaque;
  call(sid, b->args, &b->r);
  return NULL;
}

/* While a call runs: ping is answered at once, and a second call waits at
 * most busy_wait seconds, then says the session is busy. */
static void concurrency_tests(void) {
  int saved = h.cfg.busy_wait;
  h.cfg.busy_wait = 1;
  struct background_call b = {.args = "{\"code\":\"import time; time.sleep(3); print('slow done')\"}"};
  pthread_create(&b.thread, NULL, run_call, &b);
  usleep(500000);
  struct response r;
  int64_t t0 = now_ms();
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}", &r);
  int64_t took = now_ms() - t0;
  is_int(r.status, 200, "ping during a call is answered");
  ok(took < 1000, "at once (%lld ms)", (long long)took);
  response_free(&r);
  t0 = now_ms();
  call(sid, "{\"code\":\"print('second')\"}", &r);
  took = now_ms() - t0;
  const cJSON *res = rpc_result(&r, "a second call during a call");
  ok(cJSON_IsTrue(jget(res, "isError")), "a second call is a tool error");
  is_str(jstr(res, "content.0.text"), "The session is busy with another call; try again when it has finished.",
         "that says the session is busy");
  ok(took >= 900 && took < 2500, "after waiting busy_wait (%lld ms)", (long long)took);
  response_free(&r);
  pthread_join(b.thread, NULL);
  const cJSON *sc = call_result(&b.r, "the first call", false);
  is_str(jstr(sc, "stdout"), "slow done\n", "the first call finishes normally");
  response_free(&b.r);
  h.cfg.busy_wait = saved;
}

/* Links the code leaves in its workspace point outside it; ending the
 * session removes the links, never what they point to. */
static void symlink_tests(void) {
  char canary[1100], file[1200];
  snprintf(canary, sizeof(canary), "%s/canary", h.root);
  mkdir(canary, 0755);
  snprintf(file, sizeof(file), "%s/keep.txt", canary);
  FILE *f = fopen(file, "w");
  fputs("keep", f);
  fclose(f);
  char victim[SESSION_ID_MAX];
  if (!initialize(&h, TEST_TOKEN, victim))
    bail_out("initialize");
  char args[4096];
  snprintf(args, sizeof(args),
           "{\"code\":\"import os; os.symlink('%s', 'dir_link'); os.symlink('%s', 'file_link'); "
           "os.makedirs('deep/er'); os.symlink('%s', 'deep/er/link'); os.mkdir('locked'); "
           "open('locked/x', 'w').write('x'); os.chmod('locked', 0)\"}",
           canary, file, canary);
  struct response r;
  call(victim, args, &r);
  call_result(&r, "links out of the workspace", false);
  response_free(&r);
  is_int(delete_session(&h, TEST_TOKEN, victim), 204, "DELETE the session with the links");
  is_int(processes_after_delete(&h, victim, 3000), 0, "its processes are gone");
  char p[PATH_MAX + 128];
  snprintf(p, sizeof(p), "%s/sessions/%s", h.state, victim);
  ok(access(p, F_OK) < 0, "its folder has left sessions/");
  snprintf(p, sizeof(p), "%s/trash", h.state);
  is_int(visible_entries(p), 0, "and is removed from trash/, unreadable folder included");
  char buf[16] = "";
  f = fopen(file, "r");
  if (f != NULL) {
    if (fgets(buf, sizeof(buf), f) == NULL)
      buf[0] = '\0';
    fclose(f);
  }
  is_str(buf, "keep", "the file a link pointed to is intact");
}

int main(void) {
  harness_setup(&h);
  initialize_tests();
  if (!initialize(&h, TEST_TOKEN, sid))
    bail_out("initialize does not work; nothing else can be tested");
  basic_tests();
  call_tests();
  invalid_tests();
  concurrency_tests();
  symlink_tests();
  is_int(delete_session(&h, TEST_TOKEN, sid), 204, "DELETE the main session");
  is_int(processes_after_delete(&h, sid, 3000), 0, "its supervisor and executor are gone");
  harness_teardown(&h);
  cJSON_Delete(output_schema);
  return done_testing();
}
