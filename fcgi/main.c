/* mcp-server: the master process.
 *
 * Prepares the state folder and the sandbox skeleton, opens the FastCGI
 * socket, pre-forks the responders and the keeper, restarts any that dies,
 * and on SIGTERM/SIGINT drains (common/cell.h: new work is refused, running
 * calls end, for at most drain_timeout; a second signal cuts it short),
 * then stops everything it started: responders, keeper and the per-session
 * supervisors (which destroy their sandboxes).
 *
 * It is a child subreaper: supervisors are started by responders with a
 * double fork and adopted here, so they survive a responder that dies and
 * are still ours to stop.
 *
 * The FastCGI socket trusts MCP_TOKEN_ID from whoever connects: it is mode
 * 0660 with socket_group, and the master refuses to start when that group
 * is missing or nobody but root could connect (never a socket open to
 * every local user); the responders check each peer (responder.h).
 *
 * usage: mcp-server [--print-config | --settings-table] */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcgiapp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/cell.h"
#include "common/metrics.h"
#include "common/proc.h"
#include "common/settings.h"
#include "common/util.h"
#include "fcgi/keeper.h"
#include "fcgi/pkgtools.h"
#include "fcgi/responder.h"
#include "fcgi/session.h"
#include "sandbox/backend.h"
#include "sandbox/bundle.h"
#include "sandbox/cgroups.h"

#define MAX_RESPONDERS 256
#define STOP_GRACE_MS 15000
#define WORKER_GRACE_MS 5000

#define DRAIN_MIN_MS 500 /* requests between nginx and a responder get counted */

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t stop_count;
static volatile sig_atomic_t child_exited;

static volatile sig_atomic_t hangup;

static void on_stop(int sig) {
  stop_signal = sig;
  stop_count++;
}
static void on_hangup(int sig) {
  (void)sig;
  hangup = 1;
}
static void on_child(int sig) {
  (void)sig;
  child_exited = 1;
}

struct master {
  struct mcp_config cfg;
  struct peer_policy peers;
  int listen_fd;
  int ops_fd; /* config_ops_socket: the endpoints' own thread in each responder */
  char ops_path[PATH_MAX];
  pid_t responders[MAX_RESPONDERS];
  pid_t keeper;
  int64_t restarts_window_start;
  int restarts_in_window;
  int spawning; /* the index of the responder being forked */
};

static int run_keeper(void *arg) {
  struct master *m = arg;
  close(m->listen_fd);
  close(m->ops_fd);
  return keeper_main(&m->cfg);
}

static int run_responder(void *arg) {
  struct master *m = arg;
  cell_responder_index(m->spawning);
  return responder_main(&m->cfg, &m->peers, m->listen_fd, m->ops_fd);
}

static pid_t spawn(struct master *m, bool keeper, int index) {
  m->spawning = index;
  pid_t pid = -1;
  mcp_error_t err = NULL;
  if (proc_fork(keeper ? run_keeper : run_responder, m, &pid, &err) < 0) {
    mcp_error_log_release(&err, "mcp-server");
    return -1;
  }
  return pid;
}

static int open_socket(struct master *m, const char *path, int *out) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof(dir), "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash != NULL && slash != dir) {
    *slash = '\0';
    mcp_error_t err = NULL;
    if (mkdir_p(dir, 0750, &err) < 0) {
      mcp_error_log_release(&err, "mcp-server");
      return -1;
    }
  }
  unlink(path);
  mode_t old = umask(0117);
  int fd = FCGX_OpenSocket(path, 1024);
  umask(old);
  if (fd < 0) {
    fprintf(stderr, "mcp-server: cannot listen on %s\n", path);
    return -1;
  }
  /* nginx's workers are in socket_group: they need the folder and the
   * socket, nobody else does.  Created 0660 root:root (umask above), so it
   * is never open to others, even before this. */
  if (chown(path, 0, m->peers.group) < 0 || chmod(path, 0660) < 0 ||
      (slash != NULL && (chown(dir, 0, m->peers.group) < 0 || chmod(dir, 0750) < 0))) {
    fprintf(stderr, "mcp-server: cannot give %s to group %s: %s\n", path, m->cfg.socket_group, strerror(errno));
    close(fd);
    unlink(path);
    return -1;
  }
  *out = fd;
  return 0;
}

static int prepare(struct master *m) {
  mcp_error_t err = NULL;
  char rootfs[PATH_MAX];
  if (store_prepare(&m->cfg, &err) < 0 || config_path(&m->cfg, rootfs, sizeof(rootfs), "rootfs") < 0 ||
      rootfs_prepare(rootfs, m->cfg.sandbox_uid, m->cfg.sandbox_gid, &err) < 0) {
    fprintf(stderr, "mcp-server: cannot prepare %s: %s\n", m->cfg.state_dir, err ? err->msg : "path too long");
    mcp_error_release(&err);
    return -1;
  }
  if (metrics_create(&m->cfg, &err) < 0) {
    fprintf(stderr, "mcp-server: cannot create the counters: %s\n", err->msg);
    mcp_error_release(&err);
    return -1;
  }
  if (strcmp(m->cfg.backend, "runsc") == 0 && runsc_forget_stale(&m->cfg, &err) < 0) {
    fprintf(stderr, "mcp-server: cannot check the runsc state of earlier runs: %s\n", err->msg);
    mcp_error_release(&err);
    return -1;
  }
  if (strcmp(m->cfg.backend, "runsc") == 0 && cgroups_prepare_parent(&m->cfg, &err) < 0) {
    /* Some container platforms give no writable cgroups: run without the
     * backstop rather than not at all, and say so. */
    fprintf(stderr,
            "mcp-server: WARNING: cannot prepare the sandboxes' cgroup (%s); running WITHOUT the memory and "
            "process backstops (set cgroup_parent to empty to silence this)\n",
            err->msg);
    mcp_error_release(&err);
    m->cfg.cgroup_parent[0] = '\0';
    setenv("MCP_CGROUP_PARENT", "", 1); /* the supervisors read their configuration again */
  }
  if (config_ops_socket(&m->cfg, m->ops_path, sizeof(m->ops_path)) < 0) {
    fprintf(stderr, "mcp-server: fcgi_socket is too long\n");
    return -1;
  }
  return open_socket(m, m->cfg.fcgi_socket, &m->listen_fd) < 0 ? -1 : open_socket(m, m->ops_path, &m->ops_fd);
}

/* Too many restarts in a short time means a broken setup: slow down. */
static void restart_backoff(struct master *m) {
  METRIC_INC(responder_restarts);
  int64_t now = now_ms();
  if (now - m->restarts_window_start > 10000) {
    m->restarts_window_start = now;
    m->restarts_in_window = 0;
  }
  if (++m->restarts_in_window > 20)
    poll(NULL, 0, 1000);
}

/* A responder that died while the service stops (drains): its calls
 * died with it and are not waited for. */
static void forget_responder(struct master *m, pid_t pid) {
  for (int i = 0; i < m->cfg.responders; i++)
    if (m->responders[i] == pid)
      cell_responder_reset(i);
}

static void reap(struct master *m) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0)
      return;
    if (stop_signal) {
      forget_responder(m, pid);
      continue;
    }
    if (pid == m->keeper) {
      fprintf(stderr, "mcp-server: keeper %d exited (status %d); restarting it\n", pid, status);
      restart_backoff(m);
      m->keeper = spawn(m, true, 0);
      continue;
    }
    for (int i = 0; i < m->cfg.responders; i++) {
      if (m->responders[i] != pid)
        continue;
      fprintf(stderr, "mcp-server: responder %d exited (status %d); restarting it\n", pid, status);
      restart_backoff(m);
      cell_responder_reset(i);
      m->responders[i] = spawn(m, false, i);
    }
    /* anything else is an adopted supervisor or helper: just reaped */
  }
}

/* Every child of ours, adopted ones included (supervisors). */
static int list_children(pid_t *out, int max) {
  int n = 0;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", getpid());
  cleanup_dir DIR *d = opendir(path);
  struct dirent *de;
  while (d != NULL && (de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.')
      continue;
    char cpath[384];
    snprintf(cpath, sizeof(cpath), "%s/%s/children", path, de->d_name);
    cleanup_fclose FILE *f = fopen(cpath, "re");
    long pid;
    while (f != NULL && n < max && fscanf(f, "%ld", &pid) == 1)
      out[n++] = (pid_t)pid;
  }
  return n;
}

static bool is_worker(const struct master *m, pid_t pid) {
  if (pid == m->keeper)
    return true;
  for (int i = 0; i < m->cfg.responders; i++)
    if (m->responders[i] == pid)
      return true;
  return false;
}

/* SIGTERM to the chosen children, wait up to grace_ms, then SIGKILL. */
static void stop_children(struct master *m, bool workers, int64_t grace_ms) {
  pid_t kids[4096];
  int n = list_children(kids, (int)ARRAY_SIZE(kids));
  for (int i = 0; i < n; i++)
    if (is_worker(m, kids[i]) == workers)
      kill(kids[i], SIGTERM);
  int64_t deadline = now_ms() + grace_ms;
  for (;;) {
    while (waitpid(-1, NULL, WNOHANG) > 0)
      ;
    n = list_children(kids, (int)ARRAY_SIZE(kids));
    int left = 0;
    for (int i = 0; i < n; i++)
      if (is_worker(m, kids[i]) == workers)
        left++;
    if (left == 0)
      return;
    if (now_ms() >= deadline)
      break;
    poll(NULL, 0, 20);
  }
  for (int i = 0; i < n; i++)
    if (is_worker(m, kids[i]) == workers)
      kill(kids[i], SIGKILL);
  while (waitpid(-1, NULL, WNOHANG) > 0)
    ;
}

/* New work is refused from now on (the responders see it in the shared
 * counters); wait until no call runs, for at most the drain time, while
 * still reaping children; a second SIGTERM or SIGINT stops at once. */
static void drain(struct master *m) {
  cell_drain_begin();
  int64_t start = now_ms(), deadline = start + (int64_t)cell_drain_seconds(&m->cfg) * 1000;
  fprintf(stderr, "mcp-server: draining: %lld calls running; stopping when they end, in at most %d s\n",
          (long long)cell_calls_in_flight(), cell_drain_seconds(&m->cfg));
  while (now_ms() < deadline && stop_count < 2) {
    if (cell_calls_in_flight() == 0 && now_ms() - start >= DRAIN_MIN_MS)
      return;
    poll(NULL, 0, 100);
    reap(m);
  }
  fprintf(stderr, "mcp-server: drain ended with %lld calls still running\n", (long long)cell_calls_in_flight());
}

/* Workers first (so nothing starts new sandboxes), then what supervisors
 * that died (a kill, a crash) since the keeper last reaped left (their
 * containers, cgroups and mounted workspaces), then the supervisors,
 * which destroy their sandboxes; sessions stay on disk. */
static void stop_all(struct master *m) {
  stop_children(m, true, WORKER_GRACE_MS);
  keeper_reap_orphans(&m->cfg);
  stop_children(m, false, STOP_GRACE_MS);
  unlink(m->cfg.fcgi_socket);
  unlink(m->ops_path);
  mcp_error_t err = NULL;
  if (strcmp(m->cfg.backend, "runsc") == 0 && cgroups_remove_parent(&m->cfg, &err) < 0) {
    fprintf(stderr, "mcp-server: %s\n", err->msg);
    mcp_error_release(&err);
  }
}

/* The bearer tokens are nginx's business: no process of ours needs them,
 * and every child would inherit MCP_TOKENS (containers pass the tokens in
 * it).  The value is wiped in place too, so that /proc/<pid>/environ of the
 * master and of the processes it forks without exec does not show it. */
static void scrub_tokens(void) {
  char *v = getenv("MCP_TOKENS");
  if (v != NULL) {
    explicit_bzero(v, strlen(v));
    unsetenv("MCP_TOKENS");
  }
}

int main(int argc, char **argv) {
  static struct master m;
  mcp_error_t err = NULL;
  scrub_tokens();
  if (config_load(&m.cfg, &err) < 0) {
    fprintf(stderr, "mcp-server: %s\n", mcp_error_public(err));
    mcp_error_release(&err);
    return 1;
  }
  if (argc > 1 && strcmp(argv[1], "--print-config") == 0) {
    config_print(&m.cfg, stdout);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--settings-table") == 0) {
    config_markdown(stdout);
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "usage: mcp-server [--print-config | --settings-table]\n");
    return 2;
  }
  if (m.cfg.responders > MAX_RESPONDERS)
    m.cfg.responders = MAX_RESPONDERS;
  if (peer_policy_load(&m.cfg, &m.peers) < 0)
    return 1;
  /* Files and folders get the modes the code asks for, not the caller's umask. */
  umask(022);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  signal(SIGPIPE, SIG_IGN);
  struct sigaction stop = {.sa_handler = on_stop}, child = {.sa_handler = on_child};
  sigaction(SIGTERM, &stop, NULL);
  sigaction(SIGINT, &stop, NULL);
  sigaction(SIGCHLD, &child, NULL);
  struct sigaction hup = {.sa_handler = on_hangup};
  sigaction(SIGHUP, &hup, NULL);
  if (prepare(&m) < 0)
    return 1;
  /* The host's proxy and CA settings for pip and npm, asked once: the
   * responders and the keeper inherit them. */
  package_host_settings_load(&m.cfg);
  m.keeper = spawn(&m, true, 0);
  for (int i = 0; i < m.cfg.responders; i++)
    m.responders[i] = spawn(&m, false, i);
  fprintf(stderr, "mcp-server: %d responders on %s, state in %s, backend %s\n", m.cfg.responders, m.cfg.fcgi_socket,
          m.cfg.state_dir, m.cfg.backend);
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGCHLD);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGHUP);
  while (!stop_signal) {
    sigprocmask(SIG_BLOCK, &block, &old);
    if (!stop_signal && !child_exited && !hangup)
      sigsuspend(&old);
    child_exited = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (hangup) {
      /* Log rotation: the responders reopen the audit log. */
      hangup = 0;
      for (int i = 0; i < m.cfg.responders; i++)
        if (m.responders[i] > 0)
          kill(m.responders[i], SIGHUP);
    }
    reap(&m);
  }
  fprintf(stderr, "mcp-server: stopping (signal %d)\n", (int)stop_signal);
  drain(&m);
  stop_all(&m);
  return 0;
}
