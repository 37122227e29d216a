#include "config.h"

#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

int pidfd_open_compat(pid_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  errno = ENOSYS;
  return -1;
#endif
}

int status_to_exit_code(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 255;
}

/* In the child: only async-signal-safe calls until exec. */
static void child_exec(const struct proc_opts *o, int out_w, int errpipe) {
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  int in = o->stdin_fd >= 0 ? o->stdin_fd : devnull;
  int out = out_w >= 0 ? out_w : (o->stdout_fd >= 0 ? o->stdout_fd : devnull);
  int errfd = o->capture_stderr && out_w >= 0 ? out_w : (o->stderr_fd >= 0 ? o->stderr_fd : 2);
  /* dup2 clears O_CLOEXEC on the target; when source == target, clear it by hand. */
  if ((in == 0 ? fcntl(0, F_SETFD, 0) : dup2(in, 0)) < 0 || (out == 1 ? fcntl(1, F_SETFD, 0) : dup2(out, 1)) < 0 ||
      (errfd == 2 ? fcntl(2, F_SETFD, 0) : dup2(errfd, 2)) < 0)
    goto fail;
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGPIPE, SIG_DFL);
  if (o->set_ids && (setgroups(0, NULL) < 0 || setgid(o->gid) < 0 || setuid(o->uid) < 0))
    goto fail;
  if (o->cwd != NULL && chdir(o->cwd) < 0)
    goto fail;
  execve(o->argv[0], (char *const *)o->argv, (char *const *)(o->envp ? o->envp : (const char *const *)environ));
fail:;
  int e = errno;
  (void)!write(errpipe, &e, sizeof(e));
  _exit(127);
}

static int wait_deadline(pid_t pid, int pidfd, int cap_r, const struct proc_opts *o, int *status, mcp_error_t *err) {
  int64_t deadline = o->timeout_ms > 0 ? now_ms() + o->timeout_ms : -1;
  for (;;) {
    struct pollfd p[2] = {{pidfd, POLLIN, 0}, {cap_r, POLLIN, 0}};
    int n = cap_r >= 0 ? 2 : 1;
    int timeout = -1;
    if (deadline >= 0) {
      int64_t left = deadline - now_ms();
      if (left <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, status, 0);
        return mcp_fail(err, MCP_ERR_INTERNAL, ETIMEDOUT, "`%s` did not finish within %lld ms", o->argv[0],
                        (long long)o->timeout_ms);
      }
      timeout = (int)(left > 60000 ? 60000 : left);
    }
    if (o->reap_orphans) {
      pid_t w;
      int st;
      while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
        if (w == pid) {
          *status = st;
          return 0;
        }
      }
      if (timeout < 0 || timeout > 5)
        timeout = 5;
    }
    if (pidfd < 0 && cap_r < 0) {
      /* No pidfd: poll the child with short sleeps. */
      pid_t w = waitpid(pid, status, WNOHANG);
      if (w == pid)
        return 0;
      poll(NULL, 0, 5);
      continue;
    }
    int pr = poll(p, (nfds_t)n, pidfd < 0 ? (timeout < 0 || timeout > 5 ? 5 : timeout) : timeout);
    if (pr < 0 && errno != EINTR)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "poll");
    if (cap_r >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
      char tmp[8192];
      ssize_t r = read_some(cap_r, tmp, sizeof(tmp));
      if (r > 0 && o->capture->len < o->capture_max) {
        size_t take = (size_t)r;
        if (take > o->capture_max - o->capture->len)
          take = o->capture_max - o->capture->len;
        buf_append(o->capture, tmp, take);
      }
      if (r == 0)
        cap_r = -1; /* EOF: keep waiting for the exit only */
      continue;
    }
    if (pidfd < 0 || (p[0].revents & POLLIN)) {
      pid_t w = waitpid(pid, status, WNOHANG);
      if (w == pid)
        return 0;
      if (w < 0 && errno != EINTR)
        return mcp_fail(err, MCP_ERR_INTERNAL, errno, "waitpid");
    }
  }
}

int run_process(const struct proc_opts *o, int *status, mcp_error_t *err) {
  int errp[2], capp[2] = {-1, -1};
  if (pipe2(errp, O_CLOEXEC) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "pipe2");
  cleanup_close int err_r = errp[0];
  cleanup_close int err_w = errp[1];
  if (o->capture != NULL && pipe2(capp, O_CLOEXEC) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "pipe2");
  cleanup_close int cap_r = capp[0];
  cleanup_close int cap_w = capp[1];

  pid_t pid = fork();
  if (pid < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "fork");
  if (pid == 0)
    child_exec(o, cap_w, err_w);
  close(steal_fd(&err_w));
  close(steal_fd(&cap_w));

  int exec_errno = 0;
  ssize_t r;
  do
    r = read(err_r, &exec_errno, sizeof(exec_errno));
  while (r < 0 && errno == EINTR);
  if (r == (ssize_t)sizeof(exec_errno)) {
    waitpid(pid, NULL, 0);
    return mcp_fail(err, MCP_ERR_INTERNAL, exec_errno, "cannot run `%s`", o->argv[0]);
  }
  cleanup_close int pidfd = pidfd_open_compat(pid);
  int st = 0;
  int ret = wait_deadline(pid, pidfd, cap_r, o, &st, err);
  if (ret < 0)
    return ret;
  if (status)
    *status = st;
  return 0;
}
