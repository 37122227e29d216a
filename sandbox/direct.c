/* The direct backend: the executor as a plain host process in its own
 * process group.  No isolation whatsoever; it exists so that unit tests run
 * the full responder -> supervisor -> executor path without root or gVisor. */
#include "config.h"

#include "common/proc.h"
#include "common/util.h"
#include "sandbox/backend.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int direct_start(struct sandbox_ctx *ctx, int stdin_fd, int stdout_fd, mcp_error_t *err) {
  char executor[PATH_MAX], workdir[PATH_MAX + 16];
  if (snprintf(executor, sizeof(executor), "%s/executor", ctx->cfg->libexec_dir) >= (int)sizeof(executor) ||
      snprintf(workdir, sizeof(workdir), "--workdir=%s/work", ctx->dir) >= (int)sizeof(workdir))
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "executor paths");
  /* Its own session: every call's process group stays inside it, so
   * destroy() can find them all (not the supervisor's). */
  const char *argv[] = {"/usr/bin/python3", "-I", "-B", executor, "--direct", workdir, NULL};
  const char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
  struct proc_opts o = {
      .argv = argv, .envp = envp, .stdin_fd = stdin_fd, .stdout_fd = stdout_fd, .stderr_fd = -1, .new_session = true};
  pid_t pid;
  if (proc_start(&o, &pid, err) < 0)
    return -1;
  ctx->pid = pid;
  return 0;
}

/* SIGKILL every process whose session is sid (field 6 of /proc/PID/stat). */
static int kill_session(pid_t sid) {
  cleanup_dir DIR *d = opendir("/proc");
  if (d == NULL)
    return -errno;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char *end;
    long pid = strtol(de->d_name, &end, 10);
    if (*end != '\0' || pid <= 0)
      continue;
    char path[64], stat[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, stat, sizeof(stat) - 1) : -1;
    if (r <= 0)
      continue;
    stat[r] = '\0';
    /* "pid (comm) state ppid pgrp session": comm may hold spaces */
    char *close_paren = strrchr(stat, ')');
    int ppid, pgrp, session;
    char state;
    if (close_paren == NULL || sscanf(close_paren + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4)
      continue;
    if (session == sid && kill((pid_t)pid, SIGKILL) == 0)
      n++;
  }
  return n;
}

static int direct_destroy(struct sandbox_ctx *ctx, mcp_error_t *err) {
  if (ctx->pid <= 0)
    return 0;
  /* The executor's calls run in their own process groups of its session. */
  kill_session(ctx->pid);
  kill(ctx->pid, SIGKILL);
  waitpid(ctx->pid, NULL, 0);
  ctx->pid = -1;
  return 0;
}

const struct sandbox_ops sandbox_direct_ops = {
    .name = "direct",
    .start = direct_start,
    .destroy = direct_destroy,
    .checkpoint = NULL, /* a host process cannot be checkpointed: never hibernates */
    .restore = NULL,
};
