/* A tools/call answered as a stream (SSE): progress notifications about
 * once a second when the request carried _meta.progressToken, stdout and
 * stderr lines as notifications/message when the session set a log level
 * (logging/setLevel), then the result.  A cancelled call gets no response. */
#include "config.h"

#include "fcgi/stream.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/metrics.h"
#include "common/util.h"
#include "fcgi/json_scan.h"
#include "fcgi/modern.h"
#include "fcgi/tools.h"

#define LOG_LEVEL_FILE "log_level"
#define MAX_LINE 8192

int logging_set_level(struct rpc_call *c) {
  const cJSON *level = cJSON_GetObjectItemCaseSensitive(c->params, "level");
  if (!cJSON_IsString(level) || log_level_index(level->valuestring) < 0)
    return rpc_fail(c, RPC_INVALID_PARAMS,
                    "logging/setLevel: level must be one of debug, info, notice, warning, error, critical, alert, "
                    "emergency");
  mcp_error_t err = NULL;
  if (write_file_atomic(c->session->dirfd, LOG_LEVEL_FILE, level->valuestring, strlen(level->valuestring), 0600, &err) <
      0) {
    mcp_error_log_release(&err, "logging/setLevel");
    return rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error");
  }
  c->result = cJSON_CreateObject();
  return 0;
}

static int session_log_level(int dirfd) {
  cleanup_free char *text = NULL;
  mcp_error_t err = NULL;
  if (read_file_at(dirfd, LOG_LEVEL_FILE, 64, &text, NULL, &err) < 0) {
    mcp_error_release(&err);
    return -1;
  }
  return log_level_index(text);
}

/* ---- a stream's record (see stream.h) ----
 * streams/<prefix>: the request id as JSON on the first line, written
 * once the record is locked; the response message on the second, written
 * when the call is over, before the lock goes.  Mode 0400: the stream
 * delivered that response (to nginx: see record_close). */

#define RECORD_MAX ((size_t)1 << 30)
#define RECORD_DELIVERED_MODE 0400
#define DELIVERED_KEEP_COUNT 16
#define DELIVERED_KEEP_BYTES ((off_t)16 << 20)
#define RESUME_POLL_MS 200
#define RESUME_COMMENT_MS 10000
#define LOST_MESSAGE                                                                                                   \
  "The stream of this call was lost: the process that served it ended (a restart or a crash) before the call "         \
  "answered. The call may have run in part; nothing of its result was kept. Call again."

static void record_path(const char *prefix, char out[40]) { snprintf(out, 40, STREAMS_DIR "/%.20s", prefix); }

static void record_open(struct call_stream *cs) {
  struct rpc_call *c = cs->c;
  if (c->session == NULL || c->id == NULL || !cs->sse.started || cs->sse.broken)
    return;
  char path[40];
  record_path(cs->sse.prefix, path);
  const int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
  int fd = openat(c->session->dirfd, path, flags, 0600);
  if (fd < 0 && errno == ENOENT && mkdirat(c->session->dirfd, STREAMS_DIR, 0700) == 0) /* the session's first */
    fd = openat(c->session->dirfd, path, flags, 0600);
  if (fd < 0)
    return;
  cleanup_free char *id = cJSON_PrintUnformatted(c->id);
  if (lock_try(fd) < 0 || id == NULL || write_all(fd, id, strlen(id)) < 0 || write_all(fd, "\n", 1) < 0) {
    unlinkat(c->session->dirfd, path, 0);
    close(fd);
    return;
  }
  cs->record_fd = fd;
}

/* The next record in a listing of streams/ (a regular file) and its
 * status; NULL at the end. */
static const char *record_next(DIR *d, struct stat *sb) {
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb->st_mode))
      return e->d_name;
  return NULL;
}

static bool record_delivered(const struct stat *sb) { return (sb->st_mode & 07777) == RECORD_DELIVERED_MODE; }

struct kept {
  int64_t mtime_ms;
  off_t size;
  char name[24];
};

static int newest_first(const void *a, const void *b) {
  const struct kept *x = a, *y = b;
  if (x->mtime_ms != y->mtime_ms)
    return x->mtime_ms < y->mtime_ms ? 1 : -1;
  return strcmp(y->name, x->name);
}

/* A session keeps its newest delivered answers, DELIVERED_KEEP_COUNT at
 * most and DELIVERED_KEEP_BYTES in all (newest first, one that does not
 * fit goes): an answer that a cell's death caught on its way is among the
 * newest, and the answers of a busy session (with output files inlined,
 * some are megabytes) do not pile up on disk for the keeper's minutes. */
static void delivered_trim(int session_dirfd) {
  cleanup_dir DIR *d = dir_open_at(session_dirfd, STREAMS_DIR);
  if (d == NULL)
    return;
  cleanup_free struct kept *k = NULL;
  size_t n = 0, cap = 0;
  struct stat sb;
  for (const char *name; (name = record_next(d, &sb)) != NULL;) {
    if (strlen(name) >= sizeof(k->name) || !record_delivered(&sb))
      continue;
    if (n == cap) {
      struct kept *more = reallocarray(k, cap = cap ? 2 * cap : 32, sizeof(*k));
      if (more == NULL)
        return;
      k = more;
    }
    k[n] = (struct kept){stat_mtime_ms(&sb), sb.st_size, ""};
    snprintf(k[n++].name, sizeof(k->name), "%s", name);
  }
  if (n > 1)
    qsort(k, n, sizeof(*k), newest_first);
  off_t bytes = 0;
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (kept < DELIVERED_KEEP_COUNT && k[i].size <= DELIVERED_KEEP_BYTES - bytes) {
      kept++;
      bytes += k[i].size;
    } else
      unlinkat(dirfd(d), k[i].name, 0);
  }
}

/* The call is over.  Its response goes into the record before the lock
 * goes, delivered or not: "delivered" only means that nginx took it, and
 * the answer can still be lost on the way (a cell or router killed a
 * moment later, a connection dropped without a word that reaches nginx
 * late).  So a delivered record stays too, marked by its mode, for
 * stream_records_sweep's shorter time and within delivered_trim's bounds,
 * and a client that comes back gets the answer rather than 404.  An
 * undelivered one waits for its client.  A cancelled call's (msg NULL) is
 * removed, and so is a delivered one whose response could not be written
 * (a later resume gets 404).  A line cut short (a full disk) reads as no
 * response: "lost", an error, never a wrong answer. */
static void record_close(struct call_stream *cs, const cJSON *msg, bool delivered) {
  if (cs->record_fd < 0)
    return;
  cleanup_free char *json = msg != NULL ? cJSON_PrintUnformatted(msg) : NULL;
  bool written =
      json != NULL && write_all(cs->record_fd, json, strlen(json)) == 0 && write_all(cs->record_fd, "\n", 1) == 0;
  bool marked = delivered && written && fchmod(cs->record_fd, RECORD_DELIVERED_MODE) == 0;
  if (msg == NULL || (delivered && !marked)) {
    char path[40];
    record_path(cs->sse.prefix, path);
    unlinkat(cs->c->session->dirfd, path, 0);
  }
  close(cs->record_fd);
  cs->record_fd = -1;
  if (marked)
    delivered_trim(cs->c->session->dirfd);
}

void stream_records_sweep(int session_dirfd, int64_t keep_ms, int64_t delivered_keep_ms) {
  cleanup_dir DIR *d = dir_open_at(session_dirfd, STREAMS_DIR);
  if (d == NULL)
    return; /* no streamed call yet */
  int64_t now = wall_ms();
  struct stat sb;
  for (const char *name; (name = record_next(d, &sb)) != NULL;) {
    if (now - stat_mtime_ms(&sb) < (record_delivered(&sb) ? delivered_keep_ms : keep_ms))
      continue;
    cleanup_close int rfd = openat(dirfd(d), name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (rfd >= 0 && !lock_held_elsewhere(rfd)) /* a call still running keeps its record */
      unlinkat(dirfd(d), name, 0);
  }
}

/* "<12 hex>-<n>", as sse.c makes them: the prefix and n. */
static bool event_id_parse(const char *id, char prefix[13], unsigned *n) {
  if (id == NULL || strlen(id) < 14 || strlen(id) > 23 || id[12] != '-')
    return false;
  for (int i = 0; i < 12; i++)
    if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
      return false;
  char *end = NULL;
  errno = 0;
  unsigned long v = strtoul(id + 13, &end, 10);
  if (id[13] < '0' || id[13] > '9' || *end != '\0' || errno != 0 || v >= 1000000u)
    return false;
  memcpy(prefix, id, 12);
  prefix[12] = '\0';
  *n = (unsigned)v;
  return true;
}

/* The record as its responder left it (no longer locked): its request id,
 * and its response when there is one.  false: no whole first line (its
 * responder has just made it, or died making it). */
static bool record_read(int fd, cJSON **id, cJSON **response) {
  *id = *response = NULL;
  cleanup_free char *text = NULL;
  mcp_error_t err = NULL;
  if (read_fd(fd, "stream record", RECORD_MAX, &text, NULL, &err) < 0) {
    mcp_error_release(&err);
    return false;
  }
  char *nl = strchr(text, '\n');
  if (nl == NULL)
    return false;
  *nl = '\0';
  *id = cJSON_Parse(text);
  char *second = nl + 1, *end = strchr(second, '\n');
  if (*id != NULL && end != NULL) {
    *end = '\0';
    *response = cJSON_Parse(second);
  }
  return *id != NULL;
}

static cJSON *lost_response(const cJSON *id) {
  cJSON *msg = cJSON_CreateObject();
  cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
  cJSON_AddItemToObject(msg, "id", cJSON_Duplicate(id, true));
  cJSON *e = cJSON_AddObjectToObject(msg, "error");
  cJSON_AddNumberToObject(e, "code", RPC_INTERNAL_ERROR);
  cJSON_AddStringToObject(e, "message", LOST_MESSAGE);
  return msg;
}

static int resumed(enum resume_outcome outcome, int status) {
  metrics_resume(outcome);
  return status;
}

int stream_resume(int session_dirfd, const char *last_event_id, struct http_sink *sink, int64_t wait_ms,
                  const char **why) {
  char prefix[13], path[40];
  unsigned n = 0;
  if (!event_id_parse(last_event_id, prefix, &n)) {
    *why = "Bad Request: Last-Event-ID is not an event id of this server's streams";
    return resumed(RESUME_UNKNOWN, 400);
  }
  record_path(prefix, path);
  cleanup_close int fd = openat(session_dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    *why = "Not Found: no stream to resume by this Last-Event-ID in this session (an earlier resume took its answer, "
           "its answer is no longer kept, or the session has none by that id)";
    return resumed(RESUME_UNKNOWN, 404);
  }
  struct sse sse = {0};
  cleanup_cjson cJSON *id = NULL;
  cleanup_cjson cJSON *response = NULL;
  int64_t deadline = now_ms() + wait_ms, half_made_until = now_ms() + 2000, next_comment = 0;
  for (;;) {
    if (!lock_held_elsewhere(fd)) {
      if (record_read(fd, &id, &response))
        break;
      /* being made: its first line comes under the lock */
      if (now_ms() > half_made_until) {
        *why = "Not Found: the stream by this Last-Event-ID has no record to resume from";
        return resumed(RESUME_UNKNOWN, sse.started ? 0 : 404);
      }
    } else {
      /* The call runs: the stream stays open until its answer, with a
       * comment now and then for the proxies on the way. */
      if (!sse.started && sse_resume(&sse, sink, prefix, n + 1) < 0)
        return resumed(RESUME_LEFT, 0);
      if (now_ms() >= next_comment) {
        sse_keepalive(&sse);
        next_comment = now_ms() + RESUME_COMMENT_MS;
      }
      if (sse.broken || http_peer_gone(sink) || now_ms() > deadline)
        return resumed(RESUME_LEFT, 0); /* gone, or past the wait: the record stays for another try */
    }
    usleep(RESUME_POLL_MS * 1000);
  }
  if (!sse.started && sse_resume(&sse, sink, prefix, n + 1) < 0)
    return resumed(RESUME_LEFT, 0);
  cleanup_cjson cJSON *lost = response == NULL ? lost_response(id) : NULL;
  if (sse_send(&sse, response != NULL ? response : lost) < 0 || sse.broken)
    return resumed(RESUME_LEFT, 0);
  unlinkat(session_dirfd, path, 0);
  return resumed(response != NULL ? RESUME_ANSWERED : RESUME_LOST, 0);
}

void call_stream_init(struct call_stream *cs, struct rpc_call *c, int timeout_s) {
  memset(cs, 0, sizeof(*cs));
  cs->record_fd = -1;
  cs->c = c;
  cs->timeout_s = timeout_s;
  const cJSON *meta = cJSON_GetObjectItemCaseSensitive(c->params, "_meta");
  const cJSON *tok = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
  if (cJSON_IsString(tok) || cJSON_IsNumber(tok))
    cs->progress_token = tok;
  cs->log_min = c->modern ? c->log_level : session_log_level(c->session->dirfd);
  /* Stream when the client takes it: progress and log lines need it. */
  if (!http_accepts(c->http->accept, "text/event-stream"))
    return;
  cs->sse_on = true;
  if (c->modern)
    return; /* the head goes out later (stream_open) */
  const char *v = c->http->protocol_version;
  bool priming = v != NULL && strcmp(v, "2025-11-25") >= 0;
  sse_begin(&cs->sse, c->sink, priming);
  record_open(cs);
}

/* modern: the head, before the stream's first event or once the call has
 * run MODERN_STREAM_AFTER_S (stream.h); a 2025 stream began with the call. */
static bool stream_open(struct call_stream *cs) {
  if (!cs->sse.started && !cs->sse.broken)
    sse_begin_modern(&cs->sse, cs->c->sink);
  return !cs->sse.broken;
}

static void notify(struct call_stream *cs, const char *method, cJSON *params) {
  if (!stream_open(cs)) {
    cJSON_Delete(params);
    return;
  }
  cleanup_cjson cJSON *n = cJSON_CreateObject();
  cJSON_AddStringToObject(n, "jsonrpc", "2.0");
  cJSON_AddStringToObject(n, "method", method);
  cJSON_AddItemToObject(n, "params", params);
  sse_send(&cs->sse, n);
}

static void progress(struct call_stream *cs, size_t elapsed_ms) {
  int secs = (int)(elapsed_ms / 1000);
  if (cs->progress_token == NULL || secs <= cs->last_progress)
    return; /* progress strictly increases */
  cs->last_progress = secs;
  cJSON *p = cJSON_CreateObject();
  cJSON_AddItemToObject(p, "progressToken", cJSON_Duplicate(cs->progress_token, 1));
  cJSON_AddNumberToObject(p, "progress", secs);
  cJSON_AddNumberToObject(p, "total", cs->timeout_s);
  char msg[320];
  if (cs->last_output[0] != '\0')
    snprintf(msg, sizeof(msg), "%d s: %s", secs, cs->last_output);
  else
    snprintf(msg, sizeof(msg), "running: %d s of at most %d s", secs, cs->timeout_s);
  cs->last_output[0] = '\0';
  cleanup_free char *text = utf8_sanitize(msg, strlen(msg));
  cJSON_AddStringToObject(p, "message", text ? text : "");
  notify(cs, "notifications/progress", p);
}

/* modern: the newest line, for the next progress message */
static void remember_line(struct call_stream *cs, int stream, const char *line, size_t len) {
  if (!cs->c->modern || len == 0)
    return;
  size_t n = len < sizeof(cs->last_output) - 9 ? len : sizeof(cs->last_output) - 9;
  n = utf8_valid_prefix(line, n);
  snprintf(cs->last_output, sizeof(cs->last_output), "%s: %.*s", stream == 0 ? "stdout" : "stderr", (int)n, line);
}

static void log_line(struct call_stream *cs, int stream, const char *line, size_t len) {
  remember_line(cs, stream, line, len);
  int level = stream == 0 ? 1 : 3; /* info, warning */
  if (cs->log_min < 0 || level < cs->log_min)
    return;
  cleanup_free char *text = utf8_sanitize(line, len);
  cJSON *p = cJSON_CreateObject();
  cJSON_AddStringToObject(p, "level", stream == 0 ? "info" : "warning");
  cJSON_AddStringToObject(p, "logger", stream == 0 ? "stdout" : "stderr");
  cJSON_AddStringToObject(p, "data", text ? text : "");
  notify(cs, "notifications/message", p);
}

/* Whole lines go out as they complete; a very long line in pieces. */
static void output(struct call_stream *cs, int stream, const char *data, size_t len) {
  int level = stream == 0 ? 1 : 3; /* info, warning */
  if ((cs->log_min < 0 || level < cs->log_min) && !(cs->c->modern && cs->progress_token != NULL))
    return;
  struct buf *b = &cs->line[stream];
  for (size_t i = 0; i < len; i++) {
    if (data[i] == '\n') {
      log_line(cs, stream, b->data ? b->data : "", b->len);
      b->len = 0;
    } else {
      buf_append(b, data + i, 1);
      if (b->len >= MAX_LINE) {
        log_line(cs, stream, b->data, b->len);
        b->len = 0;
      }
    }
  }
}

/* modern: a client that closed its stream has cancelled the call. */
static bool client_left(struct call_stream *cs) {
  struct rpc_call *c = cs->c;
  if (!c->modern || cs->cancelled || !((cs->sse_on && cs->sse.broken) || http_peer_gone(c->sink)))
    return cs->cancelled;
  cs->cancelled = true;
  cleanup_free char *id = cJSON_PrintUnformatted(c->id);
  mcp_error_t err = NULL;
  if (id != NULL && sandbox_cancel(c->session->dirfd, id, &err) < 0)
    mcp_error_release(&err); /* nothing runs to cancel */
  return true;
}

static void keepalive(struct call_stream *cs, size_t elapsed_ms) {
  int secs = (int)(elapsed_ms / 1000);
  if (!cs->c->modern || secs <= cs->last_keepalive || (!cs->sse.started && secs < MODERN_STREAM_AFTER_S))
    return;
  cs->last_keepalive = secs;
  if (cs->sse.started)
    sse_keepalive(&cs->sse);
  else
    stream_open(cs); /* its head ends with a comment */
}

void call_stream_event(void *opaque, int type, const char *data, size_t len) {
  struct call_stream *cs = opaque;
  if (client_left(cs) || !cs->sse_on || cs->sse.broken)
    return; /* 2025: a client that left does not stop the call */
  if (type == 'T') {
    progress(cs, len);
    keepalive(cs, len);
    client_left(cs);
  } else if (type == 'O' || type == 'E')
    output(cs, type == 'O' ? 0 : 1, data, len);
}

int call_stream_finish(struct call_stream *cs, bool cancelled) {
  cancelled = cancelled || cs->cancelled;
  if (cs->c->modern && !cancelled)
    modern_decorate(cs->c);
  for (int i = 0; i < 2; i++) {
    if (cs->sse_on && cs->line[i].len > 0 && !cancelled)
      log_line(cs, i, cs->line[i].data, cs->line[i].len);
    buf_free(&cs->line[i]);
  }
  struct rpc_call *c = cs->c;
  if (cs->cancelled)
    return 1; /* modern: the client left, nothing more is sent */
  if (!cs->sse_on || (c->modern && !cs->sse.started)) {
    if (cancelled) {
      cJSON_Delete(c->result);
      c->result = NULL;
      return rpc_fail(c, -32800, "Request cancelled");
    }
    return 0;
  }
  /* A cancelled request gets no response: the stream just ends. */
  if (cancelled)
    record_close(cs, NULL, false);
  else {
    cleanup_cjson cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    cJSON_AddItemToObject(msg, "id", rpc_id_copy(c->id));
    if (c->result != NULL) {
      cJSON_AddItemToObject(msg, "result", steal_pointer(&c->result));
    } else {
      cJSON *e = cJSON_AddObjectToObject(msg, "error");
      cJSON_AddNumberToObject(e, "code", c->error_code ? c->error_code : RPC_INTERNAL_ERROR);
      cJSON_AddStringToObject(e, "message", c->error_message[0] ? c->error_message : "Internal error");
    }
    bool delivered = sse_send(&cs->sse, msg) == 0 && !cs->sse.broken && !http_peer_gone(c->sink);
    record_close(cs, msg, delivered);
  }
  return 1; /* answered on the stream */
}
