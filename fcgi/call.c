#include "config.h"

#include "fcgi/call.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>

#include "common/frame.h"
#include "common/proc.h"

/* How often the event function hears of a running call: progress is sent
 * once a second, a modern client that went away is noticed within this. */
#define CALL_TICK_MS 250

/* Beyond the call's own timeout: the supervisor's grace and a sandbox start. */
#define CALL_SLACK_MS 40000

void call_result_free(struct call_result *res) {
  buf_free(&res->out);
  buf_free(&res->err);
  free(res->value);
  res->value = NULL;
}

/* Whether this Node.js takes --disable-wasm-trap-handler (20.15 and
 * later).  Without it, V8 reserves 10 GiB of address space for each
 * WebAssembly memory, which the call's RLIMIT_AS refuses: fetch() (its
 * HTTP parser is WebAssembly) could not run at all.  Asked once per
 * responder. */
static bool node_takes_wasm_flag(const struct mcp_config *cfg) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static int known = -1;
  pthread_mutex_lock(&lock);
  if (known < 0) {
    const char *argv[] = {cfg->node, "--disable-wasm-trap-handler", "--version", NULL};
    cleanup_close int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    struct proc_opts o = {.argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = devnull, .timeout_ms = 10000};
    int status = 0;
    mcp_error_t err = NULL;
    known = run_process(&o, &status, &err) == 0 && status == 0;
    mcp_error_release(&err);
  }
  bool r = known == 1;
  pthread_mutex_unlock(&lock);
  return r;
}

char *call_request_json(const struct mcp_config *cfg, const struct call_request *req) {
  cleanup_cjson cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return NULL;
  cJSON_AddStringToObject(o, "code", req->code ? req->code : "");
  cJSON *env = cJSON_AddObjectToObject(o, "env");
  if (req->env != NULL) {
    const cJSON *it;
    cJSON_ArrayForEach(it, req->env) {
      if (cJSON_IsString(it) && it->string != NULL)
        cJSON_AddStringToObject(env, it->string, it->valuestring);
    }
  }
  if (req->files != NULL)
    cJSON_AddItemToObject(o, "files", cJSON_Duplicate(req->files, 1));
  if (req->language != NULL)
    cJSON_AddStringToObject(o, "language", req->language);
  if (req->npm_stage != NULL)
    cJSON_AddStringToObject(o, "npm_stage", req->npm_stage);
  if (req->package_dir != NULL)
    cJSON_AddStringToObject(o, "package_dir", req->package_dir);
  cJSON_AddStringToObject(o, "node", cfg->node);
  if (req->language != NULL && strcmp(req->language, "javascript") == 0 && node_takes_wasm_flag(cfg))
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "node_flags"), cJSON_CreateString("--disable-wasm-trap-handler"));
  if (req->rpc_id != NULL)
    cJSON_AddStringToObject(o, "rpc_id", req->rpc_id);
  if (req->token != NULL)
    cJSON_AddStringToObject(o, "token", req->token);
  if (req->packages != NULL)
    cJSON_AddItemToObject(o, "packages", cJSON_Duplicate(req->packages, 1));
  cJSON_AddNumberToObject(o, "timeout_ms", (double)req->timeout_s * 1000);
  /* A run's output goes to files of run_output_max bytes; its processes
   * get background_cpu_limit. */
  cJSON_AddNumberToObject(o, "output_limit", (double)(req->background ? cfg->run_output_max : cfg->output_limit));
  cJSON_AddNumberToObject(o, "cpu_seconds", req->background ? cfg->background_cpu_limit : cfg->cpu_limit);
  if (req->persistent) {
    cJSON_AddBoolToObject(o, "persistent", 1);
    cJSON_AddNumberToObject(o, "interrupt_grace_ms", (double)cfg->interrupt_grace * 1000);
    cJSON_AddNumberToObject(o, "persistent_cpu_seconds", cfg->persistent_cpu_limit);
  }
  if (req->reset)
    cJSON_AddBoolToObject(o, "reset", 1);
  if (req->background)
    cJSON_AddBoolToObject(o, "background", 1);
  cJSON_AddNumberToObject(o, "memory_bytes", (double)cfg->memory_limit);
  cJSON_AddNumberToObject(o, "nproc", cfg->nproc_limit);
  cJSON_AddNumberToObject(o, "nofile", cfg->nofile_limit);
  cJSON_AddNumberToObject(o, "fsize_bytes", (double)cfg->fsize_limit);
  egress_plan_json(req->egress, o);
  return cJSON_PrintUnformatted(o);
}

static bool get_bool(const cJSON *o, const char *k) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k)); }

static int64_t get_int(const cJSON *o, const char *k, int64_t lo, int64_t hi, int64_t dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsNumber(v) || v->valuedouble != v->valuedouble)
    return dflt;
  double d = v->valuedouble;
  if (d < (double)lo)
    return lo;
  if (d > (double)hi)
    return hi;
  return (int64_t)d;
}

int call_result_parse(const char *json, size_t len, struct call_result *res) {
  cleanup_cjson cJSON *o = cJSON_ParseWithLength(json, len);
  if (!cJSON_IsObject(o))
    return -EPROTO;
  res->exit_code = (int)get_int(o, "exit_code", 0, 255, 255);
  res->timed_out = get_bool(o, "timed_out");
  res->cancelled = get_bool(o, "cancelled");
  res->memory_error = get_bool(o, "memory_error");
  res->cpu_exceeded = get_bool(o, "cpu_exceeded");
  res->processes_exceeded = get_bool(o, "processes_exceeded");
  res->workspace_full = get_bool(o, "workspace_full");
  res->input_error = get_bool(o, "input_error");
  res->install_error = get_bool(o, "install_error");
  res->packages_missing = get_bool(o, "packages_missing");
  res->sandbox_lost = get_bool(o, "sandbox_lost");
  res->memory_exceeded = get_bool(o, "memory_exceeded");
  res->state_lost = get_bool(o, "state_lost");
  res->restored = get_bool(o, "restored");
  res->truncated = res->truncated || get_bool(o, "truncated");
  res->egress_limited = get_bool(o, "egress_limited");
  const cJSON *which = cJSON_GetObjectItemCaseSensitive(o, "egress_limit");
  static const char *const limits[] = {"bytes_out", "bytes_in", "connections", "connection_time"};
  for (size_t i = 0; cJSON_IsString(which) && i < ARRAY_SIZE(limits); i++)
    if (strcmp(which->valuestring, limits[i]) == 0)
      snprintf(res->egress_limit, sizeof(res->egress_limit), "%s", limits[i]);
  res->persistent = get_bool(o, "persistent");
  res->state_lost = get_bool(o, "state_lost");
  const cJSON *value = cJSON_GetObjectItemCaseSensitive(o, "value");
  if (cJSON_IsString(value) && res->value == NULL)
    res->value = xstrndup(value->valuestring, strnlen(value->valuestring, VALUE_MAX + 4));
  const cJSON *refused = cJSON_GetObjectItemCaseSensitive(o, "refused");
  if (cJSON_IsString(refused))
    snprintf(res->refused, sizeof(res->refused), "%s",
             strcmp(refused->valuestring, "interpreter-busy") == 0 ? "interpreter-busy" : "start-failed");
  const cJSON *run = cJSON_GetObjectItemCaseSensitive(o, "run");
  if (cJSON_IsString(run) && strlen(run->valuestring) < sizeof(res->run))
    snprintf(res->run, sizeof(res->run), "%s", run->valuestring);
  res->duration_ms = get_int(o, "duration_ms", 0, INT64_C(1) << 40, 0);
  res->cpu_ms = get_int(o, "cpu_ms", 0, INT64_C(1) << 40, 0);
  res->max_rss_kb = get_int(o, "max_rss_kb", 0, INT64_C(1) << 40, 0);
  uint64_t ob = (uint64_t)get_int(o, "stdout_bytes", 0, INT64_C(1) << 50, 0);
  uint64_t eb = (uint64_t)get_int(o, "stderr_bytes", 0, INT64_C(1) << 50, 0);
  if (ob > res->out_total)
    res->out_total = ob;
  if (eb > res->err_total)
    res->err_total = eb;
  return 0;
}

static void keep(struct buf *b, uint64_t *total, uint64_t limit, bool *truncated, const char *data, size_t len) {
  *total += len;
  size_t room = b->len < limit ? (size_t)(limit - b->len) : 0;
  if (len > room) {
    *truncated = true;
    len = room;
  }
  if (len > 0 && buf_append(b, data, len) < 0)
    *truncated = true;
}

static int exchange(const struct mcp_config *cfg, int fd, const char *json, int64_t deadline, call_event_fn ev,
                    void *opaque, struct call_result *res, mcp_error_t *err) {
  int r = frame_write(fd, FRAME_REQUEST, json, strlen(json));
  if (r < 0)
    return mcp_fail(err, MCP_ERR_SANDBOX, -r, "send the request to the supervisor");
  struct frame_reader rd;
  frame_reader_init(&rd, FRAME_CHUNK * 16);
  int ret = -1;
  int64_t started = now_ms(), next_tick = started + CALL_TICK_MS;
  for (;;) {
    struct frame f;
    int64_t until = ev != NULL && next_tick < deadline ? next_tick : deadline;
    r = frame_read(&rd, fd, until, &f);
    if (r == -ETIMEDOUT && until < deadline) {
      ev(opaque, CALL_TICK, NULL, (size_t)(now_ms() - started));
      next_tick += CALL_TICK_MS;
      continue;
    }
    if (r == -ETIMEDOUT) {
      mcp_fail_public(err, MCP_ERR_SANDBOX, "The sandbox did not answer in time; the session's files are kept.");
      break;
    }
    if (r <= 0) {
      mcp_fail(err, MCP_ERR_SANDBOX, r < 0 ? -r : EPIPE, "the supervisor closed the connection");
      break;
    }
    if (f.type == FRAME_STDOUT || f.type == FRAME_STDERR) {
      bool out = f.type == FRAME_STDOUT;
      keep(out ? &res->out : &res->err, out ? &res->out_total : &res->err_total, cfg->output_limit, &res->truncated,
           f.payload, f.len);
      if (ev != NULL)
        ev(opaque, f.type, f.payload, f.len);
    } else if (f.type == FRAME_DONE) {
      if (call_result_parse(f.payload, f.len, res) < 0)
        mcp_fail(err, MCP_ERR_SANDBOX, EPROTO, "malformed result from the sandbox");
      else
        ret = 0;
      break;
    } else if (f.type == FRAME_ERROR || f.type == FRAME_BUSY) {
      cleanup_free char *msg = xstrndup(f.payload, f.len < 300 ? f.len : 300);
      mcp_fail_public(err, f.type == FRAME_BUSY ? MCP_ERR_CAPACITY : MCP_ERR_SANDBOX, "%s",
                      msg ? msg : "The sandbox failed.");
      break;
    }
  }
  frame_reader_free(&rd);
  return ret;
}

int sandbox_call(const struct mcp_config *cfg, struct session *s, const struct call_request *req, call_event_fn ev,
                 void *opaque, struct call_result *res, mcp_error_t *err) {
  memset(res, 0, sizeof(*res));
  if (session_lock(s, (int64_t)cfg->busy_wait * 1000, err) < 0)
    return -1;
  cleanup_free char *json = call_request_json(cfg, req);
  if (json == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "request");
  cleanup_close int fd = supervisor_connect(cfg, s->dirfd, true, 10000, err);
  if (fd < 0)
    return mcp_error_wrap(err, -1, "session %s", s->id);
  /* A sandbox that is still booting holds no execution slot. */
  if (supervisor_wait_ready(fd, now_ms() + (int64_t)cfg->ready_wait * 1000, err) < 0)
    return -1;
  /* The supervisor takes the execution slots (waiting up to capacity_wait)
   * and holds them while the call runs, whatever happens to us. */
  int64_t deadline = now_ms() + (int64_t)req->timeout_s * 1000 + (int64_t)cfg->capacity_wait * 1000 + CALL_SLACK_MS;
  int ret = exchange(cfg, fd, json, deadline, ev, opaque, res, err);
  if (ret == 0 && (res->out_total > cfg->output_limit || res->err_total > cfg->output_limit))
    res->truncated = true;
  return ret;
}

int sandbox_cancel(int session_dirfd, const char *rpc_id, mcp_error_t *err) {
  /* No session lock: the call being cancelled holds it. */
  cleanup_close int fd = supervisor_connect(NULL, session_dirfd, false, 0, err);
  if (fd < 0)
    return -1;
  int r = frame_write(fd, FRAME_CANCEL, rpc_id, strlen(rpc_id));
  return r < 0 ? mcp_fail(err, MCP_ERR_INTERNAL, -r, "send cancel") : 0;
}
