#include "config.h"

#include "common/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "sandbox/client.h" /* the names of a session folder's entries */

#define MAGIC 0x4d435031u /* "MCP1" */
#define FILE_NAME "metrics.shm"

/* Set once at start-up, before any thread; read-only afterwards. */
static struct metrics *shm;

static const double bucket_le[METRIC_BUCKETS] = {0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
static const char *const outcome_names[OUTCOME_N] = {"ok",        "error",   "timeout", "memory",
                                                     "cancelled", "refused", "busy",    "sandbox"};
static const char *const reject_names[REJECT_N] = {
    [REJECT_BAD_REQUEST] = "bad_request",
    [REJECT_UNAUTHORIZED] = "unauthorized",
    [REJECT_FORBIDDEN_ORIGIN] = "forbidden_origin",
    [REJECT_SESSION_NOT_FOUND] = "session_not_found",
    [REJECT_METHOD_NOT_ALLOWED] = "method_not_allowed",
    [REJECT_NOT_ACCEPTABLE] = "not_acceptable",
    [REJECT_TOO_LARGE] = "too_large",
    [REJECT_UNSUPPORTED_MEDIA] = "unsupported_media_type",
    [REJECT_CAPACITY] = "capacity",
    [REJECT_TOKEN_SESSIONS] = "token_sessions",
    [REJECT_CALLS_CAPACITY] = "calls_capacity",
    [REJECT_TOKEN_CALLS] = "token_calls",
    [REJECT_DISK_FULL] = "disk_full",
    [REJECT_DRAINING] = "draining",
    [REJECT_TOKEN_REQUESTS] = "token_requests",
};

struct metrics *metrics_get(void) {
  return shm;
}

static int map_file(const struct mcp_config *cfg, bool create, mcp_error_t *err) {
  char path[PATH_MAX];
  if (config_path(cfg, path, sizeof(path), FILE_NAME) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "metrics path");
  if (create)
    unlink(path);
  cleanup_close int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT | O_EXCL : 0), 0600);
  if (fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open %s", path);
  if (create && ftruncate(fd, sizeof(struct metrics)) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "size %s", path);
  struct stat st;
  if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(struct metrics))
    return mcp_fail(err, MCP_ERR_INTERNAL, EINVAL, "%s has the wrong size", path);
  void *p = mmap(NULL, sizeof(struct metrics), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mmap %s", path);
  struct metrics *m = p;
  if (create) {
    m->magic = MAGIC;
    m->size = sizeof(struct metrics);
  } else if (m->magic != MAGIC || m->size != sizeof(struct metrics)) {
    munmap(p, sizeof(struct metrics));
    return mcp_fail(err, MCP_ERR_INTERNAL, EINVAL, "%s is from another version", path);
  }
  shm = m;
  return 0;
}

int metrics_create(const struct mcp_config *cfg, mcp_error_t *err) { return map_file(cfg, true, err); }
int metrics_attach(const struct mcp_config *cfg, mcp_error_t *err) { return map_file(cfg, false, err); }

void metrics_add(_Atomic uint64_t *counter, uint64_t n) { atomic_fetch_add_explicit(counter, n, memory_order_relaxed); }

/* The slot of a token name; registered once under a spin lock (rare). */
static struct metric_token *token_slot(const char *name) {
  if (name == NULL || *name == '\0' || strlen(name) >= TOKEN_NAME_MAX)
    return NULL;
  for (int i = 0; i < METRIC_TOKENS; i++)
    if (shm->tokens[i].name[0] != '\0' && strcmp(shm->tokens[i].name, name) == 0)
      return &shm->tokens[i];
  uint32_t expected = 0;
  while (!atomic_compare_exchange_weak(&shm->token_lock, &expected, 1)) {
    expected = 0;
    sched_yield();
  }
  struct metric_token *t = NULL;
  for (int i = 0; i < METRIC_TOKENS && t == NULL; i++) {
    if (strcmp(shm->tokens[i].name, name) == 0)
      t = &shm->tokens[i];
    else if (shm->tokens[i].name[0] == '\0') {
      memcpy(shm->tokens[i].name, name, strlen(name) + 1);
      t = &shm->tokens[i];
    }
  }
  atomic_store(&shm->token_lock, 0);
  return t;
}

void metrics_execution(enum exec_outcome outcome, int64_t duration_ms, const char *token_id, uint64_t bytes) {
  if (shm == NULL || outcome < 0 || outcome >= OUTCOME_N)
    return;
  metrics_add(&shm->executions[outcome], 1);
  double secs = (double)duration_ms / 1000.0;
  int b = 0;
  while (b < METRIC_BUCKETS && secs > bucket_le[b])
    b++;
  metrics_add(&shm->duration_buckets[b], 1);
  metrics_add(&shm->duration_ms_sum, duration_ms > 0 ? (uint64_t)duration_ms : 0);
  metrics_add(&shm->bytes_returned, bytes);
  struct metric_token *t = token_slot(token_id);
  if (t != NULL)
    metrics_add(&t->calls, 1);
}

void metrics_reject(int status) {
  if (shm == NULL)
    return;
  enum reject_reason r;
  switch (status) {
  case 400:
    r = REJECT_BAD_REQUEST;
    break;
  case 401:
    r = REJECT_UNAUTHORIZED;
    break;
  case 403:
    r = REJECT_FORBIDDEN_ORIGIN;
    break;
  case 404:
    r = REJECT_SESSION_NOT_FOUND;
    break;
  case 405:
    r = REJECT_METHOD_NOT_ALLOWED;
    break;
  case 406:
    r = REJECT_NOT_ACCEPTABLE;
    break;
  case 413:
    r = REJECT_TOO_LARGE;
    break;
  case 415:
    r = REJECT_UNSUPPORTED_MEDIA;
    break;
  default:
    return;
  }
  metrics_add(&shm->rejected[r], 1);
}

void metrics_reject_reason(enum reject_reason reason) {
  if (shm != NULL && reason >= 0 && reason < REJECT_N)
    metrics_add(&shm->rejected[reason], 1);
}

void metrics_resume(enum resume_outcome outcome) {
  if (shm != NULL && outcome >= 0 && outcome < RESUME_N)
    metrics_add(&shm->resumes[outcome], 1);
}

static const char *const egress_names[EGRESS_VERDICT_N] = {"allowed", "denied", "failed", "limited", "refused"};
static const char *const resume_names[RESUME_N] = {"answered", "lost", "left", "unknown"};

void metrics_egress(const char *verdict, uint64_t out, uint64_t in) {
  if (shm == NULL || verdict == NULL)
    return;
  for (int i = 0; i < EGRESS_VERDICT_N; i++)
    if (strcmp(verdict, egress_names[i]) == 0)
      metrics_add(&shm->egress_connections[i], 1);
  metrics_add(&shm->egress_bytes_out, out);
  metrics_add(&shm->egress_bytes_in, in);
}

void metrics_sandbox_start(bool ok) {
  if (shm == NULL)
    return;
  metrics_add(ok ? &shm->sandbox_starts : &shm->sandbox_start_failures, 1);
  atomic_store(ok ? &shm->last_start_ok_ms : &shm->last_start_fail_ms, wall_ms());
}

int64_t metrics_disk_free(const struct mcp_config *cfg) {
  struct statvfs v;
  if (statvfs(cfg->state_dir, &v) < 0)
    return -1;
  return (int64_t)((uint64_t)v.f_bavail * v.f_frsize);
}

int metrics_health(const struct mcp_config *cfg, const char **reason) {
  if (shm == NULL) {
    *reason = "the service counters are not available";
    return -1;
  }
  int64_t ok = atomic_load(&shm->last_start_ok_ms), fail = atomic_load(&shm->last_start_fail_ms);
  if (fail > ok) {
    *reason = "the latest sandbox start failed";
    return -1;
  }
  if (ok == 0 && cfg->pool_size > 0) {
    *reason = "no sandbox has started yet";
    return -1;
  }
  *reason = "ok";
  return 0;
}

static uint64_t get(_Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

static int count_dir(const struct mcp_config *cfg, const char *sub, bool (*want)(const char *)) {
  char path[PATH_MAX];
  if (config_path(cfg, path, sizeof(path), sub) < 0)
    return 0;
  cleanup_dir DIR *d = opendir(path);
  int n = 0;
  struct dirent *de;
  while (d != NULL && (de = readdir(d)) != NULL)
    if (want(de->d_name))
      n++;
  return n;
}

static bool want_session(const char *n) { return session_id_valid(n); }

/* Sessions whose sandbox is hibernated: a published image in the folder. */
static int count_hibernated(const struct mcp_config *cfg) {
  char path[PATH_MAX];
  if (config_path(cfg, path, sizeof(path), "sessions") < 0)
    return 0;
  cleanup_dir DIR *d = opendir(path);
  int n = 0;
  struct dirent *de;
  while (d != NULL && (de = readdir(d)) != NULL) {
    char name[SESSION_ID_MAX + 64];
    if (session_id_valid(de->d_name) &&
        snprintf(name, sizeof(name), "%s/" HIBERNATE_DIR "/" HIBERNATE_INFO, de->d_name) < (int)sizeof(name) &&
        faccessat(dirfd(d), name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
      n++;
  }
  return n;
}
static bool want_ready(const char *n) { return is_hex32(n); }

int metrics_live_sessions(const struct mcp_config *cfg) { return count_dir(cfg, "sessions", want_session); }

void metrics_line(struct buf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  if (n > 0)
    buf_append(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static void counter(struct buf *b, const char *name, const char *help, _Atomic uint64_t *c) {
  metrics_line(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, (unsigned long long)get(c));
}

/* A counter with one label: name{label="names[i]"} c[i], for i < n. */
static void labelled(struct buf *b, const char *name, const char *help, const char *label, const char *const *names,
                     _Atomic uint64_t *c, int n) {
  metrics_line(b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
  for (int i = 0; i < n; i++)
    metrics_line(b, "%s{%s=\"%s\"} %llu\n", name, label, names[i], (unsigned long long)get(&c[i]));
}

int metrics_render(const struct mcp_config *cfg, struct buf *b) {
  if (shm == NULL)
    return -1;
  labelled(b, "mcp_executions_total", "Tool calls that ran (or were refused), by outcome.", "outcome", outcome_names,
           shm->executions, OUTCOME_N);
  metrics_line(b, "# HELP mcp_execution_duration_seconds Wall-clock duration of tool calls.\n"
                  "# TYPE mcp_execution_duration_seconds histogram\n");
  uint64_t cum = 0;
  for (int i = 0; i < METRIC_BUCKETS; i++) {
    cum += get(&shm->duration_buckets[i]);
    metrics_line(b, "mcp_execution_duration_seconds_bucket{le=\"%g\"} %llu\n", bucket_le[i], (unsigned long long)cum);
  }
  cum += get(&shm->duration_buckets[METRIC_BUCKETS]);
  metrics_line(b, "mcp_execution_duration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
  metrics_line(b, "mcp_execution_duration_seconds_sum %.3f\n", (double)get(&shm->duration_ms_sum) / 1000.0);
  metrics_line(b, "mcp_execution_duration_seconds_count %llu\n", (unsigned long long)cum);
  metrics_line(b,
               "# HELP mcp_token_calls_total Tool calls by bearer token name.\n# TYPE mcp_token_calls_total counter\n");
  for (int i = 0; i < METRIC_TOKENS; i++)
    if (shm->tokens[i].name[0] != '\0')
      metrics_line(b, "mcp_token_calls_total{token=\"%s\"} %llu\n", shm->tokens[i].name,
                   (unsigned long long)get(&shm->tokens[i].calls));
  int live = metrics_live_sessions(cfg);
  metrics_line(
      b, "# HELP mcp_sessions_live Sessions that exist now.\n# TYPE mcp_sessions_live gauge\nmcp_sessions_live %d\n",
      live);
  metrics_line(b,
               "# HELP mcp_sandboxes_ready Sandboxes started ahead of demand, ready now.\n"
               "# TYPE mcp_sandboxes_ready gauge\nmcp_sandboxes_ready %d\n",
               count_dir(cfg, "pool", want_ready));
  metrics_line(b,
               "# HELP mcp_pool_target The number of sandboxes the pool is kept at now (pool_size, more after a burst "
               "of new sessions).\n# TYPE mcp_pool_target gauge\nmcp_pool_target %d\n",
               (int)atomic_load(&shm->pool_target));
  metrics_line(b,
               "# HELP mcp_sessions_hibernated Sessions whose sandbox is checkpointed to disk (no memory held).\n"
               "# TYPE mcp_sessions_hibernated gauge\nmcp_sessions_hibernated %d\n",
               count_hibernated(cfg));
  counter(b, "mcp_sessions_created_total", "Sessions created by initialize.", &shm->sessions_created);
  counter(b, "mcp_sessions_deleted_total", "Sessions ended by DELETE.", &shm->sessions_ended);
  counter(b, "mcp_sessions_expired_total", "Sessions ended by idle expiry.", &shm->sessions_expired);
  counter(b, "mcp_sandbox_starts_total", "Sandboxes started.", &shm->sandbox_starts);
  counter(b, "mcp_sandbox_start_failures_total", "Sandbox starts that failed.", &shm->sandbox_start_failures);
  counter(b, "mcp_sandboxes_lost_total", "Sandboxes stopped during a call (memory backstop, crash, overrun).",
          &shm->sandboxes_lost);
  counter(b, "mcp_hibernations_total", "Idle sandboxes checkpointed to disk and stopped.", &shm->hibernations);
  counter(b, "mcp_hibernate_failures_total", "Checkpoints of idle sandboxes that failed.", &shm->hibernate_failures);
  counter(b, "mcp_restores_total", "Hibernated sandboxes restored for a call.", &shm->restores);
  counter(b, "mcp_restore_failures_total",
          "Restores that failed: the session continued in a new sandbox with its files (state_lost).",
          &shm->restore_failures);
  counter(b, "mcp_package_installs_total", "Calls with packages whose install succeeded.", &shm->package_installs);
  counter(b, "mcp_package_install_failures_total", "Calls with packages that could not be installed.",
          &shm->package_install_failures);
  counter(b, "mcp_responder_restarts_total", "Responder or keeper processes restarted by the master.",
          &shm->responder_restarts);
  counter(b, "mcp_health_checks_total",
          "/healthz answers the responders computed (nginx serves each for one to two seconds).", &shm->health_checks);
  counter(b, "mcp_bytes_returned_total", "Output bytes returned to clients (stdout, stderr, files).",
          &shm->bytes_returned);
  labelled(b, "mcp_stream_resumes_total",
           "Streams of calls that a client resumed (GET with Last-Event-ID), by outcome: answered, lost (the call's "
           "responder had died: an error), left (the client left or the wait ended first), unknown (no such stream).",
           "outcome", resume_names, shm->resumes, RESUME_N);
  labelled(b, "mcp_egress_connections_total", "Egress connections of the calls, by verdict.", "verdict", egress_names,
           shm->egress_connections, EGRESS_VERDICT_N);
  metrics_line(b,
               "# HELP mcp_egress_bytes_total Bytes of egress connections, by direction.\n"
               "# TYPE mcp_egress_bytes_total counter\nmcp_egress_bytes_total{direction=\"out\"} %llu\n"
               "mcp_egress_bytes_total{direction=\"in\"} %llu\n",
               (unsigned long long)get(&shm->egress_bytes_out), (unsigned long long)get(&shm->egress_bytes_in));
  metrics_line(b,
               "# HELP mcp_state_disk_free_bytes Free space on the state folder's file system.\n"
               "# TYPE mcp_state_disk_free_bytes gauge\nmcp_state_disk_free_bytes %lld\n",
               (long long)metrics_disk_free(cfg));
  counter(b, "mcp_fastcgi_peers_refused_total",
          "FastCGI connections dropped unanswered: the peer is neither root nor a user that may connect.",
          &shm->peers_refused);
  labelled(b, "mcp_requests_rejected_total", "Requests refused, by reason.", "reason", reject_names, shm->rejected,
           REJECT_N);
  return 0;
}
