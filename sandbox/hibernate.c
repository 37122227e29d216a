/* Hibernation of a session's sandbox: see hibernate.h. */
#include "config.h"

#include "sandbox/hibernate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "common/frame.h"
#include "common/metrics.h"
#include "common/util.h"
#include "sandbox/client.h"
#include "sandbox/workspace.h"

#define IMAGE_FORMAT 1

void hibernate_init(struct hibernation *h, const struct mcp_config *cfg, const struct sandbox_ops *ops, int dirfd) {
  memset(h, 0, sizeof(*h));
  h->cfg = cfg;
  h->ops = ops;
  h->dirfd = dirfd;
  h->call_lock = -1;
  char path[PATH_MAX];
  struct stat st;
  if (config_path(cfg, path, sizeof(path), "sessions") == 0 && stat(path, &st) == 0) {
    h->sessions_dev = st.st_dev;
    h->sessions_ino = st.st_ino;
  }
  /* A supervisor that ended before a result could say so. */
  h->state_lost = faccessat(dirfd, STATE_LOST_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

void hibernate_idle(struct hibernation *h, const char *token) {
  h->idle_since = now_ms();
  if (token != NULL && policy_name_valid(token))
    snprintf(h->token, sizeof(h->token), "%s", token);
}

static bool enabled(const struct hibernation *h) {
  return h->cfg->hibernate_after > 0 && h->ops->checkpoint != NULL && h->ops->restore != NULL && !h->failed &&
         !h->restoring && h->idle_since > 0;
}

int hibernate_timeout_ms(struct hibernation *h, int64_t now) {
  if (!enabled(h))
    return -1;
  int64_t left = h->idle_since + (int64_t)h->cfg->hibernate_after * 1000 - now;
  return left <= 0 ? 0 : (left > INT_MAX ? INT_MAX : (int)left);
}

bool hibernate_in_sessions(const struct hibernation *h) {
  struct stat st;
  return h->sessions_ino != 0 && fstatat(h->dirfd, "..", &st, 0) == 0 && st.st_dev == h->sessions_dev &&
         st.st_ino == h->sessions_ino;
}

bool hibernate_due(struct hibernation *h, int64_t now) {
  if (!enabled(h))
    return false;
  /* A pre-started sandbox is idle from the moment a session claims it. */
  if (!hibernate_in_sessions(h)) {
    h->idle_since = now;
    return false;
  }
  return hibernate_timeout_ms(h, now) == 0;
}

/* ---- the audit log: one JSON line per hibernation event ---- */

static void audit(const struct hibernation *h, const struct sandbox_ctx *sb, const char *event, int64_t ms,
                  uint64_t bytes, const char *why) {
  const char *path = h->cfg->audit_log;
  if (path[0] == '\0')
    return;
  const char *slash = strrchr(sb->dir, '/');
  cleanup_cjson cJSON *o = log_entry_new();
  cJSON_AddStringToObject(o, "event", event);
  cJSON_AddStringToObject(o, "session_id", slash != NULL ? slash + 1 : "");
  cJSON_AddStringToObject(o, "token", h->token);
  cJSON_AddNumberToObject(o, "duration_ms", (double)ms);
  if (bytes > 0)
    cJSON_AddNumberToObject(o, "image_bytes", (double)bytes);
  if (why != NULL)
    cJSON_AddStringToObject(o, "reason", why);
  cleanup_close int fd = log_open(path);
  int r = fd >= 0 ? log_entry_write(fd, o) : -errno;
  if (r < 0)
    fprintf(stderr, "mcp-sandboxd %s: cannot write the audit log %s: %s\n", sb->id, path, strerror(-r));
}

/* ---- writing an image ---- */

static int fsync_at(int dirfd, const char *name, mcp_error_t *err) {
  cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 || fsync(fd) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "fsync `%s`", name);
  return 0;
}

/* Bytes of the regular files runsc wrote into the image folder. */
static int image_bytes(int image_fd, uint64_t *bytes, mcp_error_t *err) {
  cleanup_dir DIR *d = dir_stream(image_fd);
  if (d == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "list the image");
  *bytes = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    struct stat st;
    if (de->d_name[0] != '.' && fstatat(image_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      *bytes += (uint64_t)st.st_size;
  }
  return *bytes > 0 ? 0 : mcp_fail(err, MCP_ERR_INTERNAL, ENODATA, "the checkpoint wrote nothing");
}

static int write_info(const struct hibernation *h, int image_fd, uint64_t bytes, int64_t ms, mcp_error_t *err) {
  cleanup_cjson cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "format", IMAGE_FORMAT);
  cJSON_AddStringToObject(o, "version", PACKAGE_VERSION);
  cJSON_AddNumberToObject(o, "created_ms", (double)wall_ms());
  cJSON_AddStringToObject(o, "token", h->token);
  cJSON_AddNumberToObject(o, "image_bytes", (double)bytes);
  cJSON_AddNumberToObject(o, "checkpoint_ms", (double)ms);
  cleanup_free char *text = cJSON_PrintUnformatted(o);
  if (text == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "image information");
  cleanup_close int fd = openat(image_fd, HIBERNATE_INFO, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  int r = fd < 0 ? -errno : write_all(fd, text, strlen(text));
  if (r == 0 && fsync(fd) < 0)
    r = -errno;
  return r < 0 ? mcp_fail(err, MCP_ERR_INTERNAL, -r, "write the image information") : 0;
}

/* The image and the workspace on disk, then the image published. */
static int publish(const struct hibernation *h, int64_t ms, uint64_t *bytes, mcp_error_t *err) {
  cleanup_close int nd = openat(h->dirfd, HIBERNATE_NEW_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (nd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open the image folder");
  if (image_bytes(nd, bytes, err) < 0 || fsync_at(nd, "checkpoint.img", err) < 0 ||
      write_info(h, nd, *bytes, ms, err) < 0 || workspace_sync(h->dirfd, err) < 0)
    return -1;
  if (fsync(nd) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "fsync the image folder");
  remove_tree_at(h->dirfd, HIBERNATE_DIR, NULL);
  if (renameat(h->dirfd, HIBERNATE_NEW_DIR, h->dirfd, HIBERNATE_DIR) < 0 || fsync(h->dirfd) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "publish the image");
  return 0;
}

/* No call may be on its way, and the image needs room. */
bool hibernate_begin(struct hibernation *h) {
  int64_t free_bytes = metrics_disk_free(h->cfg);
  cleanup_close int lock = -1;
  if (free_bytes < 0 || (uint64_t)free_bytes >= h->cfg->disk_floor)
    lock = openat(h->dirfd, CALL_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock < 0 || lock_try(lock) < 0) {
    h->idle_since = now_ms(); /* try again after another while */
    return false;
  }
  hibernate_release(h);
  h->call_lock = steal_fd(&lock);
  return true;
}

/* Not tried again for this sandbox. */
static int save_failed(struct hibernation *h, const struct sandbox_ctx *sb, int64_t ms, const struct mcp_error *why) {
  h->failed = true;
  METRIC_INC(hibernate_failures);
  audit(h, sb, "hibernate_failed", ms, 0, why->msg);
  remove_tree_at(h->dirfd, HIBERNATE_NEW_DIR, NULL);
  return -1;
}

int hibernate_save(struct hibernation *h, struct sandbox_ctx *sb, mcp_error_t *err) {
  if (h->call_lock < 0) {
    mcp_fail(err, MCP_ERR_INTERNAL, EINVAL, "hibernate_save without hibernate_begin");
    return -1;
  }
  int64_t t0 = now_ms();
  char image[PATH_MAX];
  remove_tree_at(h->dirfd, HIBERNATE_NEW_DIR, NULL);
  int r = mkdirat(h->dirfd, HIBERNATE_NEW_DIR, 0700) < 0
              ? -errno
              : fd_host_path(h->dirfd, HIBERNATE_NEW_DIR, image, sizeof(image));
  if (r < 0)
    r = mcp_fail(err, MCP_ERR_INTERNAL, -r, "the image folder");
  else
    r = h->ops->checkpoint(sb, image, err);
  if (r < 0)
    return save_failed(h, sb, now_ms() - t0, *err);
  /* The sandbox is stopped: its processes go, then its workspace is
   * unmounted, which writes the file system out to work.img. */
  mcp_error_t derr = NULL;
  if (h->ops->destroy(sb, &derr) < 0)
    mcp_error_log_release(&derr, "mcp-sandboxd: destroy after the checkpoint");
  workspace_unmount(h->dirfd);
  int64_t ms = now_ms() - t0;
  uint64_t bytes = 0;
  if (publish(h, ms, &bytes, err) < 0)
    return save_failed(h, sb, ms, *err);
  METRIC_INC(hibernations);
  audit(h, sb, "hibernated", ms, bytes, NULL);
  fprintf(stderr, "mcp-sandboxd %s: hibernated (%llu bytes in %lld ms)\n", sb->id, (unsigned long long)bytes,
          (long long)ms);
  return 0;
}

/* ---- restoring ---- */

/* NULL when the published image is one this service can restore, else why not. */
static const char *image_unusable(struct hibernation *h) {
  cleanup_free char *text = NULL;
  mcp_error_t err = NULL;
  if (read_file_at(h->dirfd, HIBERNATE_DIR "/" HIBERNATE_INFO, 1 << 16, &text, NULL, &err) < 0) {
    mcp_error_release(&err);
    return "the image has no information file";
  }
  cleanup_cjson cJSON *o = cJSON_Parse(text);
  const cJSON *format = cJSON_GetObjectItemCaseSensitive(o, "format");
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(o, "version");
  const cJSON *token = cJSON_GetObjectItemCaseSensitive(o, "token");
  if (cJSON_IsString(token) && policy_name_valid(token->valuestring))
    snprintf(h->token, sizeof(h->token), "%s", token->valuestring);
  if (!cJSON_IsNumber(format) || format->valuedouble != IMAGE_FORMAT || !cJSON_IsString(version))
    return "the image information is malformed";
  if (strcmp(version->valuestring, PACKAGE_VERSION) != 0)
    return "the image was written by another version of the service";
  return h->ops->restore == NULL ? "this backend cannot restore" : NULL;
}

void hibernate_state_lost(struct hibernation *h, const struct sandbox_ctx *sb, const char *why) {
  mcp_error_t err = NULL;
  if (write_file_atomic(h->dirfd, STATE_LOST_FILE, why, strlen(why), 0600, &err) < 0)
    mcp_error_log_release(&err, "mcp-sandboxd: state-lost note"); /* still said by this supervisor */
  h->state_lost = true;
  fprintf(stderr, "mcp-sandboxd %s: the sandbox's memory is lost (%s); the next result says state_lost\n", sb->id, why);
}

void hibernate_restore_failed(struct hibernation *h, const struct sandbox_ctx *sb, const char *why) {
  h->restoring = false;
  remove_tree_at(h->dirfd, HIBERNATE_DIR, NULL);
  METRIC_INC(restore_failures);
  audit(h, sb, "restore_failed", h->restore_started > 0 ? now_ms() - h->restore_started : 0, 0, why);
  hibernate_state_lost(h, sb, why);
}

int hibernate_start(struct hibernation *h, struct sandbox_ctx *sb, int stdin_fd, int stdout_fd, mcp_error_t *err) {
  bool published = faccessat(h->dirfd, HIBERNATE_DIR, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
  /* An image whose checkpoint never finished (the service was killed in
   * the middle) is no image, and the sandbox it was of is gone. */
  if (faccessat(h->dirfd, HIBERNATE_NEW_DIR, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
    remove_tree_at(h->dirfd, HIBERNATE_NEW_DIR, NULL);
    if (!published)
      hibernate_state_lost(h, sb, "a checkpoint was interrupted");
  }
  if (!published)
    return h->ops->start(sb, stdin_fd, stdout_fd, err) < 0 ? -1 : 0;
  h->restore_started = now_ms();
  const char *why = image_unusable(h);
  char image[PATH_MAX];
  if (why == NULL && fd_host_path(h->dirfd, HIBERNATE_DIR, image, sizeof(image)) < 0)
    why = "the image's path is too long";
  if (why == NULL) {
    mcp_error_t rerr = NULL;
    if (h->ops->restore(sb, image, stdin_fd, stdout_fd, &rerr) == 0) {
      h->restoring = true;
      return 1;
    }
    mcp_error_log_release(&rerr, "mcp-sandboxd: restore");
    h->ops->destroy(sb, NULL);
    why = "the checkpoint could not be restored";
  }
  hibernate_restore_failed(h, sb, why);
  return h->ops->start(sb, stdin_fd, stdout_fd, err) < 0 ? -1 : 0;
}

int hibernate_wake(struct hibernation *h, int exec_in) {
  (void)h;
  unsigned char seed[32];
  if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
    return -EIO;
  char json[96];
  int n = snprintf(json, sizeof(json), "{\"seed\":\"");
  for (size_t i = 0; i < sizeof(seed); i++)
    n += snprintf(json + n, sizeof(json) - (size_t)n, "%02x", seed[i]);
  n += snprintf(json + n, sizeof(json) - (size_t)n, "\"}");
  return frame_write(exec_in, FRAME_WAKE, json, (size_t)n);
}

void hibernate_woke(struct hibernation *h, const struct sandbox_ctx *sb) {
  if (!h->restoring)
    return;
  h->restoring = false;
  mcp_error_t err = NULL;
  if (remove_tree_at(h->dirfd, HIBERNATE_DIR, &err) < 0)
    mcp_error_log_release(&err, "mcp-sandboxd: remove the restored image");
  h->restored = true;
  METRIC_INC(restores);
  int64_t ms = now_ms() - h->restore_started;
  audit(h, sb, "restored", ms, 0, NULL);
  fprintf(stderr, "mcp-sandboxd %s: restored in %lld ms\n", sb->id, (long long)ms);
}

/* ---- what the next result says, and the end ---- */

void hibernate_result_extra(const struct hibernation *h, char *extra, size_t size) {
  if (h->state_lost)
    json_members_add(extra, size, "\"state_lost\":true");
  if (h->restored)
    json_members_add(extra, size, "\"restored\":true");
}

void hibernate_result_sent(struct hibernation *h) {
  if (h->state_lost)
    unlinkat(h->dirfd, STATE_LOST_FILE, 0);
  h->state_lost = false;
  h->restored = false;
}

void hibernate_release(struct hibernation *h) {
  if (h->call_lock >= 0)
    close(h->call_lock);
  h->call_lock = -1;
}
