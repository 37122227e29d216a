/* Background runs, the responders' side (see runs.h). */
#include "config.h"

#include "fcgi/runs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/frame.h"
#include "sandbox/client.h"

#define DONE_MAX (4 << 20) /* bytes of done.json read */
#define WAIT_STEP_MS 100

static const char *const status_names[] = {"running", "finished", "timed_out", "cancelled", "lost"};

const char *run_status_name(enum run_status status) { return status_names[status]; }

int run_start(const struct mcp_config *cfg, struct session *s, const struct call_request *req, struct call_result *res,
              mcp_error_t *err) {
  struct call_request bg = *req;
  bg.background = true;
  if (sandbox_call(cfg, s, &bg, NULL, NULL, res, err) < 0)
    return -1;
  if (res->run[0] == '\0')
    return mcp_fail(err, MCP_ERR_SANDBOX, EPROTO, "the supervisor named no run");
  return 0;
}

static int not_found(mcp_error_t *err, const char *id) {
  return mcp_fail_public(err, MCP_ERR_NOT_FOUND,
                         "Unknown run `%.100s`: it does not exist, belongs to another token or sandbox, or its sandbox "
                         "has ended",
                         id);
}

/* <session id>.<r + 16 hex> */
static bool split_id(const char *id, char *sid, char *name) {
  const char *dot = strrchr(id, '.');
  if (dot == NULL || (size_t)(dot - id) >= SESSION_ID_MAX || strlen(dot + 1) != RUN_NAME_LEN || dot[1] != 'r')
    return false;
  for (const char *p = dot + 2; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return false;
  memcpy(sid, id, (size_t)(dot - id));
  sid[dot - id] = '\0';
  snprintf(name, RUN_NAME_LEN + 1, "%s", dot + 1);
  return session_id_valid(sid);
}

int run_open(struct store *st, const char *id, const char *token, const char *session_id, struct run *out,
             mcp_error_t *err) {
  *out = (struct run){.dirfd = -1, .session = {.dirfd = -1, .lock_fd = -1}};
  char sid[SESSION_ID_MAX];
  if (strlen(id) >= RUN_ID_MAX || !split_id(id, sid, out->name) || (session_id != NULL && strcmp(sid, session_id) != 0))
    return not_found(err, id);
  snprintf(out->id, sizeof(out->id), "%s", id);
  mcp_error_t oerr = NULL;
  if (session_open(st, sid, token, &out->session, &oerr) < 0) {
    if (oerr->kind != MCP_ERR_NOT_FOUND) {
      *err = oerr;
      return -1;
    }
    mcp_error_release(&oerr);
    return not_found(err, id);
  }
  cleanup_close int runs = openat(out->session.dirfd, RUNS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  out->dirfd = runs < 0 ? -1 : openat(runs, out->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (out->dirfd < 0) {
    run_close(out);
    return not_found(err, id);
  }
  return 0;
}

void run_close(struct run *r) {
  if (r->dirfd >= 0)
    close(r->dirfd);
  r->dirfd = -1;
  session_close(&r->session);
}

/* done.json, or NULL when the run has not ended. */
static cJSON *load_done(struct run *r) {
  cleanup_free char *text = NULL;
  size_t len = 0;
  mcp_error_t err = NULL;
  if (read_file_at(r->dirfd, RUN_DONE_FILE, DONE_MAX, &text, &len, &err) < 0) {
    mcp_error_release(&err);
    return NULL;
  }
  cJSON *o = cJSON_ParseWithLength(text, len);
  if (!cJSON_IsObject(o)) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static enum run_status status_of(const cJSON *done) {
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(done, "status");
  for (size_t i = RUN_FINISHED; cJSON_IsString(st) && i < ARRAY_SIZE(status_names); i++)
    if (strcmp(st->valuestring, status_names[i]) == 0)
      return (enum run_status)i;
  return RUN_LOST;
}

int run_status(struct run *r, enum run_status *status, cJSON **done, mcp_error_t *err) {
  if (done != NULL)
    *done = NULL;
  cJSON *d = load_done(r);
  if (d == NULL) {
    cleanup_close int fd = openat(r->dirfd, RUN_LOCK, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open the lock of run %s", r->name);
    if (fd >= 0 && lock_held_elsewhere(fd)) {
      *status = RUN_RUNNING;
      return 0;
    }
    d = load_done(r); /* it may have ended as we looked: done.json comes first */
  }
  *status = d != NULL ? status_of(d) : RUN_LOST;
  if (done != NULL)
    *done = d;
  else
    cJSON_Delete(d);
  return 0;
}

int run_wait(struct run *r, int64_t deadline_ms, enum run_status *status, cJSON **done, mcp_error_t *err) {
  for (;;) {
    if (run_status(r, status, done, err) < 0)
      return -1;
    int64_t left = deadline_ms - now_ms();
    if (*status != RUN_RUNNING || left <= 0)
      return 0;
    if (done != NULL) {
      cJSON_Delete(*done);
      *done = NULL;
    }
    usleep((useconds_t)(left < WAIT_STEP_MS ? left : WAIT_STEP_MS) * 1000);
  }
}

int run_output(struct run *r, bool stderr_stream, uint64_t offset, size_t max, struct buf *out, uint64_t *size,
               mcp_error_t *err) {
  *size = 0;
  cleanup_close int fd =
      openat(r->dirfd, stderr_stream ? RUN_STDERR_FILE : RUN_STDOUT_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0)
    return errno == ENOENT ? 0 : mcp_fail(err, MCP_ERR_INTERNAL, errno, "the output of run %s", r->name);
  *size = (uint64_t)st.st_size;
  if (offset >= *size)
    return 0;
  size_t want = *size - offset < max ? (size_t)(*size - offset) : max;
  cleanup_free char *data = malloc(want ? want : 1);
  if (data == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "the output of run %s", r->name);
  ssize_t n = pread(fd, data, want, (off_t)offset);
  if (n < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "read the output of run %s", r->name);
  return buf_append(out, data, (size_t)n) < 0 ? mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "output") : 0;
}

int run_cancel(const struct mcp_config *cfg, struct run *r, mcp_error_t *err) {
  enum run_status status = RUN_LOST;
  if (run_status(r, &status, NULL, err) < 0)
    return -1;
  if (status != RUN_RUNNING)
    return 0;
  cleanup_close int fd = supervisor_connect(cfg, r->session.dirfd, false, 2000, err);
  if (fd < 0)
    return -1;
  int w = frame_write(fd, FRAME_RUN_CANCEL, r->name, strlen(r->name));
  return w < 0 ? mcp_fail(err, MCP_ERR_INTERNAL, -w, "send the cancel of run %s", r->name) : 0;
}
