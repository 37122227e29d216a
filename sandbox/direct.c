/* The direct backend: the executor as a plain host process in its own
 * process group.  No isolation whatsoever; it exists so that unit tests run
 * the full responder -> supervisor -> executor path without root or gVisor. */
#include "config.h"

#include "backend.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

static int direct_start(struct sandbox_ctx *ctx, int stdin_fd, int stdout_fd, mcp_error_t *err) {
  char executor[PATH_MAX], workdir[PATH_MAX + 16];
  if (snprintf(executor, sizeof(executor), "%s/executor.py", ctx->cfg->libexec_dir) >= (int)sizeof(executor) ||
      snprintf(workdir, sizeof(workdir), "--workdir=%s/work", ctx->dir) >= (int)sizeof(workdir))
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "executor paths");
  pid_t pid = fork();
  if (pid < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "fork");
  if (pid == 0) {
    setpgid(0, 0);
    if (dup2(stdin_fd, 0) < 0 || dup2(stdout_fd, 1) < 0)
      _exit(127);
    close_fds_from(3);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    const char *argv[] = {"/usr/bin/python3", "-I", "-B", executor, "--direct", workdir, NULL};
    const char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
    execve(argv[0], (char *const *)argv, (char *const *)envp);
    _exit(127);
  }
  setpgid(pid, pid);
  ctx->pid = pid;
  return 0;
}

static int direct_destroy(struct sandbox_ctx *ctx, mcp_error_t *err) {
  if (ctx->pid <= 0)
    return 0;
  kill(-ctx->pid, SIGKILL);
  kill(ctx->pid, SIGKILL);
  waitpid(ctx->pid, NULL, 0);
  ctx->pid = -1;
  return 0;
}

const struct sandbox_ops sandbox_direct_ops = {
    .name = "direct",
    .start = direct_start,
    .destroy = direct_destroy,
};
