/* common/slots.c, execution slots taken in turn: a free slot is taken at
 * once; calls that find none get them in the order they asked, each woken
 * (its inotify fd readable) when the queue moves; a waiter that died is
 * passed over; a token that is full queues in its own line and does not
 * hold back another token; giving up leaves the queue and frees the
 * token's slot; beyond its busy share a token's call waits for a window
 * of the CPU with half a core idle; awaited boots' marks; whether calls
 * wait (slot_others_wait) or run (slot_others_run).  Several "supervisors"
 * in one process: OFD locks of different opens conflict as between
 * processes. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/settings.h"
#include "common/slots.h"
#include "common/util.h"
#include "tap.h"

#define WAITERS 6

static struct mcp_config cfg;

struct sup {
  struct slot_hold h;
  struct slot_wait w;
};

static struct sup sup_new(void) { return (struct sup){SLOT_HOLD_NONE, SLOT_WAIT_NONE}; }

/* The token's busy share: token_max unless a test says (no CPU look). */
static int busy_share;

static int take(struct sup *s, const char *token, int token_max, enum slot_full *full) {
  mcp_error_t err = NULL;
  enum slot_full f;
  int busy = busy_share > 0 ? busy_share : token_max;
  int r = slot_take(&cfg, token, token_max, busy, &s->h, &s->w, full ? full : &f, &err);
  if (r < 0 && r != -EAGAIN)
    diag("slot_take: %s", mcp_error_public(err));
  mcp_error_release(&err);
  return r;
}

static bool woken(const struct sup *s) {
  struct pollfd p = {slot_wait_fd(&s->w), POLLIN, 0};
  return p.fd >= 0 && poll(&p, 1, 0) == 1;
}

/* Tickets in <state>/slots/<sub>queue. */
static int tickets(const char *sub) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof(path), "%s/slots/%squeue", cfg.state_dir, sub);
  return visible_entries(path);
}

static void order_tests(void) {
  cfg.max_concurrent = 1;
  struct sup holder = sup_new();
  is_int(take(&holder, "alpha", 8, NULL), 0, "a free slot is taken at once");
  ok(holder.h.global_fd >= 0 && holder.h.token_fd >= 0, "both the service's and the token's slot are held");
  is_int(slot_wait_fd(&holder.w), -1, "and nothing waits");

  struct sup w[WAITERS];
  for (int i = 0; i < WAITERS; i++) {
    w[i] = sup_new();
    enum slot_full full;
    is_int(take(&w[i], "alpha", 8, &full), -EAGAIN, "call %d finds the service full: it waits", i);
    is_int(full, SLOT_FULL_GLOBAL, "in the service's queue, holding its token's slot (%d)", i);
  }
  is_int(tickets(""), WAITERS, "%d tickets in slots/queue", WAITERS);
  ok(!woken(&w[0]), "nobody is woken while the slot stays held");

  slot_release(&holder.h);
  ok(woken(&w[0]), "releasing the slot wakes the first waiter");
  bool rest = false;
  for (int i = 1; i < WAITERS; i++)
    rest = rest || woken(&w[i]);
  ok(!rest, "and none of the waiters behind it");
  /* Everyone looks, the last comers first: only the oldest takes it. */
  for (int i = WAITERS - 1; i > 0; i--)
    is_int(take(&w[i], "alpha", 8, NULL), -EAGAIN, "call %d, younger, waits on", i);
  is_int(take(&w[0], "alpha", 8, NULL), 0, "the oldest call takes the slot");
  is_int(slot_wait_fd(&w[0].w), -1, "and left the queue");
  ok(woken(&w[1]), "which wakes the waiter just behind it");
  ok(!woken(&w[2]), "but not the one behind that");
  for (int i = 1; i < WAITERS; i++) {
    is_int(take(&w[i], "alpha", 8, NULL), -EAGAIN, "while call %d runs, call %d waits", i - 1, i);
    slot_release(&w[i - 1].h);
    ok(woken(&w[i]), "call %d's end wakes call %d", i - 1, i);
    if (i + 1 < WAITERS)
      is_int(take(&w[i + 1], "alpha", 8, NULL), -EAGAIN, "call %d, behind it, still waits", i + 1);
    is_int(take(&w[i], "alpha", 8, NULL), 0, "call %d takes the slot in its turn", i);
  }
  slot_release(&w[WAITERS - 1].h);
  is_int(tickets(""), 0, "the queue is empty afterwards");
}

/* A child that asks for a slot of token (its limit token_max) and then
 * waits to be killed: its pid, once it said 'q' (queued) or 'x' (it got
 * one) in *said (0: it said nothing). */
static pid_t waiter_elsewhere(const char *token, int token_max, char *said) {
  int ready[2];
  if (pipe(ready) < 0)
    bail_out("pipe: %s", strerror(errno));
  pid_t pid = fork();
  if (pid == 0) {
    struct sup dead = sup_new();
    char c = take(&dead, token, token_max, NULL) == -EAGAIN ? 'q' : 'x';
    if (write(ready[1], &c, 1) != 1)
      _exit(1);
    pause();
    _exit(0);
  }
  if (read(ready[0], said, 1) != 1)
    *said = 0;
  close(ready[0]);
  close(ready[1]);
  return pid;
}

static void kill_waiter(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

static void dead_waiter_tests(void) {
  cfg.max_concurrent = 1;
  struct sup holder = sup_new();
  is_int(take(&holder, "alpha", 8, NULL), 0, "a slot is held");
  char said;
  pid_t pid = waiter_elsewhere("alpha", 8, &said);
  is_int(said, 'q', "a waiter in another process is queued");
  struct sup next = sup_new();
  is_int(take(&next, "alpha", 8, NULL), -EAGAIN, "a second waiter stands behind it");
  kill_waiter(pid);
  is_int(tickets(""), 2, "the dead waiter's ticket is still there");
  slot_release(&holder.h);
  ok(woken(&next), "the release wakes the live waiter");
  is_int(take(&next, "alpha", 8, NULL), 0, "which takes the slot: the dead one is passed over");
  is_int(tickets(""), 0, "and its ticket is gone");

  /* A dead waiter between two live ones: the one behind it watches its
   * ticket, which nobody removes at a move; the next release does. */
  struct sup first = sup_new(), last = sup_new();
  is_int(take(&first, "alpha", 8, NULL), -EAGAIN, "a live waiter");
  pid = waiter_elsewhere("alpha", 8, &said);
  is_int(said, 'q', "a waiter in another process behind it");
  is_int(take(&last, "alpha", 8, NULL), -EAGAIN, "and a live one behind that");
  kill_waiter(pid);
  slot_release(&next.h);
  ok(woken(&first) && !woken(&last), "the release wakes the first waiter only");
  is_int(take(&first, "alpha", 8, NULL), 0, "the first takes the slot");
  ok(!woken(&last), "its leaving the queue wakes nobody: the waiter behind it died");
  is_int(tickets(""), 2, "the dead ticket is still there");
  slot_release(&first.h);
  ok(woken(&last), "the end of its call removes the dead ticket, which wakes the last waiter");
  is_int(take(&last, "alpha", 8, NULL), 0, "which takes the slot");
  is_int(tickets(""), 0, "no ticket is left");
  slot_release(&last.h);
}

static void token_tests(void) {
  cfg.max_concurrent = 2;
  struct sup a1 = sup_new(), a2 = sup_new(), b = sup_new();
  is_int(take(&a1, "alpha", 1, NULL), 0, "alpha's only call slot");
  enum slot_full full;
  is_int(take(&a2, "alpha", 1, &full), -EAGAIN, "alpha's second call waits");
  is_int(full, SLOT_FULL_TOKEN, "in alpha's own queue");
  is_int(a2.h.token_fd, -1, "holding nothing");
  is_int(tickets("t-alpha/"), 1, "one ticket in slots/t-alpha/queue");
  is_int(take(&b, "beta", 1, NULL), 0, "beta's call is not held back by alpha's waiting one");
  ok(slot_global_full(&cfg, &a2.h), "the service's slots are all taken now");
  slot_release(&b.h);
  ok(!slot_global_full(&cfg, &a2.h), "and one is free after beta's call");
  slot_wait_end(&a2.w, &a2.h);
  is_int(tickets("t-alpha/"), 0, "giving up leaves the queue");
  slot_release(&a1.h);

  /* Given up in the service's queue: the token's slot it held is free again. */
  cfg.max_concurrent = 1;
  struct sup g = sup_new(), q = sup_new(), t = sup_new();
  is_int(take(&g, "beta", 1, NULL), 0, "beta takes the service's only slot");
  is_int(take(&q, "alpha", 1, &full), -EAGAIN, "alpha's call waits");
  is_int(full, SLOT_FULL_GLOBAL, "for the service's slot, holding alpha's");
  is_int(take(&t, "alpha", 1, &full), -EAGAIN, "alpha's next call waits");
  is_int(full, SLOT_FULL_TOKEN, "for alpha's slot");
  slot_wait_end(&q.w, &q.h);
  ok(woken(&t), "giving up wakes alpha's queue");
  is_int(take(&t, "alpha", 1, &full), -EAGAIN, "alpha's next call has the token's slot now");
  is_int(full, SLOT_FULL_GLOBAL, "and waits for the service's");
  ok(t.h.token_fd >= 0, "holding alpha's slot");
  slot_release(&g.h);
  is_int(take(&t, "alpha", 1, NULL), 0, "it runs once beta's call ended");
  slot_release(&t.h);
  is_int(tickets("") + tickets("t-alpha/") + tickets("t-beta/"), 0, "no ticket is left");
}

/* The CPU as the tests say it is: each look sees 100 more ticks, `idle`
 * of them idle. */
static struct cpu_sample fake_cpu;
static int fake_idle, fake_looks;

static int fake_read(struct cpu_sample *s) {
  fake_cpu.total += 100;
  fake_cpu.idle += (uint64_t)fake_idle;
  fake_looks++;
  *s = fake_cpu;
  return 0;
}

static int failed_read(struct cpu_sample *s) {
  (void)s;
  return -1;
}

static void wait_window(void) { usleep((SLOT_CPU_LOOK_MS + 10) * 1000); }

static void busy_tests(void) {
  cfg.max_concurrent = 8;
  busy_share = 2;
  slot_cpu_read = fake_read;
  fake_idle = 0;
  struct sup a[5], b = sup_new();
  for (int i = 0; i < 5; i++)
    a[i] = sup_new();
  enum slot_full full;
  is_int(take(&a[0], "alpha", 4, NULL), 0, "alpha's first call runs at once");
  is_int(take(&a[1], "alpha", 4, NULL), 0, "and its second: its busy share is 2");
  is_int(fake_looks, 0, "without a look at the CPU");
  is_int(take(&a[2], "alpha", 4, &full), -EAGAIN, "its third waits");
  is_int(full, SLOT_FULL_CPU, "for the CPU");
  ok(fake_looks > 0, "having looked at it");
  is_int(slot_wait_ms(&a[2].w), SLOT_CPU_LOOK_MS, "it looks again within %d ms", SLOT_CPU_LOOK_MS);
  fake_idle = 100;
  is_int(take(&a[2], "alpha", 4, NULL), -EAGAIN, "an idle CPU at once after the first look is no window yet");
  fake_idle = 0;
  wait_window();
  is_int(take(&a[2], "alpha", 4, &full), -EAGAIN, "a window of a busy CPU: it waits on");
  is_int(full, SLOT_FULL_CPU, "still for the CPU");
  is_int(take(&b, "beta", 4, NULL), 0, "beta's call is not held back by alpha's wait for the CPU");
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1)
    cores = 1;
  fake_idle = (int)(49 / cores); /* of 100 ticks: just under half a core */
  wait_window();
  is_int(take(&a[2], "alpha", 4, &full), -EAGAIN, "a window with %d%% idle on %ld cores (under half a core): it waits",
         fake_idle, cores);
  fake_idle = (int)((50 + cores - 1) / cores); /* half a core or a little more */
  wait_window();
  is_int(take(&a[2], "alpha", 4, NULL), 0, "a window with %d%% idle (half a core) lets the third call in", fake_idle);
  is_int(slot_wait_fd(&a[2].w), -1, "it left the queue");
  is_int(take(&a[3], "alpha", 4, &full), -EAGAIN, "the fourth waits for the CPU");
  is_int(take(&a[4], "alpha", 4, &full), -EAGAIN, "the fifth waits");
  is_int(full, SLOT_FULL_TOKEN, "behind it in alpha's line");
  fake_idle = 0;
  slot_release(&a[0].h);
  ok(woken(&a[3]), "the end of a call in alpha's busy share wakes its line");
  is_int(take(&a[4], "alpha", 4, NULL), -EAGAIN, "the younger call waits on");
  is_int(take(&a[3], "alpha", 4, NULL), 0, "the older takes the freed slot, CPU busy or not");
  slot_release(&a[2].h);
  ok(woken(&a[4]), "the end of the call beyond the share wakes the line too");
  is_int(take(&a[4], "alpha", 4, &full), -EAGAIN, "but its slot needs the CPU");
  is_int(full, SLOT_FULL_CPU, "which is busy");
  slot_wait_end(&a[4].w, &a[4].h);
  int looks = fake_looks;
  busy_share = 4;
  is_int(take(&a[4], "alpha", 4, NULL), 0, "a busy share as large as the token's limit: no wait");
  is_int(fake_looks, looks, "and no look at the CPU");
  slot_release(&a[1].h);
  slot_release(&a[3].h);
  slot_release(&a[4].h);
  slot_release(&b.h);
  is_int(tickets("") + tickets("t-alpha/") + tickets("t-beta/"), 0, "no ticket is left");

  /* slot_cpu_busy: the same rule, from a sample of the caller's. */
  struct cpu_sample since;
  fake_read(&since);
  fake_idle = (int)(49 / cores);
  ok(slot_cpu_busy(&since), "cpu busy: %d%% idle on %ld cores (under half a core) is busy", fake_idle, cores);
  fake_read(&since);
  fake_idle = (int)((50 + cores - 1) / cores);
  ok(!slot_cpu_busy(&since), "cpu busy: %d%% idle (half a core) is not", fake_idle);
  slot_cpu_read = failed_read;
  ok(slot_cpu_busy(&since), "cpu busy: a CPU that cannot be read counts as busy");
  slot_cpu_read = cpus_sample;
  busy_share = 0;
}

/* Awaited boots' marks: held while one runs, none after, none of a
 * process that died; all taken: -EAGAIN. */
static void awaited_tests(void) {
  mcp_error_t err = NULL;
  int max_starting = cfg.max_starting;
  cfg.max_starting = 2;
  ok(!awaited_boot_any(&cfg), "awaited: none before any boot");
  int a = awaited_boot_mark(&cfg, &err);
  ok(a >= 0 && awaited_boot_any(&cfg), "awaited: a mark is seen while it is held");
  int b = awaited_boot_mark(&cfg, &err);
  ok(b >= 0 && b != a, "awaited: a second boot takes another");
  is_int(awaited_boot_mark(&cfg, &err), -EAGAIN, "awaited: max_starting of them at most");
  close(a);
  ok(awaited_boot_any(&cfg), "awaited: one still held");
  close(b);
  ok(!awaited_boot_any(&cfg), "awaited: none once both are released");
  pid_t pid = fork();
  if (pid == 0) {
    mcp_error_t e = NULL;
    _exit(awaited_boot_mark(&cfg, &e) >= 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && !awaited_boot_any(&cfg),
     "awaited: the mark of a process that died is not seen");
  mcp_error_release(&err);
  cfg.max_starting = max_starting;
}

/* slot_others_wait: a live ticket in the service's queue or in a token's,
 * or an awaited boot; not a dead waiter's ticket. */
static void others_wait_tests(void) {
  ok(!slot_others_wait(&cfg), "others wait: not while no call waits");
  cfg.max_concurrent = 1;
  struct sup holder = sup_new(), waiter = sup_new();
  is_int(take(&holder, "alpha", 8, NULL), 0, "others wait: a call holds the only slot");
  ok(!slot_others_wait(&cfg), "others wait: a running call is not a waiting one");
  is_int(take(&waiter, "beta", 8, NULL), -EAGAIN, "others wait: beta's call waits for the service's slot");
  ok(slot_others_wait(&cfg), "others wait: seen in the service's queue");
  slot_wait_end(&waiter.w, &waiter.h);
  ok(!slot_others_wait(&cfg), "others wait: no more once it gave up");
  slot_release(&holder.h);

  cfg.max_concurrent = 4;
  is_int(take(&holder, "alpha", 1, NULL), 0, "others wait: alpha's only call slot is taken");
  enum slot_full full;
  is_int(take(&waiter, "alpha", 1, &full), -EAGAIN, "others wait: alpha's second call waits");
  ok(full == SLOT_FULL_TOKEN && slot_others_wait(&cfg), "others wait: seen in alpha's own queue");
  slot_wait_end(&waiter.w, &waiter.h);
  ok(!slot_others_wait(&cfg), "others wait: none once it gave up");

  char said;
  pid_t pid = waiter_elsewhere("alpha", 1, &said);
  ok(said == 'q' && slot_others_wait(&cfg), "others wait: a waiter in another process is seen");
  kill_waiter(pid);
  ok(!slot_others_wait(&cfg), "others wait: not once it died");
  is_int(tickets("t-alpha/"), 0, "others wait: and its ticket was removed");
  slot_release(&holder.h);

  mcp_error_t err = NULL;
  int mark = awaited_boot_mark(&cfg, &err);
  ok(mark >= 0 && slot_others_wait(&cfg), "others wait: an awaited boot counts");
  close(mark);
  ok(!slot_others_wait(&cfg), "others wait: not once it is ready");
  mcp_error_release(&err);
}

/* slot_others_run: a slot of the service's held beside the caller's own,
 * in this process or another; not a token's slot alone. */
static void others_run_tests(void) {
  cfg.max_concurrent = 4;
  ok(!slot_others_run(&cfg, NULL), "others run: not while no call runs");
  struct sup a = sup_new(), b = sup_new();
  is_int(take(&a, "alpha", 4, NULL), 0, "others run: alpha's call holds a slot");
  ok(slot_others_run(&cfg, NULL), "others run: seen from outside");
  ok(!slot_others_run(&cfg, &a.h), "others run: not by the call's own supervisor");
  is_int(take(&b, "beta", 4, NULL), 0, "others run: beta's call holds another");
  ok(slot_others_run(&cfg, &a.h), "others run: alpha's supervisor sees beta's");
  slot_release(&b.h);
  ok(!slot_others_run(&cfg, &a.h), "others run: not once beta's call ended");
  slot_release(&a.h);
  ok(!slot_others_run(&cfg, &a.h), "others run: none once alpha's ended (its hold released)");

  char said;
  pid_t pid = waiter_elsewhere("gamma", 4, &said);
  ok(said == 'x' && slot_others_run(&cfg, NULL), "others run: a call of another process is seen");
  kill_waiter(pid);
  ok(!slot_others_run(&cfg, NULL), "others run: not once that process died");

  char dir[sizeof(cfg.state_dir) + 32];
  snprintf(dir, sizeof(dir), "%s/slots/t-delta", cfg.state_dir);
  mkdir(dir, 0700);
  snprintf(dir, sizeof(dir), "%s/slots/t-delta/0", cfg.state_dir);
  int tfd = open(dir, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ok(tfd >= 0 && lock_try(tfd) == 0 && !slot_others_run(&cfg, NULL),
     "others run: a token's slot alone is not a running call");
  if (tfd >= 0)
    close(tfd);
}

int main(void) {
  config_defaults(&cfg);
  const char *t = getenv("TMPDIR");
  char dir[PATH_MAX - 16];
  snprintf(dir, sizeof(dir), "%s/mcp-slots-XXXXXX", t && *t ? t : "/tmp");
  if (mkdtemp(dir) == NULL)
    bail_out("mkdtemp: %s", strerror(errno));
  snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", dir);
  char slots[sizeof(dir) + 8];
  snprintf(slots, sizeof(slots), "%s/slots", dir);
  if (mkdir(slots, 0700) < 0)
    bail_out("mkdir %s: %s", slots, strerror(errno));
  order_tests();
  dead_waiter_tests();
  token_tests();
  busy_tests();
  awaited_tests();
  others_wait_tests();
  others_run_tests();
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    mcp_error_t err = NULL;
    remove_tree_at(dfd, "slots", &err);
    mcp_error_release(&err);
    close(dfd);
  }
  rmdir(dir);
  return done_testing();
}
