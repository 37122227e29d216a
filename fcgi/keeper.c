/* The keeper: one process beside the responders that
 *   - expires idle sessions (destroys their sandbox, removes the folder),
 *   - finishes removals left in trash/,
 *   - keeps sandboxes started ahead of demand: pool_size, more (up to
 *     pool_max) after a burst of new sessions (pool_target) while the CPU
 *     is free enough (pool_grow_idle),
 *   - at start (and every minute), removes runsc containers that belong to
 *     no live supervisor, and pool folders whose supervisor is gone,
 *   - every minute, removes the answers of broken streams that no client
 *     came back for in 10 minutes (fcgi/stream.h).
 * It holds no state of its own: everything is read from the state folder
 * at each tick, so it can be killed and restarted at any time. */
#include "config.h"

#include "fcgi/keeper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cpus.h"
#include "common/frame.h"
#include "common/metrics.h"
#include "common/slots.h"
#include "common/util.h"
#include "fcgi/session.h"
#include "fcgi/stream.h"
#include "sandbox/backend.h"
#include "sandbox/cgroups.h"
#include "sandbox/workspace.h"

#define TICK_MS 1000
#define REAP_EVERY_MS 60000
/* What a pool larger than pool_size leaves the host (pool_target): an idle
 * sandbox holds about 35 MiB (scripts/bench, target 5). */
#define POOL_MEM_KEEP ((int64_t)1 << 30)
#define POOL_MEM_PER_SANDBOX ((int64_t)64 << 20)

static volatile sig_atomic_t stop_requested;

/* True when a supervisor holds the folder's sup.lock. */
static bool supervised(int dirfd) {
  cleanup_close int fd = openat(dirfd, SUPERVISOR_LOCK, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  return fd >= 0 && lock_held_elsewhere(fd);
}

typedef void (*entry_fn)(struct store *st, int parent_fd, const char *name, void *opaque);

static void each_entry(int dirfd, struct store *st, entry_fn fn, void *opaque) {
  int fd = dup(dirfd);
  if (fd < 0)
    return;
  cleanup_dir DIR *d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return;
  }
  rewinddir(d);
  struct dirent *de;
  while (!stop_requested && (de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    fn(st, dirfd, de->d_name, opaque);
  }
}

static void sweep_trash(struct store *st, int parent, const char *name, void *opaque) {
  mcp_error_t err = NULL;
  if (trash_remove(st, name, &err) < 0) {
    if (err->kind != MCP_ERR_BUSY)
      mcp_error_log_release(&err, "keeper: trash");
    mcp_error_release(&err);
  }
}

/* A broken stream's answer waits this long for its client to come back
 * (fcgi/stream.h): SDKs try within seconds, the router holds a resume
 * while the session's cell restarts. */
#define STREAM_KEEP_MS (10 * 60 * 1000)
/* A delivered one (lost on the way only if a cell, the router or a
 * connection died a moment later): the SDKs' two tries, each held up to
 * the router's 60 s while the cell restarts, fit in it. */
#define STREAM_DELIVERED_KEEP_MS (3 * 60 * 1000)

/* opaque: a bool, true on the minute's tick, when the session's stream
 * records are swept as well. */
static void expire_session(struct store *st, int parent, const char *name, void *opaque) {
  if (!session_id_valid(name))
    return;
  cleanup_close int dfd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd < 0)
    return;
  if (*(const bool *)opaque)
    stream_records_sweep(dfd, STREAM_KEEP_MS, STREAM_DELIVERED_KEEP_MS);
  int64_t idle_ms = (int64_t)st->cfg->idle_timeout * 1000 + TOUCH_EVERY_MS;
  int64_t last = 0;
  cleanup_free char *text = NULL;
  mcp_error_t err = NULL;
  if (read_file_at(dfd, SESSION_META, 1 << 16, &text, NULL, &err) == 0) {
    cleanup_cjson cJSON *m = cJSON_Parse(text);
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(m, "last_used_ms");
    if (cJSON_IsNumber(u))
      last = (int64_t)u->valuedouble;
  } else {
    /* No metadata: a creation that died half-way, or one in progress.
     * Its folder's last change (ctime, never older than its mtime): a pool
     * folder claimed a moment ago and not yet given its meta.json keeps the
     * mtime of its boot, minutes old, but the claim's rename set its ctime. */
    mcp_error_release(&err);
    struct stat sb;
    if (fstat(dfd, &sb) == 0)
      last = (int64_t)sb.st_ctime * 1000;
    idle_ms = 60000;
  }
  if (wall_ms() - last <= idle_ms)
    return;
  /* A background run keeps it alive too, and it expires idle_timeout
   * after its runs last started or ended (fcgi/session.h). */
  int64_t run_last = 0;
  if (session_runs_active(dfd, &run_last) || wall_ms() - run_last <= idle_ms)
    return;
  /* A call in progress keeps the session alive. */
  cleanup_close int lock = openat(dfd, CALL_LOCK, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (lock >= 0 && lock_try(lock) < 0)
    return;
  fprintf(stderr, "keeper: session %s expired\n", name);
  METRIC_INC(sessions_expired);
  if (session_destroy(st, name, &err) < 0 && err->kind != MCP_ERR_NOT_FOUND && err->kind != MCP_ERR_BUSY)
    mcp_error_log_release(&err, "keeper: expire");
  mcp_error_release(&err);
}

struct pool_count {
  int ready;
  int pending;
};

/* Take a pool folder away and remove it: moved to the trash (a
 * responder claims one by renaming it too, so only one of us gets it),
 * removed there.  False when it was taken meanwhile. */
static bool pool_remove(struct store *st, int parent, const char *name) {
  char tname[80], rnd[33];
  random_hex32(rnd);
  snprintf(tname, sizeof(tname), "pool-%.40s.%.8s", name, rnd);
  if (renameat(parent, name, st->trash_fd, tname) != 0)
    return false;
  sweep_trash(st, st->trash_fd, tname, NULL);
  return true;
}

static void count_pool(struct store *st, int parent, const char *name, void *opaque) {
  struct pool_count *pc = opaque;
  cleanup_close int dfd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd < 0)
    return;
  bool alive = supervised(dfd);
  if (is_hex32(name) && alive) {
    pc->ready++;
    return;
  }
  /* A pool folder without a supervisor (a previous run, a crash) or a
   * leftover of an interrupted preparation: remove it. */
  struct stat sb;
  bool old = fstat(dfd, &sb) == 0 && wall_ms() / 1000 - sb.st_mtime > 60;
  if (!alive && (is_hex32(name) || old)) {
    pool_remove(st, parent, name);
  } else {
    pc->pending++;
  }
}

/* One sandbox being started ahead of demand (fill_pool). */
struct pool_start {
  char id[33];
  char name[64];
  int dfd, fd;
};

/* Prepare a pool folder and start its supervisor (which boots the sandbox
 * in the background): 0, or -1 when it could not. */
static int pool_start_begin(struct store *st, struct pool_start *ps) {
  mcp_error_t err = NULL;
  ps->dfd = ps->fd = -1;
  char id[33];
  if (slot_prepare(st, id, &err) < 0) {
    mcp_error_log_release(&err, "keeper: pool");
    return -1;
  }
  memcpy(ps->id, id, sizeof(id));
  snprintf(ps->name, sizeof(ps->name), ".new-%s", id);
  ps->dfd = openat(st->pool_fd, ps->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (ps->dfd < 0)
    return -1;
  ps->fd = supervisor_connect(st->cfg, ps->dfd, true, 5000, &err);
  if (ps->fd < 0) {
    mcp_error_log_release(&err, "keeper: pool");
    remove_tree_at(st->pool_fd, ps->name, NULL);
    close(ps->dfd);
    ps->dfd = -1;
    return -1;
  }
  return 0;
}

/* Wait for it to be ready (by deadline) and publish it, or remove it. */
static void pool_start_end(struct store *st, struct pool_start *ps, int64_t deadline) {
  mcp_error_t err = NULL;
  bool ready = supervisor_wait_ready(ps->fd, deadline, &err) == 0;
  if (!ready || slot_publish(st, ps->id, &err) < 0) {
    mcp_error_release(&err);
    fprintf(stderr, "keeper: a pre-started sandbox did not become ready\n");
    supervisor_quit(ps->dfd, 10000, NULL);
    remove_tree_at(st->pool_fd, ps->name, NULL);
  }
  close(ps->fd);
  close(ps->dfd);
}

void pool_demand_note(struct pool_demand *d, int64_t now, uint64_t created, int64_t window_ms) {
  int last = (d->head + POOL_DEMAND_SAMPLES - 1) % POOL_DEMAND_SAMPLES;
  if (d->n > 0 && now - d->at[last] < window_ms / (POOL_DEMAND_SAMPLES / 2))
    return; /* samples window/128 apart at least: the ring holds two windows */
  d->at[d->head] = now;
  d->created[d->head] = created;
  d->head = (d->head + 1) % POOL_DEMAND_SAMPLES;
  if (d->n < POOL_DEMAND_SAMPLES)
    d->n++;
}

uint64_t pool_demand_count(const struct pool_demand *d, int64_t now, uint64_t created, int64_t window_ms) {
  /* From the newest sample at least a window old (the oldest one while
   * the keeper is younger than the window): the sessions created since. */
  uint64_t base = created;
  for (int k = 0; k < d->n; k++) {
    int i = (d->head + POOL_DEMAND_SAMPLES - d->n + k) % POOL_DEMAND_SAMPLES;
    if (k == 0 || now - d->at[i] >= window_ms)
      base = d->created[i];
    else
      break;
  }
  return created >= base ? created - base : 0;
}

int pool_target(const struct mcp_config *cfg, uint64_t recent, int64_t mem_available) {
  if (cfg->pool_size <= 0)
    return 0; /* no pool, and none after a burst either */
  int top = cfg->pool_max > cfg->pool_size ? cfg->pool_max : cfg->pool_size;
  int want = recent > (uint64_t)top ? top : (int)recent;
  if (want <= cfg->pool_size)
    return cfg->pool_size;
  /* Each sandbox beyond pool_size must leave POOL_MEM_KEEP available. */
  int extra = want - cfg->pool_size;
  while (extra > 0 && mem_available >= 0 && mem_available < POOL_MEM_KEEP + (int64_t)extra * POOL_MEM_PER_SANDBOX)
    extra--;
  return cfg->pool_size + extra;
}

int64_t pool_memory_available(void) {
  char buf[4096];
  int64_t avail = -1;
  unsigned long long kib = 0;
  const char *p = read_kernel_file("/proc/meminfo", buf, sizeof(buf)) > 0 ? strstr(buf, "MemAvailable:") : NULL;
  if (p != NULL && sscanf(p, "MemAvailable: %llu kB", &kib) == 1)
    avail = (int64_t)kib * 1024;
  int64_t left = cgroups_memory_left();
  return left >= 0 && (avail < 0 || left < avail) ? left : avail;
}

/* A ready pool sandbox more than the pool is kept at (pool_remove). */
static void pool_drop_one(struct store *st, int parent, const char *name, void *opaque) {
  int *excess = opaque;
  if (*excess <= 0 || !is_hex32(name) || !pool_remove(st, parent, name))
    return;
  (*excess)--;
  fprintf(stderr, "keeper: the pool shrinks: sandbox %s stopped\n", name);
}

static struct pool_demand demand;
/* The CPU when the last fill_pool() ended: the idle share since then
 * leaves out the pool's own boots. */
static struct cpu_sample cpu_after;
static bool cpu_known;
static bool growth_told;     /* the wait below is logged once until the pool reaches its target */
static int64_t awaited_told; /* when a refill held back by an awaited boot was last logged */

/* How many sandboxes fill_pool() may have, ready or starting: the target,
 * but no more than pool_size (or than it has) while the machine was busier
 * than pool_grow_idle allows since the last fill (unknown counts as idle). */
static int pool_may_have(const struct mcp_config *cfg, int target, int have) {
  if (target <= have)
    growth_told = false; /* the pool has reached it */
  if (target <= cfg->pool_size || target <= have)
    return target; /* no growth to wait for: the CPU is not read */
  struct cpu_sample now;
  int idle = cpu_known && cpus_sample(&now) == 0 ? cpu_idle_percent(&cpu_after, &now) : -1;
  if (idle < 0 || idle >= cfg->pool_grow_idle)
    return target;
  if (!growth_told)
    fprintf(stderr,
            "keeper: the pool waits to grow to %d: the CPU was %d%% idle (pool_grow_idle %d); it grows "
            "in the seconds the CPU is free enough\n",
            target, idle, cfg->pool_grow_idle);
  growth_told = true;
  return have > cfg->pool_size ? have : cfg->pool_size;
}

/* The pool is kept at pool_target(): missing sandboxes start at once,
 * side by side (their boots take max_starting's slots), and are published
 * as each becomes ready; once the burst is a window old, the extra ready
 * ones stop. */
static void fill_pool_once(struct store *st) {
  const struct mcp_config *cfg = st->cfg;
  struct metrics *m = metrics_get();
  uint64_t created = m != NULL ? atomic_load(&m->sessions_created) : 0;
  int64_t now = now_ms(), window_ms = (int64_t)cfg->pool_window * 1000;
  pool_demand_note(&demand, now, created, window_ms);
  int target = pool_target(cfg, pool_demand_count(&demand, now, created, window_ms), pool_memory_available());
  if (m != NULL)
    atomic_store(&m->pool_target, target);
  struct pool_count pc = {0, 0};
  each_entry(st->pool_fd, st, count_pool, &pc);
  if (pc.ready > target && pc.pending == 0) {
    int excess = pc.ready - target;
    each_entry(st->pool_fd, st, pool_drop_one, &excess);
    return;
  }
  int want = pool_may_have(cfg, target, pc.ready + pc.pending) - pc.ready - pc.pending;
  int room = cfg->max_sessions - session_count(st) - pc.ready - pc.pending;
  if (want > room)
    want = room;
  if (want <= 0)
    return;
  /* Not while a session waits for a boot of its own (or a wake): on 2
   * cores a pool boot beside it, even at a quarter of the weight, made that
   * session wait about a third longer.  The next tick looks again. */
  if (awaited_boot_any(cfg)) {
    if (awaited_told == 0 || now - awaited_told >= 60000) {
      fprintf(stderr, "keeper: the pool waits to refill while a session waits for a sandbox of its own "
                      "(said at most once a minute)\n");
      awaited_told = now;
    }
    return;
  }
  /* Half as many at once as there are cores (one on two): a boot takes a
   * core, and the other half stays for the boots of sessions that wait
   * and for calls (with one per core, a session that found the pool empty
   * waited 1.04 s for its sandbox instead of 0.43 s in scripts/bench). */
  struct pool_start starts[64];
  long cores = cpus_usable() / 2;
  int most = cores < 1 ? 1 : (cores > 64 ? 64 : (int)cores);
  if (want > most)
    want = most;
  int n = 0;
  for (int i = 0; i < want && !stop_requested; i++)
    if (pool_start_begin(st, &starts[n]) == 0)
      n++;
  /* As long as a call waits for its sandbox (ready_wait): on an overloaded
   * machine a boot may take minutes, and a boot stopped before it is ready
   * is work thrown away, to be done again.  The supervisor itself ends a
   * boot that is stuck (READY_TIMEOUT_MS). */
  int64_t deadline = now_ms() + (int64_t)cfg->ready_wait * 1000;
  for (int i = 0; i < n; i++)
    pool_start_end(st, &starts[i], deadline);
}

static void fill_pool(struct store *st) {
  fill_pool_once(st);
  cpu_known = cpus_sample(&cpu_after) == 0;
}

/* sandbox ids of every folder whose supervisor is alive */
struct live_ids {
  char (*ids)[33];
  size_t n, cap;
};

static void collect_live(struct store *st, int parent, const char *name, void *opaque) {
  struct live_ids *live = opaque;
  cleanup_close int dfd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  char id[33];
  if (dfd < 0 || !supervised(dfd) || !folder_sandbox_id(dfd, id))
    return;
  if (live->n == live->cap) {
    size_t cap = live->cap ? live->cap * 2 : 64;
    void *n = realloc(live->ids, cap * sizeof(*live->ids));
    if (n == NULL)
      return;
    live->ids = n;
    live->cap = cap;
  }
  memcpy(live->ids[live->n++], id, 33);
}

static bool is_live(const struct live_ids *live, const char *id) {
  for (size_t i = 0; i < live->n; i++)
    if (strcmp(live->ids[i], id) == 0)
      return true;
  return false;
}

/* Cgroups runsc left behind (a failed create, a killed supervisor). */
static void reap_cgroups(struct store *st, const struct live_ids *live) {
  if (strcmp(st->cfg->backend, "runsc") != 0)
    return;
  char(*ids)[40] = NULL;
  size_t n = 0;
  mcp_error_t err = NULL;
  if (cgroups_list(st->cfg, &ids, &n, &err) < 0)
    mcp_error_log_release(&err, "keeper: cgroups");
  for (size_t i = 0; i < n; i++) {
    if (is_live(live, ids[i] + 3) || runsc_container_exists(st->cfg, ids[i]))
      continue;
    fprintf(stderr, "keeper: removing cgroup %s that belongs to no container\n", ids[i]);
    if (cgroups_remove(st->cfg, ids[i], &err) < 0)
      mcp_error_log_release(&err, "keeper: cgroups");
  }
  free(ids);
}

static void list_live(struct store *st, struct live_ids *live) {
  /* Folders only move forward (pool -> sessions -> trash); listing in that
   * order sees every live folder at least once even while they move. */
  each_entry(st->pool_fd, st, collect_live, live);
  each_entry(st->sessions_fd, st, collect_live, live);
  each_entry(st->trash_fd, st, collect_live, live);
}

/* A candidate must still be unclaimed when we look again: a supervisor
 * that started after the first listing creates its container under its
 * lock, and the second listing sees that lock. */
static bool still_stale(struct store *st, const char *id) {
  struct live_ids again = {NULL, 0, 0};
  list_live(st, &again);
  bool stale = !is_live(&again, id);
  free(again.ids);
  return stale;
}

static void reap_containers(struct store *st) {
  struct live_ids live = {NULL, 0, 0};
  list_live(st, &live);
  char root[PATH_MAX];
  config_path(st->cfg, root, sizeof(root), "runsc");
  cleanup_dir DIR *d = opendir(root);
  struct dirent *de;
  while (d != NULL && (de = readdir(d)) != NULL) {
    /* <cid>_sandbox:<cid>.state with cid = "mcp" + 32 hex */
    const char *n = de->d_name;
    if (strncmp(n, "mcp", 3) != 0 || strlen(n) < 35 + 6 || strcmp(n + strlen(n) - 6, ".state") != 0)
      continue;
    char id[33];
    memcpy(id, n + 3, 32);
    id[32] = '\0';
    if (!is_hex32(id))
      continue;
    if (is_live(&live, id) || !still_stale(st, id))
      continue;
    char cid[40];
    snprintf(cid, sizeof(cid), "mcp%s", id);
    fprintf(stderr, "keeper: removing container %s that belongs to no live session\n", cid);
    mcp_error_t err = NULL;
    if (strcmp(st->cfg->backend, "runsc") == 0 && runsc_remove(st->cfg, cid, &err) < 0)
      mcp_error_log_release(&err, "keeper: reap");
  }
  reap_cgroups(st, &live);
  free(live.ids);
}

/* A workspace left mounted by a supervisor that died.  Only when no
 * supervisor can start: one that started after the look would have its
 * workspace taken away. */
static void unmount_orphan(struct store *st, int parent, const char *name, void *opaque) {
  (void)st;
  (void)opaque;
  cleanup_close int dfd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd >= 0 && !supervised(dfd) && workspace_mounted(dfd)) {
    fprintf(stderr, "keeper: unmounting the workspace of %s, whose supervisor is gone\n", name);
    workspace_unmount(dfd);
  }
}

void keeper_reap_orphans(const struct mcp_config *cfg) {
  struct store st;
  mcp_error_t err = NULL;
  if (store_open(cfg, &st, &err) < 0) {
    mcp_error_log_release(&err, "mcp-server: reap");
    return;
  }
  reap_containers(&st);
  each_entry(st.pool_fd, &st, unmount_orphan, NULL);
  each_entry(st.sessions_fd, &st, unmount_orphan, NULL);
  each_entry(st.trash_fd, &st, unmount_orphan, NULL);
  store_close(&st);
}

void keeper_tick(struct store *st, bool reap) {
  each_entry(st->trash_fd, st, sweep_trash, NULL);
  each_entry(st->sessions_fd, st, expire_session, &reap);
  if (reap) {
    reap_containers(st);
    session_owners_mend(st);
  }
  fill_pool(st);
}

int keeper_main(const struct mcp_config *cfg) {
  /* SIGTERM keeps its default action: the keeper holds no state, and a
   * half-prepared pool folder is removed by the next keeper. */
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN); /* log rotation is the responders' business */
  struct store st;
  mcp_error_t err = NULL;
  if (store_open(cfg, &st, &err) < 0) {
    mcp_error_log_release(&err, "keeper");
    return 1;
  }
  int64_t last_reap = -REAP_EVERY_MS;
  while (!stop_requested) {
    bool reap = now_ms() - last_reap >= REAP_EVERY_MS;
    keeper_tick(&st, reap);
    if (reap)
      last_reap = now_ms();
    if (!stop_requested)
      poll(NULL, 0, TICK_MS);
  }
  store_close(&st);
  return 0;
}
