/* fcgi/keeper.c, the pool that follows demand: pool_size sandboxes, as many
 * as the sessions of the last pool_window seconds up to pool_max (within
 * the host's available memory), back to pool_size once the window passed;
 * the CPU share that lets it grow (pool_grow_idle); then the keeper doing
 * it, with the direct backend, and holding back while a session waits for
 * a boot of its own. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cpus.h"
#include "common/metrics.h"
#include "common/slots.h"
#include "common/util.h"
#include "fcgi/keeper.h"
#include "mcp-harness.h"
#include "tap.h"

static struct harness h;

static void target_tests(void) {
  struct mcp_config cfg = h.cfg;
  cfg.pool_size = 2;
  cfg.pool_max = 8;
  int64_t plenty = (int64_t)16 << 30;
  is_int(pool_target(&cfg, 0, plenty), 2, "no new sessions: pool_size");
  is_int(pool_target(&cfg, 1, plenty), 2, "fewer than pool_size: pool_size");
  is_int(pool_target(&cfg, 5, plenty), 5, "a burst of 5: 5");
  is_int(pool_target(&cfg, 40, plenty), 8, "a larger burst: pool_max");
  is_int(pool_target(&cfg, 40, ((int64_t)1 << 30) + ((int64_t)3 << 26)), 5,
         "memory for 3 more than pool_size beyond the 1 GiB kept: 5");
  is_int(pool_target(&cfg, 40, (int64_t)512 << 20), 2, "below the memory kept: never below pool_size");
  is_int(pool_target(&cfg, 40, -1), 8, "memory unknown: pool_max");
  int64_t avail = pool_memory_available();
  ok(avail > 0, "the memory available here is read: %lld MiB", (long long)(avail >> 20));
  cfg.pool_max = 0;
  is_int(pool_target(&cfg, 40, plenty), 2, "pool_max 0 (below pool_size): no growth");
  cfg.pool_size = 0;
  cfg.pool_max = 8;
  is_int(pool_target(&cfg, 40, plenty), 0, "pool_size 0: no pool, even after a burst");
}

static void demand_tests(void) {
  struct pool_demand d = {0};
  int64_t w = 120000;
  pool_demand_note(&d, 1000, 10, w);
  is_int(pool_demand_count(&d, 1000, 10, w), 0, "nothing since the first sample");
  pool_demand_note(&d, 2000, 13, w);
  is_int(pool_demand_count(&d, 2000, 13, w), 3, "three sessions since: 3");
  pool_demand_note(&d, 60000, 20, w);
  is_int(pool_demand_count(&d, 60000, 20, w), 10, "a keeper younger than the window counts from its start");
  pool_demand_note(&d, 122500, 20, w);
  is_int(pool_demand_count(&d, 122500, 20, w), 7, "the sessions older than the window drop out");
  pool_demand_note(&d, 190000, 21, w);
  is_int(pool_demand_count(&d, 190000, 21, w), 1, "one session in the last window");
  is_int(pool_demand_count(&d, 400000, 21, w), 0, "a quiet window: none");
  struct pool_demand e = {0};
  for (int i = 0; i < 10 * POOL_DEMAND_SAMPLES; i++)
    pool_demand_note(&e, i * 100, (uint64_t)i, w);
  int64_t t = (10 * POOL_DEMAND_SAMPLES - 1) * 100;
  uint64_t got = pool_demand_count(&e, t, (uint64_t)(10 * POOL_DEMAND_SAMPLES - 1), w);
  ok(got >= 1200 && got <= 1200 + 1200 / 64, "a steady rate over a full ring: a window's worth (%llu of 1200)",
     (unsigned long long)got);
}

static void cpu_tests(void) {
  struct cpu_sample a, b;
  is_int(cpu_sample_parse("cpu  100 5 50 800 45 0 0 0 0 0\ncpu0 50 2 25 400 22 0 0 0 0 0\n", &a), 0,
         "/proc/stat's cpu line parses");
  is_int((int)a.total, 1000, "its total: user, nice, system, idle, iowait, irq, softirq, steal");
  is_int((int)a.idle, 845, "its idle part: idle and iowait");
  is_int(cpu_sample_parse("cpu  1 2 3\n", &b), -1, "a line without the idle field is refused");
  is_int(cpu_sample_parse("intr 1 2 3 4 5\n", &b), -1, "text without the cpu line is refused");
  is_int(cpu_sample_parse("cpu  1100 5 50 900 45 0 0 0\n", &b), 0, "a later sample (8 fields, no guest)");
  is_int(cpu_idle_percent(&a, &b), 9, "100 of 1100 ticks idle since: 9%%");
  is_int(cpu_idle_percent(&b, &a), -1, "samples out of order: unknown");
  is_int(cpu_idle_percent(&a, &a), -1, "no tick between them: unknown");
  struct cpu_sample idle = {a.total + 400, a.idle + 400};
  is_int(cpu_idle_percent(&a, &idle), 100, "every tick idle: 100%%");
}

/* The ids of the ready pool sandboxes (up to 8), and how many. */
static int pool_ids(char ids[8][33]) {
  char path[PATH_MAX + 8];
  snprintf(path, sizeof(path), "%s/pool", h.state);
  DIR *d = opendir(path);
  int n = 0;
  struct dirent *de;
  while (d != NULL && (de = readdir(d)) != NULL)
    if (is_hex32(de->d_name) && n < 8)
      memcpy(ids[n++], de->d_name, 33);
  if (d != NULL)
    closedir(d);
  return n;
}

static int pool_ready(void) {
  char ids[8][33];
  return pool_ids(ids);
}

/* Supervisors or executors left of the sandboxes in before but not in the pool now. */
static int gone_left(char before[8][33], int n) {
  char now[8][33];
  int m = pool_ids(now), left = 0;
  for (int i = 0; i < n; i++) {
    bool kept = false;
    for (int j = 0; j < m; j++)
      kept = kept || strcmp(before[i], now[j]) == 0;
    if (!kept)
      left += processes_with(before[i], 5000);
  }
  return left;
}

/* A process that keeps one CPU busy until killed. */
static pid_t spin(void) {
  pid_t pid = fork();
  if (pid == 0)
    for (volatile unsigned long n = 0;; n++)
      ;
  return pid;
}

/* The keeper itself: pool_size 1, pool_max 3, a window of 5 s. */
static void keeper_tests(void) {
  h.cfg.pool_size = 1;
  h.cfg.pool_max = 3;
  h.cfg.pool_window = 5;
  h.cfg.pool_grow_idle = 100; /* grows only when every tick of the CPU was idle */
  struct metrics *m = metrics_get();
  keeper_tick(&h.store, false);
  is_int(pool_ready(), 1, "the keeper starts pool_size sandboxes");
  is_int(atomic_load(&m->pool_target), 1, "mcp_pool_target says 1");
  char ids[3][SESSION_ID_MAX];
  for (int i = 0; i < 3; i++)
    if (!initialize(&h, TEST_TOKEN, ids[i]))
      bail_out("initialize %d", i);
  pid_t busy = spin();
  if (busy < 0)
    bail_out("fork: %s", strerror(errno));
  for (int i = 0; i < 3; i++) {
    usleep(300 * 1000); /* ticks of the CPU pass, one of them busy */
    keeper_tick(&h.store, false);
  }
  is_int(atomic_load(&m->pool_target), 3, "after 3 new sessions mcp_pool_target says 3");
  is_int(pool_ready(), 1, "a busy CPU (below pool_grow_idle): the pool holds pool_size, not more");
  kill(busy, SIGKILL);
  waitpid(busy, NULL, 0);
  h.cfg.pool_grow_idle = 0; /* whatever the load */
  for (int i = 0; i < 6 && pool_ready() < 3; i++)
    keeper_tick(&h.store, false);
  is_int(pool_ready(), 3, "pool_grow_idle 0: the pool grows and holds 3");
  is_int(atomic_load(&m->pool_target), 3, "mcp_pool_target says 3");
  for (int i = 0; i < 3; i++)
    is_int(delete_session(&h, TEST_TOKEN, ids[i]), 204, "DELETE %d", i);
  keeper_tick(&h.store, false);
  is_int(pool_ready(), 3, "within the window it stays");
  char before[8][33];
  int n = pool_ids(before);
  sleep(6);
  keeper_tick(&h.store, false);
  is_int(pool_ready(), 1, "a window without new sessions: back to pool_size");
  is_int(atomic_load(&m->pool_target), 1, "mcp_pool_target says 1 again");
  is_int(gone_left(before, n), 0, "nothing is left of the sandboxes the pool stopped");
  h.cfg.pool_size = 0;
  n = pool_ids(before);
  keeper_tick(&h.store, false);
  is_int(pool_ready(), 0, "pool_size 0: the pool is emptied");
  is_int(gone_left(before, n), 0, "and nothing is left of it");
}

/* While a session waits for a boot of its own (a supervisor holds an
 * awaited mark) the keeper starts no pool boot; it does at the next tick
 * after the mark is gone. */
static void awaited_tests(void) {
  h.cfg.pool_size = 0;
  keeper_tick(&h.store, false);
  h.cfg.pool_size = 1;
  mcp_error_t err = NULL;
  int mark = awaited_boot_mark(&h.cfg, &err);
  if (mark < 0)
    bail_out("awaited mark: %s", err ? err->msg : "none free");
  keeper_tick(&h.store, false);
  is_int(pool_ready(), 0, "while a session waits for its own boot the pool boots none");
  close(mark);
  keeper_tick(&h.store, false);
  is_int(pool_ready(), 1, "once it is ready the pool refills");
  h.cfg.pool_size = 0;
  keeper_tick(&h.store, false);
}

/* A pool folder claimed a moment ago: renamed into sessions/ before its
 * meta.json is written, with the mtime of its boot (an hour old here).
 * The keeper must not take it for a creation that died half-way. */
static void claim_race_tests(void) {
  const char *id = "0123456789abcdef0123456789abcdef";
  if (mkdirat(h.store.pool_fd, ".claim-test", 0700) < 0)
    bail_out("mkdir: %s", strerror(errno));
  int fd = openat(h.store.pool_fd, ".claim-test", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct timespec old[2] = {{.tv_sec = time(NULL) - 3600}, {.tv_sec = time(NULL) - 3600}};
  if (fd < 0 || futimens(fd, old) < 0)
    bail_out("futimens: %s", strerror(errno));
  struct stat before, sb;
  if (fstat(fd, &before) < 0)
    bail_out("fstat: %s", strerror(errno));
  close(fd);
  usleep(20 * 1000);
  if (renameat(h.store.pool_fd, ".claim-test", h.store.sessions_fd, id) < 0)
    bail_out("rename: %s", strerror(errno));
  ok(fstatat(h.store.sessions_fd, id, &sb, 0) == 0 && sb.st_mtime < time(NULL) - 3000,
     "the claimed folder keeps its old mtime");
  ok(sb.st_ctim.tv_sec > before.st_ctim.tv_sec ||
         (sb.st_ctim.tv_sec == before.st_ctim.tv_sec && sb.st_ctim.tv_nsec > before.st_ctim.tv_nsec),
     "the rename sets its ctime (what the keeper reads)");
  keeper_tick(&h.store, false);
  ok(fstatat(h.store.sessions_fd, id, &sb, 0) == 0,
     "the keeper leaves a folder claimed a moment ago, without meta.json");
  remove_tree_at(h.store.sessions_fd, id, NULL);
}

int main(void) {
  harness_setup(&h);
  mcp_error_t err = NULL;
  if (metrics_create(&h.cfg, &err) < 0)
    bail_out("counters: %s", err->msg);
  target_tests();
  demand_tests();
  cpu_tests();
  keeper_tests();
  awaited_tests();
  claim_race_tests();
  harness_teardown(&h);
  return done_testing();
}
