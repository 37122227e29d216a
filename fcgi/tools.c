#include "config.h"

#include "fcgi/tools.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/metrics.h"
#include "common/util.h"
#include "fcgi/audit.h"
#include "fcgi/egress.h"
#include "fcgi/files.h"
#include "fcgi/handles.h"
#include "fcgi/json_scan.h"
#include "fcgi/runs.h"
#include "fcgi/stream.h"
#include "fcgi/tasks.h"
#include "sandbox/bundle.h"

/* Beyond a call's own limits (and ready_wait): the supervisor's grace
 * (call.c), and the time a client gets to take the answer. */
#define CALL_SLACK_S 40
#define RESULT_GRACE_S 30

/* ---- arguments ---- */

static bool env_name_valid(const char *s) {
  if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
    return false;
  for (s++; *s; s++)
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
      return false;
  return true;
}

static int parse_env(const cJSON *env, mcp_error_t *err) {
  if (!cJSON_IsObject(env))
    return mcp_fail_public(err, MCP_ERR_INVALID, "env_variables must be an object whose values are strings");
  int n = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, env) {
    if (++n > MAX_ENV_VARS)
      return mcp_fail_public(err, MCP_ERR_INVALID, "env_variables: at most %d variables", MAX_ENV_VARS);
    if (strlen(it->string) > MAX_ENV_NAME || !env_name_valid(it->string))
      return mcp_fail_public(err, MCP_ERR_INVALID,
                             "env_variables: `%.64s` is not a valid name ([A-Za-z_][A-Za-z0-9_]*)", it->string);
    if (!cJSON_IsString(it))
      return mcp_fail_public(err, MCP_ERR_INVALID, "env_variables: the value of %.64s must be a string", it->string);
    if (strlen(it->valuestring) > MAX_ENV_VALUE)
      return mcp_fail_public(err, MCP_ERR_INVALID, "env_variables: the value of %.64s is longer than %d bytes",
                             it->string, MAX_ENV_VALUE);
  }
  return 0;
}

static const char *const arg_names[] = {"code",    "packages",     "env_variables", "timeout_seconds", "files",
                                        "sandbox", "egress_allow", "persistent",    "reset",           "background"};

static int check_names(const cJSON *args, mcp_error_t *err) {
  const cJSON *it;
  cJSON_ArrayForEach(it, args) {
    bool known = false;
    for (size_t i = 0; i < ARRAY_SIZE(arg_names) && !known; i++)
      known = strcmp(it->string, arg_names[i]) == 0;
    if (!known)
      return mcp_fail_public(
          err, MCP_ERR_INVALID,
          "unknown argument `%.64s`; expected code, packages, env_variables, timeout_seconds, files, "
          "sandbox, egress_allow, persistent, reset, background",
          it->string);
  }
  return 0;
}

/* max: timeout_max, or background_timeout_max for a background run. */
static int parse_timeout(int max, bool background, const cJSON *to, int *out, mcp_error_t *err) {
  /* range before the integer test: converting a huge double is undefined */
  if (!cJSON_IsNumber(to) || to->valuedouble < 1 || to->valuedouble > max ||
      to->valuedouble != (double)(int64_t)to->valuedouble)
    return mcp_fail_public(err, MCP_ERR_INVALID, "timeout_seconds must be an integer from 1 to %d%s", max,
                           background ? " for a background run" : "");
  *out = (int)to->valuedouble;
  return 0;
}

/* persistent, reset, background: booleans. */
static int parse_modes(const cJSON *args, struct code_args *out, mcp_error_t *err) {
  static const char *const names[] = {"persistent", "reset", "background"};
  bool *flags[] = {&out->persistent, &out->reset, &out->background};
  for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, names[i]);
    if (v != NULL && !cJSON_IsNull(v) && !cJSON_IsBool(v))
      return mcp_fail_public(err, MCP_ERR_INVALID, "%s must be a boolean", names[i]);
    *flags[i] = cJSON_IsTrue(v);
  }
  return 0;
}

/* An argument that is absent or null is not given. */
static const cJSON *given(const cJSON *args, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);
  return cJSON_IsNull(v) ? NULL : v;
}

int code_args_parse(const struct mcp_config *cfg, const struct lang *lang, const cJSON *args, struct code_args *out,
                    mcp_error_t *err) {
  return code_args_parse_task(cfg, lang, args, false, out, err);
}

int code_args_parse_task(const struct mcp_config *cfg, const struct lang *lang, const cJSON *args, bool task,
                         struct code_args *out, mcp_error_t *err) {
  memset(out, 0, sizeof(*out));
  out->lang = lang;
  out->timeout_s = cfg->timeout_default;
  if (args != NULL && !cJSON_IsObject(args) && !cJSON_IsNull(args))
    return mcp_fail_public(err, MCP_ERR_INVALID, "arguments must be an object");
  if (check_names(args, err) < 0)
    return -1;
  const cJSON *code = cJSON_GetObjectItemCaseSensitive(args, "code");
  if (!cJSON_IsString(code))
    return mcp_fail_public(err, MCP_ERR_INVALID, "code is required and must be a string");
  if (strlen(code->valuestring) > cfg->max_code)
    return mcp_fail_public(err, MCP_ERR_INVALID, "code is longer than the limit of %llu bytes",
                           (unsigned long long)cfg->max_code);
  out->code = code->valuestring;
  if (parse_modes(args, out, err) < 0)
    return -1;
  out->task = task;
  out->background = out->background || task;
  int max = out->background ? cfg->background_timeout_max : cfg->timeout_max;
  if (out->background)
    out->timeout_s = cfg->background_timeout_max;
  const cJSON *env = given(args, "env_variables"), *to = given(args, "timeout_seconds");
  const cJSON *files = given(args, "files"), *pk = given(args, "packages"), *sb = given(args, "sandbox");
  if (sb != NULL && !cJSON_IsString(sb))
    return mcp_fail_public(err, MCP_ERR_INVALID, "sandbox must be a string: a handle an earlier call returned");
  out->sandbox = sb != NULL ? sb->valuestring : NULL;
  if ((env != NULL && parse_env(env, err) < 0) ||
      (to != NULL && parse_timeout(max, out->background, to, &out->timeout_s, err) < 0) ||
      (files != NULL && files_validate(cfg, files, err) < 0) || (pk != NULL && lang->packages_validate(pk, err) < 0))
    return -1;
  const cJSON *eg = given(args, "egress_allow");
  if (eg != NULL && out->background)
    return mcp_fail_public(err, MCP_ERR_INVALID,
                           "egress_allow cannot be combined with background (a background run "
                           "has no network)");
  if (eg != NULL && egress_arg_parse(eg, out->egress_allow, sizeof(out->egress_allow), err) < 0)
    return -1;
  out->egress_given = eg != NULL;
  out->env = env;
  out->files = cJSON_GetArraySize(files) > 0 ? files : NULL;
  out->packages = cJSON_GetArraySize(pk) > 0 ? pk : NULL;
  return 0;
}

/* The specs, sorted, one per line: how a set is written down. */
static char *set_text(const cJSON *packages) {
  const char *v[64];
  size_t n = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, packages) {
    if (n < ARRAY_SIZE(v))
      v[n++] = p->valuestring;
  }
  for (size_t i = 1; i < n; i++) /* insertion sort: a few dozen at most */
    for (size_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
      const char *t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  struct buf b = {0};
  for (size_t i = 0; i < n; i++)
    if (buf_append(&b, v[i], strlen(v[i])) < 0 || buf_append(&b, "\n", 1) < 0) {
      buf_free(&b);
      return NULL;
    }
  char *text = xstrndup(b.data ? b.data : "", b.len);
  buf_free(&b);
  return text;
}

/* What the session installed (session folder, outside the workspace):
 * asking again for it needs no resolution.  Python: every spec asked for
 * is a line; JavaScript: the file is the set copied in last. */
static bool all_installed(struct session *s, const struct lang *lang, const cJSON *packages) {
  cleanup_free char *text = NULL;
  mcp_error_t err = NULL;
  if (read_file_at(s->dirfd, lang->installed_file, 1 << 20, &text, NULL, &err) < 0) {
    mcp_error_release(&err);
    return false;
  }
  if (lang->installed_is_set) {
    cleanup_free char *set = set_text(packages);
    return set != NULL && strcmp(set, text) == 0;
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

static void remember_packages(struct session *s, const struct lang *lang, const cJSON *packages) {
  if (all_installed(s, lang, packages))
    return;
  mcp_error_t err = NULL;
  if (lang->installed_is_set) {
    cleanup_free char *set = set_text(packages);
    if (set != NULL && write_file_atomic(s->dirfd, lang->installed_file, set, strlen(set), 0600, &err) < 0)
      mcp_error_log_release(&err, "packages");
    return;
  }
  cleanup_free char *text = NULL;
  size_t len = 0;
  if (read_file_at(s->dirfd, lang->installed_file, 1 << 20, &text, &len, &err) < 0)
    mcp_error_release(&err);
  cleanup_buf struct buf b = {0};
  buf_append(&b, text ? text : "", text ? len : 0);
  const cJSON *p;
  cJSON_ArrayForEach(p, packages) {
    buf_append(&b, p->valuestring, strlen(p->valuestring));
    buf_append(&b, "\n", 1);
  }
  if (b.len < (1 << 20) && write_file_atomic(s->dirfd, lang->installed_file, b.data, b.len, 0600, &err) < 0)
    mcp_error_log_release(&err, "packages");
}

/* The session's record is wrong (the code removed what was installed). */
static void forget_packages(struct session *s, const struct lang *lang) { unlinkat(s->dirfd, lang->installed_file, 0); }

/* The call's folder of resolved packages: <session>/packages/c-<16 hex>,
 * root's, which the session's sandbox sees at /opt/mcp/packages/<name>. */
static int call_folder(struct session *s, char name[24], mcp_error_t *err) {
  if (mkdirat(s->dirfd, SESSION_PACKAGES_DIR, 0755) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir %s", SESSION_PACKAGES_DIR);
  cleanup_close int pfd = openat(s->dirfd, SESSION_PACKAGES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (pfd < 0 || fchmod(pfd, 0755) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open %s", SESSION_PACKAGES_DIR);
  char rnd[33];
  random_hex32(rnd);
  snprintf(name, 24, "c-%.16s", rnd);
  if (mkdirat(pfd, name, 0755) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir %s/%s", SESSION_PACKAGES_DIR, name);
  int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fchmod(fd, 0755) < 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return mcp_fail(err, MCP_ERR_INTERNAL, e, "open %s/%s", SESSION_PACKAGES_DIR, name);
  }
  return fd;
}

static void call_folder_remove(struct session *s, const char *name) {
  if (name[0] == '\0')
    return;
  cleanup_close int pfd = openat(s->dirfd, SESSION_PACKAGES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  mcp_error_t err = NULL;
  if (pfd >= 0 && remove_tree_at(pfd, name, &err) < 0)
    mcp_error_log_release(&err, "packages: the call's folder");
}

/* Resolve what the session does not have yet into the call's folder
 * (named in dir; empty when nothing was fetched); -1 with c->result set
 * when that fails. */
static int fetch_packages(struct rpc_call *c, const struct code_args *ca, char dir[24]) {
  dir[0] = '\0';
  if (all_installed(c->session, ca->lang, ca->packages))
    return 0;
  mcp_error_t err = NULL;
  cleanup_close int dfd = call_folder(c->session, dir, &err);
  if (dfd >= 0 && ca->lang->packages_fetch(c->ctx->cfg, ca->packages, dfd, &err) == 0)
    return 0;
  call_folder_remove(c->session, dir);
  dir[0] = '\0';
  if (err->kind != MCP_ERR_INVALID) {
    mcp_error_log_release(&err, "packages");
    c->result = tool_error_result("The packages could not be fetched (internal error); the code did not run.");
    return -1;
  }
  c->result = tool_error_result(mcp_error_public(err));
  mcp_error_release(&err);
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
static void account(struct rpc_call *c, const struct code_args *pa, const struct call_result *res,
                    enum exec_outcome outcome, int64_t started) {
  int64_t ms = now_ms() - started;
  uint64_t bytes = res ? res->out.len + res->err.len + res->files_bytes : 0;
  metrics_execution(outcome, ms, c->http->token_id, bytes);
  if (pa->packages != NULL && res != NULL) {
    struct metrics *m = metrics_get();
    if (m != NULL)
      metrics_add(res->install_error ? &m->package_install_failures : &m->package_installs, 1);
  }
  struct audit_entry e = {.tool = pa->lang->tool,
                          .code = pa->code,
                          .packages = pa->packages,
                          .res = res,
                          .outcome = outcome,
                          .duration_ms = ms,
                          .bytes_returned = bytes};
  audit_call(c, &e);
}

/* The call's answer: the sandbox named in it (modern), then sent. */
static int finish(struct rpc_call *c, struct call_stream *cs, bool cancelled) {
  handles_note(c);
  return call_stream_finish(cs, cancelled);
}

/* One exchange with the sandbox: a call (streamed to the client), or the
 * start of a background run, which keeps the folder of its packages until
 * it ends (its supervisor removes it). */
static int one_call(struct rpc_call *c, const struct code_args *ca, const struct call_request *req,
                    struct call_stream *cs, struct call_result *res, mcp_error_t *err) {
  const struct mcp_config *cfg = c->ctx->cfg;
  int r = ca->background ? run_start(cfg, c->session, req, res, err)
                         : sandbox_call(cfg, c->session, req, call_stream_event, cs, res, err);
  if (!ca->background || r < 0)
    call_folder_remove(c->session, req->package_dir != NULL ? req->package_dir : "");
  return r;
}

/* The call's request, its packages resolved; the retry of a session whose
 * workspace lost what it installed (its code removed it): the executor
 * says so, the packages are resolved and the call (whose code did not
 * run) is made again, once.  -1 with c->result set when it failed. */
static int call_with_packages(struct rpc_call *c, const struct lang *lang, const struct code_args *ca,
                              struct call_request *req, struct call_stream *cs, struct call_result *res,
                              int64_t started) {
  char key[33] = "", dir[24] = "";
  if (ca->packages != NULL && lang->packages_key != NULL && lang->packages_key(ca->packages, key) < 0)
    key[0] = '\0';
  mcp_error_t err = NULL;
  for (int attempt = 0;; attempt++) {
    if (ca->packages != NULL && fetch_packages(c, ca, dir) < 0) {
      account(c, ca, NULL, OUTCOME_REFUSED, started);
      return -1;
    }
    req->npm_stage = key[0] ? key : NULL;
    req->package_dir = dir[0] ? dir : NULL;
    if (one_call(c, ca, req, cs, res, &err) < 0) {
      c->result = tool_error_result(mcp_error_public(err));
      bool busy = err->kind == MCP_ERR_BUSY || err->kind == MCP_ERR_CAPACITY;
      if (!busy)
        mcp_error_log_release(&err, "tools/call");
      mcp_error_release(&err);
      account(c, ca, NULL, busy ? OUTCOME_BUSY : OUTCOME_SANDBOX, started);
      call_result_free(res);
      return -1;
    }
    if (!res->packages_missing || dir[0] != '\0' || attempt > 0)
      return 0;
    forget_packages(c->session, lang);
    call_result_free(res);
  }
}

/* The result of an exchange that went through. */
static void call_result_to_client(struct rpc_call *c, const struct lang *lang, const struct code_args *ca,
                                  struct call_result *res) {
  res->timeout_s = ca->timeout_s;
  if (ca->packages != NULL && !ca->background && !res->install_error && !res->input_error && !res->sandbox_lost)
    remember_packages(c->session, lang, ca->packages);
  if (res->refused[0] != '\0')
    c->result = tool_error_result(refused_sentence(res->refused));
  else if (ca->task)
    c->result = tasks_created(c, res->run);
  else if (ca->background)
    c->result = run_started_result(c->ctx->cfg, res);
  else
    c->result = call_tool_result(c->ctx->cfg, res);
  if (c->result == NULL)
    rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error");
  else if (!ca->background && res->refused[0] == '\0')
    res->files_bytes = results_add_outputs(c);
}

int64_t call_budget_s(const struct mcp_config *cfg, int timeout_s, bool persistent, bool packages) {
  return (int64_t)cfg->busy_wait + cfg->ready_wait + timeout_s + cfg->capacity_wait + CALL_SLACK_S + RESULT_GRACE_S +
         (persistent ? cfg->interrupt_grace : 0) + (packages ? cfg->package_timeout : 0);
}

static int execute(struct rpc_call *c, const struct lang *lang, const struct code_args *ca, int64_t started) {
  /* The responder may spend this long on the call; past it, a client that
   * has not taken its answer is cut off (responder.c's watchdog). */
  const struct mcp_config *cfg = c->ctx->cfg;
  mcp_error_t err = NULL;
  int64_t budget_s = call_budget_s(cfg, ca->background ? 0 : ca->timeout_s, ca->persistent, ca->packages != NULL);
  http_set_deadline(c->sink, now_ms() + budget_s * 1000);
  struct call_stream cs;
  call_stream_init(&cs, c, ca->timeout_s);
  /* The call's network: the deployment's policy, the token's, narrowed
   * by the call's egress_allow (fcgi/egress.h); none for a run. */
  struct egress_plan plan;
  if (egress_plan_for(cfg, c->http->token_id, ca->egress_given ? ca->egress_allow : NULL, &plan, &err) < 0) {
    c->result = tool_error_result(mcp_error_public(err));
    if (err->kind != MCP_ERR_INVALID)
      mcp_error_log_release(&err, "egress");
    mcp_error_release(&err);
    account(c, ca, NULL, OUTCOME_REFUSED, started);
    return finish(c, &cs, false);
  }
  char rpc_id[300];
  rpc_id_text(c->id, rpc_id, sizeof(rpc_id));
  struct call_request req = {.code = ca->code,
                             .egress = ca->background ? NULL : &plan,
                             .env = ca->env,
                             .files = ca->files,
                             .packages = lang->packages_in_request ? ca->packages : NULL,
                             .language = lang->name,
                             .rpc_id = rpc_id,
                             .token = c->http->token_id,
                             .timeout_s = ca->timeout_s,
                             .persistent = ca->persistent,
                             .reset = ca->reset};
  struct call_result res;
  if (call_with_packages(c, lang, ca, &req, &cs, &res, started) < 0)
    return finish(c, &cs, false);
  call_result_to_client(c, lang, ca, &res);
  bool cancelled = res.cancelled;
  account(c, ca, &res, result_outcome(&res), started);
  call_result_free(&res);
  return finish(c, &cs, cancelled);
}

/* The sandbox of the call: a handle's, a new one (modern), or the
 * session's own (2025). */
static int bind_sandbox(struct rpc_call *c, const struct code_args *ca, struct session *s) {
  if (c->modern)
    return handles_bind(c, ca->sandbox, s);
  return handles_check_own(c, ca->sandbox);
}

static int run_code(struct rpc_call *c, const struct lang *lang, const cJSON *args) {
  int64_t started = now_ms();
  struct code_args ca;
  mcp_error_t err = NULL;
  enum task_plan plan = tasks_plan(c->ctx->cfg, c->modern, c->modern && tasks_declared(c->params), args);
  if (plan == TASK_NEEDS_EXTENSION) {
    char what[200];
    snprintf(what, sizeof(what),
             "timeout_seconds above %d runs only as a task (declare " TASKS_EXTENSION
             ") or as a background run (background: true)",
             c->ctx->cfg->timeout_max);
    return tasks_missing_extension(c, what);
  }
  if (code_args_parse_task(c->ctx->cfg, lang, args, plan == TASK_CREATE, &ca, &err) < 0) {
    char sentence[400];
    snprintf(sentence, sizeof(sentence), "Invalid arguments: %s.", mcp_error_public(err));
    mcp_error_release(&err);
    c->result = tool_error_result(sentence);
    struct code_args none = {.lang = lang, .code = NULL};
    account(c, &none, NULL, OUTCOME_REFUSED, started);
    return 0;
  }
  struct session s;
  if (bind_sandbox(c, &ca, &s) < 0) {
    account(c, &ca, NULL, OUTCOME_REFUSED, started);
    return 0;
  }
  int r = execute(c, lang, &ca, started);
  if (c->modern)
    handles_release(c);
  return r;
}

int tools_call(struct rpc_call *c) {
  if (!cJSON_IsObject(c->params))
    return rpc_fail(c, RPC_INVALID_PARAMS, "tools/call: params must be an object with name and arguments");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(c->params, "name");
  if (!cJSON_IsString(name))
    return rpc_fail(c, RPC_INVALID_PARAMS, "tools/call: params.name must be a string");
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
  const struct lang *lang = lang_by_tool(name->valuestring);
  if (lang != NULL && lang->available(c->ctx->cfg))
    return run_code(c, lang, args);
  if (c->modern && strcmp(name->valuestring, CLOSE_SANDBOX) == 0)
    return handles_close(c, args);
  if (strcmp(name->valuestring, GET_RUN) == 0)
    return run_tools_get(c, args);
  if (strcmp(name->valuestring, CANCEL_RUN) == 0)
    return run_tools_cancel(c, args);
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
