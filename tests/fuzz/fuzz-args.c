/* Fuzz harness: the arguments of tools/call execute_python and
 * execute_javascript.
 *
 * Input: a JSON text.  Like the responder, the harness runs json_scan()
 * first (what it refuses never reaches the argument checks), then gives
 * the value to code_args_parse() as the `arguments` of both tools, to
 * files_validate(), packages_validate() and npm_validate() as the `files`
 * and `packages` arguments, and every string in it to package_check() as
 * one requirement and to npm_spec_check() as one npm spec.
 *
 * Checked: a parse that succeeds yields what the rest of the call relies
 * on (code, a timeout within 1..timeout_max, env values that are strings
 * with valid names, files and packages that pass their own checks); a
 * parse that fails yields one sentence, and the tool error made of it is
 * valid JSON for a client. */
#include "config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "fcgi/files.h"
#include "fcgi/json_scan.h"
#include "fcgi/mcp.h"
#include "fcgi/npm.h"
#include "fcgi/packages.h"
#include "fcgi/tools.h"
#include "fuzz.h"

static struct mcp_config cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  config_defaults(&cfg);
  /* Small limits, so that inputs of fuzzing size reach them. */
  cfg.max_code = 4096;
  cfg.max_body = 8192;
  cfg.input_files_max = 4;
  cfg.timeout_max = 300;
  cfg.timeout_default = 60;
  return 0;
}

/* A client-facing sentence: run_python() wraps msg this way. */
static void check_sentence(const char *msg, const char *what) {
  if (msg[0] == '\0')
    fuzz_fail("%s: failed without saying why", what);
  char sentence[340];
  snprintf(sentence, sizeof(sentence), "Invalid arguments: %s.", msg);
  cleanup_cjson cJSON *r = tool_error_result(sentence);
  cleanup_free char *text = cJSON_PrintUnformatted(r);
  if (text == NULL)
    fuzz_fail("%s: the tool error cannot be printed", what);
  cJSON_Delete(fuzz_check_json(text, strlen(text), what));
}

/* An oracle written apart from the parser's own check: a POSIX name is a
 * letter or underscore, then letters, digits and underscores only. */
static bool env_name_ok(const char *s) {
  static const char head[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_";
  static const char tail[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789";
  size_t n = strlen(s);
  return n > 0 && strchr(head, s[0]) != NULL && strspn(s, tail) == n;
}

static void check_parsed(const cJSON *args, const struct code_args *pa) {
  if (pa->code == NULL || strlen(pa->code) > cfg.max_code)
    fuzz_fail("accepted without code, or with code over max_code");
  if (pa->timeout_s < 1 || pa->timeout_s > cfg.timeout_max)
    fuzz_fail("accepted timeout_seconds %d", pa->timeout_s);
  const cJSON *e;
  cJSON_ArrayForEach(e, pa->env) {
    if (!cJSON_IsString(e) || e->string == NULL || !env_name_ok(e->string))
      fuzz_fail("accepted an env variable that is not NAME: string");
  }
  mcp_error_t err = NULL;
  if (pa->files != NULL && files_validate(&cfg, pa->files, &err) < 0)
    fuzz_fail("accepted files that files_validate refuses: %s", mcp_error_public(err));
  if (pa->packages != NULL && pa->lang->packages_validate(pa->packages, &err) < 0)
    fuzz_fail("accepted packages that the tool's check refuses: %s", mcp_error_public(err));
  /* No argument but the five known ones. */
  const cJSON *it;
  cJSON_ArrayForEach(it, args) {
    static const char *const known[] = {"code", "packages", "env_variables", "timeout_seconds", "files"};
    bool found = false;
    for (size_t i = 0; i < ARRAY_SIZE(known); i++)
      found = found || strcmp(it->string, known[i]) == 0;
    if (!found)
      fuzz_fail("accepted an unknown argument `%s`", it->string);
  }
}

/* Every string anywhere in v, as a requirement. */
static void each_requirement(const cJSON *v, int depth) {
  if (depth > 64)
    return;
  for (; v != NULL; v = v->next) {
    if (cJSON_IsString(v)) {
      const char *why = package_problem(v->valuestring);
      if (why != NULL)
        check_sentence(why, "package_problem");
      else if (strpbrk(v->valuestring, "/\\:@;") != NULL || strlen(v->valuestring) > 200)
        fuzz_fail("package_problem accepted `%.200s`", v->valuestring);
      why = npm_spec_problem(v->valuestring);
      if (why != NULL)
        check_sentence(why, "npm_spec_problem");
      else if (v->valuestring[0] == '-' || strpbrk(v->valuestring, ":\\#") != NULL ||
               strstr(v->valuestring, "..") != NULL || (strchr(v->valuestring, '/') && v->valuestring[0] != '@'))
        /* an option, a URL, a git or file spec, a path */
        fuzz_fail("npm_spec_problem accepted `%.200s`", v->valuestring);
    }
    if (cJSON_IsArray(v) || cJSON_IsObject(v))
      each_requirement(v->child, depth + 1);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  if (json_scan(text, size, 64, MCP_MAX_JSON_VALUES, NULL) != JSON_OK)
    return 0;
  cleanup_cjson cJSON *args = cJSON_ParseWithLength(text, size);
  if (args == NULL)
    return 0;

  struct code_args pa;
  for (size_t i = 0; i < langs_count; i++) {
    mcp_error_t err = NULL;
    if (code_args_parse(&cfg, langs[i], args, &pa, &err) == 0)
      check_parsed(args, &pa);
    else
      check_sentence(mcp_error_public(err), "code_args_parse");
    mcp_error_release(&err);
  }
  /* Each check alone, on the whole input. */
  static const struct {
    const char *name;
    int (*fn)(const cJSON *, mcp_error_t *);
  } lists[] = {{"packages_validate", packages_validate}, {"npm_validate", npm_validate}};
  mcp_error_t err = NULL;
  if (files_validate(&cfg, args, &err) < 0)
    check_sentence(mcp_error_public(err), "files_validate");
  mcp_error_release(&err);
  for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
    if (lists[i].fn(args, &err) < 0)
      check_sentence(mcp_error_public(err), lists[i].name);
    mcp_error_release(&err);
  }
  each_requirement(args, 0);

  /* The raw input as one requirement too (NUL-terminated copy). */
  cleanup_free char *req = xstrndup(text, size < 512 ? size : 512);
  const char *why = req != NULL ? package_problem(req) : NULL;
  if (why != NULL)
    check_sentence(why, "package_problem");
  why = req != NULL ? npm_spec_problem(req) : NULL;
  if (why != NULL)
    check_sentence(why, "npm_spec_problem");
  return 0;
}
