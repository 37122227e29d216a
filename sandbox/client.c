/* Reaching a sandbox's supervisor from another process (see client.h). */
#include "config.h"

#include "sandbox/client.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "common/frame.h"
#include "common/proc.h"
#include "common/util.h"

int supervisor_spawn(const struct mcp_config *cfg, int dir_fd, const char *name, mcp_error_t *err) {
  char exe[PATH_MAX], dir[PATH_MAX];
  if (snprintf(exe, sizeof(exe), "%s/mcp-sandboxd", cfg->libexec_dir) >= (int)sizeof(exe))
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "supervisor path");
  int r = fd_host_path(dir_fd, name, dir, sizeof(dir));
  if (r < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, -r, "supervisor folder");
  /* Detached: it is adopted by the master (a subreaper) and outlives the
   * responder that asked for it. */
  const char *argv[] = {exe, dir, NULL};
  return proc_spawn_detached(argv, err);
}

static int connect_once(int dirfd) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (fd_path(sa.sun_path, sizeof(sa.sun_path), dirfd, SUPERVISOR_SOCKET) < 0)
    return -ENAMETOOLONG;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

int supervisor_connect(const struct mcp_config *cfg, int dirfd, bool spawn, int64_t wait_ms, mcp_error_t *err) {
  int fd = connect_once(dirfd);
  if (fd >= 0 || !spawn)
    return fd >= 0 ? fd : mcp_fail(err, MCP_ERR_SANDBOX, -fd, "connect to the supervisor");
  if (fd != -ENOENT && fd != -ECONNREFUSED)
    return mcp_fail(err, MCP_ERR_INTERNAL, -fd, "connect to the supervisor");
  mcp_error_t spawn_err = NULL;
  if (supervisor_spawn(cfg, dirfd, ".", &spawn_err) < 0) {
    int e = spawn_err->errno_value;
    mcp_error_log_release(&spawn_err, "supervisor");
    return mcp_fail(err, MCP_ERR_SANDBOX, e, "start the supervisor");
  }
  int64_t deadline = now_ms() + wait_ms;
  int pause = 1;
  while (now_ms() < deadline) {
    poll(NULL, 0, pause);
    if (pause < 20)
      pause *= 2;
    fd = connect_once(dirfd);
    if (fd >= 0)
      return fd;
  }
  return mcp_fail(err, MCP_ERR_SANDBOX, -fd, "the supervisor did not start listening");
}

int supervisor_wait_ready(int fd, int64_t deadline_ms, mcp_error_t *err) {
  int r = frame_write(fd, FRAME_STATUS, "{\"wait\":true}", 13);
  if (r < 0)
    return mcp_fail(err, MCP_ERR_SANDBOX, -r, "ask the supervisor");
  struct frame_reader rd;
  frame_reader_init(&rd, 4096);
  struct frame f = {0}; /* read only when frame_read() returned 1 */
  r = frame_read(&rd, fd, deadline_ms, &f);
  int ret = 0;
  if (r == 1 && f.type == FRAME_ERROR) {
    cleanup_free char *msg = xstrndup(f.payload, f.len < 300 ? f.len : 300);
    ret = mcp_fail_public(err, MCP_ERR_SANDBOX, "%s", msg ? msg : "The sandbox failed.");
  } else if (r == -ETIMEDOUT) {
    /* Still booting at the deadline: on an overloaded machine boots queue
     * for max_starting and share the cores with calls.  The sandbox goes
     * on starting; asking again finds it sooner or ready. */
    ret = mcp_fail_public(err, MCP_ERR_CAPACITY,
                          "The server is at capacity: the session's sandbox is still starting (ready_wait passed); "
                          "try again in a moment.");
  } else if (r != 1 || f.type != FRAME_STATUS || memmem(f.payload, f.len, "\"ready\":true", 12) == NULL) {
    ret = mcp_fail(err, MCP_ERR_SANDBOX, r < 0 ? -r : EPIPE, "the supervisor did not report a ready sandbox");
  }
  frame_reader_free(&rd);
  return ret;
}

/* A supervisor holds sup.lock from its first instant, before it listens. */
bool supervisor_alive(int dirfd) {
  cleanup_close int fd = openat(dirfd, SUPERVISOR_LOCK, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  return fd >= 0 && lock_held_elsewhere(fd);
}

int supervisor_quit(int dirfd, int64_t wait_ms, mcp_error_t *err) {
  int64_t deadline = now_ms() + wait_ms;
  int r = connect_once(dirfd);
  /* One that is still starting (DELETE right after initialize) is waited
   * for: otherwise it would start a sandbox for an ended session. */
  while (r < 0 && supervisor_alive(dirfd) && now_ms() < deadline) {
    poll(NULL, 0, 10);
    r = connect_once(dirfd);
  }
  if (r < 0)
    return 0; /* nobody listens: nothing to stop */
  cleanup_close int fd = r;
  if (frame_write(fd, FRAME_QUIT, NULL, 0) < 0)
    return 0;
  struct frame_reader rd;
  frame_reader_init(&rd, 1 << 20);
  if (deadline < now_ms() + 2000)
    deadline = now_ms() + 2000; /* the teardown itself */
  for (;;) {
    struct frame f;
    r = frame_read(&rd, fd, deadline, &f);
    if (r <= 0 || f.type == FRAME_DONE)
      break;
  }
  frame_reader_free(&rd);
  if (r == -ETIMEDOUT)
    return mcp_fail(err, MCP_ERR_INTERNAL, ETIMEDOUT, "the supervisor did not stop");
  return 0;
}
