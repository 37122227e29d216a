/* What comes back from a sandbox, and what goes to the client:
 * call_result_parse() on hostile payloads, call_request_json(),
 * utf8_sanitize(), python_args_parse() and call_tool_result(). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fcgi/call.h"
#include "fcgi/json_scan.h"
#include "fcgi/tools.h"
#include "guard.h"
#include "tap.h"

#define S(lit) lit, sizeof(lit) - 1

/* Parse a payload that ends right before a guard page: frame payloads are
 * not NUL-terminated. */
static int parse(const char *json, size_t len, struct call_result *res) {
  struct guarded g = guarded_copy(json, len);
  if (g.data == NULL)
    bail_out("cannot map a guard page");
  memset(res, 0, sizeof(*res));
  int r = call_result_parse(g.data, len, res);
  guarded_free(&g);
  return r;
}

static void parse_tests(void) {
  struct call_result r;
  is_int(parse(S("{\"exit_code\":3,\"timed_out\":true,\"duration_ms\":1500,\"stdout_bytes\":10,\"stderr_bytes\":20,"
                 "\"cpu_ms\":7,\"max_rss_kb\":9000,\"truncated\":false,\"cancelled\":false,\"memory_error\":true}"),
               &r),
         0, "a well-formed result");
  ok(r.exit_code == 3 && r.timed_out && r.duration_ms == 1500 && r.out_total == 10 && r.err_total == 20 &&
         r.cpu_ms == 7 && r.max_rss_kb == 9000 && !r.truncated && !r.cancelled && r.memory_error,
     "every field is read");

  static const struct {
    const char *json;
    size_t len;
  } not_objects[] = {{S("")},
                     {S("not json")},
                     {S("[]")},
                     {S("null")},
                     {S("3")},
                     {S("\"{}\"")},
                     {S("{")},
                     {S("{\"exit_code\":NaN}")},
                     {S("{\"exit_code\":Infinity}")}};
  for (size_t i = 0; i < ARRAY_SIZE(not_objects); i++)
    is_int(parse(not_objects[i].json, not_objects[i].len, &r), -EPROTO, "'%s' is refused", not_objects[i].json);

  is_int(parse(S("{}"), &r), 0, "an empty object");
  is_int(r.exit_code, 255, "a missing exit code counts as a failure (255)");
  ok(!r.timed_out && r.duration_ms == 0 && r.out_total == 0, "and nothing else is invented");

  static const struct {
    const char *json;
    size_t len;
    int exit_code;
  } codes[] = {
      {S("{\"exit_code\":\"0\"}"), 255}, {S("{\"exit_code\":true}"), 255},       {S("{\"exit_code\":null}"), 255},
      {S("{\"exit_code\":[0]}"), 255},   {S("{\"exit_code\":{}}"), 255},         {S("{\"exit_code\":1e300}"), 255},
      {S("{\"exit_code\":1e999}"), 255}, {S("{\"exit_code\":-1e999}"), 0},       {S("{\"exit_code\":-5}"), 0},
      {S("{\"exit_code\":256}"), 255},   {S("{\"exit_code\":3.9}"), 3},          {S("{\"exit_code\":137}"), 137},
      {S("{\"exit_code\":-0}"), 0},      {S("{\"exit_code\":2147483648}"), 255},
  };
  for (size_t i = 0; i < ARRAY_SIZE(codes); i++) {
    is_int(parse(codes[i].json, codes[i].len, &r), 0, "%s parses", codes[i].json);
    is_int(r.exit_code, codes[i].exit_code, "%s: exit_code clamped to %d", codes[i].json, codes[i].exit_code);
  }

  parse(S("{\"duration_ms\":1e300,\"cpu_ms\":-1e300,\"max_rss_kb\":1e999,\"stdout_bytes\":1e300,"
          "\"stderr_bytes\":-7}"),
        &r);
  is_int(r.duration_ms, INT64_C(1) << 40, "a huge duration is clamped");
  is_int(r.cpu_ms, 0, "a negative cpu time becomes 0");
  is_int(r.max_rss_kb, INT64_C(1) << 40, "an infinite rss is clamped");
  is_int(r.out_total, INT64_C(1) << 50, "a huge stdout count is clamped");
  is_int(r.err_total, 0, "a negative stderr count becomes 0");

  parse(S("{\"timed_out\":1,\"cancelled\":\"true\",\"memory_error\":[true],\"cpu_exceeded\":{},\"sandbox_lost\":null}"),
        &r);
  ok(!r.timed_out && !r.cancelled && !r.memory_error && !r.cpu_exceeded && !r.sandbox_lost,
     "only JSON true sets a flag");

  /* What the responder counted itself is never lowered by the sandbox. */
  struct guarded g = guarded_copy(S("{\"stdout_bytes\":5,\"truncated\":false}"));
  memset(&r, 0, sizeof(r));
  r.out_total = 100;
  r.truncated = true;
  call_result_parse(g.data, sizeof("{\"stdout_bytes\":5,\"truncated\":false}") - 1, &r);
  ok(r.out_total == 100 && r.truncated, "counted output and truncation are kept");
  guarded_free(&g);

  /* Bytes beyond len are not part of the payload. */
  static const char two[] = "{\"exit_code\":4}{\"exit_code\":5}";
  memset(&r, 0, sizeof(r));
  is_int(call_result_parse(two, 15, &r), 0, "only len bytes are parsed");
  is_int(r.exit_code, 4, "the first object");

  /* Deep nesting does not crash the parser. */
  size_t n = 100000;
  char *deep = malloc(2 * n + 16);
  size_t k = 0;
  deep[k++] = '{';
  for (const char *p = "\"a\":"; *p != '\0'; p++)
    deep[k++] = *p;
  for (size_t i = 0; i < n; i++)
    deep[k++] = '[';
  for (size_t i = 0; i < n; i++)
    deep[k++] = ']';
  deep[k++] = '}';
  is_int(parse(deep, k, &r), -EPROTO, "100000 nested arrays are refused, not a crash");
  free(deep);
}

static void request_tests(void) {
  struct mcp_config cfg;
  config_defaults(&cfg);
  /* Values no default has, so that each one is seen to come from cfg. */
  cfg.output_limit = 12345;
  cfg.memory_limit = (uint64_t)77 << 20;
  cfg.cpu_limit = 33;
  cfg.nproc_limit = 99;
  cfg.fsize_limit = (uint64_t)5 << 20;
  cJSON *env = cJSON_Parse("{\"A\":\"1\",\"B\":\"two\"}");
  struct call_request req = {.code = "print(1)", .env = env, .timeout_s = 7};
  char *text = call_request_json(&cfg, &req);
  cJSON *o = cJSON_Parse(text);
  ok(o != NULL, "call_request_json is JSON");
  is_str(cJSON_GetStringValue(cJSON_GetObjectItem(o, "code")), "print(1)", "code");
  is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "timeout_ms")), 7000, "timeout in ms");
  is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "output_limit")), cfg.output_limit, "output_limit");
  is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "memory_bytes")), cfg.memory_limit, "memory_bytes");
  is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "cpu_seconds")), cfg.cpu_limit, "cpu_seconds");
  is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "nproc")), cfg.nproc_limit, "nproc");
  is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "fsize_bytes")), cfg.fsize_limit, "fsize_bytes");
  ok(cJSON_Compare(cJSON_GetObjectItem(o, "env"), env, 1), "env is passed as given");
  cJSON_Delete(o);
  free(text);
  req.env = NULL;
  text = call_request_json(&cfg, &req);
  o = cJSON_Parse(text);
  const cJSON *e = cJSON_GetObjectItem(o, "env");
  ok(cJSON_IsObject(e) && e->child == NULL, "no env: an empty object");
  cJSON_Delete(o);
  free(text);
  cJSON_Delete(env);
}

struct san_case {
  const char *name;
  const char *in;
  size_t len;
  const char *out;
};

#define R "\xEF\xBF\xBD"
static const struct san_case sanitize[] = {
    {"empty", S(""), ""},
    {"ASCII", S("hello\n"), "hello\n"},
    {"valid multibyte", S("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"},
    {"invalid byte",
     S("a\xFF"
       "b"),
     "a" R "b"},
    {"NUL", S("a\0b"), "a" R "b"},
    {"only NULs", S("\0\0"), R R},
    {"cut 3-byte sequence at the end", S("x\xE2\x82"), "x" R R},
    {"overlong", S("\xC0\xAF"), R R},
    {"surrogate", S("\xED\xA0\x80"), R R R},
    {"lone continuation", S("\x80z"), R "z"},
    {"beyond U+10FFFF", S("\xF4\x90\x80\x80"), R R R R},
    {"U+FFFD itself is kept", S(R), R},
};

static void sanitize_tests(void) {
  for (size_t i = 0; i < ARRAY_SIZE(sanitize); i++) {
    const struct san_case *c = &sanitize[i];
    struct guarded g = guarded_copy(c->in, c->len);
    char *out = utf8_sanitize(g.data, c->len);
    is_str(out, c->out, "utf8_sanitize: %s", c->name);
    if (out != NULL)
      is_int(utf8_valid_prefix(out, strlen(out)), strlen(out), "utf8_sanitize: %s: the output is valid", c->name);
    free(out);
    guarded_free(&g);
  }
}

struct arg_case {
  const char *args; /* JSON, or NULL for absent arguments */
  const char *msg;  /* expected sentence, NULL: valid */
};

static const struct arg_case args_cases[] = {
    {"{\"code\":\"print(1)\"}", NULL},
    {"{\"code\":\"\"}", NULL},
    {"{\"code\":\"x\",\"timeout_seconds\":1}", NULL},
    {"{\"code\":\"x\",\"timeout_seconds\":300}", NULL},
    {"{\"code\":\"x\",\"timeout_seconds\":null,\"env_variables\":null,\"packages\":null}", NULL},
    {"{\"code\":\"x\",\"env_variables\":{\"A_1\":\"v\",\"_b\":\"\"}}", NULL},
    {"{\"code\":\"x\",\"packages\":[]}", NULL},
    {NULL, "code is required and must be a string"},
    {"null", "code is required and must be a string"},
    {"{}", "code is required and must be a string"},
    {"\"print(1)\"", "arguments must be an object"},
    {"[\"print(1)\"]", "arguments must be an object"},
    {"{\"code\":5}", "code is required and must be a string"},
    {"{\"code\":null}", "code is required and must be a string"},
    {"{\"code\":[\"x\"]}", "code is required and must be a string"},
    {"{\"code\":\"x\",\"extra\":1}", "unknown argument `extra`; expected code, "},
    {"{\"Code\":\"x\"}", "unknown argument `Code`; expected code, "},
    {"{\"code\":\"x\",\"timeout_seconds\":0}", "timeout_seconds must be an integer from 1 to 300"},
    {"{\"code\":\"x\",\"timeout_seconds\":-1}", "timeout_seconds must be an integer from 1 to 300"},
    {"{\"code\":\"x\",\"timeout_seconds\":301}", "timeout_seconds must be an integer from 1 to 300"},
    {"{\"code\":\"x\",\"timeout_seconds\":1.5}", "timeout_seconds must be an integer from 1 to 300"},
    {"{\"code\":\"x\",\"timeout_seconds\":1e300}", "timeout_seconds must be an integer from 1 to 300"},
    {"{\"code\":\"x\",\"timeout_seconds\":-1e300}", "timeout_seconds must be an integer from 1 to 300"},
    {"{\"code\":\"x\",\"timeout_seconds\":1e999}", "timeout_seconds must be an integer from 1 to 300"},
    {"{\"code\":\"x\",\"timeout_seconds\":\"10\"}", "timeout_seconds must be an integer from 1 to 300"},
    {"{\"code\":\"x\",\"timeout_seconds\":true}", "timeout_seconds must be an integer from 1 to 300"},
    {"{\"code\":\"x\",\"env_variables\":\"A=1\"}", "env_variables must be an object whose values are strings"},
    {"{\"code\":\"x\",\"env_variables\":[\"A\"]}", "env_variables must be an object whose values are strings"},
    {"{\"code\":\"x\",\"env_variables\":{\"A\":1}}", "env_variables: the value of A must be a string"},
    {"{\"code\":\"x\",\"env_variables\":{\"A\":null}}", "env_variables: the value of A must be a string"},
    {"{\"code\":\"x\",\"env_variables\":{\"1A\":\"v\"}}",
     "env_variables: `1A` is not a valid name ([A-Za-z_][A-Za-z0-9_]*)"},
    {"{\"code\":\"x\",\"env_variables\":{\"A-B\":\"v\"}}",
     "env_variables: `A-B` is not a valid name ([A-Za-z_][A-Za-z0-9_]*)"},
    {"{\"code\":\"x\",\"env_variables\":{\"A=B\":\"v\"}}",
     "env_variables: `A=B` is not a valid name ([A-Za-z_][A-Za-z0-9_]*)"},
    {"{\"code\":\"x\",\"env_variables\":{\"\":\"v\"}}",
     "env_variables: `` is not a valid name ([A-Za-z_][A-Za-z0-9_]*)"},
    {"{\"code\":\"x\",\"packages\":\"numpy\"}", "packages must be an array of strings"},
    {"{\"code\":\"x\",\"packages\":[1]}", "packages must be an array of strings"},
};

static void args_tests(void) {
  const struct lang *python = lang_by_tool("execute_python");
  struct mcp_config cfg;
  config_defaults(&cfg);
  for (size_t i = 0; i < ARRAY_SIZE(args_cases); i++) {
    const struct arg_case *c = &args_cases[i];
    cJSON *a = c->args ? cJSON_Parse(c->args) : NULL;
    if (c->args != NULL && a == NULL)
      bail_out("test input is not JSON: %s", c->args);
    struct code_args pa;
    mcp_error_t err = NULL;
    int r = code_args_parse(&cfg, python, a, &pa, &err);
    const char *msg = err != NULL ? mcp_error_public(err) : "";
    if (c->msg == NULL) {
      is_int(r, 0, "arguments %s are valid", c->args);
      if (r < 0)
        diag("%s", msg);
    } else {
      is_int(r, -1, "arguments %s are refused", c->args ? c->args : "(absent)");
      /* The list of accepted arguments grows with the tool: its start is enough. */
      if (strstr(c->msg, "unknown argument") != NULL)
        like(msg, c->msg, "with the sentence");
      else
        is_str(msg, c->msg, "with the sentence");
    }
    mcp_error_release(&err);
    cJSON_Delete(a);
  }

  struct code_args pa;
  mcp_error_t err = NULL;
  cJSON *a =
      cJSON_Parse("{\"code\":\"x\",\"timeout_seconds\":42,\"env_variables\":{\"K\":\"v\"},\"packages\":[\"p\"]}");
  code_args_parse(&cfg, python, a, &pa, &err);
  ok(pa.code && strcmp(pa.code, "x") == 0 && pa.timeout_s == 42 && cJSON_IsObject(pa.env) && cJSON_IsArray(pa.packages),
     "parsed arguments are returned");
  cJSON_Delete(a);
  a = cJSON_Parse("{\"code\":\"x\"}");
  code_args_parse(&cfg, python, a, &pa, &err);
  ok(pa.timeout_s == 60 && pa.env == NULL && pa.packages == NULL, "defaults: timeout_default, no env, no packages");
  cJSON_Delete(a);

  /* Limits that depend on the configuration. */
  cfg.max_code = 1024;
  char *big = malloc(1100 + 32);
  snprintf(big, 32, "{\"code\":\"");
  memset(big + 9, 'x', 1025);
  snprintf(big + 9 + 1025, 8, "\"}");
  a = cJSON_Parse(big);
  is_int(code_args_parse(&cfg, python, a, &pa, &err), -1, "code longer than max_code");
  is_str(err ? mcp_error_public(err) : "", "code is longer than the limit of 1024 bytes", "says the limit");
  mcp_error_release(&err);
  cJSON_Delete(a);
  free(big);

  struct buf b = {0};
  static const char head[] = "{\"code\":\"x\",\"env_variables\":{";
  buf_append(&b, head, sizeof(head) - 1);
  for (int i = 0; i <= MAX_ENV_VARS; i++) {
    char one[32];
    snprintf(one, sizeof(one), "%s\"V%d\":\"x\"", i ? "," : "", i);
    buf_append(&b, one, strlen(one));
  }
  buf_append(&b, "}}", 2);
  a = cJSON_Parse(b.data);
  is_int(code_args_parse(&cfg, python, a, &pa, &err), -1, "more than MAX_ENV_VARS variables");
  is_str(err ? mcp_error_public(err) : "", "env_variables: at most 256 variables", "says the limit");
  mcp_error_release(&err);
  cJSON_Delete(a);
  buf_free(&b);
}

static void result_tests(void) {
  struct mcp_config cfg;
  config_defaults(&cfg);
  struct call_result r;
  memset(&r, 0, sizeof(r));
  buf_append(&r.out, "hi\xFF\n", 4);
  buf_append(&r.err, "", 0);
  r.exit_code = 0;
  r.duration_ms = 12;
  cJSON *res = call_tool_result(&cfg, &r);
  const cJSON *sc = cJSON_GetObjectItem(res, "structuredContent");
  is_str(cJSON_GetStringValue(cJSON_GetObjectItem(sc, "stdout")), "hi" R "\n", "stdout is sanitized");
  is_str(cJSON_GetStringValue(cJSON_GetObjectItem(sc, "stderr")), "", "empty stderr is an empty string");
  is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(sc, "exit_code")), 0, "exit_code");
  is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(sc, "duration_ms")), 12, "duration_ms");
  ok(cJSON_IsFalse(cJSON_GetObjectItem(sc, "timed_out")) && cJSON_IsFalse(cJSON_GetObjectItem(sc, "truncated")),
     "timed_out and truncated are false");
  ok(cJSON_IsFalse(cJSON_GetObjectItem(res, "isError")), "exit 0 is not an error");
  const cJSON *block = cJSON_GetArrayItem(cJSON_GetObjectItem(res, "content"), 0);
  is_str(cJSON_GetStringValue(cJSON_GetObjectItem(block, "type")), "text", "one text block");
  cJSON *again = cJSON_Parse(cJSON_GetStringValue(cJSON_GetObjectItem(block, "text")));
  ok(cJSON_Compare(again, sc, 1), "whose text is structuredContent serialized");
  cJSON_Delete(again);
  cJSON_Delete(res);

  r.exit_code = 1;
  res = call_tool_result(&cfg, &r);
  ok(cJSON_IsTrue(cJSON_GetObjectItem(res, "isError")), "a non-zero exit is an error");
  cJSON_Delete(res);
  r.exit_code = 0;
  r.timed_out = true;
  res = call_tool_result(&cfg, &r);
  ok(cJSON_IsTrue(cJSON_GetObjectItem(res, "isError")), "a timeout is an error");
  cJSON_Delete(res);
  call_result_free(&r);

  memset(&r, 0, sizeof(r));
  res = call_tool_result(&cfg, &r);
  is_str(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(res, "structuredContent"), "stdout")), "",
         "no output at all is an empty string");
  cJSON_Delete(res);

  /* The supervisor's result for a call whose sandbox the host-task guard
   * replaced before the call answered (sandbox/supervisor.c). */
  is_int(parse(S("{\"exit_code\":137,\"timed_out\":false,\"sandbox_lost\":true,\"memory_exceeded\":false,"
                 "\"processes_exceeded\":true,\"duration_ms\":10272,\"stdout_bytes\":0,\"stderr_bytes\":0}"),
               &r),
         0, "the result of a call the host-task guard's replacement ended");
  res = call_tool_result(&cfg, &r);
  sc = cJSON_GetObjectItem(res, "structuredContent");
  ok(cJSON_IsTrue(cJSON_GetObjectItem(sc, "processes_exceeded")) &&
         cJSON_IsTrue(cJSON_GetObjectItem(sc, "sandbox_restarted")),
     "says processes_exceeded and sandbox_restarted");
  const char *notes =
      cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(res, "content"), 1), "text"));
  ok(notes != NULL && strstr(notes, "too many host tasks") != NULL, "its note names the cause: %s",
     notes ? notes : "(none)");
  ok(notes != NULL && strstr(notes, "The sandbox was stopped") == NULL, "and says the sandbox restarts only once");
  cJSON_Delete(res);
  call_result_free(&r);

  res = tool_error_result("It failed.");
  ok(cJSON_IsTrue(cJSON_GetObjectItem(res, "isError")), "tool_error_result has isError");
  is_str(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(res, "content"), 0), "text")),
         "It failed.", "and the sentence as text");
  cJSON_Delete(res);
}

int main(void) {
  parse_tests();
  request_tests();
  sanitize_tests();
  args_tests();
  result_tests();
  return done_testing();
}
