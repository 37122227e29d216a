/* Background runs, the supervisor's side (see background.h). */
#include "config.h"

#include "sandbox/background.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/slots.h"
#include "sandbox/bundle.h"

/* Beyond its wall clock: the executor's interrupt grace and kill, the
 * result on its way. */
#define RUN_DEADLINE_SLACK_MS 10000

void bg_runs_init(struct bg_runs *rs, const struct mcp_config *cfg, int session_dirfd) {
  memset(rs, 0, sizeof(*rs));
  rs->cfg = cfg;
  rs->dirfd = session_dirfd;
  for (int i = 0; i < RUNS_MAX; i++)
    rs->r[i].dirfd = rs->r[i].lock_fd = rs->r[i].slot_fd = rs->r[i].out_fd = rs->r[i].err_fd = -1;
}

int bg_runs_active(const struct bg_runs *rs) {
  int n = 0;
  for (int i = 0; i < RUNS_MAX; i++)
    n += rs->r[i].active;
  return n;
}

static struct bg_run *by_number(struct bg_runs *rs, int n) {
  for (int i = 0; i < RUNS_MAX; i++)
    if (rs->r[i].active && rs->r[i].n == n)
      return &rs->r[i];
  return NULL;
}

/* The next run number (1-255) no active run has. */
static int next_number(struct bg_runs *rs) {
  for (int k = 0; k < 255; k++) {
    int n = (rs->last_n + k) % 255 + 1;
    if (by_number(rs, n) == NULL) {
      rs->last_n = n;
      return n;
    }
  }
  return 0;
}

static int open_in(int dirfd, const char *name, int flags) {
  return openat(dirfd, name, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* runs/<name>/ with its lock held, its output files and its record. */
static int make_record(struct bg_run *r, int session_dirfd, const cJSON *req, mcp_error_t *err) {
  if (mkdirat(session_dirfd, RUNS_DIR, 0700) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir %s", RUNS_DIR);
  cleanup_close int runs = openat(session_dirfd, RUNS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (runs < 0 || mkdirat(runs, r->name, 0700) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir %s/%s", RUNS_DIR, r->name);
  r->dirfd = openat(runs, r->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (r->dirfd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open %s/%s", RUNS_DIR, r->name);
  r->lock_fd = open_in(r->dirfd, RUN_LOCK, O_RDWR | O_CREAT);
  r->out_fd = open_in(r->dirfd, RUN_STDOUT_FILE, O_WRONLY | O_CREAT | O_APPEND);
  r->err_fd = open_in(r->dirfd, RUN_STDERR_FILE, O_WRONLY | O_CREAT | O_APPEND);
  if (r->lock_fd < 0 || r->out_fd < 0 || r->err_fd < 0 || lock_try(r->lock_fd) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "the files of run %s", r->name);
  cleanup_cjson cJSON *rec = cJSON_CreateObject();
  const cJSON *tok = cJSON_GetObjectItemCaseSensitive(req, "token");
  const cJSON *lang = cJSON_GetObjectItemCaseSensitive(req, "language");
  const cJSON *to = cJSON_GetObjectItemCaseSensitive(req, "timeout_ms");
  cJSON_AddStringToObject(rec, "token", cJSON_IsString(tok) ? tok->valuestring : "");
  cJSON_AddStringToObject(rec, "language", cJSON_IsString(lang) ? lang->valuestring : "python");
  cJSON_AddNumberToObject(rec, "started", (double)wall_ms());
  cJSON_AddNumberToObject(rec, "timeout_s", cJSON_IsNumber(to) ? to->valuedouble / 1000 : 0);
  cJSON_AddBoolToObject(rec, "persistent", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "persistent")));
  cleanup_free char *text = cJSON_PrintUnformatted(rec);
  if (text == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "run record");
  return write_file_atomic(r->dirfd, RUN_RECORD, text, strlen(text), 0600, err);
}

static void release(struct bg_run *r) {
  int *fds[] = {&r->dirfd, &r->lock_fd, &r->slot_fd, &r->out_fd, &r->err_fd};
  for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
    if (*fds[i] >= 0)
      close(*fds[i]);
    *fds[i] = -1;
  }
  buf_free(&r->request);
  r->active = r->sent = r->cancelled = false;
}

/* The G frame's JSON: the request, with its number. */
static int make_request(struct bg_run *r, cJSON *req) {
  cJSON_DeleteItemFromObjectCaseSensitive(req, "run");
  cJSON_AddNumberToObject(req, "run", r->n);
  const cJSON *pd = cJSON_GetObjectItemCaseSensitive(req, "package_dir");
  snprintf(r->package_dir, sizeof(r->package_dir), "%s", cJSON_IsString(pd) ? pd->valuestring : "");
  cleanup_free char *text = cJSON_PrintUnformatted(req);
  return text != NULL ? buf_append(&r->request, text, strlen(text)) : -1;
}

static void answer_busy(int *type, char *answer, size_t size, const char *sentence) {
  *type = FRAME_BUSY;
  snprintf(answer, size, "%s", sentence);
}

static struct bg_run *free_entry(struct bg_runs *rs, const struct mcp_config *cfg) {
  if (bg_runs_active(rs) >= cfg->runs_per_session)
    return NULL;
  for (int i = 0; i < RUNS_MAX; i++)
    if (!rs->r[i].active)
      return &rs->r[i];
  return NULL;
}

void bg_run_start(struct bg_runs *rs, const char *session_id, const char *token, const char *req_text, size_t len,
                  int *answer_type, char *answer, size_t size) {
  const struct mcp_config *cfg = rs->cfg;
  char sentence[300];
  struct bg_run *r = free_entry(rs, cfg);
  if (r == NULL) {
    snprintf(sentence, sizeof(sentence),
             "This sandbox already has its maximum of %d background runs active; wait for one to end (get_run) or "
             "cancel one (cancel_run).",
             cfg->runs_per_session);
    return answer_busy(answer_type, answer, size, sentence);
  }
  mcp_error_t err = NULL;
  int slot = run_slot_try(cfg, token, &err);
  if (slot < 0) {
    if (slot != -EAGAIN)
      mcp_error_log_release(&err, "mcp-sandboxd: run slot");
    snprintf(sentence, sizeof(sentence),
             "This token already has its maximum of %d background runs active; wait for one to end (get_run) or "
             "cancel one (cancel_run).",
             cfg->runs_per_token);
    return answer_busy(answer_type, answer, size, sentence);
  }
  cleanup_cjson cJSON *req = cJSON_ParseWithLength(req_text, len);
  char hex[33];
  random_hex32(hex);
  snprintf(r->name, sizeof(r->name), "r%.16s", hex);
  r->slot_fd = slot;
  r->n = next_number(rs);
  r->active = true;
  if (req == NULL || r->n == 0 || make_record(r, rs->dirfd, req, &err) < 0 || make_request(r, req) < 0) {
    mcp_error_log_release(&err, "mcp-sandboxd: run");
    release(r);
    *answer_type = FRAME_ERROR;
    snprintf(answer, size, "The background run could not be started (internal error); try again.");
    return;
  }
  *answer_type = FRAME_DONE;
  snprintf(answer, size, "{\"run\":\"%s.%s\",\"status\":\"running\"}", session_id, r->name);
}

unsigned bg_lang_bit_of(const char *language) { return strcmp(language, "javascript") == 0 ? 2 : 1; }

unsigned bg_lang_bit(const cJSON *req) {
  const cJSON *lang = cJSON_GetObjectItemCaseSensitive(req, "language");
  return bg_lang_bit_of(cJSON_IsString(lang) ? lang->valuestring : "python");
}

bool bg_mark_interpreter_lost(cJSON *req, unsigned *lost) {
  unsigned bit = bg_lang_bit(req);
  if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "persistent")) || (*lost & bit) == 0)
    return false;
  *lost &= ~bit;
  cJSON_DeleteItemFromObjectCaseSensitive(req, "interpreter_lost");
  cJSON_AddBoolToObject(req, "interpreter_lost", 1);
  return true;
}

void buf_replace_json(struct buf *b, const cJSON *o) {
  cleanup_free char *text = cJSON_PrintUnformatted(o);
  struct buf nb = {0};
  if (text == NULL || buf_append(&nb, text, strlen(text)) < 0)
    return;
  buf_free(b);
  *b = nb;
}

void bg_runs_send(struct bg_runs *rs, int exec_in, unsigned *interpreters_lost) {
  for (int i = 0; i < RUNS_MAX; i++) {
    struct bg_run *r = &rs->r[i];
    if (!r->active || r->sent || exec_in < 0)
      continue;
    cleanup_cjson cJSON *req = cJSON_ParseWithLength(r->request.data, r->request.len);
    if (req != NULL && bg_mark_interpreter_lost(req, interpreters_lost))
      buf_replace_json(&r->request, req);
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(req, "timeout_ms");
    const cJSON *grace = cJSON_GetObjectItemCaseSensitive(req, "interrupt_grace_ms");
    r->deadline = now_ms() + (cJSON_IsNumber(to) ? (int64_t)to->valuedouble : 3600000) +
                  (cJSON_IsNumber(grace) ? (int64_t)grace->valuedouble : 0) + RUN_DEADLINE_SLACK_MS;
    if (frame_write(exec_in, FRAME_RUN_START, r->request.data, r->request.len) == 0)
      r->sent = true;
  }
}

/* Append what the run wrote, up to run_output_max bytes per stream. */
static void keep_output(struct bg_run *r, const struct mcp_config *cfg, bool out, const char *data, size_t len) {
  uint64_t *bytes = out ? &r->out_bytes : &r->err_bytes;
  uint64_t room = *bytes < cfg->run_output_max ? cfg->run_output_max - *bytes : 0;
  size_t take = len < room ? len : (size_t)room;
  *bytes += len;
  if (take > 0 && write_all(out ? r->out_fd : r->err_fd, data, take) < 0)
    fprintf(stderr, "mcp-sandboxd: run %s: cannot write its output: %s\n", r->name, strerror(errno));
}

static const char *status_of(const struct bg_run *r, const cJSON *res) {
  if (r->cancelled || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "cancelled")))
    return "cancelled";
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "sandbox_lost")))
    return "lost";
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "timed_out")))
    return "timed_out";
  return "finished";
}

/* The run ended with result json: done.json, then everything goes. */
static void finish(struct bg_runs *rs, struct bg_run *r, const char *json, size_t len) {
  const struct mcp_config *cfg = rs->cfg;
  cleanup_cjson cJSON *res = cJSON_ParseWithLength(json, len);
  if (!cJSON_IsObject(res)) {
    cJSON_Delete(res);
    res = cJSON_CreateObject();
    cJSON_AddNumberToObject(res, "exit_code", 255);
  }
  cJSON_DeleteItemFromObjectCaseSensitive(res, "status");
  cJSON_AddStringToObject(res, "status", status_of(r, res));
  cJSON_AddNumberToObject(res, "stdout_total", (double)r->out_bytes);
  cJSON_AddNumberToObject(res, "stderr_total", (double)r->err_bytes);
  cJSON_AddBoolToObject(res, "output_truncated",
                        r->out_bytes > cfg->run_output_max || r->err_bytes > cfg->run_output_max);
  cleanup_free char *text = cJSON_PrintUnformatted(res);
  mcp_error_t err = NULL;
  if (text == NULL || write_file_atomic(r->dirfd, RUN_DONE_FILE, text, strlen(text), 0600, &err) < 0)
    mcp_error_log_release(&err, "mcp-sandboxd: the run's result");
  if (r->package_dir[0] != '\0') {
    cleanup_close int pfd = openat(rs->dirfd, SESSION_PACKAGES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd >= 0 && remove_tree_at(pfd, r->package_dir, &err) < 0)
      mcp_error_log_release(&err, "mcp-sandboxd: the run's packages");
  }
  release(r); /* the lock goes after done.json is there */
}

void bg_runs_on_frame(struct bg_runs *rs, const struct frame *f) {
  if (f->len < 1)
    return;
  struct bg_run *r = by_number(rs, (unsigned char)f->payload[0]);
  if (r == NULL || !r->sent)
    return;
  if (f->type == FRAME_RUN_STDOUT || f->type == FRAME_RUN_STDERR)
    keep_output(r, rs->cfg, f->type == FRAME_RUN_STDOUT, f->payload + 1, f->len - 1);
  else if (f->type == FRAME_RUN_DONE)
    finish(rs, r, f->payload + 1, f->len - 1);
}

void bg_run_cancel(struct bg_runs *rs, const char *name, size_t len, int exec_in) {
  for (int i = 0; i < RUNS_MAX; i++) {
    struct bg_run *r = &rs->r[i];
    if (!r->active || len != strlen(r->name) || memcmp(r->name, name, len) != 0)
      continue;
    r->cancelled = true;
    unsigned char n = (unsigned char)r->n;
    if (r->sent && exec_in >= 0)
      frame_write(exec_in, FRAME_RUN_CANCEL, &n, 1);
    else if (!r->sent) {
      static const char cancelled[] = "{\"exit_code\":130,\"cancelled\":true}";
      finish(rs, r, cancelled, sizeof(cancelled) - 1);
    }
  }
}

void bg_runs_lost(struct bg_runs *rs, bool memory_exceeded) {
  char json[160];
  snprintf(json, sizeof(json), "{\"exit_code\":137,\"sandbox_lost\":true,\"memory_exceeded\":%s}",
           memory_exceeded ? "true" : "false");
  for (int i = 0; i < RUNS_MAX; i++)
    if (rs->r[i].active && rs->r[i].sent)
      finish(rs, &rs->r[i], json, strlen(json));
}

int64_t bg_runs_deadline(const struct bg_runs *rs) {
  int64_t first = 0;
  for (int i = 0; i < RUNS_MAX; i++)
    if (rs->r[i].active && rs->r[i].sent && (first == 0 || rs->r[i].deadline < first))
      first = rs->r[i].deadline;
  return first;
}

bool bg_runs_overran(const struct bg_runs *rs, int64_t now) {
  int64_t first = bg_runs_deadline(rs);
  return first > 0 && now >= first;
}
