/* The tasks extension (io.modelcontextprotocol/tasks, fcgi/tasks.h) through
 * mcp_serve(): which calls become tasks, the CreateTaskResult, tasks/get in
 * every status (working, completed with the result a plain call returns,
 * a tool error and a timeout as completed, cancelled, failed for a run the
 * service lost), tasks/update and tasks/cancel acks, TTLs and poll
 * intervals, the gate (-32021) for requests that do not declare the
 * extension, Mcp-Name, and authorization: another token's task is unknown. */
#include "config.h"

#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "fcgi/runs.h"
#include "fcgi/tasks.h"
#include "mcp-harness.h"
#include "tap.h"

#define V "2026-07-28"
#define CAPS_PLAIN "{}"
#define CAPS_TASKS "{\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}}"
#define OTHER_TOKEN "other-token"

static struct harness h;

/* One modern request: method, params (without _meta), the client
 * capabilities, the Mcp-Name header (NULL: none) and the token. */
static void request(const char *token, const char *method, const char *params, const char *caps, const char *name,
                    struct response *r) {
  size_t size = strlen(params) + 1024;
  cleanup_free char *body = malloc(size);
  snprintf(body, size,
           "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"%s\",\"params\":{%s%s\"_meta\":{"
           "\"io.modelcontextprotocol/protocolVersion\":\"" V "\",\"io.modelcontextprotocol/clientCapabilities\":%s}}}",
           method, params, params[0] ? "," : "", caps);
  struct http_request req = post_request(body, NULL);
  req.protocol_version = V;
  req.mcp_method = method;
  req.mcp_name = name;
  req.token_id = token;
  req.accept = "application/json";
  serve(&h, &req, r);
}

/* tools/call of execute_python with these arguments. */
static void call(const char *token, const char *caps, const char *args, struct response *r) {
  char params[4096];
  snprintf(params, sizeof(params), "\"name\":\"execute_python\",\"arguments\":%s", args);
  request(token, "tools/call", params, caps, "execute_python", r);
}

/* tasks/get, tasks/update or tasks/cancel of id, declaring the extension. */
static void task_rpc(const char *token, const char *method, const char *id, struct response *r) {
  char params[512];
  snprintf(params, sizeof(params), "\"taskId\":\"%s\"%s", id,
           strcmp(method, "tasks/update") == 0 ? ",\"inputResponses\":{}" : "");
  request(token, method, params, CAPS_TASKS, id, r);
}

/* Poll tasks/get until the task leaves `working` (or wait_ms passed). */
static void wait_task(const char *id, int wait_ms, struct response *r) {
  for (int64_t t0 = now_ms();;) {
    task_rpc(TEST_TOKEN, "tasks/get", id, r);
    const char *st = jstr(r->json, "result.status");
    if (st == NULL || strcmp(st, "working") != 0 || now_ms() - t0 > wait_ms)
      return;
    response_free(r);
    usleep(100000);
  }
}

static bool matches(const char *s, const char *pattern) {
  regex_t re;
  if (s == NULL || regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
    return false;
  bool m = regexec(&re, s, 0, NULL, 0) == 0;
  regfree(&re);
  return m;
}

static bool is_int_ms(const cJSON *v) {
  return cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble == (double)(int64_t)v->valuedouble;
}

/* ---- which calls become tasks ---- */

struct plan_case {
  const char *what, *args;
  bool modern, declared;
  enum task_plan want;
};

static const struct plan_case plans[] = {
    {"background, declared", "{\"background\":true}", true, true, TASK_CREATE},
    {"background, not declared: a run id", "{\"background\":true}", true, false, TASK_PLAIN},
    {"background over a 2025 session", "{\"background\":true}", false, true, TASK_PLAIN},
    {"no timeout (timeout_default 60, task_after 60)", "{}", true, true, TASK_PLAIN},
    {"timeout_seconds 60", "{\"timeout_seconds\":60}", true, true, TASK_PLAIN},
    {"timeout_seconds 61, declared", "{\"timeout_seconds\":61}", true, true, TASK_CREATE},
    {"timeout_seconds 61, not declared", "{\"timeout_seconds\":61}", true, false, TASK_PLAIN},
    {"timeout_seconds 301 (above timeout_max), declared", "{\"timeout_seconds\":301}", true, true, TASK_CREATE},
    {"timeout_seconds 301, not declared", "{\"timeout_seconds\":301}", true, false, TASK_NEEDS_EXTENSION},
    {"timeout_seconds 301 over a 2025 session", "{\"timeout_seconds\":301}", false, false, TASK_PLAIN},
    {"timeout_seconds 3601 (above background_timeout_max)", "{\"timeout_seconds\":3601}", true, false, TASK_PLAIN},
    {"timeout_seconds 301.5", "{\"timeout_seconds\":301.5}", true, false, TASK_PLAIN},
    {"timeout_seconds 1e300, declared: a task, whose bound the tool checks", "{\"timeout_seconds\":1e300}", true, true,
     TASK_CREATE},
    {"timeout_seconds 1e300, not declared", "{\"timeout_seconds\":1e300}", true, false, TASK_PLAIN},
    {"timeout_seconds as a string", "{\"timeout_seconds\":\"400\"}", true, false, TASK_PLAIN},
    {"egress_allow with 120 s, declared: a plain call", "{\"timeout_seconds\":120,\"egress_allow\":[]}", true, true,
     TASK_PLAIN},
    {"egress_allow with 301 s, not declared", "{\"timeout_seconds\":301,\"egress_allow\":[]}", true, false, TASK_PLAIN},
    {"arguments not an object", "[1]", true, true, TASK_PLAIN},
};

/* Runs shorter than plain calls (scripts/test's stack: timeout_max 120,
 * background_timeout_max 15), task_after 5. */
static const struct plan_case short_runs[] = {
    {"short runs: timeout_seconds 5 (task_after 5), declared", "{\"timeout_seconds\":5}", true, true, TASK_PLAIN},
    {"short runs: timeout_seconds 10, declared", "{\"timeout_seconds\":10}", true, true, TASK_CREATE},
    {"short runs: timeout_seconds 90, declared: a plain call (a task could not take it)", "{\"timeout_seconds\":90}",
     true, true, TASK_PLAIN},
    {"short runs: timeout_seconds 121, declared: refused as a plain call", "{\"timeout_seconds\":121}", true, true,
     TASK_PLAIN},
    {"short runs: background, declared", "{\"background\":true,\"timeout_seconds\":5}", true, true, TASK_CREATE},
};

static void plan_tests(void) {
  struct mcp_config cfg;
  config_defaults(&cfg);
  for (size_t i = 0; i < ARRAY_SIZE(plans); i++) {
    cleanup_cjson cJSON *args = cJSON_Parse(plans[i].args);
    is_int(tasks_plan(&cfg, plans[i].modern, plans[i].declared, args), plans[i].want, "plan: %s", plans[i].what);
  }
  cfg.task_after = 0;
  cleanup_cjson cJSON *none = cJSON_Parse("{}");
  is_int(tasks_plan(&cfg, true, true, none), TASK_CREATE, "plan: task_after 0 makes every declared call a task");
  cfg.task_after = 1000;
  cleanup_cjson cJSON *long_call = cJSON_Parse("{\"timeout_seconds\":500}");
  is_int(tasks_plan(&cfg, true, true, long_call), TASK_CREATE,
         "plan: above timeout_max a task, whatever task_after says");
  config_defaults(&cfg);
  cfg.task_after = 5;
  cfg.timeout_max = 120;
  cfg.background_timeout_max = 15;
  for (size_t i = 0; i < ARRAY_SIZE(short_runs); i++) {
    cleanup_cjson cJSON *args = cJSON_Parse(short_runs[i].args);
    is_int(tasks_plan(&cfg, short_runs[i].modern, short_runs[i].declared, args), short_runs[i].want, "plan: %s",
           short_runs[i].what);
  }
  cleanup_cjson cJSON *p = cJSON_Parse("{\"_meta\":{\"io.modelcontextprotocol/clientCapabilities\":" CAPS_TASKS "}}");
  ok(tasks_declared(p), "declared: an object under clientCapabilities.extensions");
  cleanup_cjson cJSON *q = cJSON_Parse("{\"_meta\":{\"io.modelcontextprotocol/clientCapabilities\":{\"extensions\":{"
                                       "\"io.modelcontextprotocol/tasks\":true}}}}");
  ok(!tasks_declared(q) && !tasks_declared(NULL), "not declared: a value that is not an object, or no params");
}

/* ---- discovery, the gate, headers, unknown tasks ---- */

static void discover_tests(void) {
  struct response r;
  request(TEST_TOKEN, "server/discover", "", CAPS_PLAIN, NULL, &r);
  const cJSON *caps = jget(rpc_result(&r, "server/discover"), "capabilities");
  ok(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(jget(caps, "extensions"), TASKS_EXTENSION)),
     "discover: capabilities.extensions names " TASKS_EXTENSION);
  ok(jget(caps, "tasks") == NULL, "discover: no 2025-style capabilities.tasks");
  response_free(&r);
}

static void gate_tests(void) {
  static const char *const methods[] = {"tasks/get", "tasks/update", "tasks/cancel"};
  for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
    struct response r;
    char params[200];
    snprintf(params, sizeof(params), "\"taskId\":\"gate-test\"%s",
             strcmp(methods[i], "tasks/update") == 0 ? ",\"inputResponses\":{}" : "");
    request(TEST_TOKEN, methods[i], params, CAPS_PLAIN, "gate-test", &r);
    is_rpc_error(&r, 400, -32021, "Missing required client capability", methods[i]);
    ok(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(jget(r.json, "error.data.requiredCapabilities.extensions"),
                                                       TASKS_EXTENSION)),
       "%s: data.requiredCapabilities names the extension", methods[i]);
    response_free(&r);
  }
}

static void header_tests(void) {
  struct response r;
  request(TEST_TOKEN, "tasks/get", "\"taskId\":\"abc\"", CAPS_TASKS, NULL, &r);
  is_rpc_error(&r, 400, -32020, "Mcp-Name header is required", "tasks/get without Mcp-Name");
  response_free(&r);
  request(TEST_TOKEN, "tasks/get", "\"taskId\":\"abc\"", CAPS_TASKS, "abd", &r);
  is_rpc_error(&r, 400, -32020, "does not match", "tasks/get with another Mcp-Name");
  response_free(&r);
  request(TEST_TOKEN, "tasks/cancel", "", CAPS_TASKS, "abc", &r);
  is_rpc_error(&r, 400, -32020, "no value", "Mcp-Name without a taskId in the body");
  response_free(&r);
  request(TEST_TOKEN, "tasks/get", "\"taskId\":\"abc\"", CAPS_TASKS, "  abc\t", &r);
  is_rpc_error(&r, 200, -32602, "Task not found", "Mcp-Name is trimmed, then an unknown task");
  response_free(&r);
  request(TEST_TOKEN, "tasks/get", "", CAPS_TASKS, NULL, &r);
  is_rpc_error(&r, 200, -32602, "taskId is required", "tasks/get without taskId");
  response_free(&r);
}

static void unknown_tests(void) {
  static const char *const ids[] = {"tasks-conformance-nonexistent-12345", "../../etc/passwd",
                                    "0123456789abcdef0123456789abcdef.r0123456789abcdef"};
  static const char *const methods[] = {"tasks/get", "tasks/update", "tasks/cancel"};
  for (size_t i = 0; i < ARRAY_SIZE(ids); i++)
    for (size_t m = 0; m < ARRAY_SIZE(methods); m++) {
      struct response r;
      task_rpc(TEST_TOKEN, methods[m], ids[i], &r);
      char what[160];
      snprintf(what, sizeof(what), "%s of %s", methods[m], ids[i]);
      is_rpc_error(&r, 200, -32602, "Task not found", what);
      response_free(&r);
    }
  static const char *const gone[] = {"tasks/result", "tasks/list"};
  for (size_t i = 0; i < ARRAY_SIZE(gone); i++) {
    struct response r;
    request(TEST_TOKEN, gone[i], "\"taskId\":\"x\"", CAPS_TASKS, NULL, &r);
    is_rpc_error(&r, 404, -32601, "Method not found", gone[i]);
    response_free(&r);
  }
}

/* ---- calls without the extension never get a task ---- */

static void plain_tests(void) {
  struct response r;
  call(TEST_TOKEN, CAPS_PLAIN, "{\"code\":\"print(1)\",\"background\":true}", &r);
  const cJSON *res = rpc_result(&r, "background without the extension");
  is_str(jstr(res, "resultType"), "complete", "background without the extension: a plain result");
  ok(jget(res, "taskId") == NULL && matches(jstr(res, "structuredContent.run"), "\\.r[0-9a-f]{16}$"),
     "... with the run id, no taskId");
  response_free(&r);
  call(TEST_TOKEN, CAPS_PLAIN, "{\"code\":\"print(2)\",\"timeout_seconds\":120}", &r);
  is_str(jstr(r.json, "result.structuredContent.stdout"), "2\n", "timeout_seconds 120 without the extension runs");
  ok(jget(r.json, "result.taskId") == NULL, "... as a plain call");
  response_free(&r);
  call(TEST_TOKEN, CAPS_PLAIN, "{\"code\":\"print(3)\",\"timeout_seconds\":301}", &r);
  is_rpc_error(&r, 400, -32021, "runs only as a task", "timeout_seconds above timeout_max without the extension");
  ok(cJSON_IsObject(
         cJSON_GetObjectItemCaseSensitive(jget(r.json, "error.data.requiredCapabilities.extensions"), TASKS_EXTENSION)),
     "... data.requiredCapabilities names the extension");
  response_free(&r);
  call(TEST_TOKEN, CAPS_TASKS, "{\"code\":\"print(4)\",\"timeout_seconds\":3601}", &r);
  ok(cJSON_IsTrue(jget(r.json, "result.isError")), "timeout_seconds above background_timeout_max: refused");
  like(jstr(r.json, "result.content.0.text"), "from 1 to 3600", "... saying a task's bound");
  response_free(&r);
  call(TEST_TOKEN, CAPS_PLAIN, "{\"code\":\"print(4)\",\"timeout_seconds\":3601}", &r);
  like(jstr(r.json, "result.content.0.text"), "from 1 to 300.", "... and without the extension a plain call's");
  response_free(&r);
  call(TEST_TOKEN, CAPS_TASKS, "{\"code\":\"print(5)\"}", &r);
  is_str(jstr(r.json, "result.structuredContent.stdout"), "5\n", "a short call of a declaring client runs plainly");
  response_free(&r);
  request(TEST_TOKEN, "tools/call",
          "\"name\":\"execute_python\",\"arguments\":{\"code\":\"print(6)\"},\"task\":{\"ttl\":60000,"
          "\"pollInterval\":100}",
          CAPS_TASKS, "execute_python", &r);
  ok(jget(r.json, "result.taskId") == NULL && jstr(r.json, "result.structuredContent.stdout") != NULL &&
         strcmp(jstr(r.json, "result.structuredContent.stdout"), "6\n") == 0,
     "a 2025-style `task` param is tolerated and makes no task");
  response_free(&r);
}

/* ---- the life of a task ---- */

static void created_shape(const cJSON *res, char *id, size_t size) {
  is_str(jstr(res, "resultType"), "task", "CreateTaskResult: resultType task");
  snprintf(id, size, "%s", jstr(res, "taskId") ? jstr(res, "taskId") : "");
  ok(matches(id, "^[0-9a-f]{32}\\.r[0-9a-f]{16}$"), "taskId: the sandbox handle, then the run (%s)", id);
  is_str(jstr(res, "status"), "working", "CreateTaskResult: working");
  ok(matches(jstr(res, "createdAt"), "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$") &&
         matches(jstr(res, "lastUpdatedAt"), "^[0-9]{4}-[0-9]{2}-[0-9]{2}T"),
     "createdAt and lastUpdatedAt in ISO 8601");
  ok(is_int_ms(jget(res, "ttlMs")) && jnum(res, "ttlMs") >= h.cfg.idle_timeout * 1000.0,
     "ttlMs: an integer, at least idle_timeout (%.0f)", jnum(res, "ttlMs"));
  ok(is_int_ms(jget(res, "pollIntervalMs")) && jnum(res, "pollIntervalMs") >= 500, "pollIntervalMs: from 500 ms");
  static const char *const absent[] = {"result", "error",        "inputRequests", "requestState",     "task",
                                       "ttl",    "pollInterval", "content",       "structuredContent"};
  bool none = true;
  for (size_t i = 0; i < ARRAY_SIZE(absent); i++)
    none = none && jget(res, absent[i]) == NULL;
  ok(none, "CreateTaskResult: flat, without result, error, inputRequests, requestState or 2025 keys");
}

static void completed_shape(const cJSON *res, const char *id) {
  is_str(jstr(res, "status"), "completed", "tasks/get: completed");
  is_str(jstr(res, "resultType"), "complete", "tasks/get: resultType complete");
  is_str(jstr(res, "taskId"), id, "tasks/get: the same taskId");
  const cJSON *result = jget(res, "result");
  is_str(jstr(result, "structuredContent.stdout"), "tick 0\ntick 1\ndone\n", "the result: the call's stdout");
  ok(cJSON_IsFalse(jget(result, "isError")), "the result: isError false");
  is_str(jstr(result, "resultType"), "complete", "the result: resultType complete");
  char handle[SESSION_ID_MAX];
  snprintf(handle, sizeof(handle), "%.*s", (int)(strrchr(id, '.') - id), id);
  is_str(jstr(result, "structuredContent.sandbox"), handle, "the result names the task's sandbox");
  is_str(jstr(result, "structuredContent.files.0.name"), "result.txt", "the result lists the output file");
  bool file = false;
  const cJSON *b;
  cJSON_ArrayForEach(b, jget(result, "content")) file =
      file || (jstr(b, "resource.text") != NULL && strcmp(jstr(b, "resource.text"), "42") == 0);
  ok(file, "the output file comes back as content");
  ok(jget(res, "error") == NULL && jget(result, "_meta.io.modelcontextprotocol/related-task") == NULL,
     "no error, no related-task _meta");
}

static void lifecycle_tests(char *id, size_t size) {
  struct response r;
  call(TEST_TOKEN, CAPS_TASKS,
       "{\"code\":\"import os, time\\nfor i in range(2):\\n    print('tick', i, flush=True)\\n    time.sleep(0.7)\\n"
       "os.makedirs('output', exist_ok=True)\\nopen('output/result.txt', 'w').write('42')\\nprint('done')\","
       "\"background\":true}",
       &r);
  created_shape(rpc_result(&r, "tools/call as a task"), id, size);
  response_free(&r);
  task_rpc(TEST_TOKEN, "tasks/get", id, &r);
  const cJSON *res = rpc_result(&r, "tasks/get at once");
  is_str(jstr(res, "taskId"), id, "tasks/get right after the CreateTaskResult finds the task");
  is_str(jstr(res, "status"), "working", "... working");
  like(jstr(res, "statusMessage"), "Running for", "... its statusMessage says for how long");
  ok(jget(res, "result") == NULL && jget(res, "error") == NULL, "... with no result or error yet");
  response_free(&r);
  wait_task(id, 20000, &r);
  completed_shape(rpc_result(&r, "tasks/get, ended"), id);
  double ttl = jnum(r.json, "result.ttlMs");
  char created[64];
  snprintf(created, sizeof(created), "%s", jstr(r.json, "result.createdAt") ?: "");
  response_free(&r);
  usleep(1100 * 1000);
  task_rpc(TEST_TOKEN, "tasks/get", id, &r);
  ok(jnum(r.json, "result.ttlMs") == ttl, "an ended task's ttlMs stays (%.0f)", ttl);
  is_str(jstr(r.json, "result.createdAt"), created, "and its createdAt");
  is_str(jstr(r.json, "result.result.structuredContent.files.0.name"), "result.txt", "and its files, again");
  response_free(&r);
  char params[256];
  snprintf(params, sizeof(params), "\"name\":\"get_run\",\"arguments\":{\"run\":\"%s\"}", id);
  request(TEST_TOKEN, "tools/call", params, CAPS_TASKS, "get_run", &r);
  is_str(jstr(r.json, "result.structuredContent.status"), "finished", "get_run reads the task's run: one mechanism");
  response_free(&r);
}

static void ack_shape(struct response *r, const char *what) {
  const cJSON *res = rpc_result(r, what);
  is_str(jstr(res, "resultType"), "complete", "%s: an empty ack, resultType complete", what);
  static const char *const absent[] = {"taskId", "status", "result", "error", "inputRequests"};
  bool none = true;
  for (size_t i = 0; i < ARRAY_SIZE(absent); i++)
    none = none && jget(res, absent[i]) == NULL;
  ok(none, "%s: no task fields", what);
}

static void update_cancel_tests(const char *done_id) {
  struct response r;
  task_rpc(TEST_TOKEN, "tasks/update", done_id, &r);
  ack_shape(&r, "tasks/update");
  response_free(&r);
  char params[256];
  snprintf(params, sizeof(params), "\"taskId\":\"%s\",\"inputResponses\":{\"unknown-key\":{\"ignored\":true}}",
           done_id);
  request(TEST_TOKEN, "tasks/update", params, CAPS_TASKS, done_id, &r);
  ack_shape(&r, "tasks/update with a key never asked for");
  response_free(&r);
  snprintf(params, sizeof(params), "\"taskId\":\"%s\"", done_id);
  request(TEST_TOKEN, "tasks/update", params, CAPS_TASKS, done_id, &r);
  is_rpc_error(&r, 200, -32602, "inputResponses is required", "tasks/update without inputResponses");
  response_free(&r);
  task_rpc(TEST_TOKEN, "tasks/cancel", done_id, &r);
  ack_shape(&r, "tasks/cancel of an ended task");
  response_free(&r);
  task_rpc(TEST_TOKEN, "tasks/get", done_id, &r);
  is_str(jstr(r.json, "result.status"), "completed", "an ended task stays completed after tasks/cancel");
  response_free(&r);

  char id[RUN_ID_MAX + 8];
  call(TEST_TOKEN, CAPS_TASKS,
       "{\"code\":\"import time\\nprint('waiting', flush=True)\\ntime.sleep(60)\","
       "\"background\":true}",
       &r);
  snprintf(id, sizeof(id), "%s", jstr(r.json, "result.taskId") ?: "");
  response_free(&r);
  usleep(500 * 1000);
  task_rpc(TEST_TOKEN, "tasks/cancel", id, &r);
  ack_shape(&r, "tasks/cancel of a working task");
  response_free(&r);
  wait_task(id, 5000, &r);
  is_str(jstr(r.json, "result.status"), "cancelled", "the task settles to cancelled");
  ok(jget(r.json, "result.result") == NULL && jget(r.json, "result.error") == NULL, "... with no result or error");
  response_free(&r);
  task_rpc(TEST_TOKEN, "tasks/cancel", id, &r);
  ack_shape(&r, "tasks/cancel again");
  response_free(&r);
}

/* A tool error and a timeout are completed tasks with isError results;
 * a task made by timeout_seconds above task_after. */
static void error_tests(void) {
  struct response r;
  char id[RUN_ID_MAX + 8];
  call(TEST_TOKEN, CAPS_TASKS, "{\"code\":\"raise SystemExit(3)\",\"timeout_seconds\":120}", &r);
  is_str(jstr(r.json, "result.resultType"), "task", "timeout_seconds above task_after: a task");
  snprintf(id, sizeof(id), "%s", jstr(r.json, "result.taskId") ?: "");
  response_free(&r);
  wait_task(id, 20000, &r);
  is_str(jstr(r.json, "result.status"), "completed", "a tool error is a completed task (not failed)");
  ok(cJSON_IsTrue(jget(r.json, "result.result.isError")) &&
         jnum(r.json, "result.result.structuredContent.exit_code") == 3,
     "... whose result has isError and exit code 3");
  response_free(&r);

  call(TEST_TOKEN, CAPS_TASKS, "{\"code\":\"import time\\ntime.sleep(30)\",\"timeout_seconds\":1,\"background\":true}",
       &r);
  snprintf(id, sizeof(id), "%s", jstr(r.json, "result.taskId") ?: "");
  response_free(&r);
  wait_task(id, 20000, &r);
  is_str(jstr(r.json, "result.status"), "completed", "a timed-out task is completed");
  ok(cJSON_IsTrue(jget(r.json, "result.result.structuredContent.timed_out")) &&
         cJSON_IsTrue(jget(r.json, "result.result.isError")),
     "... with timed_out and isError");
  like(jstr(r.json, "result.statusMessage"), "wall-clock limit of 1 s", "... and says so");
  response_free(&r);

  call(TEST_TOKEN, CAPS_TASKS, "{\"code\":\"print('long allowed')\",\"timeout_seconds\":301}", &r);
  is_str(jstr(r.json, "result.resultType"), "task", "timeout_seconds above timeout_max, declared: a task");
  snprintf(id, sizeof(id), "%s", jstr(r.json, "result.taskId") ?: "");
  response_free(&r);
  wait_task(id, 20000, &r);
  is_str(jstr(r.json, "result.result.structuredContent.stdout"), "long allowed\n", "... which runs");
  response_free(&r);
}

/* The run's folder on the host: <state>/sessions/<handle>/runs/<name>. */
static int run_folder(const char *id) {
  char path[PATH_MAX + 256];
  const char *dot = strrchr(id, '.');
  if (dot == NULL)
    return -1;
  snprintf(path, sizeof(path), "%s/sessions/%.*s/runs/%s", h.state, (int)(dot - id), id, dot + 1);
  return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* What a restart leaves: a run without done.json whose supervisor is gone
 * is failed (-32603); one whose sandbox died under it is completed with
 * the result a plain call gets then. */
static void lost_tests(const char *id) {
  int fd = run_folder(id);
  cleanup_free char *saved = NULL;
  size_t len = 0;
  mcp_error_t err = NULL;
  if (!ok(fd >= 0 && read_file_at(fd, "done.json", 1 << 20, &saved, &len, &err) == 0, "the run's done.json"))
    return;
  unlinkat(fd, "done.json", 0);
  struct response r;
  task_rpc(TEST_TOKEN, "tasks/get", id, &r);
  is_str(jstr(r.json, "result.status"), "failed", "a run lost without its end: failed");
  is_int(jnum(r.json, "result.error.code"), -32603, "... with the JSON-RPC error -32603");
  ok(jstr(r.json, "result.error.message") != NULL && jget(r.json, "result.result") == NULL, "... and no result");
  like(jstr(r.json, "result.statusMessage"), "service restarted", "... saying why");
  response_free(&r);
  static const char lost[] = "{\"exit_code\":137,\"sandbox_lost\":true,\"memory_exceeded\":true,\"status\":\"lost\"}";
  ok(write_file_atomic(fd, "done.json", lost, strlen(lost), 0600, &err) == 0, "done.json of a sandbox that died");
  task_rpc(TEST_TOKEN, "tasks/get", id, &r);
  is_str(jstr(r.json, "result.status"), "completed", "a run whose sandbox died: completed");
  ok(cJSON_IsTrue(jget(r.json, "result.result.isError")) &&
         cJSON_IsTrue(jget(r.json, "result.result.structuredContent.sandbox_restarted")),
     "... isError with sandbox_restarted, as a plain call");
  response_free(&r);
  write_file_atomic(fd, "done.json", saved, len, 0600, &err);
  close(fd);
}

static void token_tests(void) {
  struct response r;
  char id[RUN_ID_MAX + 8];
  call(TEST_TOKEN, CAPS_TASKS, "{\"code\":\"import time\\ntime.sleep(20)\",\"background\":true}", &r);
  snprintf(id, sizeof(id), "%s", jstr(r.json, "result.taskId") ?: "");
  response_free(&r);
  static const char *const methods[] = {"tasks/get", "tasks/update", "tasks/cancel"};
  for (size_t m = 0; m < ARRAY_SIZE(methods); m++) {
    struct response made_up;
    task_rpc(OTHER_TOKEN, methods[m], id, &r);
    char what[64];
    snprintf(what, sizeof(what), "%s of another token's task", methods[m]);
    is_rpc_error(&r, 200, -32602, "Task not found", what);
    task_rpc(OTHER_TOKEN, methods[m], "0123456789abcdef0123456789abcdef.r0123456789abcdef", &made_up);
    is_str(jstr(r.json, "error.message"), jstr(made_up.json, "error.message"),
           "%s: the same answer as for a task that never existed", what);
    response_free(&made_up);
    response_free(&r);
  }
  task_rpc(TEST_TOKEN, "tasks/get", id, &r);
  is_str(jstr(r.json, "result.status"), "working", "the other token's tasks/cancel changed nothing");
  response_free(&r);
  task_rpc(TEST_TOKEN, "tasks/cancel", id, &r);
  response_free(&r);
}

/* With a cell's name, the taskId starts with it, as the handle does: a
 * router sends the extension's requests where the sandbox lives. */
static void cell_tests(void) {
  snprintf(h.cfg.cell, sizeof(h.cfg.cell), "cell-7");
  struct response r;
  call(TEST_TOKEN, CAPS_TASKS, "{\"code\":\"print('in the cell')\",\"background\":true}", &r);
  char id[RUN_ID_MAX + 8];
  snprintf(id, sizeof(id), "%s", jstr(r.json, "result.taskId") ?: "");
  ok(matches(id, "^cell-7\\.[0-9a-f]{32}\\.r[0-9a-f]{16}$"), "with a cell: the taskId starts with its name (%s)", id);
  response_free(&r);
  h.cfg.cell[0] = '\0';
  wait_task(id, 20000, &r);
  is_str(jstr(r.json, "result.result.structuredContent.stdout"), "in the cell\n", "and it is served by that id");
  response_free(&r);
}

int main(void) {
  plan_tests();
  harness_setup(&h);
  discover_tests();
  gate_tests();
  header_tests();
  unknown_tests();
  plain_tests();
  char id[RUN_ID_MAX + 8] = "";
  lifecycle_tests(id, sizeof(id));
  update_cancel_tests(id);
  error_tests();
  lost_tests(id);
  token_tests();
  cell_tests();
  harness_teardown(&h);
  return done_testing();
}
