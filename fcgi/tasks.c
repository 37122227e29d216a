/* The tasks extension over background runs (see tasks.h). */
#include "config.h"

#include "fcgi/tasks.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/util.h"
#include "fcgi/handles.h"
#include "fcgi/json_scan.h"
#include "fcgi/runs.h"
#include "fcgi/tools.h"

#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define POLL_MIN_MS 500
#define RECORD_MAX (64 << 10)
#define TAIL_BYTES 256 /* of stdout read for the newest output line */

/* A run as a task: what tasks/get shows. */
struct task {
  struct run run;
  enum run_status status;
  cJSON *done;                                 /* done.json once it ended, or NULL */
  int64_t created_ms, updated_ms, run_last_ms; /* wall clock */
  int timeout_s;
};

static const cJSON *get(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

/* ---- which calls become tasks ---- */

bool tasks_declared(const cJSON *params) {
  return cJSON_IsObject(get(get(get(get(params, "_meta"), META_CAPS), "extensions"), TASKS_EXTENSION));
}

enum task_plan tasks_plan(const struct mcp_config *cfg, bool modern, bool declared, const cJSON *args) {
  if (!modern || !cJSON_IsObject(args))
    return TASK_PLAIN;
  if (cJSON_IsTrue(get(args, "background")))
    return declared ? TASK_CREATE : TASK_PLAIN;
  const cJSON *to = get(args, "timeout_seconds"), *eg = get(args, "egress_allow");
  if (eg != NULL && !cJSON_IsNull(eg)) /* a run has no network: a plain call */
    return TASK_PLAIN;
  double t = cfg->timeout_default;
  if (to != NULL && !cJSON_IsNull(to)) {
    if (!cJSON_IsNumber(to))
      return TASK_PLAIN;
    t = to->valuedouble;
  }
  double task_max = cfg->background_timeout_max, plain_max = cfg->timeout_max;
  /* Beyond both bounds the tool refuses it, naming the larger one. */
  if (t > task_max && t > plain_max)
    return declared && task_max >= plain_max ? TASK_CREATE : TASK_PLAIN;
  /* Only a task can take it; without the extension, -32021 for a value a
   * task could take (range before the integer test: converting a huge
   * double is undefined; here t <= task_max). */
  if (t > plain_max)
    return declared ? TASK_CREATE : t == (double)(int64_t)t ? TASK_NEEDS_EXTENSION : TASK_PLAIN;
  return declared && t > cfg->task_after && t <= task_max ? TASK_CREATE : TASK_PLAIN;
}

int tasks_missing_extension(struct rpc_call *c, const char *what) {
  cJSON *data = cJSON_CreateObject();
  cJSON *ext = cJSON_AddObjectToObject(cJSON_AddObjectToObject(data, "requiredCapabilities"), "extensions");
  cJSON_AddObjectToObject(ext, TASKS_EXTENSION);
  cJSON_Delete(c->error_data);
  c->error_data = data;
  c->http_status = 400;
  return rpc_fail(c, MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability: %s", what);
}

void tasks_capability(cJSON *capabilities) {
  cJSON *ext = cJSON_GetObjectItemCaseSensitive(capabilities, "extensions");
  if (ext == NULL)
    ext = cJSON_AddObjectToObject(capabilities, "extensions");
  cJSON_AddObjectToObject(ext, TASKS_EXTENSION);
}

static const char *const methods[] = {"tasks/get", "tasks/update", "tasks/cancel"};

bool tasks_method(const char *method) {
  for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
    if (strcmp(method, methods[i]) == 0)
      return true;
  return false;
}

/* ---- a run read as a task ---- */

static int64_t mtime_ms(int dirfd, const char *name) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return 0;
  return stat_mtime_ms(&st);
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* run.json: its start and wall-clock limit (the folder's time when it is unreadable). */
static void load_record(struct task *t) {
  cleanup_free char *text = NULL;
  size_t len = 0;
  mcp_error_t err = NULL;
  t->created_ms = mtime_ms(t->run.dirfd, RUN_RECORD);
  if (read_file_at(t->run.dirfd, RUN_RECORD, RECORD_MAX, &text, &len, &err) < 0) {
    mcp_error_release(&err);
    return;
  }
  cleanup_cjson cJSON *rec = cJSON_ParseWithLength(text, len);
  const cJSON *started = get(rec, "started"), *to = get(rec, "timeout_s");
  if (cJSON_IsNumber(started) && started->valuedouble > 0 && started->valuedouble < 1e15)
    t->created_ms = (int64_t)started->valuedouble;
  if (cJSON_IsNumber(to) && to->valuedouble >= 0 && to->valuedouble < 1e9)
    t->timeout_s = (int)to->valuedouble;
}

/* Its status and times: the run's end (done.json), or while it works (or
 * was lost without an end) its newest output. */
static int load_state(struct task *t, mcp_error_t *err) {
  if (run_status(&t->run, &t->status, &t->done, err) < 0)
    return -1;
  int64_t end = t->done != NULL ? mtime_ms(t->run.dirfd, RUN_DONE_FILE) : 0;
  t->run_last_ms = max64(t->created_ms, end);
  t->updated_ms = end > 0 ? end
                          : max64(t->created_ms, max64(mtime_ms(t->run.dirfd, RUN_STDOUT_FILE),
                                                       mtime_ms(t->run.dirfd, RUN_STDERR_FILE)));
  t->updated_ms = max64(t->updated_ms, t->created_ms);
  return 0;
}

static void task_close(struct task *t) {
  cJSON_Delete(t->done);
  t->done = NULL;
  run_close(&t->run);
}

/* Nothing open yet: task_close() may run on it. */
static void task_init(struct task *t) {
  *t = (struct task){.run = {.dirfd = -1, .session = {.dirfd = -1, .lock_fd = -1}}, .status = RUN_LOST};
}

/* Open the task id names, for the caller's token. */
static int open_task_id(struct rpc_call *c, const char *id, struct task *t) {
  task_init(t);
  mcp_error_t err = NULL;
  if (run_open(c->ctx->store, id, c->http->token_id, NULL, &t->run, &err) < 0) {
    bool missing = err->kind == MCP_ERR_NOT_FOUND;
    if (!missing)
      mcp_error_log_release(&err, "task");
    mcp_error_release(&err);
    return missing ? rpc_fail(c, RPC_INVALID_PARAMS,
                              "Failed to retrieve task: Task not found (it does not exist, belongs to another "
                              "token, or its sandbox has ended or expired)")
                   : rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error: the task could not be read; try again");
  }
  load_record(t);
  if (load_state(t, &err) < 0) {
    mcp_error_log_release(&err, "task");
    task_close(t);
    return rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error: the task could not be read; try again");
  }
  return 0;
}

static int open_task(struct rpc_call *c, struct task *t) {
  task_init(t);
  const cJSON *id = get(c->params, "taskId");
  if (!cJSON_IsString(id) || id->valuestring[0] == '\0')
    return rpc_fail(c, RPC_INVALID_PARAMS,
                    "Invalid params: taskId is required (a string: the taskId a tools/call answered with)");
  return open_task_id(c, id->valuestring, t);
}

/* ---- the Task object ---- */

static void iso_time(int64_t ms, char out[40]) {
  time_t s = (time_t)(ms / 1000);
  struct tm tm;
  size_t n = gmtime_r(&s, &tm) != NULL ? strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm) : 0;
  snprintf(out + n, 40 - n, ".%03dZ", (int)(ms % 1000));
}

/* failed: the run was lost and left no end (its supervisor died with the service). */
static const char *status_name(const struct task *t) {
  static const char *const names[] = {
      [RUN_RUNNING] = "working",     [RUN_FINISHED] = "completed", [RUN_TIMED_OUT] = "completed",
      [RUN_CANCELLED] = "cancelled", [RUN_LOST] = "completed",
  };
  return t->status == RUN_LOST && t->done == NULL ? "failed" : names[t->status];
}

/* The newest whole line of its stdout (at most TAIL_BYTES), or "". */
static void newest_line(struct task *t, char *out, size_t size) {
  cleanup_buf struct buf b = {0};
  uint64_t total = 0;
  mcp_error_t err = NULL;
  out[0] = '\0';
  if (run_output(&t->run, false, UINT64_MAX, 0, &b, &total, &err) < 0 ||
      run_output(&t->run, false, total > TAIL_BYTES ? total - TAIL_BYTES : 0, TAIL_BYTES, &b, &total, &err) < 0) {
    mcp_error_release(&err);
    return;
  }
  size_t end = b.len;
  while (end > 0 && (b.data[end - 1] == '\n' || b.data[end - 1] == '\r'))
    end--;
  size_t start = end;
  while (start > 0 && b.data[start - 1] != '\n')
    start--;
  cleanup_free char *line = utf8_sanitize(b.data ? b.data + start : "", end - start);
  snprintf(out, size, "%s", line ? line : "");
}

static void status_message(struct task *t, char *out, size_t size) {
  const cJSON *ms = get(t->done, "duration_ms"), *code = get(t->done, "exit_code");
  char line[TAIL_BYTES + 1];
  if (t->status == RUN_RUNNING) {
    newest_line(t, line, sizeof(line));
    snprintf(out, size, "Running for %lld s (wall-clock limit %d s)%s%s", (long long)(wall_ms() - t->created_ms) / 1000,
             t->timeout_s, line[0] ? "; newest output: " : ".", line);
  } else if (t->status == RUN_CANCELLED)
    snprintf(out, size, "Cancelled; what it wrote until then can be read with get_run.");
  else if (t->status == RUN_LOST && t->done == NULL)
    snprintf(out, size, "Lost: the service restarted while it ran; what it wrote until then can be read with get_run.");
  else if (t->status == RUN_LOST)
    snprintf(out, size, "Its sandbox stopped under it; the result says why.");
  else if (t->status == RUN_TIMED_OUT)
    snprintf(out, size, "Stopped at its wall-clock limit of %d s.", t->timeout_s);
  else
    snprintf(out, size, "Finished with exit code %d after %.1f s.", cJSON_IsNumber(code) ? code->valueint : 0,
             cJSON_IsNumber(ms) ? ms->valuedouble / 1000 : 0.0);
}

/* ttlMs: from createdAt to the earliest moment the keeper may end the
 * task's sandbox (idle_timeout after the later of the run's end and the
 * sandbox's last use; after now while the run is active). */
static int64_t ttl_ms(const struct mcp_config *cfg, const struct task *t) {
  int64_t last = max64(t->run_last_ms, t->run.session.last_used_ms);
  if (t->status == RUN_RUNNING)
    last = max64(last, wall_ms());
  return last + (int64_t)cfg->idle_timeout * 1000 - t->created_ms;
}

static int64_t poll_ms(const struct mcp_config *cfg, const struct task *t) {
  int64_t p = (wall_ms() - t->created_ms) / 10,
          lo = POLL_MIN_MS < cfg->task_poll_max ? POLL_MIN_MS : cfg->task_poll_max;
  return p < lo ? lo : p > cfg->task_poll_max ? cfg->task_poll_max : p;
}

/* The fields every Task has (CreateTaskResult, tasks/get). */
static cJSON *task_fields(const struct mcp_config *cfg, struct task *t) {
  char created[40], updated[40], message[TAIL_BYTES + 200];
  iso_time(t->created_ms, created);
  iso_time(t->updated_ms, updated);
  status_message(t, message, sizeof(message));
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "taskId", t->run.id);
  cJSON_AddStringToObject(o, "status", status_name(t));
  cJSON_AddStringToObject(o, "statusMessage", message);
  cJSON_AddStringToObject(o, "createdAt", created);
  cJSON_AddStringToObject(o, "lastUpdatedAt", updated);
  cJSON_AddNumberToObject(o, "ttlMs", (double)ttl_ms(cfg, t));
  cJSON_AddNumberToObject(o, "pollIntervalMs", (double)poll_ms(cfg, t));
  return o;
}

cJSON *tasks_created(struct rpc_call *c, const char *run_id) {
  struct task t;
  if (open_task_id(c, run_id, &t) < 0)
    return NULL;
  cJSON *o = task_fields(c->ctx->cfg, &t);
  task_close(&t);
  cJSON_AddStringToObject(o, "resultType", "task");
  return o;
}

/* ---- tasks/get's payload ---- */

/* The call's fields from done.json, its output from the run's files
 * (output_limit bytes each, as a plain call keeps). */
static int load_result(const struct mcp_config *cfg, struct task *t, struct call_result *res) {
  *res = (struct call_result){0};
  cleanup_free char *text = cJSON_PrintUnformatted(t->done);
  mcp_error_t err = NULL;
  if (text == NULL || call_result_parse(text, strlen(text), res) < 0)
    res->exit_code = 255;
  res->timeout_s = t->timeout_s;
  if (run_output(&t->run, false, 0, cfg->output_limit, &res->out, &res->out_total, &err) < 0 ||
      run_output(&t->run, true, 0, cfg->output_limit, &res->err, &res->err_total, &err) < 0) {
    mcp_error_log_release(&err, "task output");
    call_result_free(res);
    return -1;
  }
  res->truncated = res->truncated || res->out_total > cfg->output_limit || res->err_total > cfg->output_limit ||
                   cJSON_IsTrue(get(t->done, "output_truncated"));
  return 0;
}

/* The CallToolResult a plain call of the same code returns: its output,
 * its files (collected once, as get_run does) and its sandbox. */
static cJSON *call_result_of(struct rpc_call *c, struct task *t) {
  const struct mcp_config *cfg = c->ctx->cfg;
  struct call_result res;
  if (load_result(cfg, t, &res) < 0)
    return NULL;
  cJSON *result = res.refused[0] ? tool_error_result(refused_sentence(res.refused)) : call_tool_result(cfg, &res);
  bool collect = res.refused[0] == '\0';
  call_result_free(&res);
  if (result == NULL)
    return NULL;
  cJSON *own_result = c->result;
  struct session *own = c->session;
  c->result = result;
  if (collect)
    run_tools_add_files(c, &t->run);
  c->session = &t->run.session;
  handles_note(c);
  c->session = own;
  c->result = own_result;
  cJSON_AddStringToObject(result, "resultType", "complete");
  return result;
}

static cJSON *lost_error(void) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddNumberToObject(e, "code", RPC_INTERNAL_ERROR);
  cJSON_AddStringToObject(e, "message",
                          "Internal error: the run was lost when the service restarted; what it wrote until then can "
                          "be read with get_run");
  return e;
}

/* ---- the methods ---- */

static int gate(struct rpc_call *c) {
  if (tasks_declared(c->params))
    return 0;
  char what[160];
  snprintf(what, sizeof(what), "%s needs the %s extension declared in _meta's clientCapabilities.extensions", c->method,
           TASKS_EXTENSION);
  return tasks_missing_extension(c, what);
}

static void empty_ack(struct rpc_call *c) {
  c->result = cJSON_CreateObject();
  cJSON_AddStringToObject(c->result, "resultType", "complete");
}

int tasks_get(struct rpc_call *c) {
  struct task t;
  if (gate(c) < 0 || open_task(c, &t) < 0)
    return -1;
  cJSON *o = task_fields(c->ctx->cfg, &t);
  const char *status = status_name(&t);
  if (strcmp(status, "completed") == 0) {
    cJSON *result = call_result_of(c, &t);
    if (result == NULL) {
      cJSON_Delete(o);
      task_close(&t);
      return rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error: the task's result could not be read; try again");
    }
    cJSON_AddItemToObject(o, "result", result);
  } else if (strcmp(status, "failed") == 0)
    cJSON_AddItemToObject(o, "error", lost_error());
  task_close(&t);
  cJSON_AddStringToObject(o, "resultType", "complete");
  c->result = o;
  return 0;
}

int tasks_update(struct rpc_call *c) {
  struct task t;
  if (gate(c) < 0 || open_task(c, &t) < 0)
    return -1;
  task_close(&t);
  if (!cJSON_IsObject(get(c->params, "inputResponses")))
    return rpc_fail(c, RPC_INVALID_PARAMS,
                    "Invalid params: inputResponses is required (an object keyed by the task's inputRequests)");
  /* No task of this server asks for input: no key is outstanding, and
   * every response is ignored. */
  empty_ack(c);
  return 0;
}

int tasks_cancel(struct rpc_call *c) {
  struct task t;
  if (gate(c) < 0 || open_task(c, &t) < 0)
    return -1;
  mcp_error_t err = NULL;
  if (t.status == RUN_RUNNING && run_cancel(c->ctx->cfg, &t.run, &err) < 0)
    mcp_error_log_release(&err, "tasks/cancel"); /* no supervisor: the run is lost, and says so */
  task_close(&t);
  empty_ack(c);
  return 0;
}
