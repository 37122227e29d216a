#include "config.h"

#include "fcgi/tools.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fcgi/files.h"
#include "fcgi/audit.h"
#include "fcgi/json_scan.h"
#include "fcgi/stream.h"
#include "common/metrics.h"
#include "fcgi/npm.h"
#include "fcgi/packages.h"
#include "common/util.h"

/* ---- arguments ---- */

static int arg_fail(char *msg, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int arg_fail(char *msg, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, size, fmt, ap);
  va_end(ap);
  return -1;
}

static bool env_name_valid(const char *s) {
  if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
    return false;
  for (s++; *s; s++)
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
      return false;
  return true;
}

static int parse_env(const cJSON *env, char *msg, size_t size) {
  if (!cJSON_IsObject(env))
    return arg_fail(msg, size, "env_variables must be an object whose values are strings");
  int n = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, env) {
    if (++n > MAX_ENV_VARS)
      return arg_fail(msg, size, "env_variables: at most %d variables", MAX_ENV_VARS);
    if (strlen(it->string) > MAX_ENV_NAME || !env_name_valid(it->string))
      return arg_fail(msg, size, "env_variables: `%.64s` is not a valid name ([A-Za-z_][A-Za-z0-9_]*)", it->string);
    if (!cJSON_IsString(it))
      return arg_fail(msg, size, "env_variables: the value of %.64s must be a string", it->string);
    if (strlen(it->valuestring) > MAX_ENV_VALUE)
      return arg_fail(msg, size, "env_variables: the value of %.64s is longer than %d bytes", it->string,
                      MAX_ENV_VALUE);
  }
  return 0;
}

int python_args_parse(const struct mcp_config *cfg, const cJSON *args, struct python_args *out, char *msg,
                      size_t size) {
  return code_args_parse(cfg, LANG_PYTHON, args, out, msg, size);
}

int code_args_parse(const struct mcp_config *cfg, enum tool_lang lang, const cJSON *args, struct python_args *out,
                    char *msg, size_t size) {
  memset(out, 0, sizeof(*out));
  out->lang = lang;
  out->timeout_s = cfg->timeout_default;
  if (args != NULL && !cJSON_IsObject(args) && !cJSON_IsNull(args))
    return arg_fail(msg, size, "arguments must be an object");
  const cJSON *it;
  cJSON_ArrayForEach(it, args) {
    if (strcmp(it->string, "code") != 0 && strcmp(it->string, "packages") != 0 &&
        strcmp(it->string, "env_variables") != 0 && strcmp(it->string, "timeout_seconds") != 0 &&
        strcmp(it->string, "files") != 0)
      return arg_fail(msg, size,
                      "unknown argument `%.64s`; expected code, packages, env_variables, timeout_seconds, files",
                      it->string);
  }
  const cJSON *code = cJSON_GetObjectItemCaseSensitive(args, "code");
  if (!cJSON_IsString(code))
    return arg_fail(msg, size, "code is required and must be a string");
  if (strlen(code->valuestring) > cfg->max_code)
    return arg_fail(msg, size, "code is longer than the limit of %llu bytes", (unsigned long long)cfg->max_code);
  out->code = code->valuestring;
  const cJSON *env = cJSON_GetObjectItemCaseSensitive(args, "env_variables");
  if (env != NULL && !cJSON_IsNull(env)) {
    if (parse_env(env, msg, size) < 0)
      return -1;
    out->env = env;
  }
  const cJSON *to = cJSON_GetObjectItemCaseSensitive(args, "timeout_seconds");
  if (to != NULL && !cJSON_IsNull(to)) {
    /* range before the integer test: converting a huge double is undefined */
    if (!cJSON_IsNumber(to) || to->valuedouble < 1 || to->valuedouble > cfg->timeout_max ||
        to->valuedouble != (double)(int64_t)to->valuedouble)
      return arg_fail(msg, size, "timeout_seconds must be an integer from 1 to %d", cfg->timeout_max);
    out->timeout_s = (int)to->valuedouble;
  }
  const cJSON *files = cJSON_GetObjectItemCaseSensitive(args, "files");
  if (files != NULL && !cJSON_IsNull(files)) {
    if (files_validate(cfg, files, msg, size) < 0)
      return -1;
    if (cJSON_GetArraySize(files) > 0)
      out->files = files;
  }
  const cJSON *pk = cJSON_GetObjectItemCaseSensitive(args, "packages");
  if (pk != NULL && !cJSON_IsNull(pk)) {
    if ((lang == LANG_PYTHON ? packages_validate(pk, msg, size) : npm_validate(pk, msg, size)) < 0)
      return -1;
    if (cJSON_GetArraySize(pk) > 0)
      out->packages = pk;
  }
  return 0;
}

static const char *installed_file(enum tool_lang lang) {
  return lang == LANG_PYTHON ? "packages.installed" : "npm.installed";
}

/* Requirements installed in this session, one per line (session folder,
 * outside the workspace): asking again for them needs no download. */
static bool all_installed(struct session *s, enum tool_lang lang, const cJSON *packages) {
  cleanup_free char *text = NULL;
  mcp_error_t err = NULL;
  if (read_file_at(s->dirfd, installed_file(lang), 1 << 20, &text, NULL, &err) < 0) {
    mcp_error_release(&err);
    return false;
  }
  const cJSON *p;
  cJSON_ArrayForEach(p, packages) {
    size_t n = strlen(p->valuestring);
    bool found = false;
    for (const char *line = text; *line && !found; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "")
      found = strncmp(line, p->valuestring, n) == 0 && (line[n] == '\n' || line[n] == '\0');
    if (!found)
      return false;
  }
  return true;
}

static void remember_packages(struct session *s, enum tool_lang lang, const cJSON *packages) {
  if (all_installed(s, lang, packages))
    return;
  cleanup_free char *text = NULL;
  size_t len = 0;
  mcp_error_t err = NULL;
  if (read_file_at(s->dirfd, installed_file(lang), 1 << 20, &text, &len, &err) < 0)
    mcp_error_release(&err);
  cleanup_buf struct buf b = {0};
  buf_append(&b, text ? text : "", text ? len : 0);
  const cJSON *p;
  cJSON_ArrayForEach(p, packages) {
    buf_append(&b, p->valuestring, strlen(p->valuestring));
    buf_append(&b, "\n", 1);
  }
  if (b.len < (1 << 20) && write_file_atomic(s->dirfd, installed_file(lang), b.data, b.len, 0600, &err) < 0)
    mcp_error_log_release(&err, "packages");
}

/* Download what the session does not have yet; -1 with c->result set. */
/* Fetch what the session does not have yet: wheels for Python, an
 * installed npm tree for JavaScript (its name in npm_stage).  -1 with
 * c->result set when that fails. */
static int fetch_packages(struct rpc_call *c, const struct python_args *pa, char stage[33]) {
  stage[0] = '\0';
  /* npm: the installed tree of a set of specs is cached by the set, so
   * asking is cheap; the executor copies it unless /work/node_modules
   * already holds that very set (an older version asked for again, or a
   * deleted node_modules, must be copied). */
  if (pa->lang == LANG_PYTHON && all_installed(c->session, pa->lang, pa->packages))
    return 0;
  char said[1600] = "";
  mcp_error_t err = NULL;
  int r = pa->lang == LANG_PYTHON ? packages_fetch(c->ctx->cfg, pa->packages, said, sizeof(said), &err)
                                  : npm_stage(c->ctx->cfg, pa->packages, stage, said, sizeof(said), &err);
  if (r == 0)
    return 0;
  stage[0] = '\0';
  char sentence[1800];
  if (err->kind == MCP_ERR_INVALID && pa->lang == LANG_PYTHON)
    snprintf(sentence, sizeof(sentence),
             "The packages could not be downloaded as wheels from the package index; "
             "nothing was installed and the code did not run. pip said:\n%s",
             said);
  else if (err->kind == MCP_ERR_INVALID)
    snprintf(sentence, sizeof(sentence),
             "The npm packages could not be installed from the registry (install "
             "scripts never run); nothing was installed and the code did not run. npm said:\n%s",
             said);
  else
    snprintf(sentence, sizeof(sentence), "The packages could not be fetched (internal error); the code did not run.");
  if (err->kind != MCP_ERR_INVALID)
    mcp_error_log_release(&err, "packages");
  mcp_error_release(&err);
  c->result = tool_error_result(sentence);
  return -1;
}

/* The JSON-RPC id as JSON text: how notifications/cancelled names it. */
static void rpc_id_text(const cJSON *id, char *buf, size_t size) {
  cleanup_free char *t = cJSON_PrintUnformatted(id);
  snprintf(buf, size, "%s", t ? t : "");
}

static enum exec_outcome result_outcome(const struct call_result *r) {
  if (r->cancelled)
    return OUTCOME_CANCELLED;
  if (r->timed_out)
    return OUTCOME_TIMEOUT;
  if (r->memory_exceeded || r->memory_error)
    return OUTCOME_MEMORY;
  if (r->sandbox_lost)
    return OUTCOME_SANDBOX;
  return r->exit_code == 0 ? OUTCOME_OK : OUTCOME_ERROR;
}

/* Counters and the audit line of one call, whatever its end. */
static void account(struct rpc_call *c, const struct python_args *pa, const struct call_result *res,
                    enum exec_outcome outcome, int64_t started) {
  int64_t ms = now_ms() - started;
  uint64_t bytes = res ? res->out.len + res->err.len + res->files_bytes : 0;
  metrics_execution(outcome, ms, c->http->token_id, bytes);
  if (pa->packages != NULL && res != NULL) {
    struct metrics *m = metrics_get();
    if (m != NULL)
      metrics_add(res->install_error ? &m->package_install_failures : &m->package_installs, 1);
  }
  struct audit_entry e = {.tool = pa->lang == LANG_PYTHON ? "execute_python" : "execute_javascript",
                          .code = pa->code,
                          .packages = pa->packages,
                          .res = res,
                          .outcome = outcome,
                          .duration_ms = ms,
                          .bytes_returned = bytes};
  audit_call(c, &e);
}

static int run_code(struct rpc_call *c, enum tool_lang lang, const cJSON *args) {
  int64_t started = now_ms();
  char msg[300];
  struct python_args pa;
  if (code_args_parse(c->ctx->cfg, lang, args, &pa, msg, sizeof(msg)) < 0) {
    char sentence[340];
    snprintf(sentence, sizeof(sentence), "Invalid arguments: %s.", msg);
    c->result = tool_error_result(sentence);
    struct python_args none = {.lang = lang, .code = NULL};
    account(c, &none, NULL, OUTCOME_REFUSED, started);
    return 0;
  }
  struct call_stream cs;
  call_stream_init(&cs, c, pa.timeout_s);
  char npm_stage[33] = "";
  if (pa.packages != NULL && fetch_packages(c, &pa, npm_stage) < 0) {
    account(c, &pa, NULL, OUTCOME_REFUSED, started);
    return call_stream_finish(&cs, false);
  }
  char rpc_id[300];
  rpc_id_text(c->id, rpc_id, sizeof(rpc_id));
  struct call_request req = {.code = pa.code,
                             .env = pa.env,
                             .files = pa.files,
                             .packages = lang == LANG_PYTHON ? pa.packages : NULL,
                             .language = lang == LANG_PYTHON ? "python" : "javascript",
                             .npm_stage = npm_stage[0] ? npm_stage : NULL,
                             .rpc_id = rpc_id,
                             .timeout_s = pa.timeout_s};
  struct call_result res;
  mcp_error_t err = NULL;
  if (sandbox_call(c->ctx->cfg, c->session, &req, call_stream_event, &cs, &res, &err) < 0) {
    c->result = tool_error_result(mcp_error_public(err));
    bool busy = err->kind == MCP_ERR_BUSY || err->kind == MCP_ERR_CAPACITY;
    if (!busy)
      mcp_error_log_release(&err, "tools/call");
    mcp_error_release(&err);
    account(c, &pa, NULL, busy ? OUTCOME_BUSY : OUTCOME_SANDBOX, started);
    call_result_free(&res);
    return call_stream_finish(&cs, false);
  }
  res.timeout_s = pa.timeout_s;
  if (pa.packages != NULL && !res.install_error && !res.input_error && !res.sandbox_lost)
    remember_packages(c->session, pa.lang, pa.packages);
  c->result = python_result(c->ctx->cfg, &res);
  bool cancelled = res.cancelled;
  if (c->result == NULL)
    rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error");
  else
    res.files_bytes = results_add_outputs(c);
  account(c, &pa, &res, result_outcome(&res), started);
  call_result_free(&res);
  return call_stream_finish(&cs, cancelled);
}

int tools_call(struct rpc_call *c) {
  if (!cJSON_IsObject(c->params))
    return rpc_fail(c, RPC_INVALID_PARAMS, "tools/call: params must be an object with name and arguments");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(c->params, "name");
  if (!cJSON_IsString(name))
    return rpc_fail(c, RPC_INVALID_PARAMS, "tools/call: params.name must be a string");
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
  if (strcmp(name->valuestring, "execute_python") == 0)
    return run_code(c, LANG_PYTHON, args);
  if (strcmp(name->valuestring, "execute_javascript") == 0 && tools_javascript_available(c->ctx->cfg))
    return run_code(c, LANG_JAVASCRIPT, args);
  return rpc_fail(c, RPC_INVALID_PARAMS, "Unknown tool: %.100s", name->valuestring);
}

void tools_notification(struct mcp_ctx *ctx, struct session *s, const char *method, const cJSON *params) {
  (void)ctx;
  /* notifications/initialized and others need no action. */
  if (strcmp(method, "notifications/cancelled") != 0)
    return;
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(params, "requestId");
  if (!cJSON_IsString(id) && !cJSON_IsNumber(id))
    return;
  char rpc_id[300];
  rpc_id_text(id, rpc_id, sizeof(rpc_id));
  mcp_error_t err = NULL;
  if (sandbox_cancel(s->dirfd, rpc_id, &err) < 0)
    mcp_error_release(&err); /* no supervisor: nothing runs to cancel */
}
