/* mcp-sandboxd: the supervisor of one session's sandbox.
 *
 * One process per live sandbox.  It owns the pipes to the executor (the
 * sandbox's PID 1), listens on <session>/ctl.sock for the responders, runs one
 * call at a time (others wait in order), holds the call's execution slots
 * (common/slots.h) from its start to its end, enforces the call's hard
 * deadline from outside the sandbox, and restarts the sandbox when it dies.
 *
 * It never blocks on a responder: what it sends a responder waits in that
 * responder's queue, written as the socket takes it.  The queue is bounded
 * (a call forwards at most output_limit bytes of each stream); a responder
 * whose queue would outgrow it is dropped and its call goes on.  So a
 * client that reads slowly slows only itself: deadlines are checked after
 * every frame, and the slots are released when the call ends.  Because
 * it holds the executor's pipes, a responder may die in the middle of a call
 * without losing the sandbox: the call finishes within its limits and the
 * next responder finds the session as it was.
 *
 * Background runs (background.h) are its too: they run in the sandbox
 * beside the calls, their output goes to files, and they outlive the
 * responder that started them.
 *
 * After a call's answer it tells the executor whether to hold its next
 * spare while other sessions' calls wait or run on busy cores (frames L,
 * then N) or not (N at once: see SPARES_LATER_MS).
 *
 * It is a child subreaper: runsc's sandbox and gofer processes are
 * reparented to it and reaped at once, which is what makes teardown fast
 * (sandbox/GVISOR.md: ~20 ms instead of ~2 s).
 *
 * A session's sandbox that stays idle for hibernate_after seconds is
 * checkpointed to disk and the supervisor exits; the next supervisor of the
 * folder restores it (sandbox/hibernate.h: what, where, and what never
 * hibernates; sandbox_busy() below says when it must not).
 *
 * usage: mcp-sandboxd <session-folder>
 * The folder holds `sandbox` (the 32-hex sandbox id) and `work/`. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "common/frame.h"
#include "common/metrics.h"
#include "common/policy.h"
#include "common/settings.h"
#include "common/slots.h"
#include "common/util.h"
#include "sandbox/backend.h"
#include "sandbox/background.h"
#include "sandbox/cgroups.h"
#include "sandbox/client.h"
#include "sandbox/egress.h"
#include "sandbox/hibernate.h"
#include "sandbox/supervisor.h"
#include "sandbox/workspace.h"

#define MAX_CLIENTS 32
/* A boot whose executor is not ready ready_wait and this long after it
 * began is stuck, and ended.  A call waits up to ready_wait for a boot, then
 * is told to ask again: a slow boot on an overloaded machine goes on that
 * long, and this long more for the call that asks again to find it. */
#define READY_TIMEOUT_MS 60000
/* How long after its wall clock (and a cell's interrupt grace) a call has
 * to answer before the sandbox is restarted: a fork bomb's 128 processes,
 * killed at the wall clock, took gVisor 1-4 s to tear down at a load of 25,
 * and the executor's own kill() and wait() calls block meanwhile. */
#define DEADLINE_GRACE_MS 5000
#define MAX_QUICK_DEATHS 3
#define BOOT_RETRY_MS 50 /* how soon a supervisor without a boot slot tries again */
#define FINAL_FLUSH_MS 2000
/* How often a running call's host tasks are counted (see check_tasks), and
 * how long the call or run it stops has to answer. */
#define TASKS_CHECK_MS 250
#define TASKS_CUT_WAIT_MS 5000
/* The guard's line, in eighths of sandbox_pids (check_tasks), and the lower
 * one at which a call gets a new sandbox rather than the host tasks an
 * earlier call left (tasks_left_over).  A sandbox holds about 90 of its
 * 2304 (the default on 2 cores) between calls. */
#define TASKS_CUT_EIGHTHS 6
#define TASKS_LEFT_EIGHTHS 5
#define QUIESCE_MS 5000 /* the executor's answer to H before a checkpoint */
/* After a call's answer, while other sessions' calls wait or run (slots.h:
 * slot_others_wait, slot_others_run) and the cores were busy over the
 * call, the executor forks and warms no spare (frame L) until none waits
 * and none runs on busy cores (N), for at most SPARES_LATER_MS (when
 * nothing waits, N once the answer has gone on); the
 * supervisor looks every SPARES_LOOK_MS, and the cores are busy unless
 * half a core idled at each of its last SPARES_ROOM_LOOKS looks
 * (slot_cpu_busy).  On 2 cores a burst's early sessions otherwise spend
 * three times their call's CPU on their next spare while the late ones
 * wait for the CPU, or run beside it (tests/bench/FINDINGS.md, "Bursts").  Calls that wait or run while the
 * cores idle (for a token's limit, beside sleeping calls) are not held back
 * by a spare's fork, and do not hold it back. */
#define SPARES_LATER_MS 2000
#define SPARES_LOOK_MS 50
/* Looks in a row that must find the cores with room while other calls run:
 * a window of SPARES_LOOK_MS is 5 ticks of each core's time, and single
 * windows with half a core idle were seen beside a spinner on each core
 * (tests/unit/test-mcp-spares.c failed 1 run in 7-16 with one look). */
#define SPARES_ROOM_LOOKS 2

struct client {
  int fd;
  struct frame_reader r;
  struct buf outq;                 /* frames not yet written to fd */
  size_t outq_off;                 /* ... the first outq_off bytes of outq are */
  char token[POLICY_NAME_MAX + 1]; /* whose request it is */
  int64_t slot_deadline;           /* waiting for execution slots until then; 0: not waiting */
  bool has_request;                /* a request frame is queued in `request` */
  struct buf request;
  char rpc_id[300]; /* the JSON-RPC id of its request, as JSON text */
  int64_t queued_at;
  bool wants_ready; /* answer S once the sandbox is ready */
  bool retried;     /* its request outlived one sandbox before it was accepted */
};

struct sup {
  struct mcp_config cfg;
  const struct sandbox_ops *ops;
  struct sandbox_ctx sb;
  int dirfd;
  int lock_fd; /* sup.lock, held for our whole life */
  int listen_fd;
  int sig_fd;
  int exec_in;  /* we write requests */
  int exec_out; /* we read frames */
  struct frame_reader exec_r;
  bool started;
  bool ready;
  bool ended; /* the folder was ended before we held sup.lock: we start nothing */
  int64_t started_at;
  int quick_deaths;
  pid_t sandbox_pid; /* its main host process, -1: unknown */
  bool sandbox_gone; /* we reaped it: the sandbox is dead */
  struct client clients[MAX_CLIENTS];
  struct slot_hold slots;     /* the running call's execution slots */
  struct slot_wait slot_wait; /* the next call's place in a slots queue */
  int boot_fd;                /* a boot slot while the sandbox starts (-1: none) */
  int awaited_fd;             /* while a boot a session waits for runs: its mark (slots.h; -1: none) */
  bool boot_waiting;          /* no boot slot was free: try again soon */
  int call;                   /* index of the client whose call runs, -1: none */
  bool call_active;
  bool call_orphaned; /* its client went away: finish, discard */
  bool call_accepted; /* the executor took it (A): a loss now is the call's */
  bool call_cancelled;
  bool tasks_cut;           /* the host-task guard stopped a call or run (check_tasks) ... */
  bool tasks_cut_answered;  /* ... which has answered: a new sandbox now */
  int64_t tasks_cut_at;     /* now_ms() of the cut */
  int64_t tasks_checked_at; /* now_ms() of the last count */
  int64_t call_deadline;
  int64_t call_started;
  uint64_t output_limit;
  uint64_t sent_out, sent_err;
  bool quit;
  int quitter;                /* the client that asked us to quit, -1: a signal */
  struct egress eg;           /* the relay of the calls' network traffic */
  struct bg_runs runs;        /* the background runs of the sandbox */
  unsigned interpreters;      /* languages (bg_lang_bit) of the interpreters alive (the last D or d said) */
  unsigned interpreters_lost; /* ... that died with a sandbox, not yet told to a persistent call */
  bool call_persistent;
  unsigned call_lang; /* the call's language (bg_lang_bit) */
  struct hibernation hib;
  struct cpu_sample call_cpu;   /* the CPU at the call's start */
  struct cpu_sample spares_cpu; /* the CPU at the last look since L (spares_looked_at) */
  bool call_cpu_ok;             /* call_cpu could be read */
  bool spares_cpu_ok;           /* spares_cpu could be read */
  int spares_room_looks;        /* looks in a row since L that found the cores with room */
  int64_t spares_later_until;   /* the executor holds its spares (L) until N or then; 0: it does not */
  int64_t spares_looked_at;     /* now_ms() of the last look at the queues since L */
};

static void client_close(struct sup *s, int i) {
  struct client *c = &s->clients[i];
  if (c->fd >= 0)
    close(c->fd);
  frame_reader_free(&c->r);
  buf_free(&c->request);
  buf_free(&c->outq);
  memset(c, 0, sizeof(*c));
  c->fd = -1;
  if (s->call == i && s->call_active)
    s->call_orphaned = true;
}

/* A responder's queue may hold a call's whole forwarded output, its result
 * and a little more; one that does not drain it is dropped. */
static size_t outq_max(const struct sup *s) { return 2 * (size_t)s->cfg.output_limit + (1 << 20); }

/* Write what the socket takes now.  -1 when the client is gone. */
static int client_flush(struct sup *s, int i) {
  struct client *c = &s->clients[i];
  while (c->fd >= 0 && c->outq_off < c->outq.len) {
    ssize_t w = write(c->fd, c->outq.data + c->outq_off, c->outq.len - c->outq_off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    if (w <= 0) {
      client_close(s, i); /* a responder that went away; its call goes on */
      return -1;
    }
    c->outq_off += (size_t)w;
  }
  if (c->outq_off == c->outq.len) {
    c->outq.len = 0;
    c->outq_off = 0;
  } else if (c->outq_off > (1 << 20)) {
    memmove(c->outq.data, c->outq.data + c->outq_off, c->outq.len - c->outq_off);
    c->outq.len -= c->outq_off;
    c->outq_off = 0;
  }
  return 0;
}

static void client_send(struct sup *s, int i, int type, const void *data, size_t len) {
  struct client *c = &s->clients[i];
  if (c->fd < 0)
    return;
  if (c->outq.len - c->outq_off + len + FRAME_HEADER > outq_max(s) || frame_append(&c->outq, type, data, len) < 0) {
    fprintf(stderr, "mcp-sandboxd %s: a responder does not read; dropped (its call goes on)\n", s->sb.id);
    client_close(s, i);
    return;
  }
  client_flush(s, i);
}

static void client_error(struct sup *s, int i, const char *sentence) {
  client_send(s, i, FRAME_ERROR, sentence, strlen(sentence));
}

/* The boot slot goes back once the executor is ready or the sandbox is
 * gone (slots.h). */
static void boot_release(struct sup *s) {
  if (s->boot_fd >= 0)
    close(s->boot_fd);
  if (s->awaited_fd >= 0)
    close(s->awaited_fd);
  s->boot_fd = s->awaited_fd = -1;
}

/* A boot a session waits for holds a mark until the ready: meanwhile the
 * keeper boots nothing for the pool (slots.h).  Best effort: without one
 * the pool's boots go on beside it. */
static void awaited_mark(struct sup *s) {
  mcp_error_t err = NULL;
  int fd = awaited_boot_mark(&s->cfg, &err);
  if (fd == -1)
    mcp_error_log_release(&err, "mcp-sandboxd: awaited boot");
  s->awaited_fd = fd < 0 ? -1 : fd;
}

static void exec_close(struct sup *s) {
  if (s->exec_in >= 0)
    close(s->exec_in);
  if (s->exec_out >= 0)
    close(s->exec_out);
  s->exec_in = s->exec_out = -1;
  frame_reader_free(&s->exec_r);
  s->ready = false;
  s->started = false;
  s->sandbox_pid = -1;
  s->tasks_cut = s->tasks_cut_answered = false;
  s->spares_later_until = 0;
  /* The interpreters die with it; the next persistent call of each language says so. */
  s->interpreters_lost |= s->interpreters;
  s->interpreters = 0;
  boot_release(s);
}

static void sandbox_stop(struct sup *s) {
  exec_close(s);
  mcp_error_t err = NULL;
  if (s->ops->destroy(&s->sb, &err) < 0)
    mcp_error_log_release(&err, "mcp-sandboxd: destroy");
}

/* A restored sandbox that died or did not answer its wake: the next start
 * boots a new one (the image is gone) and the next result says state_lost. */
static void restore_lost(struct sup *s, const char *why) {
  hibernate_restore_failed(&s->hib, &s->sb, why);
  sandbox_stop(s);
}

/* Current host path of our folder: it moves from pool/ to sessions/. */
static int refresh_dir(struct sup *s, mcp_error_t *err) {
  int r = fd_host_path(s->dirfd, NULL, s->sb.dir, sizeof(s->sb.dir));
  return r < 0 ? mcp_fail(err, MCP_ERR_INTERNAL, -r, "the folder's path") : 0;
}

/* A sandbox a session waits for goes first on the cores, one booted ahead
 * of demand last (cgroups.h): a boot in sessions/ is awaited, one in pool/
 * is not.  The bundle carries its weight (runsc creates the cgroup with
 * it); boot_weight writes it again once runsc has returned (cgroup v2's own
 * scale) and BOOT_DONE at the ready.  Best effort: without a CPU controller
 * to write to it boots at the weight of any other. */
static void boot_weight(struct sup *s, enum boot_weight w) {
  if (strcmp(s->cfg.backend, "runsc") != 0)
    return;
  mcp_error_t err = NULL;
  if (cgroups_boot_weight(&s->cfg, s->sb.container_id, w, &err) < 0)
    mcp_error_release(&err);
}

static int sandbox_start(struct sup *s, mcp_error_t *err) {
  int in[2], out[2];
  if (refresh_dir(s, err) < 0)
    return -1;
  if (pipe2(in, O_CLOEXEC) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "pipe2");
  if (pipe2(out, O_CLOEXEC) < 0) {
    close(in[0]);
    close(in[1]);
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "pipe2");
  }
  enum boot_weight boot = hibernate_in_sessions(&s->hib) ? BOOT_AWAITED : BOOT_AHEAD;
  s->sb.cpu_shares = cgroups_boot_shares(boot);
  if (boot == BOOT_AWAITED)
    awaited_mark(s);
  int ret = strcmp(s->cfg.backend, "runsc") == 0 ? workspace_mount(s->dirfd, err) : 0;
  if (ret == 0) /* 1: restored from its hibernation image */
    ret = hibernate_start(&s->hib, &s->sb, in[0], out[1], err);
  close(in[0]);
  close(out[1]);
  if (ret < 0) {
    close(in[1]);
    close(out[0]);
    s->ops->destroy(&s->sb, NULL);
    metrics_sandbox_start(false);
    return -1;
  }
  metrics_sandbox_start(true);
  s->exec_in = in[1];
  s->exec_out = out[0];
  frame_reader_init(&s->exec_r, 16 << 20);
  s->started = true;
  s->ready = false;
  s->started_at = now_ms();
  /* Its main host process: the executor (direct backend) or runsc's sandbox
   * process.  It is our child (we are the subreaper of runsc's processes):
   * reaping it tells that the sandbox died, even while its pipes are still
   * held by dying processes. */
  s->sandbox_pid = s->sb.pid > 0 ? s->sb.pid : runsc_sandbox_pid(&s->cfg, s->sb.container_id);
  s->sandbox_gone = false;
  boot_weight(s, boot);
  if (ret == 1 && hibernate_wake(&s->hib, s->exec_in) < 0)
    restore_lost(s, "the restored executor could not be woken");
  return 0;
}

/* Fail every waiting client with a sentence; used when no sandbox can run. */
static void fail_waiting(struct sup *s, const char *sentence) {
  for (int i = 0; i < MAX_CLIENTS; i++)
    if (s->clients[i].fd >= 0 && (s->clients[i].has_request || s->clients[i].wants_ready))
      client_error(s, i, sentence);
}

/* The result with what the supervisor adds (the egress relay's limit,
 * what hibernation must say): the members of extra (`"egress_limited":true,...`)
 * replace those of the same name (a persistent call's "state_lost":false
 * becomes true).  NULL: unchanged. */
static char *with_extra(const char *json, const char *extra) {
  if (extra[0] == '\0')
    return NULL;
  size_t x = strlen(extra);
  cleanup_free char *wrapped = malloc(x + 3);
  if (wrapped == NULL)
    return NULL;
  snprintf(wrapped, x + 3, "{%s}", extra);
  cleanup_cjson cJSON *add = cJSON_Parse(wrapped);
  cleanup_cjson cJSON *o = cJSON_Parse(json);
  if (!cJSON_IsObject(o) || !cJSON_IsObject(add))
    return NULL;
  cJSON *item = NULL;
  cJSON_ArrayForEach(item, add) {
    cJSON_DeleteItemFromObjectCaseSensitive(o, item->string);
    cJSON_AddItemToObject(o, item->string, cJSON_Duplicate(item, true));
  }
  return cJSON_PrintUnformatted(o);
}

static void send_call_result(struct sup *s, const char *json) {
  char extra[320];
  egress_call_end(&s->eg, extra, sizeof(extra));
  hibernate_result_extra(&s->hib, extra, sizeof(extra));
  /* Once the host-task guard has cut (check_tasks) the sandbox is replaced
   * when the activity it stopped has answered: a persistent call's
   * interpreter goes with it. */
  if (s->tasks_cut && s->call_persistent) {
    s->interpreters &= ~s->call_lang; /* told here */
    json_members_add(extra, sizeof(extra), "\"state_lost\":true");
  }
  cleanup_free char *merged = with_extra(json, extra);
  if (merged != NULL)
    json = merged;
  if (s->call >= 0 && !s->call_orphaned && s->clients[s->call].fd >= 0) {
    client_send(s, s->call, FRAME_DONE, json, strlen(json));
    if (s->clients[s->call].fd >= 0)
      hibernate_result_sent(&s->hib); /* it was said */
  }
  hibernate_idle(&s->hib, s->call >= 0 ? s->clients[s->call].token : NULL);
  if (s->call >= 0 && s->clients[s->call].fd >= 0) {
    s->clients[s->call].has_request = false;
    buf_free(&s->clients[s->call].request);
  }
  s->call = -1;
  s->call_active = false;
  s->call_orphaned = false;
  slot_release(&s->slots);
}

/* Under ptrace every process of the sandbox is backed by host tasks, and
 * each fork that RLIMIT_NPROC refuses still leaves gVisor with more of
 * them: a fork bomb held at its process limit makes the sandbox's host
 * tasks grow for as long as it runs, until the pids backstop kills the
 * whole sandbox (sandbox/GVISOR.md).  Counted every TASKS_CHECK_MS while a
 * call or a run runs; at 3/4 of sandbox_pids the executor stops the one
 * whose processes are the most (P: its result says processes_exceeded)
 * while the sandbox still lives.  gVisor keeps those host tasks after the
 * bomb is gone: once it has answered (or TASKS_CUT_WAIT_MS passed), a new
 * sandbox with the same workspace replaces this one (replace_after_cut),
 * rather than one that cuts every call. */
static bool tasks_watched(const struct sup *s) { return s->call_active || bg_runs_active(&s->runs) > 0; }

/* Whether the sandbox's host tasks (*tasks) reach eighths/8 of
 * sandbox_pids; not without a pids cgroup (yet): nothing to compare. */
static bool tasks_over_line(struct sup *s, uint64_t *tasks, int eighths) {
  mcp_error_t err = NULL;
  if (cgroups_tasks(&s->cfg, s->sb.container_id, tasks, &err) < 0) {
    mcp_error_release(&err);
    return false;
  }
  return *tasks >= (uint64_t)s->cfg.sandbox_pids / 8 * (uint64_t)eighths;
}

static void check_tasks(struct sup *s) {
  int64_t now = now_ms();
  if (!s->ready || s->tasks_cut || s->cfg.sandbox_pids <= 0 || !tasks_watched(s) ||
      now - s->tasks_checked_at < TASKS_CHECK_MS)
    return;
  s->tasks_checked_at = now;
  uint64_t tasks = 0;
  if (!tasks_over_line(s, &tasks, TASKS_CUT_EIGHTHS))
    return;
  fprintf(stderr, "mcp-sandboxd %s: the sandbox holds %llu host tasks of %d; stopping the call or run at fault\n",
          s->sb.id, (unsigned long long)tasks, s->cfg.sandbox_pids);
  s->tasks_cut = true;
  s->tasks_cut_at = now;
  frame_write(s->exec_in, FRAME_PROCESSES, NULL, 0);
}

/* The sandbox died or overran (lost), or is replaced: end the call and the
 * runs with what we know.  A call the executor had not yet accepted never
 * ran (the sandbox was killed from outside between calls, and we learnt it
 * only when the request was on its way): it stays queued, once, for the
 * next sandbox. */
static void sandbox_end(struct sup *s, bool deadline, bool lost) {
  if (s->hib.restoring) { /* no call was given to it yet */
    restore_lost(s, "the restored sandbox stopped before it answered");
    return;
  }
  if (lost)
    METRIC_INC(sandboxes_lost);
  struct client *c = s->call >= 0 ? &s->clients[s->call] : NULL;
  if (c != NULL && s->call_active && !deadline && !s->call_accepted && !s->call_orphaned && !s->call_cancelled &&
      c->fd >= 0 && c->has_request && !c->retried) {
    fprintf(stderr, "mcp-sandboxd %s: the sandbox was gone before it took the call; the call waits for a new one\n",
            s->sb.id);
    c->retried = true;
    s->call = -1;
    s->call_active = false;
    slot_release(&s->slots);
    bg_runs_lost(&s->runs, false);
  } else if (s->call_active || bg_runs_active(&s->runs) > 0) {
    /* The memory backstop kills the whole sandbox: its cgroup (gone after
     * the destroy below) says whether that is what happened. */
    uint64_t ooms = 0;
    mcp_error_t err = NULL;
    if (cgroups_oom_kills(&s->cfg, s->sb.container_id, &ooms, &err) < 0)
      mcp_error_log_release(&err, "mcp-sandboxd: oom count");
    /* The call's persistent interpreter dies with the sandbox: its state is lost. */
    bool state_lost = s->call_active && s->call_persistent;
    if (state_lost)
      s->interpreters &= ~s->call_lang; /* told here */
    /* The host-task guard's cut replaces the sandbox once the call it
     * stopped has answered, or TASKS_CUT_WAIT_MS after the cut (a loaded
     * machine): then this result is that call's, and says why. */
    bool cut = s->tasks_cut && s->call_active;
    char json[400];
    snprintf(json, sizeof(json),
             "{\"exit_code\":137,\"timed_out\":%s,\"sandbox_lost\":true,\"memory_exceeded\":%s,"
             "\"processes_exceeded\":%s,\"duration_ms\":%lld,\"stdout_bytes\":%llu,\"stderr_bytes\":%llu%s}",
             deadline ? "true" : "false", ooms > 0 ? "true" : "false", cut ? "true" : "false",
             (long long)(now_ms() - s->call_started), (unsigned long long)s->sent_out, (unsigned long long)s->sent_err,
             state_lost ? ",\"persistent\":true,\"state_lost\":true" : "");
    if (s->call_active)
      send_call_result(s, json);
    bg_runs_lost(&s->runs, ooms > 0);
  }
  if (lost && now_ms() - s->started_at < 5000)
    s->quick_deaths++;
  else if (lost)
    s->quick_deaths = 0;
  sandbox_stop(s);
}

static void sandbox_lost(struct sup *s, bool deadline) { sandbox_end(s, deadline, true); }

/* After the host-task guard's cut (check_tasks), once the call or run it
 * stopped has answered (or TASKS_CUT_WAIT_MS passed): a new sandbox, the
 * same workspace; what still ran in this one is lost. */
static void replace_after_cut(struct sup *s) {
  if (!s->tasks_cut || !s->started || (!s->tasks_cut_answered && now_ms() - s->tasks_cut_at < TASKS_CUT_WAIT_MS))
    return;
  fprintf(stderr, "mcp-sandboxd %s: a new sandbox, to release the host tasks\n", s->sb.id);
  sandbox_end(s, false, false);
}

static uint64_t json_u64(const cJSON *o, const char *key, uint64_t dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) && v->valuedouble >= 0 ? (uint64_t)v->valuedouble : dflt;
}

/* Before a call starts: host tasks near the guard's line were left by an
 * earlier call (gVisor keeps them after a fork bomb, and a bomb stopped at
 * its wall clock may never have crossed the line while it ran).  The call
 * would be cut once its own few tasks take the count over the line, and
 * blamed for them: a new sandbox with the same workspace takes it instead
 * (the request stays queued).  The line here is lower than the guard's
 * (TASKS_LEFT_EIGHTHS): with the same line, a count just under it passed
 * this check and the next call's process and spare took it over (a
 * listing of processes after a fork bomb, cut at 761 ms in a CI run).
 * Not while a background run shares the sandbox: check_tasks stops the
 * one at fault. */
static bool tasks_left_over(struct sup *s) {
  if (s->cfg.sandbox_pids <= 0 || s->tasks_cut || bg_runs_active(&s->runs) > 0)
    return false;
  uint64_t tasks = 0;
  if (!tasks_over_line(s, &tasks, TASKS_LEFT_EIGHTHS))
    return false;
  fprintf(stderr, "mcp-sandboxd %s: %llu host tasks of %d left by earlier calls; a new sandbox for the next call\n",
          s->sb.id, (unsigned long long)tasks, s->cfg.sandbox_pids);
  return true;
}

static void start_call(struct sup *s, int i) {
  struct client *c = &s->clients[i];
  cleanup_cjson cJSON *req = cJSON_ParseWithLength(c->request.data, c->request.len);
  uint64_t timeout_ms = json_u64(req, "timeout_ms", 60000);
  s->output_limit = json_u64(req, "output_limit", 1 << 20);
  s->sent_out = s->sent_err = 0;
  s->call = i;
  s->call_active = true;
  s->call_orphaned = false;
  s->call_accepted = false;
  s->call_cancelled = false;
  s->call_started = now_ms();
  /* A persistent cell is interrupted first, and killed after a grace. */
  s->call_persistent = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "persistent"));
  s->call_lang = bg_lang_bit(req);
  if (bg_mark_interpreter_lost(req, &s->interpreters_lost))
    buf_replace_json(&c->request, req);
  s->call_deadline =
      s->call_started + (int64_t)timeout_ms + DEADLINE_GRACE_MS + (int64_t)json_u64(req, "interrupt_grace_ms", 0);
  c->slot_deadline = 0;
  /* The session's id is the name of its folder (it moved from pool/). */
  mcp_error_t err = NULL;
  if (refresh_dir(s, &err) < 0)
    mcp_error_release(&err);
  const char *slash = strrchr(s->sb.dir, '/');
  egress_call_start(&s->eg, req, c->token, slash != NULL ? slash + 1 : s->sb.dir);
  s->spares_later_until = 0; /* the request ends the executor's wait too */
  s->call_cpu_ok = slot_cpu_read(&s->call_cpu) == 0;
  if (frame_write(s->exec_in, FRAME_REQUEST, c->request.data, c->request.len) < 0)
    sandbox_lost(s, false);
}

/* The execution slots for client i's call, without blocking: true when
 * held.  A call that finds none waits its turn (slots.h), up to
 * capacity_wait, and is then answered that the server (or its token) is
 * at capacity. */
static bool take_slots(struct sup *s, int i) {
  struct client *c = &s->clients[i];
  struct token_policy pol = {.max_concurrent = s->cfg.max_concurrent};
  enum slot_full full = SLOT_FULL_NONE;
  mcp_error_t err = NULL;
  int r = policy_for(&s->cfg, c->token, &pol, &err);
  if (r == 0)
    r = slot_take(&s->cfg, c->token, pol.max_concurrent, s->cfg.token_busy_concurrent, &s->slots, &s->slot_wait, &full,
                  &err);
  if (r == 0)
    return true;
  int64_t now = now_ms();
  if (r != -EAGAIN) {
    mcp_error_log_release(&err, "mcp-sandboxd: slots");
    full = SLOT_FULL_GLOBAL;
  } else if (c->slot_deadline == 0) {
    c->slot_deadline = now + (int64_t)s->cfg.capacity_wait * 1000;
  }
  if (r == -EAGAIN && now < c->slot_deadline)
    return false;
  /* The token's limit is named only where it is the narrower one and the
   * service had room: a token whose limit is the service's (one tenant's
   * fair share is all of it) or that waited while the service was full
   * too is told the server is at capacity. */
  if (full == SLOT_FULL_TOKEN && (pol.max_concurrent >= s->cfg.max_concurrent || slot_global_full(&s->cfg, &s->slots)))
    full = SLOT_FULL_GLOBAL;
  slot_wait_end(&s->slot_wait, &s->slots);
  char sentence[200];
  if (full == SLOT_FULL_TOKEN)
    snprintf(sentence, sizeof(sentence),
             "This token already runs its maximum of %d calls at once; try again when one has finished.",
             pol.max_concurrent);
  else if (full == SLOT_FULL_CPU)
    snprintf(sentence, sizeof(sentence),
             "The server is at capacity: its CPUs are busy with this token's other calls; try again in a moment.");
  else
    snprintf(sentence, sizeof(sentence), "The server is at capacity (%d calls are running); try again in a moment.",
             s->cfg.max_concurrent);
  metrics_reject_reason(full == SLOT_FULL_TOKEN ? REJECT_TOKEN_CALLS : REJECT_CALLS_CAPACITY);
  client_send(s, i, FRAME_BUSY, sentence, strlen(sentence));
  if (c->fd >= 0) {
    c->has_request = false;
    c->slot_deadline = 0;
    buf_free(&c->request);
  }
  return false;
}

static void maybe_start_next(struct sup *s) {
  /* Killed from outside between calls, before its pipes said so: start a
   * new sandbox rather than hand the next call to the dead one. */
  if (s->started && s->sandbox_gone && !s->call_active) {
    sandbox_lost(s, false);
    return;
  }
  if (s->call_active)
    return;
  if (!s->ready) {
    /* A place in a slots queue is for a call that can start now: one that
     * waits for its sandbox to start again would hold the line. */
    if (slot_wait_fd(&s->slot_wait) >= 0)
      slot_wait_end(&s->slot_wait, &s->slots);
    return;
  }
  int best = -1;
  for (int i = 0; i < MAX_CLIENTS; i++) {
    struct client *c = &s->clients[i];
    if (c->fd >= 0 && c->has_request && (best < 0 || c->queued_at < s->clients[best].queued_at))
      best = i;
  }
  if (best >= 0 && slot_wait_fd(&s->slot_wait) < 0 && tasks_left_over(s)) {
    sandbox_end(s, false, false);
    return;
  }
  if (best >= 0 && take_slots(s, best))
    start_call(s, best);
  else if (best < 0 && slot_wait_fd(&s->slot_wait) >= 0)
    slot_wait_end(&s->slot_wait, &s->slots); /* the waiting call went away */
}

/* A call waits for slots: look again when woken, or soon. */
static bool waiting_for_slots(const struct sup *s) {
  for (int i = 0; i < MAX_CLIENTS; i++)
    if (s->clients[i].fd >= 0 && s->clients[i].has_request && s->clients[i].slot_deadline > 0)
      return true;
  return false;
}

static void forward_output(struct sup *s, const struct frame *f) {
  uint64_t *sent = f->type == FRAME_STDOUT ? &s->sent_out : &s->sent_err;
  if (!s->call_active || *sent >= s->output_limit)
    return;
  size_t take = f->len;
  if (take > s->output_limit - *sent)
    take = (size_t)(s->output_limit - *sent);
  *sent += take;
  if (!s->call_orphaned)
    client_send(s, s->call, f->type, f->payload, take);
}

/* Which persistent interpreters the executor keeps (its D and d frames
 * say); a result of the activity the host-task guard stopped. */
static void note_result(struct sup *s, const char *json, size_t len) {
  cleanup_cjson cJSON *res = cJSON_ParseWithLength(json, len);
  const cJSON *langs = cJSON_GetObjectItemCaseSensitive(res, "interpreters");
  if (cJSON_IsArray(langs)) {
    s->interpreters = 0;
    const cJSON *l;
    cJSON_ArrayForEach(l, langs) {
      if (cJSON_IsString(l))
        s->interpreters |= bg_lang_bit_of(l->valuestring);
    }
  }
  if (s->tasks_cut && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "processes_exceeded")))
    s->tasks_cut_answered = true;
}

/* Whether the cores were busy over the call, from its start to its answer
 * (slot_cpu_busy); a call too short to tell counts as busy. */
static bool cores_were_busy(struct sup *s) {
  return !s->call_cpu_ok || now_ms() - s->call_started < SLOT_CPU_LOOK_MS || slot_cpu_busy(&s->call_cpu);
}

/* Whether other sessions' calls wait for a slot or a boot, or run (our own
 * slot, held until the answer has gone on, is not counted). */
static bool others_wait_or_run(struct sup *s) {
  return slot_others_wait(&s->cfg) || slot_others_run(&s->cfg, &s->slots);
}

/* The executor's call has answered (its D is in): while other sessions'
 * calls wait or run on busy cores, its next spares wait too
 * (SPARES_LATER_MS).  Said before the answer goes on, so that it is there
 * before any request sent on it.  Whether the spares wait (if not, the
 * caller says N once the answer has gone on). */
static bool spares_later(struct sup *s) {
  if (!cores_were_busy(s) || !others_wait_or_run(s))
    return false;
  char ms[16];
  int len = snprintf(ms, sizeof(ms), "%d", SPARES_LATER_MS);
  if (frame_write(s->exec_in, FRAME_SPARES_LATER, ms, (size_t)len) == 0) {
    s->spares_looked_at = now_ms();
    s->spares_later_until = s->spares_looked_at + SPARES_LATER_MS;
    s->spares_cpu_ok = slot_cpu_read(&s->spares_cpu) == 0;
    s->spares_room_looks = 0;
  }
  return true;
}

/* Whether less than half a core idled since the last look (unreadable:
 * busy); the next look's window starts now. */
static bool cores_busy_since_look(struct sup *s) {
  bool busy = !s->spares_cpu_ok || slot_cpu_busy(&s->spares_cpu);
  s->spares_cpu_ok = slot_cpu_read(&s->spares_cpu) == 0;
  return busy;
}

/* Every SPARES_LOOK_MS after an L: N once no call waits, and no call runs
 * or the cores had room at the last SPARES_ROOM_LOOKS looks.  (Past
 * SPARES_LATER_MS the executor goes on by itself; a failed write is a
 * sandbox loss, which the pipe's end tells.)  No look while a request of
 * this session's own waits for slots: its ticket is a call that waits, so
 * no look could say N, and the call's start ends the executor's wait
 * anyway (under load, 16 sessions back to back on 2 cores, the queued
 * supervisors' looks were most of their 1,650 system calls per call). */
static void spares_look(struct sup *s) {
  int64_t now = now_ms();
  if (s->spares_later_until == 0 || waiting_for_slots(s) || now - s->spares_looked_at < SPARES_LOOK_MS)
    return;
  s->spares_looked_at = now;
  s->spares_room_looks = cores_busy_since_look(s) ? 0 : s->spares_room_looks + 1;
  bool room = s->spares_room_looks >= SPARES_ROOM_LOOKS;
  if (now >= s->spares_later_until) {
    s->spares_later_until = 0;
  } else if (!slot_others_wait(&s->cfg) && (room || !slot_others_run(&s->cfg, &s->slots))) {
    s->spares_later_until = 0;
    frame_write(s->exec_in, FRAME_SPARES_NOW, NULL, 0);
  }
}

static void on_exec_frame(struct sup *s, const struct frame *f) {
  switch (f->type) {
  case FRAME_READY:
    s->ready = true;
    boot_release(s);
    boot_weight(s, BOOT_DONE);
    hibernate_woke(&s->hib, &s->sb); /* when it was restored */
    hibernate_idle(&s->hib, NULL);
    note_result(s, f->payload, f->len); /* a restored executor's Y names its live interpreters */
    bg_runs_send(&s->runs, s->exec_in, &s->interpreters_lost);
    for (int i = 0; i < MAX_CLIENTS; i++)
      if (s->clients[i].fd >= 0 && s->clients[i].wants_ready) {
        s->clients[i].wants_ready = false;
        client_send(s, i, FRAME_STATUS, "{\"ready\":true}", 14);
      }
    break;
  case FRAME_ACCEPTED:
    s->call_accepted = s->call_active;
    break;
  case FRAME_STDOUT:
  case FRAME_STDERR:
    forward_output(s, f);
    break;
  case FRAME_DONE:
    if (s->call_active) {
      cleanup_free char *json = xstrndup(f->payload, f->len);
      note_result(s, f->payload, f->len);
      bool held = spares_later(s);
      send_call_result(s, json ? json : "{}");
      /* No reason to hold them: N once the answer has gone on, so that an
       * executor with no spare left forks the next one now (main.py,
       * between_calls), not beside the answer on its way out. */
      if (!held)
        frame_write(s->exec_in, FRAME_SPARES_NOW, NULL, 0);
    }
    break;
  case FRAME_RUN_DONE:
    if (f->len > 0)
      note_result(s, f->payload + 1, f->len - 1);
    hibernate_idle(&s->hib, NULL); /* idle from the run's end */
    /* fall through */
  case FRAME_RUN_STDOUT:
  case FRAME_RUN_STDERR:
    bg_runs_on_frame(&s->runs, f);
    break;
  default:
    break; /* nothing else is expected from the executor */
  }
}

static void on_exec_readable(struct sup *s) {
  ssize_t n = frame_reader_fill(&s->exec_r, s->exec_out);
  if (n == 0 || (n < 0 && n != -EAGAIN)) {
    sandbox_lost(s, false);
    return;
  }
  struct frame f;
  int r;
  while (s->started && (r = frame_reader_next(&s->exec_r, &f)) == 1) {
    on_exec_frame(s, &f);
    /* A call that keeps the executor writing is still held to its deadline. */
    if (s->call_active && now_ms() >= s->call_deadline)
      return;
  }
  if (s->started && r < 0) {
    fprintf(stderr, "mcp-sandboxd %s: protocol error from the executor\n", s->sb.id);
    sandbox_lost(s, false);
  }
}

/* notifications/cancelled names a JSON-RPC id: stop that call if it runs,
 * or drop it from the queue.  The responder waiting for it gets a result
 * that says "cancelled" and sends no response. */
static void cancel_call(struct sup *s, const char *id, size_t len) {
  if (len == 0 || len >= sizeof(s->clients[0].rpc_id))
    return;
  for (int i = 0; i < MAX_CLIENTS; i++) {
    struct client *c = &s->clients[i];
    if (c->fd < 0 || !c->has_request || strlen(c->rpc_id) != len || memcmp(c->rpc_id, id, len) != 0)
      continue;
    if (s->call_active && s->call == i) {
      s->call_cancelled = true;
      if (s->started)
        frame_write(s->exec_in, FRAME_CANCEL, NULL, 0);
    } else {
      static const char done[] = "{\"exit_code\":130,\"cancelled\":true}";
      client_send(s, i, FRAME_DONE, done, sizeof(done) - 1);
      if (c->fd >= 0) {
        c->has_request = false;
        buf_free(&c->request);
      }
    }
  }
}

/* A request with "background": a run of ours from now on (background.h),
 * answered at once. */
static bool start_run(struct sup *s, int i, const struct frame *f) {
  cleanup_cjson cJSON *req = cJSON_ParseWithLength(f->payload, f->len);
  if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "background")))
    return false;
  const cJSON *tok = cJSON_GetObjectItemCaseSensitive(req, "token");
  mcp_error_t err = NULL;
  if (refresh_dir(s, &err) < 0)
    mcp_error_release(&err);
  const char *slash = strrchr(s->sb.dir, '/');
  char answer[400];
  int type = FRAME_ERROR;
  bg_run_start(&s->runs, slash != NULL ? slash + 1 : s->sb.dir, cJSON_IsString(tok) ? tok->valuestring : "", f->payload,
               f->len, &type, answer, sizeof(answer));
  client_send(s, i, type, answer, strlen(answer));
  if (s->ready)
    bg_runs_send(&s->runs, s->exec_in, &s->interpreters_lost);
  return true;
}

static void on_client_frame(struct sup *s, int i, const struct frame *f) {
  struct client *c = &s->clients[i];
  switch (f->type) {
  case FRAME_RUN_CANCEL:
    bg_run_cancel(&s->runs, f->payload, f->len, s->ready ? s->exec_in : -1);
    break;
  case FRAME_REQUEST: {
    if (start_run(s, i, f))
      return;
    if (c->has_request || (s->call_active && s->call == i)) {
      client_error(s, i, "A call is already running on this connection.");
      return;
    }
    buf_free(&c->request);
    if (buf_append(&c->request, f->payload, f->len) < 0) {
      client_error(s, i, "Internal server error.");
      return;
    }
    cleanup_cjson cJSON *req = cJSON_ParseWithLength(f->payload, f->len);
    const cJSON *rid = cJSON_GetObjectItemCaseSensitive(req, "rpc_id");
    snprintf(c->rpc_id, sizeof(c->rpc_id), "%s", cJSON_IsString(rid) ? rid->valuestring : "");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(req, "token");
    snprintf(c->token, sizeof(c->token), "%s", cJSON_IsString(tok) ? tok->valuestring : "");
    c->slot_deadline = 0;
    c->has_request = true;
    c->retried = false;
    c->queued_at = now_ms();
    maybe_start_next(s);
    break;
  }
  case FRAME_CANCEL:
    cancel_call(s, f->payload, f->len);
    break;
  case FRAME_QUIT:
    s->quit = true;
    s->quitter = i;
    break;
  case FRAME_STATUS: {
    bool wait = f->len > 0 && memmem(f->payload, f->len, "wait", 4) != NULL;
    if (s->ready || !wait) {
      char json[64];
      snprintf(json, sizeof(json), "{\"ready\":%s,\"busy\":%s}", s->ready ? "true" : "false",
               s->call_active ? "true" : "false");
      client_send(s, i, FRAME_STATUS, json, strlen(json));
    } else {
      c->wants_ready = true;
    }
    break;
  }
  default:
    client_error(s, i, "Unexpected frame.");
    break;
  }
}

static void on_client_readable(struct sup *s, int i) {
  struct client *c = &s->clients[i];
  ssize_t n = frame_reader_fill(&c->r, c->fd);
  if (n == 0 || (n < 0 && n != -EAGAIN)) {
    client_close(s, i);
    return;
  }
  struct frame f;
  int r;
  while (s->clients[i].fd >= 0 && (r = frame_reader_next(&c->r, &f)) == 1)
    on_client_frame(s, i, &f);
  if (s->clients[i].fd >= 0 && r < 0) {
    client_error(s, i, "Malformed frame.");
    client_close(s, i);
  }
}

static void on_accept(struct sup *s) {
  int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0)
    return;
  for (int i = 0; i < MAX_CLIENTS; i++) {
    /* The slot of a call whose responder went away stays reserved until
     * that call ends: s->call still names it. */
    if (s->clients[i].fd < 0 && !(s->call_active && s->call == i)) {
      s->clients[i].fd = fd;
      frame_reader_init(&s->clients[i].r, 64 << 20);
      return;
    }
  }
  const char *msg = "The session has too many waiting calls.";
  struct buf b = {0};
  if (frame_append(&b, FRAME_ERROR, msg, strlen(msg)) == 0)
    (void)!write(fd, b.data, b.len); /* a fresh socket takes it, or nothing */
  buf_free(&b);
  close(fd);
}

static void reap_children(struct sup *s) {
  for (;;) {
    pid_t p = waitpid(-1, NULL, WNOHANG);
    if (p <= 0)
      return;
    if (p == s->sandbox_pid)
      s->sandbox_gone = true;
  }
}

static void on_signal(struct sup *s) {
  struct signalfd_siginfo si;
  while (read(s->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
    if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP)
      s->quit = true;
  }
  reap_children(s);
}

/* Start the sandbox when none runs, with a bound on crash loops. */
static void ensure_sandbox(struct sup *s) {
  if (s->started || s->quit)
    return;
  if (s->quick_deaths >= MAX_QUICK_DEATHS) {
    fail_waiting(s, "The sandbox keeps stopping right after it starts; the session's files are kept.");
    s->quit = true;
    return;
  }
  mcp_error_t err = NULL;
  if (s->boot_fd < 0 && s->cfg.max_starting > 0) { /* 0: not resolved, no limit (tests) */
    int fd = boot_slot_try(&s->cfg, &err);
    s->boot_waiting = fd == -EAGAIN;
    if (s->boot_waiting)
      return; /* the loop tries again in a moment */
    if (fd < 0)
      mcp_error_log_release(&err, "mcp-sandboxd: boot slot"); /* boot without one */
    s->boot_fd = fd < 0 ? -1 : fd;
  }
  if (sandbox_start(s, &err) < 0) {
    boot_release(s);
    mcp_error_log_release(&err, "mcp-sandboxd: start");
    fail_waiting(s, "The sandbox could not be started; try again later.");
    s->quit = true;
  }
}

/* Whether anything needs the sandbox as it is now: a call that runs or
 * waits, a background run (started or waiting for the executor), a client
 * waiting for it to be ready.  A busy sandbox never hibernates. */
static bool sandbox_busy(const struct sup *s) {
  if (s->call_active || bg_runs_active(&s->runs) > 0)
    return true;
  for (int i = 0; i < MAX_CLIENTS; i++)
    if (s->clients[i].fd >= 0 && (s->clients[i].has_request || s->clients[i].wants_ready))
      return true;
  return false;
}

/* After a failed checkpoint: whether the sandbox still runs. */
static bool sandbox_alive(struct sup *s) {
  reap_children(s);
  return !s->sandbox_gone && s->sandbox_pid > 0 && kill(s->sandbox_pid, 0) == 0;
}

/* Before the checkpoint the executor drops its spares (frame H): the wake
 * replaces them anyway, and without the pages they copied the image is
 * half the size (12 against 23 MB with numpy and pandas), written and
 * restored sooner.  An executor that does not answer in time is
 * checkpointed as it is. */
static void executor_quiesce(struct sup *s) {
  s->spares_later_until = 0; /* H ends the executor's wait for N */
  if (frame_write(s->exec_in, FRAME_HIBERNATE, NULL, 0) < 0)
    return;
  int64_t deadline = now_ms() + QUIESCE_MS;
  struct frame f;
  while (frame_read(&s->exec_r, s->exec_out, deadline, &f) == 1)
    if (f.type == FRAME_HIBERNATE)
      return;
}

/* Idle for hibernate_after: the sandbox goes to disk and we exit (hibernate.h). */
static void maybe_hibernate(struct sup *s) {
  if (!s->ready || s->quit || sandbox_busy(s) || !hibernate_due(&s->hib, now_ms()))
    return;
  mcp_error_t err = NULL;
  if (refresh_dir(s, &err) < 0) {
    mcp_error_log_release(&err, "mcp-sandboxd: hibernate");
    return;
  }
  if (!hibernate_begin(&s->hib))
    return; /* a responder holds call.lock: not now */
  executor_quiesce(s);
  s->quit = true;
  if (hibernate_save(&s->hib, &s->sb, &err) == 0) {
    exec_close(s);
    return;
  }
  mcp_error_log_release(&err, "mcp-sandboxd: hibernate");
  if (sandbox_alive(s)) {
    s->quit = false; /* it goes on as it was, and is not checkpointed again */
    hibernate_release(&s->hib);
    return;
  }
  hibernate_state_lost(&s->hib, &s->sb, "the sandbox did not survive a failed checkpoint");
  sandbox_stop(s);
}

static int64_t ready_timeout_ms(const struct sup *s) {
  if (s->hib.restoring)
    return RESTORE_WAKE_MS;
  return (int64_t)s->cfg.ready_wait * 1000 + READY_TIMEOUT_MS;
}

static int loop(struct sup *s) {
  while (!s->quit) {
    ensure_sandbox(s);
    if (s->quit)
      break;
    struct pollfd p[4 + MAX_CLIENTS + EGRESS_POLL_MAX];
    int idx[4 + MAX_CLIENTS + EGRESS_POLL_MAX];
    int n = 0;
    p[n] = (struct pollfd){s->sig_fd, POLLIN, 0};
    idx[n++] = -1;
    p[n] = (struct pollfd){s->listen_fd, POLLIN, 0};
    idx[n++] = -2;
    p[n] = (struct pollfd){s->exec_out, POLLIN, 0};
    idx[n++] = -3;
    /* Woken when the queue moves (slots.h); slot_take drains it. */
    p[n] = (struct pollfd){slot_wait_fd(&s->slot_wait), POLLIN, 0};
    idx[n++] = -5;
    for (int i = 0; i < MAX_CLIENTS; i++) {
      if (s->clients[i].fd < 0)
        continue;
      short ev = POLLIN | (s->clients[i].outq.len > s->clients[i].outq_off ? POLLOUT : 0);
      p[n] = (struct pollfd){s->clients[i].fd, ev, 0};
      idx[n++] = i;
    }
    int eg_first = n;
    n += egress_poll_fill(&s->eg, p + n, EGRESS_POLL_MAX);
    for (int k = eg_first; k < n; k++)
      idx[k] = -4;
    int timeout = 1000;
    int64_t now = now_ms();
    bool queued = waiting_for_slots(s);
    if (s->call_active) {
      int64_t left = s->call_deadline - now;
      timeout = left <= 0 ? 0 : (left < timeout ? (int)left : timeout);
    } else if (!s->started && s->boot_waiting) {
      timeout = BOOT_RETRY_MS;
    } else if (!s->ready) {
      int64_t left = s->started_at + ready_timeout_ms(s) - now;
      timeout = left <= 0 ? 0 : (left < timeout ? (int)left : timeout);
    } else if (queued) {
      timeout = slot_wait_ms(&s->slot_wait);
    } else if (!sandbox_busy(s)) {
      int left = hibernate_timeout_ms(&s->hib, now);
      timeout = left >= 0 && left < timeout ? left : timeout;
    }
    if (tasks_watched(s) && timeout > TASKS_CHECK_MS)
      timeout = TASKS_CHECK_MS;
    int64_t run_deadline = bg_runs_deadline(&s->runs);
    if (run_deadline > 0 && run_deadline - now < timeout)
      timeout = run_deadline - now <= 0 ? 0 : (int)(run_deadline - now);
    int eg_timeout = egress_timeout_ms(&s->eg);
    if (eg_timeout >= 0 && eg_timeout < timeout)
      timeout = eg_timeout;
    if (s->spares_later_until > 0 && !queued && timeout > SPARES_LOOK_MS) /* spares_look */
      timeout = SPARES_LOOK_MS;
    int r = poll(p, (nfds_t)n, timeout);
    if (r < 0 && errno != EINTR)
      return -1;
    /* The relay first: a call that ends below must find its bytes counted. */
    egress_poll_done(&s->eg, p + eg_first, r > 0 ? n - eg_first : 0);
    for (int k = 0; r > 0 && k < eg_first; k++) {
      if (p[k].revents == 0)
        continue;
      if (idx[k] == -1)
        on_signal(s);
      else if (idx[k] == -2)
        on_accept(s);
      else if (idx[k] == -3) {
        if (s->started)
          on_exec_readable(s);
      } else if (idx[k] == -5) {
        /* the queue moved: maybe_start_next below looks */
      } else if (s->clients[idx[k]].fd == p[k].fd) {
        if ((p[k].revents & POLLOUT) && client_flush(s, idx[k]) < 0)
          continue;
        if (p[k].revents & (POLLIN | POLLHUP | POLLERR))
          on_client_readable(s, idx[k]);
      }
    }
    check_tasks(s);
    replace_after_cut(s);
    spares_look(s);
    now = now_ms();
    if (s->call_active && now >= s->call_deadline) {
      fprintf(stderr, "mcp-sandboxd %s: the call overran its deadline; restarting the sandbox\n", s->sb.id);
      sandbox_lost(s, true);
    } else if (s->started && bg_runs_overran(&s->runs, now)) {
      fprintf(stderr, "mcp-sandboxd %s: a background run overran its deadline; restarting the sandbox\n", s->sb.id);
      sandbox_lost(s, false);
    } else if (s->started && !s->ready && now - s->started_at >= ready_timeout_ms(s)) {
      fprintf(stderr, "mcp-sandboxd %s: the executor did not become ready\n", s->sb.id);
      if (s->hib.restoring) {
        restore_lost(s, "the restored executor did not answer its wake");
      } else {
        s->quick_deaths = MAX_QUICK_DEATHS;
        sandbox_stop(s);
      }
    }
    maybe_start_next(s);
    maybe_hibernate(s);
  }
  return 0;
}

/* On the way out: what the responders are owed, for a bounded time. */
static void flush_all(struct sup *s, int64_t deadline) {
  for (;;) {
    struct pollfd p[MAX_CLIENTS];
    int idx[MAX_CLIENTS], n = 0;
    for (int i = 0; i < MAX_CLIENTS; i++)
      if (s->clients[i].fd >= 0 && s->clients[i].outq.len > s->clients[i].outq_off) {
        p[n] = (struct pollfd){s->clients[i].fd, POLLOUT, 0};
        idx[n++] = i;
      }
    int64_t left = deadline - now_ms();
    if (n == 0 || left <= 0 || poll(p, (nfds_t)n, (int)left) <= 0)
      return;
    for (int k = 0; k < n; k++)
      if (p[k].revents != 0)
        client_flush(s, idx[k]);
  }
}

static int setup(struct sup *s, const char *dir, mcp_error_t *err) {
  s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (s->dirfd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open `%s`", dir);
  egress_init(&s->eg, &s->cfg, s->dirfd);
  hibernate_init(&s->hib, &s->cfg, s->ops, s->dirfd);
  /* The bind mount's source (/opt/mcp/egress), empty until a call has egress. */
  if (mkdirat(s->dirfd, EGRESS_DIR, 0755) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir `%s/%s`", dir, EGRESS_DIR);
  /* One supervisor per folder: the lock lives as long as we do. */
  s->lock_fd = openat(s->dirfd, SUPERVISOR_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (s->lock_fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open lock");
  if (lock_try(s->lock_fd) < 0)
    return mcp_fail(err, MCP_ERR_BUSY, errno, "another supervisor holds `%s`", dir);
  /* Ended before we held the lock: session_destroy moves the folder to the
   * trash, then stops the supervisor that holds it, and found none.  Not
   * at `dir` any more: nothing to start (an executor started now would
   * run in the trash with no one to stop it). */
  struct stat here, there;
  if (fstat(s->dirfd, &here) < 0 || stat(dir, &there) < 0 || here.st_dev != there.st_dev || here.st_ino != there.st_ino)
    return s->ended = true, mcp_fail(err, MCP_ERR_NOT_FOUND, 0, "`%s` was ended before its supervisor started", dir);
  cleanup_free char *id = NULL;
  if (read_file_at(s->dirfd, SANDBOX_ID_FILE, 64, &id, NULL, err) < 0)
    return -1;
  id[strcspn(id, "\n")] = '\0';
  if (sandbox_ctx_init(&s->sb, &s->cfg, id, dir, err) < 0)
    return -1;
  bg_runs_init(&s->runs, &s->cfg, s->dirfd);

  s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listen_fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "socket");
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (fd_path(sa.sun_path, sizeof(sa.sun_path), s->dirfd, SUPERVISOR_SOCKET) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "socket path");
  unlinkat(s->dirfd, SUPERVISOR_SOCKET, 0);
  mode_t old = umask(0077);
  int br = bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa));
  umask(old);
  if (br < 0 || listen(s->listen_fd, 64) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "bind/listen `%s`", sa.sun_path);

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, NULL);
  s->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (s->sig_fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "signalfd");
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

int supervisor_main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: mcp-sandboxd SESSION-FOLDER\n");
    return 2;
  }
  static struct sup s;
  s.exec_in = s.exec_out = s.listen_fd = s.sig_fd = s.lock_fd = -1;
  s.sandbox_pid = -1;
  s.slots = SLOT_HOLD_NONE;
  s.slot_wait = SLOT_WAIT_NONE;
  s.boot_fd = s.awaited_fd = -1;
  s.call = -1;
  s.quitter = -1;
  for (int i = 0; i < MAX_CLIENTS; i++)
    s.clients[i].fd = -1;
  mcp_error_t err = NULL;
  if (config_load(&s.cfg, &err) < 0) {
    fprintf(stderr, "mcp-sandboxd: %s\n", mcp_error_public(err));
    mcp_error_release(&err);
    return 1;
  }
  s.ops = sandbox_ops_for(s.cfg.backend);
  mcp_error_t merr = NULL;
  if (metrics_attach(&s.cfg, &merr) < 0)
    mcp_error_release(&merr); /* counting is optional (tests run without a master) */
  umask(022);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  runsc_set_reaper(true);
  if (setup(&s, argv[1], &err) < 0) {
    int busy = err->kind == MCP_ERR_BUSY || s.ended; /* not ours to run: quietly */
    if (!busy)
      mcp_error_log_release(&err, "mcp-sandboxd");
    mcp_error_release(&err);
    return busy ? 0 : 1;
  }
  loop(&s);
  /* Stop accepting first, so no responder queues behind a dying supervisor. */
  unlinkat(s.dirfd, SUPERVISOR_SOCKET, 0);
  close(s.listen_fd);
  egress_close(&s.eg);
  sandbox_stop(&s);
  reap_children(&s);
  workspace_unmount(s.dirfd);
  /* Release the folder before answering: whoever asked us to quit removes it next. */
  close(s.lock_fd);
  /* A hibernated sandbox: the responders waiting for call.lock may start
   * the next supervisor now that sup.lock is free. */
  hibernate_release(&s.hib);
  slot_wait_end(&s.slot_wait, &s.slots);
  for (int i = 0; i < MAX_CLIENTS; i++) {
    if (s.clients[i].fd < 0)
      continue;
    if (i == s.quitter)
      client_send(&s, i, FRAME_DONE, "{}", 2);
    else if (s.clients[i].has_request || s.clients[i].wants_ready)
      client_error(&s, i, "The session ended before the call could finish.");
  }
  flush_all(&s, now_ms() + FINAL_FLUSH_MS);
  for (int i = 0; i < MAX_CLIENTS; i++)
    if (s.clients[i].fd >= 0)
      client_close(&s, i);
  reap_children(&s);
  return 0;
}
