/* The executor's next spare waits while other sessions' calls wait or run
 * on busy cores, end to end (responder -> supervisor -> executor, the
 * direct backend): after a call's answer the supervisor says L when
 * slot_others_wait (common/slots.h) finds a waiting call or an awaited
 * boot, or slot_others_run a running call, and N once none waits and no
 * call runs on busy cores (sandbox/supervisor.c: spares_later,
 * spares_look); the executor forks its spare only then
 * (executor/mcp_executor/main.py, between_calls).  In the
 * direct backend the executor and its spares are host processes whose
 * command line names the executor folder: between two calls there are two
 * (the executor and one spare), or one while the spare waits.  The awaited
 * boot and the running call are a mark and a slot the test takes itself,
 * and it keeps the cores busy meanwhile (a spare waits only for calls that
 * wait for busy cores or run on them). */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cpus.h"

#include "common/slots.h"
#include "common/util.h"
#include "mcp-harness.h"
#include "tap.h"

/* The supervisor's SPARES_LATER_MS: past it the executor forks anyway. */
#define LATER_MS 2000

static struct harness h;
static char sid[SESSION_ID_MAX];
static char needle[PATH_MAX + 16];

/* Wait up to wait_ms for exactly n executor processes; whether there were. */
static bool executors_reach(int n, int wait_ms) {
  int64_t deadline = now_ms() + wait_ms;
  for (;;) {
    int now = processes_now(needle);
    if (now == n)
      return true;
    if (now_ms() >= deadline) {
      diag("%d executor processes, not %d", now, n);
      return false;
    }
    poll(NULL, 0, 10);
  }
}

/* Whether there are n executor processes at every look for ms. */
static bool executors_stay(int n, int ms) {
  int64_t deadline = now_ms() + ms;
  while (now_ms() < deadline) {
    int now = processes_now(needle);
    if (now != n) {
      diag("%d executor processes, not %d", now, n);
      return false;
    }
    poll(NULL, 0, 10);
  }
  return true;
}

/* A process spinning on each core, until spin_stop. */
static pid_t spinners[64];
static int nspinners;

static void spin_start(void) {
  long cores = cpus_usable();
  for (nspinners = 0; nspinners < cores && nspinners < 64; nspinners++) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(30); /* never outlives a test that died */
      for (volatile unsigned long x = 0;; x++) {
      }
    }
    spinners[nspinners] = pid;
  }
}

static void spin_stop(void) {
  for (int i = 0; i < nspinners; i++)
    if (spinners[i] > 0) {
      kill(spinners[i], SIGKILL);
      waitpid(spinners[i], NULL, 0);
    }
  nspinners = 0;
}

/* Another session's running call: a process that holds one of the
 * service's slots, as its supervisor would, until call_end.  (Not this
 * process: the spinners forked later would hold the slot's lock too.) */
static pid_t call_start(void) {
  int ready[2];
  if (pipe(ready) < 0)
    bail_out("pipe: %s", strerror(errno));
  pid_t pid = fork();
  if (pid == 0) {
    struct slot_hold hold = SLOT_HOLD_NONE;
    struct slot_wait wait = SLOT_WAIT_NONE;
    enum slot_full full;
    mcp_error_t err = NULL;
    char c = slot_take(&h.cfg, "other", 4, 4, &hold, &wait, &full, &err) == 0 ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1)
      _exit(1);
    alarm(60); /* never outlives a test that died */
    pause();
    _exit(0);
  }
  char c = 0;
  if (read(ready[0], &c, 1) != 1 || c != 'y')
    bail_out("no slot for another session's call");
  close(ready[0]);
  close(ready[1]);
  return pid;
}

static void call_end(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

/* After a call's answer at `answered`: the call's process gone, and no
 * spare for longer than the executor's SPARE_DELAY (50 ms) and a fork
 * take. */
static void no_spare(const char *what, int64_t answered) {
  bool none = executors_reach(1, LATER_MS / 4) && executors_stay(1, LATER_MS / 4);
  if (now_ms() - answered < LATER_MS * 3 / 4)
    ok(none, "%s: no spare is forked after the answer", what);
  else
    ok(true, "%s # SKIP the machine was too slow to look before the wait's bound", what);
}

static void print1(const char *what) {
  struct response r;
  post(&h, sid,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\","
       "\"arguments\":{\"code\":\"print(1)\"}}}",
       &r);
  const cJSON *res = rpc_result(&r, what);
  is_str(jstr(res, "structuredContent.stdout"), "1\n", "%s: the call answers", what);
  response_free(&r);
}

int main(void) {
  harness_setup(&h);
  if (!initialize(&h, TEST_TOKEN, sid))
    bail_out("initialize does not work; nothing else can be tested");
  snprintf(needle, sizeof(needle), "%s/executor ", h.libexec);

  print1("nobody waits");
  ok(executors_reach(2, 5000), "nobody waits: the next spare is forked after the answer");

  mcp_error_t err = NULL;
  int mark = awaited_boot_mark(&h.cfg, &err);
  ok(mark >= 0, "a boot another session waits for (its mark, held by the test)");
  spin_start();
  print1("a boot is awaited");
  int64_t answered = now_ms();
  no_spare("a boot is awaited", answered);
  int64_t released = now_ms();
  close(mark);
  spin_stop();
  bool forked = executors_reach(2, 5000);
  ok(forked, "once nothing waits the spare is forked");
  if (forked && released - answered < LATER_MS / 2)
    ok(now_ms() < answered + LATER_MS, "at the supervisor's word (N), before the wait's bound");
  mcp_error_release(&err);

  print1("after the wait");
  ok(executors_reach(2, 5000), "after the wait: the next call's spare is forked at once again");

  /* Another session's call runs (the test holds one of the service's slots,
   * as its supervisor would) on busy cores: the spare waits; once the
   * cores have room, though the call still runs, it is forked. */
  pid_t other = call_start();
  spin_start();
  print1("a call runs on busy cores");
  answered = now_ms();
  no_spare("a call runs on busy cores", answered);
  spin_stop();
  /* (Whether that came before the wait's bound depends on the other tests
   * that make check runs beside this one leaving the cores room.) */
  ok(executors_reach(2, 5000), "and once the cores have room it is forked, though the call still runs");

  /* And on busy cores once that call has ended. */
  spin_start();
  print1("a call runs again");
  answered = now_ms();
  no_spare("a call runs again", answered);
  released = now_ms();
  call_end(other);
  forked = executors_reach(2, 5000);
  spin_stop();
  ok(forked, "once the call has ended the spare is forked, though the cores are busy");
  if (forked && released - answered < LATER_MS / 2)
    ok(now_ms() < answered + LATER_MS, "at the supervisor's word (N), before the wait's bound");

  is_int(delete_session(&h, TEST_TOKEN, sid), 204, "DELETE the session");
  is_int(processes_after_delete(&h, sid, 3000), 0, "its supervisor and executor are gone");
  harness_teardown(&h);
  return done_testing();
}
