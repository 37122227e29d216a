/* A cell's shared state (see cell.h). */
#include "config.h"

#include "common/cell.h"

#include <stdio.h>

#include "common/metrics.h"

void cell_drain_begin(void) {
  struct metrics *m = metrics_get();
  int64_t expected = 0;
  if (m != NULL)
    atomic_compare_exchange_strong(&m->draining_since_ms, &expected, now_ms() > 0 ? now_ms() : 1);
}

bool cell_draining(void) {
  struct metrics *m = metrics_get();
  return m != NULL && atomic_load(&m->draining_since_ms) != 0;
}

/* This process's slot: set once at a responder's start, before threads. */
static int responder_slot;

void cell_responder_index(int i) { responder_slot = i >= 0 && i < CELL_RESPONDERS_MAX ? i : 0; }

void cell_responder_reset(int i) {
  struct metrics *m = metrics_get();
  if (m == NULL || i < 0 || i >= CELL_RESPONDERS_MAX)
    return;
  atomic_store(&m->calls_in_flight[i], 0);
  for (int t = 0; t < CELL_THREADS_MAX; t++)
    atomic_store(&m->serving[i * CELL_THREADS_MAX + t], 0);
}

/* FNV-1a of a token's name, never 0 (a thread serving nothing). */
static uint64_t token_hash(const char *name) {
  uint64_t h = 14695981039346656037ull;
  for (const char *p = name; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h != 0 ? h : 1;
}

static _Atomic uint64_t *serving_slot(struct metrics *m, int thread) {
  return m != NULL && thread >= 0 && thread < CELL_THREADS_MAX ? &m->serving[responder_slot * CELL_THREADS_MAX + thread]
                                                               : NULL;
}

int cell_request_begin(const struct mcp_config *cfg, int thread, const char *token, int share) {
  struct metrics *m = metrics_get();
  _Atomic uint64_t *mine = serving_slot(m, thread);
  if (share <= 0 || mine == NULL || token == NULL || *token == '\0')
    return 0; /* no bound, or nothing to count it in */
  uint64_t h = token_hash(token);
  /* Published first, then counted with ours: of two that start at once,
   * each sees the other. */
  atomic_store(mine, h);
  int responders = cfg->responders < CELL_RESPONDERS_MAX ? cfg->responders : CELL_RESPONDERS_MAX;
  int threads = cfg->responder_threads + 1 < CELL_THREADS_MAX ? cfg->responder_threads + 1 : CELL_THREADS_MAX;
  int n = 0;
  for (int r = 0; r < responders; r++)
    for (int t = 0; t < threads; t++)
      n += atomic_load(&m->serving[r * CELL_THREADS_MAX + t]) == h;
  if (n <= share)
    return 0;
  atomic_store(mine, 0);
  return -1;
}

void cell_request_end(int thread) {
  _Atomic uint64_t *mine = serving_slot(metrics_get(), thread);
  if (mine != NULL)
    atomic_store(mine, 0);
}

void cell_call_begin(void) {
  struct metrics *m = metrics_get();
  if (m != NULL)
    atomic_fetch_add(&m->calls_in_flight[responder_slot], 1);
}

void cell_call_end(void) {
  struct metrics *m = metrics_get();
  if (m != NULL)
    atomic_fetch_sub(&m->calls_in_flight[responder_slot], 1);
}

int64_t cell_calls_in_flight(void) {
  struct metrics *m = metrics_get();
  int64_t n = 0;
  for (int i = 0; m != NULL && i < CELL_RESPONDERS_MAX; i++) {
    int32_t v = atomic_load(&m->calls_in_flight[i]);
    n += v > 0 ? v : 0;
  }
  return n;
}

void cell_forwarded(void) { METRIC_INC(forwarded); }

int cell_health(const struct mcp_config *cfg, const char **reason) {
  if (cell_draining()) {
    *reason = "draining: this cell takes no new work and stops once its running calls end";
    return -1;
  }
  return metrics_health(cfg, reason);
}

int cell_drain_seconds(const struct mcp_config *cfg) {
  return cfg->drain_timeout > 0 ? cfg->drain_timeout : cfg->timeout_max + 10;
}

void cell_metrics_render(const struct mcp_config *cfg, struct buf *b, int live_sessions) {
  struct metrics *m = metrics_get();
  if (m == NULL)
    return;
  (void)live_sessions;
  metrics_line(b,
               "# HELP mcp_cell_info The cell's name (empty: the service is not a cell).\n# TYPE mcp_cell_info gauge\n"
               "mcp_cell_info{cell=\"%s\"} 1\n",
               cfg->cell);
  metrics_line(b,
               "# HELP mcp_cell_draining 1 while the cell drains (after SIGTERM): no new sessions or calls.\n"
               "# TYPE mcp_cell_draining gauge\nmcp_cell_draining %d\n",
               cell_draining() ? 1 : 0);
  metrics_line(b,
               "# HELP mcp_calls_in_flight Tool calls running now.\n# TYPE mcp_calls_in_flight gauge\n"
               "mcp_calls_in_flight %lld\n",
               (long long)cell_calls_in_flight());
  metrics_line(b,
               "# HELP mcp_requests_forwarded_total Requests naming another cell's session or sandbox, sent to that "
               "cell.\n# TYPE mcp_requests_forwarded_total counter\nmcp_requests_forwarded_total %llu\n",
               (unsigned long long)atomic_load(&m->forwarded));
}

void cell_status_json(const struct mcp_config *cfg, int live_sessions, bool healthy, char *out, size_t size) {
  snprintf(out, size, "{\"cell\":\"%s\",\"sessions\":%d,\"draining\":%s,\"healthy\":%s,\"calls\":%lld}\n", cfg->cell,
           live_sessions, cell_draining() ? "true" : "false", healthy ? "true" : "false",
           (long long)cell_calls_in_flight());
}
