/* Service counters shared by every process of the service.
 *
 * One fixed-size file, <state>/metrics.shm, mapped shared by the master
 * (and so by the responders and the keeper it forks) and by each
 * supervisor; counters are C11 atomics updated in place.  The master
 * recreates it at start, so counters start at zero with the service, as
 * Prometheus expects of a restarted process.  metrics_render() writes the
 * Prometheus text format; gauges (live sessions, hibernated ones, ready
 * sandboxes) are counted from the state folder at scrape time. */
#ifndef MCP_METRICS_H
#define MCP_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/settings.h"
#include "common/util.h"

enum exec_outcome {
  OUTCOME_OK,
  OUTCOME_ERROR, /* the code failed (non-zero exit) */
  OUTCOME_TIMEOUT,
  OUTCOME_MEMORY,
  OUTCOME_CANCELLED,
  OUTCOME_REFUSED, /* invalid arguments, packages that cannot be fetched */
  OUTCOME_BUSY,    /* session busy or server at capacity */
  OUTCOME_SANDBOX, /* the sandbox failed */
  OUTCOME_N
};

enum reject_reason {
  REJECT_BAD_REQUEST,
  REJECT_UNAUTHORIZED,
  REJECT_FORBIDDEN_ORIGIN,
  REJECT_SESSION_NOT_FOUND,
  REJECT_METHOD_NOT_ALLOWED,
  REJECT_NOT_ACCEPTABLE,
  REJECT_TOO_LARGE,
  REJECT_UNSUPPORTED_MEDIA,
  REJECT_CAPACITY,       /* max_sessions: a new session gets 503 */
  REJECT_TOKEN_SESSIONS, /* the token's max_sessions */
  REJECT_CALLS_CAPACITY, /* max_concurrent calls: a call waited capacity_wait in vain */
  REJECT_TOKEN_CALLS,    /* the token's max_concurrent calls */
  REJECT_DISK_FULL,      /* a new session refused below the free-space floor */
  REJECT_DRAINING,       /* a new session or call refused while the cell drains (common/cell.h) */
  REJECT_TOKEN_REQUESTS, /* the token's max_requests: requests it has in progress in this cell */
  REJECT_N
};

/* What became of a client's GET with Last-Event-ID (fcgi/stream.h). */
enum resume_outcome {
  RESUME_ANSWERED, /* the call's response went out on the new stream */
  RESUME_LOST,     /* the call's responder had died: an error for its request */
  RESUME_LEFT,     /* the client left, or the wait ended, before the answer: the record stays */
  RESUME_UNKNOWN,  /* no stream of ours by that id (400, 404) */
  RESUME_N
};

/* What became of an egress connection (sandbox/egress.h). */
enum egress_verdict {
  EGRESS_ALLOWED, /* the proxy forwarded it */
  EGRESS_DENIED,  /* the policy, an address rule or the TLS server name refused it */
  EGRESS_FAILED,  /* the proxy could not connect (DNS, connection) or is not running */
  EGRESS_LIMITED, /* a limit of the call ended or refused it */
  EGRESS_REFUSED, /* not a proxy request, or no egress for the call */
  EGRESS_VERDICT_N
};

#define METRIC_BUCKETS 12
#define CELL_RESPONDERS_MAX 256 /* fcgi/main.c's MAX_RESPONDERS */
#define CELL_THREADS_MAX 257    /* the setting responder_threads' maximum, and the endpoints' thread */
#define METRIC_TOKENS 64
#define TOKEN_NAME_MAX 65

struct metric_token {
  char name[TOKEN_NAME_MAX];
  _Atomic uint64_t calls;
};

struct metrics {
  uint32_t magic;
  uint32_t size;
  _Atomic uint64_t executions[OUTCOME_N];
  _Atomic uint64_t duration_buckets[METRIC_BUCKETS + 1]; /* per bucket, the last is +Inf */
  _Atomic uint64_t duration_ms_sum;
  _Atomic uint64_t sessions_created;
  _Atomic uint64_t sessions_ended; /* DELETE */
  _Atomic uint64_t sessions_expired;
  _Atomic uint64_t sandbox_starts;
  _Atomic uint64_t sandbox_start_failures;
  _Atomic uint64_t sandboxes_lost;     /* stopped during a call (backstop, crash, overrun) */
  _Atomic uint64_t hibernations;       /* sandboxes checkpointed to disk and stopped (sandbox/hibernate.h) */
  _Atomic uint64_t hibernate_failures; /* checkpoints that failed (the sandbox kept running, or was lost) */
  _Atomic uint64_t restores;           /* hibernated sandboxes restored, their executor awake */
  _Atomic uint64_t restore_failures;   /* restores that failed: a new sandbox, state_lost */
  _Atomic uint64_t package_installs;
  _Atomic uint64_t package_install_failures;
  _Atomic uint64_t responder_restarts;
  _Atomic uint64_t rejected[REJECT_N];
  _Atomic uint64_t bytes_returned;
  _Atomic uint64_t egress_connections[EGRESS_VERDICT_N];
  _Atomic uint64_t egress_bytes_out;
  _Atomic uint64_t egress_bytes_in;
  _Atomic uint64_t peers_refused;                       /* FastCGI connections from a peer that may not talk to us */
  _Atomic uint64_t health_checks;                       /* /healthz answers computed (nginx keeps each 1-2 s) */
  _Atomic uint64_t resumes[RESUME_N];                   /* streams resumed with Last-Event-ID, by outcome */
  _Atomic int64_t draining_since_ms;                    /* common/cell.h: 0 while serving */
  _Atomic int32_t calls_in_flight[CELL_RESPONDERS_MAX]; /* common/cell.h: per responder */
  _Atomic uint64_t forwarded;                           /* common/cell.h: requests sent to the cell that owns them */
  _Atomic int64_t last_start_ok_ms;                     /* wall clock of the latest sandbox start that worked */
  _Atomic int64_t last_start_fail_ms;                   /* ... and of the latest that failed */
  _Atomic int32_t pool_target;                          /* fcgi/keeper.c: the size the pool is kept at now */
  _Atomic uint32_t token_lock;
  struct metric_token tokens[METRIC_TOKENS];
  /* common/cell.h: per responder thread, the hash of the token whose
   * request it serves (0: none) */
  _Atomic uint64_t serving[CELL_RESPONDERS_MAX * CELL_THREADS_MAX];
};

/* Master: create (or recreate) the file and map it. */
int metrics_create(const struct mcp_config *cfg, mcp_error_t *err);
/* Supervisors: map the existing file. */
int metrics_attach(const struct mcp_config *cfg, mcp_error_t *err);
/* The mapping, or NULL before create/attach (then counting is a no-op). */
struct metrics *metrics_get(void);

void metrics_add(_Atomic uint64_t *counter, uint64_t n);
#define METRIC_INC(field)                                                                                              \
  do {                                                                                                                 \
    struct metrics *m_ = metrics_get();                                                                                \
    if (m_ != NULL)                                                                                                    \
      metrics_add(&m_->field, 1);                                                                                      \
  } while (0)

void metrics_execution(enum exec_outcome outcome, int64_t duration_ms, const char *token_id, uint64_t bytes);
/* A request refused with this HTTP status (503s are counted by reason,
 * where they happen, with metrics_reject_reason). */
void metrics_reject(int http_status);
void metrics_reject_reason(enum reject_reason reason);
/* A stream resumed with Last-Event-ID, by what became of it (fcgi/stream.c). */
void metrics_resume(enum resume_outcome outcome);
/* One egress connection ended: its verdict by name ("allowed", ...) and
 * its bytes each way. */
void metrics_egress(const char *verdict, uint64_t out, uint64_t in);
/* A supervisor's sandbox start: its outcome, for metrics and /healthz. */
void metrics_sandbox_start(bool ok);
/* Bytes free (for an unprivileged writer) on the state folder's file
 * system, or -1 when unknown. */
int64_t metrics_disk_free(const struct mcp_config *cfg);
/* Sessions that exist now (counted in the state folder). */
int metrics_live_sessions(const struct mcp_config *cfg);
/* /healthz: 0 when the service can start sandboxes, else -1 with a reason. */
int metrics_health(const struct mcp_config *cfg, const char **reason);
/* Append printf-style text (at most 511 bytes) to a rendering. */
void metrics_line(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prometheus text format, gauges included. */
int metrics_render(const struct mcp_config *cfg, struct buf *out);

#endif
