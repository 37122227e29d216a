/* get_run and cancel_run: thin tools over the runs module (runs.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "fcgi/files.h"
#include "fcgi/json_scan.h"
#include "fcgi/runs.h"
#include "fcgi/tools.h"

#define RUN_OUTPUTS "outputs.json" /* the first ended get_run's files, cached for later ones */
#define CANCEL_WAIT_MS 3000
#define OUTPUTS_LOCK_WAIT_MS 5000

struct run_args {
  const char *run;
  int wait_s;
  uint64_t offsets[2];
};

static int get_offset(const cJSON *args, const char *name, uint64_t *out, mcp_error_t *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);
  *out = 0;
  if (v == NULL || cJSON_IsNull(v))
    return 0;
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e15 ||
      v->valuedouble != (double)(int64_t)v->valuedouble)
    return mcp_fail_public(err, MCP_ERR_INVALID, "%s must be a non-negative integer", name);
  *out = (uint64_t)v->valuedouble;
  return 0;
}

/* {run, wait_seconds?, stdout_offset?, stderr_offset?} (get) or {run} (cancel). */
static int parse_args(const struct mcp_config *cfg, const cJSON *args, bool get, struct run_args *out,
                      mcp_error_t *err) {
  memset(out, 0, sizeof(*out));
  static const char *const names[] = {"run", "wait_seconds", "stdout_offset", "stderr_offset"};
  if (!cJSON_IsObject(args))
    return mcp_fail_public(err, MCP_ERR_INVALID, "arguments must be an object with `run`");
  const cJSON *it;
  cJSON_ArrayForEach(it, args) {
    bool known = false;
    for (size_t i = 0; i < (get ? ARRAY_SIZE(names) : 1) && !known; i++)
      known = strcmp(it->string, names[i]) == 0;
    if (!known)
      return mcp_fail_public(err, MCP_ERR_INVALID, "unknown argument `%.64s`; expected %s", it->string,
                             get ? "run, wait_seconds, stdout_offset, stderr_offset" : "run");
  }
  const cJSON *run = cJSON_GetObjectItemCaseSensitive(args, "run");
  if (!cJSON_IsString(run))
    return mcp_fail_public(err, MCP_ERR_INVALID,
                           "run is required and must be a string: the id a background call "
                           "returned");
  out->run = run->valuestring;
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(args, "wait_seconds");
  if (w != NULL && !cJSON_IsNull(w)) {
    if (!cJSON_IsNumber(w) || w->valuedouble < 0 || w->valuedouble > cfg->run_wait_max ||
        w->valuedouble != (double)(int)w->valuedouble)
      return mcp_fail_public(err, MCP_ERR_INVALID, "wait_seconds must be an integer from 0 to %d", cfg->run_wait_max);
    out->wait_s = (int)w->valuedouble;
  }
  if (get_offset(args, "stdout_offset", &out->offsets[0], err) < 0 ||
      get_offset(args, "stderr_offset", &out->offsets[1], err) < 0)
    return -1;
  return 0;
}

static void invalid(struct rpc_call *c, mcp_error_t *err) {
  char sentence[400];
  snprintf(sentence, sizeof(sentence), "Invalid arguments: %s.", mcp_error_public(*err));
  mcp_error_release(err);
  c->result = tool_error_result(sentence);
}

/* The run named, for this token (and over a 2025 session: of this session). */
static int open_run(struct rpc_call *c, const char *id, struct run *r) {
  mcp_error_t err = NULL;
  const char *own = c->modern || c->session == NULL ? NULL : c->session->id;
  if (run_open(c->ctx->store, id, c->http->token_id, own, r, &err) == 0)
    return 0;
  if (err->kind == MCP_ERR_NOT_FOUND) {
    char sentence[400];
    snprintf(sentence, sizeof(sentence), "%s.", mcp_error_public(err));
    c->result = tool_error_result(sentence);
    mcp_error_release(&err);
  } else {
    mcp_error_log_release(&err, "run");
    c->result = tool_error_result("The run could not be opened (internal error); try again.");
  }
  return -1;
}

/* The output of one stream from its offset, and the offset after it. */
static int add_output(const struct mcp_config *cfg, struct run *r, cJSON *sc, bool err_stream, uint64_t offset) {
  cleanup_buf struct buf b = {0};
  uint64_t size = 0;
  mcp_error_t err = NULL;
  if (run_output(r, err_stream, offset, cfg->output_limit, &b, &size, &err) < 0) {
    mcp_error_log_release(&err, "run output");
    return -1;
  }
  cleanup_free char *text = utf8_sanitize(b.data ? b.data : "", b.len);
  cJSON_AddStringToObject(sc, err_stream ? "stderr" : "stdout", text ? text : "");
  cJSON_AddNumberToObject(sc, err_stream ? "stderr_offset" : "stdout_offset", (double)(offset + b.len));
  return 0;
}

/* The result fields of done.json (bounded and typed again: the executor
 * wrote part of it). */
static void add_result(cJSON *sc, const cJSON *done) {
  struct call_result res = {0};
  cleanup_free char *text = cJSON_PrintUnformatted(done);
  if (text == NULL || call_result_parse(text, strlen(text), &res) < 0)
    return;
  cJSON_AddNumberToObject(sc, "exit_code", res.exit_code);
  cJSON_AddBoolToObject(sc, "timed_out", res.timed_out);
  cJSON_AddNumberToObject(sc, "duration_ms", (double)res.duration_ms);
  cJSON_AddBoolToObject(sc, "truncated", res.truncated);
  cJSON_AddBoolToObject(sc, "memory_exceeded", res.memory_exceeded || res.memory_error);
  cJSON_AddBoolToObject(sc, "cpu_exceeded", res.cpu_exceeded);
  cJSON_AddBoolToObject(sc, "processes_exceeded", res.processes_exceeded);
  cJSON_AddBoolToObject(sc, "workspace_full", res.workspace_full);
  cJSON_AddBoolToObject(sc, "sandbox_restarted", res.sandbox_lost);
  cJSON_AddBoolToObject(sc, "egress_limited", res.egress_limited);
  cJSON_AddBoolToObject(sc, "output_truncated",
                        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(done, "output_truncated")));
  if (res.persistent) {
    cJSON_AddBoolToObject(sc, "state_lost", res.state_lost);
    cleanup_free char *value = res.value != NULL ? utf8_sanitize(res.value, strlen(res.value)) : NULL;
    if (value != NULL)
      cJSON_AddStringToObject(sc, "value", value);
  }
  call_result_free(&res);
}

static bool run_failed(const cJSON *sc, enum run_status status) {
  const cJSON *code = cJSON_GetObjectItemCaseSensitive(sc, "exit_code");
  return status == RUN_LOST || status == RUN_CANCELLED || status == RUN_TIMED_OUT ||
         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sc, "processes_exceeded")) ||
         (cJSON_IsNumber(code) && code->valuedouble != 0);
}

static void add_text(cJSON *content, const char *text) {
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "type", "text");
  cJSON_AddStringToObject(t, "text", text);
  cJSON_AddItemToArray(content, t);
}

/* The files the ended run left in output/: collected once, as a call's
 * are (under the session's lock, against its manifest), then kept with
 * the run for later get_run calls. */
void run_tools_add_files(struct rpc_call *c, struct run *r) {
  cleanup_free char *cached = NULL;
  size_t len = 0;
  mcp_error_t err = NULL;
  cJSON *sc = cJSON_GetObjectItemCaseSensitive(c->result, "structuredContent");
  if (read_file_at(r->dirfd, RUN_OUTPUTS, 64 << 20, &cached, &len, &err) == 0) {
    cleanup_cjson cJSON *o = cJSON_ParseWithLength(cached, len);
    cJSON *blocks = cJSON_DetachItemFromObjectCaseSensitive(o, "content");
    cJSON *content = cJSON_GetObjectItemCaseSensitive(c->result, "content");
    cJSON *b;
    while (cJSON_IsArray(blocks) && (b = cJSON_DetachItemFromArray(blocks, 0)) != NULL)
      cJSON_AddItemToArray(content, b);
    cJSON_Delete(blocks);
    static const char *const lists[] = {"files", "skipped_files"};
    for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
      cJSON *l = cJSON_DetachItemFromObjectCaseSensitive(o, lists[i]);
      cJSON_AddItemToObject(sc, lists[i], l != NULL ? l : cJSON_CreateArray());
    }
    return;
  }
  mcp_error_release(&err);
  if (session_lock(&r->session, OUTPUTS_LOCK_WAIT_MS, &err) < 0) {
    mcp_error_release(&err); /* another call runs: the files come with a later get_run */
    return;
  }
  struct session *own = c->session;
  c->session = &r->session;
  cJSON *content = cJSON_GetObjectItemCaseSensitive(c->result, "content");
  int before = cJSON_GetArraySize(content);
  results_add_outputs(c);
  c->session = own;
  session_unlock(&r->session);
  cleanup_cjson cJSON *keep = cJSON_CreateObject();
  cJSON *blocks = cJSON_AddArrayToObject(keep, "content");
  for (int i = before; i < cJSON_GetArraySize(content); i++)
    cJSON_AddItemToArray(blocks, cJSON_Duplicate(cJSON_GetArrayItem(content, i), 1));
  cJSON_AddItemToObject(keep, "files", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(sc, "files"), 1));
  cJSON_AddItemToObject(keep, "skipped_files",
                        cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(sc, "skipped_files"), 1));
  cleanup_free char *text = cJSON_PrintUnformatted(keep);
  if (text != NULL && write_file_atomic(r->dirfd, RUN_OUTPUTS, text, strlen(text), 0600, &err) < 0)
    mcp_error_log_release(&err, "run outputs");
}

/* The result of get_run (and cancel_run): status, output, and once ended
 * the fields and files of a finished call. */
static int run_result(struct rpc_call *c, struct run *r, enum run_status status, const cJSON *done,
                      const uint64_t offsets[2]) {
  const struct mcp_config *cfg = c->ctx->cfg;
  cJSON *sc = cJSON_CreateObject();
  cJSON_AddStringToObject(sc, "run", r->id);
  cJSON_AddStringToObject(sc, "status", run_status_name(status));
  if (add_output(cfg, r, sc, false, offsets[0]) < 0 || add_output(cfg, r, sc, true, offsets[1]) < 0) {
    cJSON_Delete(sc);
    c->result = tool_error_result("The run's output could not be read (internal error); try again.");
    return 0;
  }
  if (done != NULL)
    add_result(sc, done);
  c->result = cJSON_CreateObject();
  cJSON *content = cJSON_AddArrayToObject(c->result, "content");
  add_text(content, "{}");
  cJSON_AddItemToObject(c->result, "structuredContent", sc);
  cJSON_AddBoolToObject(c->result, "isError", run_failed(sc, status));
  if (status == RUN_LOST)
    add_text(content, "The run was lost: its sandbox stopped under it (the service restarted, or the sandbox was "
                      "killed); what it wrote until then is kept.");
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sc, "processes_exceeded")))
    add_text(content, "The run was stopped: its processes (a fork bomb?) made the sandbox hold too many host tasks. "
                      "The sandbox restarts; files in /work are kept.");
  if (status != RUN_RUNNING && done != NULL)
    run_tools_add_files(c, r);
  cleanup_free char *text = cJSON_PrintUnformatted(sc);
  cJSON_ReplaceItemInObject(cJSON_GetArrayItem(content, 0), "text", cJSON_CreateString(text ? text : "{}"));
  return 0;
}

static int answer(struct rpc_call *c, struct run *r, const uint64_t offsets[2], int64_t deadline_ms) {
  enum run_status status;
  cleanup_cjson cJSON *done = NULL;
  mcp_error_t err = NULL;
  if (run_wait(r, deadline_ms, &status, &done, &err) < 0) {
    mcp_error_log_release(&err, "run");
    c->result = tool_error_result("The run could not be read (internal error); try again.");
    return 0;
  }
  return run_result(c, r, status, done, offsets);
}

/* get_run (get) or cancel_run: the run named, for this caller, answered
 * once it ended or at the wait's end. */
static int run_tool(struct rpc_call *c, const cJSON *args, bool get) {
  struct run_args a;
  mcp_error_t err = NULL;
  if (parse_args(c->ctx->cfg, args, get, &a, &err) < 0) {
    invalid(c, &err);
    return 0;
  }
  struct run r;
  if (open_run(c, a.run, &r) < 0)
    return 0;
  if (!get && run_cancel(c->ctx->cfg, &r, &err) < 0)
    mcp_error_log_release(&err, "cancel_run"); /* no supervisor: the run is lost, and says so */
  int ret = answer(c, &r, a.offsets, now_ms() + (get ? (int64_t)a.wait_s * 1000 : CANCEL_WAIT_MS));
  run_close(&r);
  return ret;
}

int run_tools_get(struct rpc_call *c, const cJSON *args) { return run_tool(c, args, true); }

int run_tools_cancel(struct rpc_call *c, const cJSON *args) { return run_tool(c, args, false); }
