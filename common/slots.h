/* Execution slots: at most max_concurrent calls run at once across the
 * service, and at most its policy's max_concurrent for one token
 * (common/policy.h).  A slot is an OFD lock on a file below <state>/slots/:
 * N for the service's, t-<token name>/N for a token's.  The supervisor that
 * runs a call holds its slots from the call's start to its end, whatever
 * its client does, and the kernel releases them when that process dies.
 *
 * Calls that find no slot free get them in the order they asked: each
 * waits in a queue, the folder queue/ beside the slots (the token's first,
 * then, holding the token's slot, the service's), as a ticket file named
 * by the time it joined and locked while its supervisor lives.  Only the
 * oldest live ticket of a queue takes a slot; a ticket whose supervisor
 * died is removed by the next waiter or releaser that finds it.  Waiters
 * watch their queue with inotify: the first one the folder, whose times a
 * supervisor that releases a slot while tickets wait changes, each other
 * one the live ticket just ahead of it.  So the first takes a slot as
 * soon as it is free, each other one looks when the one ahead has left,
 * not at the next poll, and none spins or is woken for nothing (before,
 * each end of a call woke every waiter twice).  A token's waiters stand in
 * the service's queue only up to the token's own limit, so one tenant's
 * calls cannot fill the line of another's.
 *
 * Beyond its busy share (token_busy_concurrent, the cores by default) a
 * token's call also waits for the CPU: the first in the token's line takes
 * one of the token's further slots only when the machine's CPU was at least
 * half a core idle over the last SLOT_CPU_LOOK_MS.  On busy cores more of
 * one token's calls at once finish no sooner and each costs more CPU (more
 * gVisor processes share the caches); calls that sleep or wait on the
 * network leave the CPU idle and are let in.  Other tokens are not held:
 * each token's line is its own. */
#ifndef MCP_SLOTS_H
#define MCP_SLOTS_H

#include "common/cpus.h"
#include "common/error.h"
#include "common/settings.h"
#include "common/util.h"

struct slot_hold {
  int global_fd; /* -1: none held */
  int token_fd;
  int slots_dir; /* <state>/slots and its t-<name>, open while a slot is */
  int token_dir; /* held or awaited (to wake the queue on release); -1 */
};

enum slot_full {
  SLOT_FULL_NONE,
  SLOT_FULL_TOKEN,  /* the token runs its max_concurrent calls */
  SLOT_FULL_GLOBAL, /* the service runs max_concurrent calls */
  SLOT_FULL_CPU,    /* the token runs its busy share and the CPU is busy */
};

#define SLOT_HOLD_NONE ((struct slot_hold){-1, -1, -1, -1})

#define SLOT_TICKET_MAX 48

/* A supervisor's place in a queue (at most one at a time). */
struct slot_wait {
  int queue_dir; /* the queue folder of the ticket; -1: not queued */
  int ticket_fd; /* the ticket, locked */
  int notify_fd; /* inotify: the ticket ahead, or the folder when none is */
  int watch;     /* its watch (-1: none) */
  char ticket[SLOT_TICKET_MAX];
  char watched[SLOT_TICKET_MAX]; /* the ticket it watches; "": the folder; "*": all of it */
  char token[80];                /* t-<name> of the token the wait is for */
  struct cpu_sample cpu;         /* the CPU when it was last looked at while */
  int64_t cpu_at;                /* waiting for it (monotonic ms; 0: not) */
};

#define SLOT_WAIT_NONE ((struct slot_wait){-1, -1, -1, -1, "", "", "", {0, 0}, 0})
/* How often a waiter looks again without being woken: a slot's holder or a
 * ticket's waiter that died wakes nobody. */
#define SLOT_WAIT_POLL_MS 250
/* The window over which a call beyond its token's busy share looks at the
 * CPU (and how often it looks while it waits for it). */
#define SLOT_CPU_LOOK_MS 50

/* Take one slot of each kind, in turn, without blocking: 0 when both are
 * held (and the wait ended); -EAGAIN with *full saying which kind has none
 * free for us yet: the call is in that queue, h may hold the token's slot,
 * and the caller polls slot_wait_fd(w) (readable: call slot_take again)
 * and calls again at least every slot_wait_ms(w); another negative value
 * with err set on a failure (nothing held, no longer queued).  token_busy
 * is the token's busy share (token_max or more: no CPU wait). */
int slot_take(const struct mcp_config *cfg, const char *token, int token_max, int token_busy, struct slot_hold *h,
              struct slot_wait *w, enum slot_full *full, mcp_error_t *err);
/* How the CPU is read for the busy share (cpus_sample; a test's own). */
extern int (*slot_cpu_read)(struct cpu_sample *s);
/* Whether the CPU was busy from since (a slot_cpu_read sample) to now by
 * the busy share's rule: less than half a core idle (unreadable: busy). */
bool slot_cpu_busy(const struct cpu_sample *since);
/* The fd to poll while waiting (-1: not waiting); drained by slot_take. */
int slot_wait_fd(const struct slot_wait *w);
/* How soon a waiting caller must call slot_take again unwoken (ms). */
int slot_wait_ms(const struct slot_wait *w);
/* Give up waiting: leave the queue and release what h holds. */
void slot_wait_end(struct slot_wait *w, struct slot_hold *h);
/* While waiting in the token's queue: whether the service's slots are all
 * taken too (what a call told it waited too long is told). */
bool slot_global_full(const struct mcp_config *cfg, struct slot_hold *h);
/* Release both slots and wake the queues that wait for them. */
void slot_release(struct slot_hold *h);
/* Whether calls wait: a live ticket in the service's queue or in any
 * token's, or an awaited boot (below).  A sandbox whose call has answered
 * holds back its next spare meanwhile, if the cores are busy
 * (sandbox/supervisor.c). */
bool slot_others_wait(const struct mcp_config *cfg);
/* Whether calls of other supervisors run: a slot of the service's held
 * beside h's own (h: the caller's hold, or NULL).  While they run on busy
 * cores, a sandbox whose call has answered holds back its next spare too. */
bool slot_others_run(const struct mcp_config *cfg, const struct slot_hold *h);

/* Boot slots: at most max_starting sandboxes boot at once across the
 * service (lock files below <state>/slots/boot/).  A boot takes CPU (the
 * sentry, the executor's imports) and waits on I/O: a burst of new sessions
 * that all boot at once thrash and finish together and late; too few at a
 * time leave the CPUs idle (hence 4 x cores by default).
 * A supervisor holds one from the start of its sandbox until the executor
 * says it is ready (or the sandbox stops).  The slot's fd, -EAGAIN when
 * none is free, or -1 with err set. */
int boot_slot_try(const struct mcp_config *cfg, mcp_error_t *err);

/* Awaited boots: a supervisor whose sandbox a session waits for (a boot in
 * sessions/, or a wake from hibernation) holds one of the lock files below
 * <state>/slots/awaited/ from the start of that boot to the executor's
 * ready, and the keeper starts no pool boot while one is held
 * (fcgi/keeper.c).  On 2 cores a pool boot beside it, even at a quarter of
 * the weight, made a session that found the pool empty wait about a third
 * longer (tests/bench/FINDINGS.md, "Pool empty").  The lock goes with its
 * process: a supervisor that died holds none.  The mark's fd, -EAGAIN when
 * all max_starting (64 when unlimited) are held, or -1 with err set. */
int awaited_boot_mark(const struct mcp_config *cfg, mcp_error_t *err);
/* Whether any process holds one. */
bool awaited_boot_any(const struct mcp_config *cfg);

/* Run slots: at most runs_per_token background runs of one token are
 * active at once across the service (lock files below
 * <state>/slots/runs/t-<token name>/).  The supervisor that owns a run holds
 * its slot until the run ends (sandbox/background.h).  The slot's fd,
 * -EAGAIN when none is free, or -1 with err set. */
int run_slot_try(const struct mcp_config *cfg, const char *token, mcp_error_t *err);

#endif
