/* The one audited helper that runs child processes (after crun's
 * run_process_with_stdin_timeout_envp).  Every fork of the host goes through
 * here: pipes with O_CLOEXEC, fork/exec, an error pipe that reports a failed
 * exec, every descriptor above 2 closed in the child, a process group (or a
 * session) of its own, a deadline, and SIGKILL of the whole group and a reap
 * on every exit path.
 *
 * Argument vectors are built with struct argv, which grows as needed. */
#ifndef MCP_PROC_H
#define MCP_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/util.h"

/* A growable, NULL-terminated argument vector of borrowed strings. */
struct argv {
  const char **v; /* v[n] == NULL once anything was added */
  size_t n, cap;
  bool oom; /* an addition failed: the vector must not be run */
};
void argv_add(struct argv *a, const char *arg);
void argv_free(struct argv *a);
static inline void cleanup_argvp(struct argv *a) { argv_free(a); }
#define cleanup_argv __attribute__((cleanup(cleanup_argvp)))

struct proc_opts {
  const char *const *argv;
  const char *const *envp; /* NULL: inherit the caller's environment */
  int stdin_fd;            /* -1: /dev/null */
  int stdout_fd;           /* -1: /dev/null, unless capture is set */
  int stderr_fd;           /* -1: inherit */
  int64_t timeout_ms;      /* <= 0: no deadline */
  struct buf *capture;     /* when set, stdout is captured here ... */
  size_t capture_max;      /* ... up to this many bytes (the rest is drained) */
  bool capture_stderr;     /* stderr goes to the capture too */
  bool set_ids;            /* run as uid:gid with no supplementary groups */
  uid_t uid;
  gid_t gid;
  const char *cwd;
  bool new_session; /* setsid() rather than a process group of its own */
  /* Also reap any other child while waiting: a subreaper (the supervisor)
   * must reap the sandbox processes runsc reparents to it at once, or
   * `runsc delete` waits seconds for them to disappear. */
  bool reap_orphans;
};

/* Run and wait.  *status receives the wait status.  Fails when the program
 * cannot be started or the deadline passes (its process group is then
 * killed). */
int run_process(const struct proc_opts *o, int *status, mcp_error_t *err);
/* Start without waiting (capture and timeout_ms are not used): the pid of
 * the child, which the caller reaps. */
int proc_start(const struct proc_opts *o, pid_t *pid, mcp_error_t *err);
/* Start argv detached from the caller: a double fork, so that it is adopted
 * by the nearest subreaper and outlives the caller; a session of its own,
 * stdin and stdout /dev/null, stderr inherited. */
int proc_spawn_detached(const char *const *argv, mcp_error_t *err);
/* Fork a process of this program that runs fn(arg) and exits with its
 * value, with default signal dispositions and no signal blocked. */
int proc_fork(int (*fn)(void *), void *arg, pid_t *pid, mcp_error_t *err);

/* pidfd_open(2) with an ENOSYS fallback of -1. */
int pidfd_open_compat(pid_t pid);

/* Exit code in the shell's convention: code, or 128 + signal. */
int status_to_exit_code(int status);

#endif
