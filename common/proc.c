#include "config.h"

#include "common/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
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

void argv_add(struct argv *a, const char *arg) {
  if (a->oom)
    return;
  if (a->n + 2 > a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 16;
    const char **v = realloc(a->v, cap * sizeof(*v));
    if (v == NULL) {
      a->oom = true;
      return;
    }
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = arg;
  a->v[a->n] = NULL;
}

void argv_free(struct argv *a) {
  free(a->v);
  a->v = NULL;
  a->n = a->cap = 0;
  a->oom = false;
}

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Every descriptor from `from` on is closed by exec: what the caller holds
 * (the FastCGI socket, other clients' connections) never reaches a child.
 * Marked rather than closed, so the error pipe works until exec.  Only
 * async-signal-safe calls: this runs between fork and exec. */
static void cloexec_from(int from) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)from, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
    return;
#endif
  struct rlimit rl;
  rlim_t max = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 65536;
  if (max > 65536)
    max = 65536;
  for (int fd = from; fd < (int)max; fd++)
    fcntl(fd, F_SETFD, FD_CLOEXEC);
}

static void unblock_signals(void) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGPIPE, SIG_DFL);
}

/* In the child: only async-signal-safe calls until exec. */
static void child_exec(const struct proc_opts *o, int out_w, int errpipe) {
  if (o->new_session ? setsid() < 0 : setpgid(0, 0) < 0)
    goto fail;
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  int in = o->stdin_fd >= 0 ? o->stdin_fd : devnull;
  int out = out_w >= 0 ? out_w : (o->stdout_fd >= 0 ? o->stdout_fd : devnull);
  int errfd = o->capture_stderr && out_w >= 0 ? out_w : (o->stderr_fd >= 0 ? o->stderr_fd : 2);
  /* dup2 clears O_CLOEXEC on the target; when source == target, clear it by hand. */
  if ((in == 0 ? fcntl(0, F_SETFD, 0) : dup2(in, 0)) < 0 || (out == 1 ? fcntl(1, F_SETFD, 0) : dup2(out, 1)) < 0 ||
      (errfd == 2 ? fcntl(2, F_SETFD, 0) : dup2(errfd, 2)) < 0)
    goto fail;
  cloexec_from(3);
  unblock_signals();
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

/* The child's errno when its exec failed (read from the error pipe, which
 * exec closes), else 0. */
static int exec_result(int err_r) {
  int exec_errno = 0;
  ssize_t r;
  do
    r = read(err_r, &exec_errno, sizeof(exec_errno));
  while (r < 0 && errno == EINTR);
  return r == (ssize_t)sizeof(exec_errno) ? exec_errno : 0;
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
        kill(-pid, SIGKILL); /* the child and everything it started */
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

/* Fork and exec; *cap_r is the read end of the capture pipe, if any. */
static int start(const struct proc_opts *o, pid_t *pid_out, int *cap_r_out, mcp_error_t *err) {
  int errp[2], capp[2] = {-1, -1};
  if (o->argv == NULL || o->argv[0] == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, EINVAL, "no program to run");
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
  int e = exec_result(err_r);
  if (e != 0) {
    waitpid(pid, NULL, 0);
    return mcp_fail(err, MCP_ERR_INTERNAL, e, "cannot run `%s`", o->argv[0]);
  }
  *pid_out = pid;
  *cap_r_out = steal_fd(&cap_r);
  return 0;
}

int proc_start(const struct proc_opts *o, pid_t *pid, mcp_error_t *err) {
  int cap_r = -1;
  struct proc_opts plain = *o;
  plain.capture = NULL;
  return start(&plain, pid, &cap_r, err);
}

int run_process(const struct proc_opts *o, int *status, mcp_error_t *err) {
  pid_t pid = -1;
  int cap_fd = -1;
  if (start(o, &pid, &cap_fd, err) < 0)
    return -1;
  cleanup_close int cap_r = cap_fd;
  cleanup_close int pidfd = pidfd_open_compat(pid);
  int st = 0;
  int ret = wait_deadline(pid, pidfd, cap_r, o, &st, err);
  if (ret < 0)
    return ret;
  if (status)
    *status = st;
  return 0;
}

int proc_spawn_detached(const char *const *argv, mcp_error_t *err) {
  int errp[2];
  if (pipe2(errp, O_CLOEXEC) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "pipe2");
  cleanup_close int err_r = errp[0];
  cleanup_close int err_w = errp[1];
  pid_t pid = fork();
  if (pid < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "fork");
  if (pid == 0) {
    /* The middle child exits at once: the program is adopted by the
     * nearest subreaper. */
    if (fork() != 0)
      _exit(0);
    struct proc_opts o = {.argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = 2, .new_session = true};
    child_exec(&o, -1, err_w);
  }
  close(steal_fd(&err_w));
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
    ;
  int e = exec_result(err_r); /* EOF once the grandchild exec'd or died */
  if (e != 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, e, "cannot run `%s`", argv[0]);
  return 0;
}

int proc_fork(int (*fn)(void *), void *arg, pid_t *pid_out, mcp_error_t *err) {
  pid_t pid = fork();
  if (pid < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "fork");
  if (pid == 0) {
    /* The parent's handlers must not survive in the child. */
    static const int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
      signal(sigs[i], SIG_DFL);
    unblock_signals();
    _exit(fn(arg));
  }
  *pid_out = pid;
  return 0;
}
