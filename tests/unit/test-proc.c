/* common/proc.c, the one process runner that pip and npm (and runsc) go
 * through: a child gets no descriptor of its caller beyond 0-2 (a responder
 * holds the FastCGI socket and other tenants' connections), and at the
 * deadline its whole process group is killed, grandchildren included. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/proc.h"
#include "common/util.h"
#include "tap.h"

/* A child that lists its own descriptors sees 0, 1 and 2 only, whatever
 * the caller holds open without O_CLOEXEC (a listening socket, a pipe, a
 * file). */
static void fd_tests(void) {
  int sv[2];
  int lsock = socket(AF_UNIX, SOCK_STREAM, 0); /* no SOCK_CLOEXEC: as a careless caller would */
  int p[2];
  if (lsock < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 || pipe(p) < 0)
    bail_out("sockets: %s", strerror(errno));
  int file = open("/dev/null", O_RDONLY);
  int high = fcntl(file, F_DUPFD, 200); /* a high number too */
  const char *argv[] = {"/bin/sh", "-c", "ls /proc/self/fd | sort -n | tr '\\n' ' '", NULL};
  struct buf out = {0};
  struct proc_opts o = {.argv = argv,
                        .stdin_fd = -1,
                        .stdout_fd = -1,
                        .stderr_fd = -1,
                        .capture = &out,
                        .capture_max = 4096,
                        .timeout_ms = 20000};
  int st = -1;
  mcp_error_t err = NULL;
  is_int(run_process(&o, &st, &err), 0, "run_process runs the listing");
  is_int(st, 0, "it exits 0");
  /* ls itself opens one more descriptor to read the folder: 3 */
  char *text = xstrndup(out.data ? out.data : "", out.len);
  is_str(text, "0 1 2 3 ", "the child holds 0-2 (and ls its own listing, 3): none of the caller's %d, %d, %d, %d, %d",
         lsock, sv[0], p[0], file, high);
  free(text);
  buf_free(&out);
  mcp_error_release(&err);
  close(lsock);
  close(sv[0]);
  close(sv[1]);
  close(p[0]);
  close(p[1]);
  close(file);
  close(high);
}

static bool alive(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

/* A child that starts a grandchild (in the child's process group) with a
 * long sleep, and sleeps itself: both are gone once run_process returns at
 * the deadline. */
static void deadline_tests(void) {
  char pidfile[] = "/tmp/mcp-test-proc-XXXXXX";
  int fd = mkstemp(pidfile);
  if (fd < 0)
    bail_out("mkstemp: %s", strerror(errno));
  close(fd);
  char script[512];
  snprintf(script, sizeof(script), "sleep 300 & echo $! > %s; sleep 300", pidfile);
  const char *argv[] = {"/bin/sh", "-c", script, NULL};
  struct proc_opts o = {.argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .timeout_ms = 1500};
  int st = -1;
  mcp_error_t err = NULL;
  int64_t t0 = now_ms();
  int r = run_process(&o, &st, &err);
  int64_t took = now_ms() - t0;
  ok(r < 0, "run_process fails at the deadline");
  ok(err != NULL && err->errno_value == ETIMEDOUT, "with ETIMEDOUT");
  ok(took >= 1400 && took < 10000, "after about the deadline (%lld ms)", (long long)took);
  mcp_error_release(&err);
  cleanup_free char *text = NULL;
  int dfd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (read_file_at(dfd, pidfile + 5, 64, &text, NULL, &err) < 0)
    bail_out("the grandchild's pid: %s", err->msg);
  close(dfd);
  pid_t grandchild = (pid_t)atol(text);
  ok(grandchild > 1, "the grandchild had started (%d)", (int)grandchild);
  /* It was killed with its group; init reaps it within moments. */
  bool gone = false;
  for (int i = 0; i < 200 && !gone; i++) {
    char path[64], stat[256] = "";
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)grandchild);
    int sfd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = sfd >= 0 ? read(sfd, stat, sizeof(stat) - 1) : -1;
    if (sfd >= 0)
      close(sfd);
    /* gone, or a zombie waiting for its new parent */
    char *paren = n > 0 ? strrchr(stat, ')') : NULL;
    gone = !alive(grandchild) || n <= 0 || (paren != NULL && paren[2] == 'Z');
    if (!gone)
      usleep(10000);
  }
  ok(gone, "the grandchild (sleep 300) was killed with the child's group at the deadline");
  if (!gone)
    kill(grandchild, SIGKILL);
  unlink(pidfile);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  fd_tests();
  deadline_tests();
  return done_testing();
}
