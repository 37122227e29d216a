/* The one audited helper that runs a child process (after crun's
 * run_process_with_stdin_timeout_envp): pipes with O_CLOEXEC, fork/exec, an
 * error pipe that reports a failed exec, a deadline, SIGKILL and reap on every
 * exit path. */
#ifndef MCP_PROC_H
#define MCP_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "util.h"

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
  /* Also reap any other child while waiting: a subreaper (the supervisor)
   * must reap the sandbox processes runsc reparents to it at once, or
   * `runsc delete` waits seconds for them to disappear. */
  bool reap_orphans;
};

/* Run and wait.  *status receives the wait status.  Fails when the program
 * cannot be started or the deadline passes (the child is then killed). */
int run_process(const struct proc_opts *o, int *status, mcp_error_t *err);

/* pidfd_open(2) with an ENOSYS fallback of -1. */
int pidfd_open_compat(pid_t pid);

/* Exit code in the shell's convention: code, or 128 + signal. */
int status_to_exit_code(int status);

#endif
