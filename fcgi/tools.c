#include "config.h"

#include "tools.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "files.h"
#include "audit.h"
#include "json_scan.h"
#include "stream.h"
#include "sandbox/metrics.h"
#include "sandbox/packages.h"
#include "sandbox/util.h"

/* ---- schemas ---- */

static cJSON *prop(cJSON *props, const char *name, const char *type, const char *description) {
  cJSON *p = cJSON_AddObjectToObject(props, name);
  cJSON_AddStringToObject(p, "type", type);
  if (description != NULL)
    cJSON_AddStringToObject(p, "description", description);
  return p;
}

static cJSON *input_schema(const struct mcp_config *cfg) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "type", "object");
  cJSON *props = cJSON_AddObjectToObject(s, "properties");
  prop(props, "code", "string",
       "Python 3 source code, run as __main__ in a fresh process. Print what you want to see; "
       "write files to output/ to get them back.");
  cJSON *pk = prop(props, "packages", "array",
                   "Python packages (PEP 508 requirements such as requests or pandas>=2) to install into the "
                   "session before running; installed packages stay for the session's later calls.");
  cJSON_AddStringToObject(cJSON_AddObjectToObject(pk, "items"), "type", "string");
  cJSON *env = prop(props, "env_variables", "object", "Environment variables for this call only.");
  cJSON_AddStringToObject(cJSON_AddObjectToObject(env, "additionalProperties"), "type", "string");
  cJSON *files = prop(props, "files", "array",
                      "Files to write into the workspace before the code runs, paths relative to /work.");
  cJSON *fi = cJSON_AddObjectToObject(files, "items");
  cJSON_AddStringToObject(fi, "type", "object");
  cJSON *fp = cJSON_AddObjectToObject(fi, "properties");
  prop(fp, "path", "string", "Relative path, e.g. data/input.csv");
  prop(fp, "text", "string", "UTF-8 content");
  prop(fp, "base64", "string", "Binary content, base64-encoded");
  cJSON *freq = cJSON_AddArrayToObject(fi, "required");
  cJSON_AddItemToArray(freq, cJSON_CreateString("path"));
  cJSON *to = prop(props, "timeout_seconds", "integer", "Wall-clock limit of the call in seconds.");
  cJSON_AddNumberToObject(to, "minimum", 1);
  cJSON_AddNumberToObject(to, "maximum", cfg->timeout_max);
  cJSON_AddNumberToObject(to, "default", cfg->timeout_default);
  cJSON *req = cJSON_AddArrayToObject(s, "required");
  cJSON_AddItemToArray(req, cJSON_CreateString("code"));
  cJSON_AddBoolToObject(s, "additionalProperties", 0);
  return s;
}

static cJSON *output_schema(void) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "type", "object");
  cJSON *props = cJSON_AddObjectToObject(s, "properties");
  prop(props, "stdout", "string", "Standard output (at most the configured limit).");
  prop(props, "stderr", "string", "Standard error (at most the configured limit).");
  prop(props, "exit_code", "integer", "Exit status; 128+N when killed by signal N.");
  prop(props, "timed_out", "boolean", "The wall-clock limit ended the call.");
  prop(props, "duration_ms", "integer", "Wall-clock duration of the call.");
  prop(props, "truncated", "boolean", "Output beyond the limit was dropped.");
  prop(props, "memory_exceeded", "boolean", "The code ran out of its memory limit.");
  prop(props, "cpu_exceeded", "boolean", "The code used up its CPU time limit.");
  prop(props, "workspace_full", "boolean", "The session's workspace quota is used up.");
  cJSON *fl = prop(props, "files", "array", "Files new or changed in /work/output by this call.");
  cJSON *fli = cJSON_AddObjectToObject(fl, "items");
  cJSON_AddStringToObject(fli, "type", "object");
  cJSON *flp = cJSON_AddObjectToObject(fli, "properties");
  prop(flp, "name", "string", "Path relative to output/");
  prop(flp, "size", "integer", NULL);
  prop(flp, "mime_type", "string", NULL);
  prop(flp, "inlined", "boolean", "The content is in this result");
  prop(flp, "reason", "string", "Why it is not inlined");
  cJSON *sk = prop(props, "skipped_files", "array", "Entries of output/ that are not regular files.");
  cJSON *ski = cJSON_AddObjectToObject(sk, "items");
  cJSON_AddStringToObject(ski, "type", "object");
  cJSON *skp = cJSON_AddObjectToObject(ski, "properties");
  prop(skp, "name", "string", NULL);
  prop(skp, "reason", "string", NULL);
  prop(props, "sandbox_restarted", "boolean",
       "The sandbox was stopped during the call and restarts for the next call; files in /work are kept.");
  cJSON *req = cJSON_AddArrayToObject(s, "required");
  static const char *const required[] = {"stdout",    "stderr",          "exit_code",    "timed_out",
                                         "duration_ms", "truncated", "memory_exceeded", "cpu_exceeded",
                                         "workspace_full", "sandbox_restarted"};
  for (size_t i = 0; i < ARRAY_SIZE(required); i++)
    cJSON_AddItemToArray(req, cJSON_CreateString(required[i]));
  return s;
}

cJSON *tools_list(const struct mcp_config *cfg) {
  cJSON *r = cJSON_CreateObject();
  cJSON *tools = cJSON_AddArrayToObject(r, "tools");
  cJSON *t = cJSON_CreateObject();
  cJSON_AddItemToArray(tools, t);
  cJSON_AddStringToObject(t, "name", "execute_python");
  cJSON_AddStringToObject(t, "title", "Run Python");
  cJSON_AddStringToObject(
      t, "description",
      "Run Python 3 code in this session's isolated sandbox (gVisor, no network). The working directory "
      "/work persists between calls of the session: files and installed packages stay, variables do not "
      "(each call is a fresh process). Returns stdout, stderr and the exit code; isError is true when the "
      "code fails or times out.");
  cJSON_AddItemToObject(t, "inputSchema", input_schema(cfg));
  cJSON_AddItemToObject(t, "outputSchema", output_schema());
  cJSON *ann = cJSON_AddObjectToObject(t, "annotations");
  cJSON_AddBoolToObject(ann, "readOnlyHint", 0);
  cJSON_AddBoolToObject(ann, "destructiveHint", 0);
  cJSON_AddBoolToObject(ann, "idempotentHint", 0);
  cJSON_AddBoolToObject(ann, "openWorldHint", 0);
  return r;
}

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
      return arg_fail(msg, size, "env_variables: `%.64s` is not a valid name ([A-Za-z_][A-Za-z0-9_]*)",
                      it->string);
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
  memset(out, 0, sizeof(*out));
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
    if (packages_validate(pk, msg, size) < 0)
      return -1;
    if (cJSON_GetArraySize(pk) > 0)
      out->packages = pk;
  }
  return 0;
}

/* ---- results ---- */

char *utf8_sanitize(const char *data, size_t len) {
  struct buf b = {0};
  static const char repl[] = "\xEF\xBF\xBD";
  while (len > 0) {
    size_t ok = utf8_valid_prefix(data, len);
    if (buf_append(&b, data, ok) < 0)
      goto oom;
    data += ok;
    len -= ok;
    if (len == 0)
      break;
    /* one bad byte (or a NUL) becomes U+FFFD */
    if (buf_append(&b, repl, 3) < 0)
      goto oom;
    data++;
    len--;
  }
  if (b.data == NULL)
    return strdup("");
  return b.data;
oom:
  buf_free(&b);
  return NULL;
}

static void add_text(cJSON *content, const char *text) {
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "type", "text");
  cJSON_AddStringToObject(t, "text", text);
  cJSON_AddItemToArray(content, t);
}

cJSON *tool_error_result(const char *sentence) {
  cJSON *r = cJSON_CreateObject();
  add_text(cJSON_AddArrayToObject(r, "content"), sentence);
  cJSON_AddBoolToObject(r, "isError", 1);
  return r;
}

/* One sentence per limit the call hit, for the reader of the text content. */
static void limit_notes(const struct mcp_config *cfg, const struct call_result *res, struct buf *b) {
  char line[256];
  if (res->timed_out) {
    snprintf(line, sizeof(line), "The call was stopped at its wall-clock limit of %d s.", res->timeout_s);
    buf_append(b, line, strlen(line));
  }
  if (res->memory_exceeded || res->memory_error) {
    snprintf(line, sizeof(line), "%sThe code ran out of memory (limit %llu MiB per call).", b->len ? " " : "",
             (unsigned long long)(cfg->memory_limit >> 20));
    buf_append(b, line, strlen(line));
  }
  if (res->cpu_exceeded) {
    snprintf(line, sizeof(line), "%sThe code used up its CPU time limit of %d s.", b->len ? " " : "",
             cfg->cpu_limit);
    buf_append(b, line, strlen(line));
  }
  if (res->install_error) {
    snprintf(line, sizeof(line), "%sThe packages could not be installed (see stderr); the code did not run.",
             b->len ? " " : "");
    buf_append(b, line, strlen(line));
  }
  if (res->input_error) {
    snprintf(line, sizeof(line), "%sThe input files could not be written (see stderr); the code did not run.",
             b->len ? " " : "");
    buf_append(b, line, strlen(line));
  }
  if (res->workspace_full) {
    snprintf(line, sizeof(line), "%sThe workspace /work is full (quota %llu MiB per session); delete files to make room.",
             b->len ? " " : "", (unsigned long long)(cfg->workspace_quota >> 20));
    buf_append(b, line, strlen(line));
  }
  if (res->sandbox_lost) {
    snprintf(line, sizeof(line), "%sThe sandbox was stopped and restarts for the next call; files in /work are kept.",
             b->len ? " " : "");
    buf_append(b, line, strlen(line));
  }
  if (res->truncated) {
    snprintf(line, sizeof(line), "%sOutput beyond %llu bytes per stream was dropped.", b->len ? " " : "",
             (unsigned long long)cfg->output_limit);
    buf_append(b, line, strlen(line));
  }
}

cJSON *python_result(const struct mcp_config *cfg, const struct call_result *res) {
  cleanup_free char *out = utf8_sanitize(res->out.data ? res->out.data : "", res->out.len);
  cleanup_free char *err = utf8_sanitize(res->err.data ? res->err.data : "", res->err.len);
  if (out == NULL || err == NULL)
    return NULL;
  cJSON *sc = cJSON_CreateObject();
  cJSON_AddStringToObject(sc, "stdout", out);
  cJSON_AddStringToObject(sc, "stderr", err);
  cJSON_AddNumberToObject(sc, "exit_code", res->exit_code);
  cJSON_AddBoolToObject(sc, "timed_out", res->timed_out);
  cJSON_AddNumberToObject(sc, "duration_ms", (double)res->duration_ms);
  cJSON_AddBoolToObject(sc, "truncated", res->truncated);
  cJSON_AddBoolToObject(sc, "memory_exceeded", res->memory_exceeded || res->memory_error);
  cJSON_AddBoolToObject(sc, "cpu_exceeded", res->cpu_exceeded);
  cJSON_AddBoolToObject(sc, "workspace_full", res->workspace_full);
  cJSON_AddBoolToObject(sc, "sandbox_restarted", res->sandbox_lost);
  cJSON *r = cJSON_CreateObject();
  cJSON *content = cJSON_AddArrayToObject(r, "content");
  cleanup_free char *text = cJSON_PrintUnformatted(sc);
  add_text(content, text ? text : "{}");
  cleanup_buf struct buf notes = {0};
  limit_notes(cfg, res, &notes);
  if (notes.len > 0)
    add_text(content, notes.data);
  cJSON_AddItemToObject(r, "structuredContent", sc);
  cJSON_AddBoolToObject(r, "isError",
                        res->exit_code != 0 || res->timed_out || res->cancelled || res->sandbox_lost);
  return r;
}

/* What the call left in /work/output, read while the session is still
 * locked and the sandbox idle (every process of the call has ended). */
static uint64_t add_outputs(struct rpc_call *c) {
  const struct mcp_config *cfg = c->ctx->cfg;
  struct out_limits lim = {cfg->output_file_max, cfg->output_total_max, cfg->output_files_max};
  struct out_list out;
  mcp_error_t err = NULL;
  cJSON *sc = cJSON_GetObjectItemCaseSensitive(c->result, "structuredContent");
  if (outputs_collect(c->session->dirfd, &lim, &out, &err) < 0) {
    mcp_error_log_release(&err, "outputs");
    cJSON_AddArrayToObject(sc, "files");
    cJSON_AddArrayToObject(sc, "skipped_files");
    return 0;
  }
  files_add_outputs(c->result, sc, &out);
  uint64_t bytes = 0;
  for (size_t i = 0; i < out.n; i++)
    bytes += out.files[i].len;
  outputs_free(&out);
  /* The text block mirrors structuredContent, files included. */
  cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c->result, "content"), 0);
  cleanup_free char *text = cJSON_PrintUnformatted(sc);
  if (first != NULL && text != NULL)
    cJSON_ReplaceItemInObject(first, "text", cJSON_CreateString(text));
  return bytes;
}

#define INSTALLED_FILE "packages.installed"

/* Requirements installed in this session, one per line (session folder,
 * outside the workspace): asking again for them needs no download. */
static bool all_installed(struct session *s, const cJSON *packages) {
  cleanup_free char *text = NULL;
  mcp_error_t err = NULL;
  if (read_file_at(s->dirfd, INSTALLED_FILE, 1 << 20, &text, NULL, &err) < 0) {
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

static void remember_packages(struct session *s, const cJSON *packages) {
  if (all_installed(s, packages))
    return;
  cleanup_free char *text = NULL;
  size_t len = 0;
  mcp_error_t err = NULL;
  if (read_file_at(s->dirfd, INSTALLED_FILE, 1 << 20, &text, &len, &err) < 0)
    mcp_error_release(&err);
  cleanup_buf struct buf b = {0};
  buf_append(&b, text ? text : "", text ? len : 0);
  const cJSON *p;
  cJSON_ArrayForEach(p, packages) {
    buf_append(&b, p->valuestring, strlen(p->valuestring));
    buf_append(&b, "\n", 1);
  }
  if (b.len < (1 << 20) && write_file_atomic(s->dirfd, INSTALLED_FILE, b.data, b.len, 0600, &err) < 0)
    mcp_error_log_release(&err, "packages");
}

/* Download what the session does not have yet; -1 with c->result set. */
static int fetch_packages(struct rpc_call *c, const cJSON *packages) {
  if (all_installed(c->session, packages))
    return 0;
  char pip[1600] = "";
  mcp_error_t err = NULL;
  if (packages_fetch(c->ctx->cfg, packages, pip, sizeof(pip), &err) == 0)
    return 0;
  char sentence[1800];
  if (err->kind == MCP_ERR_INVALID)
    snprintf(sentence, sizeof(sentence), "The packages could not be downloaded as wheels from the package index; "
             "nothing was installed and the code did not run. pip said:\n%s", pip);
  else
    snprintf(sentence, sizeof(sentence), "The packages could not be downloaded (internal error); the code did not run.");
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
  struct audit_entry e = {.tool = "execute_python", .code = pa->code, .packages = pa->packages, .res = res,
                          .outcome = outcome, .duration_ms = ms, .bytes_returned = bytes};
  audit_call(c, &e);
}

static int run_python(struct rpc_call *c, const cJSON *args) {
  int64_t started = now_ms();
  char msg[300];
  struct python_args pa;
  if (python_args_parse(c->ctx->cfg, args, &pa, msg, sizeof(msg)) < 0) {
    char sentence[340];
    snprintf(sentence, sizeof(sentence), "Invalid arguments: %s.", msg);
    c->result = tool_error_result(sentence);
    struct python_args none = {.code = NULL};
    account(c, &none, NULL, OUTCOME_REFUSED, started);
    return 0;
  }
  struct call_stream cs;
  call_stream_init(&cs, c, pa.timeout_s);
  if (pa.packages != NULL && fetch_packages(c, pa.packages) < 0) {
    account(c, &pa, NULL, OUTCOME_REFUSED, started);
    return call_stream_finish(&cs, false);
  }
  char rpc_id[300];
  rpc_id_text(c->id, rpc_id, sizeof(rpc_id));
  struct call_request req = {.code = pa.code, .env = pa.env, .files = pa.files, .packages = pa.packages,
                             .rpc_id = rpc_id, .timeout_s = pa.timeout_s};
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
    remember_packages(c->session, pa.packages);
  c->result = python_result(c->ctx->cfg, &res);
  bool cancelled = res.cancelled;
  if (c->result == NULL)
    rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error");
  else
    res.files_bytes = add_outputs(c);
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
    return run_python(c, args);
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
