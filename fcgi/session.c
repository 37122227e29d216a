#include "config.h"

#include "fcgi/session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "common/frame.h"
#include "common/metrics.h"
#include "common/policy.h"
#include "common/util.h"
#include "fcgi/pkgtools.h"
#include "sandbox/backend.h"
#include "sandbox/background.h"
#include "sandbox/workspace.h"

static int open_dir_at(int dirfd, const char *name, mcp_error_t *err) {
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return mcp_fail(err, errno == ENOENT ? MCP_ERR_NOT_FOUND : MCP_ERR_INTERNAL, errno, "open `%s`", name);
  return fd;
}

int store_prepare(const struct mcp_config *cfg, mcp_error_t *err) {
  if (mkdir_p(cfg->state_dir, 0711, err) < 0)
    return -1;
  cleanup_close int sfd = open(cfg->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (sfd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open `%s`", cfg->state_dir);
  /* The state folder is only traversable: nginx's workers reach the socket
   * folder below it, nobody lists or reads sessions but root. */
  fchmod(sfd, 0711);
  static const char *const dirs[] = {"sessions", "pool",   "trash",      "runsc",      "slots",
                                     "logs",     "owners", PACKAGE_WORK, PACKAGE_CACHE};
  for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
    if (mkdirat(sfd, dirs[i], 0700) < 0 && errno != EEXIST)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir `%s/%s`", cfg->state_dir, dirs[i]);
    /* package-work: package_user reaches its own folders below it */
    mode_t mode = strcmp(dirs[i], PACKAGE_WORK) == 0 ? 0711 : 0700;
    if (fchmodat(sfd, dirs[i], mode, 0) < 0)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "chmod `%s/%s`", cfg->state_dir, dirs[i]);
  }
  /* The package caches are package_user's (pip and npm write them as that
   * user); through a descriptor, never by name. */
  struct package_user pu;
  mcp_error_t perr = NULL;
  cleanup_close int cfd = openat(sfd, PACKAGE_CACHE, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (package_user_get(cfg, &pu, &perr) < 0)
    mcp_error_log_release(&perr, "state folder");
  else if (cfd < 0 || ((geteuid() == 0 && fchown(cfd, pu.uid, pu.gid) < 0) || fchmod(cfd, 0700) < 0))
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "hand `%s/%s` to %s", cfg->state_dir, PACKAGE_CACHE,
                    cfg->package_user);
  /* Folders of tool runs that a stop interrupted; and the caches every
   * session shared before (wheels/, npm/: other tenants' choices). */
  static const char *const old[] = {PACKAGE_WORK, "wheels", "npm"};
  for (size_t i = 0; i < ARRAY_SIZE(old); i++) {
    mcp_error_t rerr = NULL;
    if (remove_tree_at(sfd, old[i], &rerr) < 0)
      mcp_error_log_release(&rerr, "state folder");
  }
  if (mkdirat(sfd, PACKAGE_WORK, 0711) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir `%s/%s`", cfg->state_dir, PACKAGE_WORK);
  if (fchmodat(sfd, PACKAGE_WORK, 0711, 0) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "chmod `%s/%s`", cfg->state_dir, PACKAGE_WORK);
  return 0;
}

int store_open(const struct mcp_config *cfg, struct store *st, mcp_error_t *err) {
  memset(st, 0, sizeof(*st));
  st->cfg = cfg;
  st->state_fd = st->sessions_fd = st->pool_fd = st->trash_fd = -1;
  st->state_fd = open(cfg->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (st->state_fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open `%s`", cfg->state_dir);
  if ((st->sessions_fd = open_dir_at(st->state_fd, "sessions", err)) < 0 ||
      (st->pool_fd = open_dir_at(st->state_fd, "pool", err)) < 0 ||
      (st->trash_fd = open_dir_at(st->state_fd, "trash", err)) < 0) {
    store_close(st);
    return mcp_error_wrap(err, -1, "state folder `%s`", cfg->state_dir);
  }
  return 0;
}

void store_close(struct store *st) {
  int *fds[] = {&st->state_fd, &st->sessions_fd, &st->pool_fd, &st->trash_fd};
  for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
    if (*fds[i] >= 0)
      close(*fds[i]);
    *fds[i] = -1;
  }
}

static int write_meta(struct session *s, mcp_error_t *err) {
  cleanup_cjson cJSON *m = cJSON_CreateObject();
  if (m == NULL || !cJSON_AddNumberToObject(m, "version", 1) || !cJSON_AddStringToObject(m, "id", s->id) ||
      !cJSON_AddNumberToObject(m, "created_ms", (double)s->created_ms) ||
      !cJSON_AddNumberToObject(m, "last_used_ms", (double)s->last_used_ms) ||
      !cJSON_AddStringToObject(m, "token_id", s->token_id) || !cJSON_AddStringToObject(m, "sandbox_id", s->sandbox_id))
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "session metadata");
  cleanup_free char *text = cJSON_PrintUnformatted(m);
  if (text == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "session metadata");
  return write_file_atomic(s->dirfd, SESSION_META, text, strlen(text), 0600, err);
}

static int read_meta(struct session *s, mcp_error_t *err) {
  cleanup_free char *text = NULL;
  size_t len = 0;
  if (read_file_at(s->dirfd, SESSION_META, 1 << 16, &text, &len, err) < 0)
    return -1;
  cleanup_cjson cJSON *m = cJSON_ParseWithLength(text, len);
  const cJSON *tok = cJSON_GetObjectItemCaseSensitive(m, "token_id");
  const cJSON *sb = cJSON_GetObjectItemCaseSensitive(m, "sandbox_id");
  const cJSON *created = cJSON_GetObjectItemCaseSensitive(m, "created_ms");
  const cJSON *used = cJSON_GetObjectItemCaseSensitive(m, "last_used_ms");
  if (!cJSON_IsString(tok) || !cJSON_IsString(sb) || !is_hex32(sb->valuestring) || !cJSON_IsNumber(created) ||
      !cJSON_IsNumber(used) || strlen(tok->valuestring) > TOKEN_ID_MAX)
    return mcp_fail(err, MCP_ERR_INTERNAL, EINVAL, "session %s: malformed metadata", s->id);
  snprintf(s->token_id, sizeof(s->token_id), "%s", tok->valuestring);
  memcpy(s->sandbox_id, sb->valuestring, 33);
  s->created_ms = (int64_t)created->valuedouble;
  s->last_used_ms = (int64_t)used->valuedouble;
  return 0;
}

static int count_entries(int parent_fd, const char *name, bool (*want)(const char *)) {
  cleanup_dir DIR *d = dir_open_at(parent_fd, name);
  int n = 0;
  struct dirent *de;
  while (d != NULL && (de = readdir(d)) != NULL)
    if (want(de->d_name))
      n++;
  return n;
}

int session_count(struct store *st) { return count_entries(st->state_fd, "sessions", session_id_valid); }

/* What the workspace images below state/<name> may still take. */
static uint64_t unallocated_in(int parent_fd, const char *name) {
  cleanup_dir DIR *d = dir_open_at(parent_fd, name);
  uint64_t sum = 0;
  struct dirent *de;
  while (d != NULL && (de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.' && (de->d_name[1] == '\0' || (de->d_name[1] == '.' && de->d_name[2] == '\0')))
      continue;
    cleanup_close int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0)
      sum += workspace_unallocated(fd);
  }
  return sum;
}

bool session_disk_low(struct store *st, int64_t *free_out, uint64_t *committed_out) {
  /* Workspace images are sparse: every session (and pre-started sandbox)
   * may still grow to its quota, and a full disk would fail the writes of
   * them all.  So what they may still take counts as used, and a new
   * session needs disk_floor and its own quota beyond that. */
  int64_t free_bytes = metrics_disk_free(st->cfg);
  uint64_t committed = unallocated_in(st->state_fd, "sessions") + unallocated_in(st->state_fd, "pool");
  uint64_t needs = st->cfg->disk_floor + (strcmp(st->cfg->backend, "runsc") == 0 ? st->cfg->workspace_quota : 0);
  if (free_out != NULL)
    *free_out = free_bytes;
  if (committed_out != NULL)
    *committed_out = committed;
  return free_bytes >= 0 && ((uint64_t)free_bytes < committed || (uint64_t)free_bytes - committed < needs);
}

/* owners/t-<token>/<session id>: one empty file per live session of the
 * token, so that a token's sessions are counted without reading them all. */
static void owner_dir_name(const char *token_id, char name[80]) {
  snprintf(name, 80, "owners/t-%s", policy_name_valid(token_id) ? token_id : "_");
}

static int token_session_count(struct store *st, const char *token_id) {
  char name[80];
  owner_dir_name(token_id, name);
  return count_entries(st->state_fd, name, session_id_valid);
}

static int owner_add(struct store *st, const char *token_id, const char *sid, mcp_error_t *err) {
  char dir[80], path[256];
  owner_dir_name(token_id, dir);
  snprintf(path, sizeof(path), "%s/%s", dir, sid);
  if (mkdirat(st->state_fd, dir, 0700) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir %s", dir);
  int fd = openat(st->state_fd, path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "create %s", path);
  close(fd);
  return 0;
}

static void owner_remove(struct store *st, const char *token_id, const char *sid) {
  char dir[80], path[256];
  owner_dir_name(token_id, dir);
  snprintf(path, sizeof(path), "%s/%s", dir, sid);
  unlinkat(st->state_fd, path, 0);
}

/* Counting and creating are one step under <state>/sessions.lock, so
 * concurrent initializes never pass a cap.  Each holder opens the file
 * itself: an OFD lock belongs to the open file description, and threads
 * sharing one would all hold it. */
static int store_lock(struct store *st, mcp_error_t *err) {
  int fd = openat(st->state_fd, "sessions.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open sessions.lock");
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
  while (fcntl(fd, F_OFD_SETLKW, &fl) < 0) {
    if (errno != EINTR) {
      int e = errno;
      close(fd);
      return mcp_fail(err, MCP_ERR_INTERNAL, e, "lock sessions.lock");
    }
  }
  return fd;
}

int slot_prepare(struct store *st, char id_out[33], mcp_error_t *err) {
  char id[33], name[64];
  random_hex32(id);
  snprintf(name, sizeof(name), ".new-%s", id);
  if (mkdirat(st->pool_fd, name, 0700) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir pool/%s", name);
  cleanup_close int dfd = open_dir_at(st->pool_fd, name, err);
  if (dfd < 0)
    return -1;
  /* The quota needs a loop-mounted image: only for real sandboxes. */
  uint64_t quota = strcmp(st->cfg->backend, "runsc") == 0 ? st->cfg->workspace_quota : 0;
  if (workspace_create(dfd, quota, st->cfg->sandbox_uid, st->cfg->sandbox_gid, err) < 0)
    goto fail_wrapped;
  char text[40];
  snprintf(text, sizeof(text), "%s\n", id);
  if (write_file_atomic(dfd, SANDBOX_ID_FILE, text, strlen(text), 0600, err) < 0)
    goto fail_wrapped;
  memcpy(id_out, id, 33);
  return 0;
fail_wrapped:
  remove_tree_at(st->pool_fd, name, NULL);
  return -1;
}

int slot_publish(struct store *st, const char *id, mcp_error_t *err) {
  char name[64];
  snprintf(name, sizeof(name), ".new-%s", id);
  if (renameat(st->pool_fd, name, st->pool_fd, id) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "publish pool/%s", id);
  return 0;
}

/* Take a ready pool folder by renaming it to sessions/<sid>: rename is
 * atomic, so two responders never claim the same one. */
static int claim_slot(struct store *st, const char *sid, char sandbox_id[33]) {
  cleanup_dir DIR *d = dir_open_at(st->state_fd, "pool");
  if (d == NULL)
    return -1;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!is_hex32(de->d_name))
      continue;
    if (renameat(st->pool_fd, de->d_name, st->sessions_fd, sid) == 0) {
      memcpy(sandbox_id, de->d_name, 33);
      return 0;
    }
  }
  return -1;
}

static int fresh_folder(struct store *st, const char *sid, char sandbox_id[33], mcp_error_t *err) {
  if (slot_prepare(st, sandbox_id, err) < 0)
    return -1;
  char name[64];
  snprintf(name, sizeof(name), ".new-%s", sandbox_id);
  if (renameat(st->pool_fd, name, st->sessions_fd, sid) < 0) {
    int e = errno;
    remove_tree_at(st->pool_fd, name, NULL);
    return mcp_fail(err, MCP_ERR_INTERNAL, e, "move a new folder to sessions/%s", sid);
  }
  return 0;
}

/* Reserve a session: under the store's lock, check the caps and make its
 * (empty) folder and its owner entry; the folder is filled afterwards. */
static int reserve(struct store *st, const char *token_id, const char *sid, mcp_error_t *err) {
  struct token_policy pol;
  if (policy_for(st->cfg, token_id, &pol, err) < 0)
    return -1;
  cleanup_close int lock = store_lock(st, err);
  if (lock < 0)
    return -1;
  int64_t free_bytes;
  uint64_t committed;
  if (session_disk_low(st, &free_bytes, &committed)) {
    metrics_reject_reason(REJECT_DISK_FULL);
    fprintf(stderr,
            "session_create: %lld bytes free on the state folder's disk, %llu of them promised to the workspaces "
            "that exist: below disk_floor + a workspace\n",
            (long long)free_bytes, (unsigned long long)committed);
    return mcp_fail_public(err, MCP_ERR_CAPACITY, "The server is low on disk space; try again later.");
  }
  if (session_count(st) >= st->cfg->max_sessions) {
    metrics_reject_reason(REJECT_CAPACITY);
    return mcp_fail_public(err, MCP_ERR_CAPACITY,
                           "The server has reached its maximum number of sessions; try again later.");
  }
  if (token_session_count(st, token_id) >= pol.max_sessions) {
    metrics_reject_reason(REJECT_TOKEN_SESSIONS);
    return mcp_fail_public(err, MCP_ERR_CAPACITY,
                           "This token has reached its maximum of %d sessions; end one (HTTP DELETE) or let one "
                           "expire, then try again.",
                           pol.max_sessions);
  }
  if (mkdirat(st->sessions_fd, sid, 0700) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir sessions/%s", sid);
  if (owner_add(st, token_id, sid, err) < 0) {
    unlinkat(st->sessions_fd, sid, AT_REMOVEDIR);
    return -1;
  }
  return 0;
}

int session_create(struct store *st, const char *token_id, struct session *out, mcp_error_t *err) {
  memset(out, 0, sizeof(*out));
  out->dirfd = out->lock_fd = -1;
  if (strlen(token_id) > TOKEN_ID_MAX)
    return mcp_fail(err, MCP_ERR_INVALID, EINVAL, "token id too long");
  session_id_new(st->cfg->cell, out->id);
  if (reserve(st, token_id, out->id, err) < 0)
    return -1;
  /* A pool folder, or a new one, replaces the empty reserved folder. */
  bool claimed = claim_slot(st, out->id, out->sandbox_id) == 0;
  if (!claimed && fresh_folder(st, out->id, out->sandbox_id, err) < 0)
    goto fail;
  out->dirfd = open_dir_at(st->sessions_fd, out->id, err);
  if (out->dirfd < 0)
    goto fail;
  snprintf(out->token_id, sizeof(out->token_id), "%s", token_id);
  out->created_ms = out->last_used_ms = wall_ms();
  if (write_meta(out, err) < 0) {
    session_close(out);
    remove_tree_at(st->sessions_fd, out->id, NULL);
    goto fail;
  }
  /* No ready sandbox: start one now so it boots while the client sends
   * notifications/initialized. */
  if (!claimed) {
    mcp_error_t ignored = NULL;
    if (supervisor_spawn(st->cfg, st->sessions_fd, out->id, &ignored) < 0)
      mcp_error_log_release(&ignored, "session_create");
  }
  return 0;
fail:
  unlinkat(st->sessions_fd, out->id, AT_REMOVEDIR);
  owner_remove(st, token_id, out->id);
  return -1;
}

/* True when a responder holds the session's call.lock. */
static void note_time(int dirfd, const char *name, int64_t *last_ms) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return;
  int64_t t = stat_mtime_ms(&st);
  if (t > *last_ms)
    *last_ms = t;
}

bool session_runs_active(int session_dirfd, int64_t *last_ms) {
  *last_ms = 0;
  cleanup_dir DIR *d = dir_open_at(session_dirfd, RUNS_DIR);
  if (d == NULL)
    return false;
  bool active = false;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] != 'r')
      continue;
    cleanup_close int rfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rfd < 0)
      continue;
    note_time(rfd, RUN_RECORD, last_ms);
    note_time(rfd, RUN_DONE_FILE, last_ms);
    cleanup_close int lfd = openat(rfd, RUN_LOCK, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    active |= lfd >= 0 && lock_held_elsewhere(lfd);
  }
  return active;
}

static bool call_running(int dirfd) {
  cleanup_close int fd = openat(dirfd, CALL_LOCK, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  return fd >= 0 && lock_held_elsewhere(fd);
}

int session_open(struct store *st, const char *id, const char *token_id, struct session *out, mcp_error_t *err) {
  memset(out, 0, sizeof(*out));
  out->dirfd = out->lock_fd = -1;
  if (!session_id_valid(id))
    return mcp_fail(err, MCP_ERR_NOT_FOUND, 0, "malformed session id");
  snprintf(out->id, sizeof(out->id), "%s", id);
  out->dirfd = openat(st->sessions_fd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (out->dirfd < 0)
    return mcp_fail(err, MCP_ERR_NOT_FOUND, 0, "session %s: no folder", id);
  mcp_error_t merr = NULL;
  if (read_meta(out, &merr) < 0) {
    bool missing = merr->kind == MCP_ERR_NOT_FOUND;
    if (!missing)
      mcp_error_log_release(&merr, "session_open");
    mcp_error_release(&merr);
    session_close(out);
    return mcp_fail(err, MCP_ERR_NOT_FOUND, 0, "session %s: no metadata", id);
  }
  if (strcmp(out->token_id, token_id) != 0) {
    session_close(out);
    return mcp_fail(err, MCP_ERR_NOT_FOUND, 0, "session %s: owned by another token", id);
  }
  /* A call in progress keeps the session alive, as for the keeper: its
   * other requests (ping, notifications/cancelled) must still find it. */
  int64_t idle_ms = (int64_t)st->cfg->idle_timeout * 1000 + TOUCH_EVERY_MS, run_last = 0;
  if (wall_ms() - out->last_used_ms > idle_ms && !call_running(out->dirfd) &&
      !session_runs_active(out->dirfd, &run_last) && wall_ms() - run_last > idle_ms) {
    session_close(out);
    return mcp_fail(err, MCP_ERR_NOT_FOUND, 0, "session %s: expired", id);
  }
  return 0;
}

int session_touch(struct store *st, struct session *s, mcp_error_t *err) {
  (void)st;
  /* Expiry counts in seconds: a busy client need not rewrite the
   * metadata on every request. */
  int64_t now = wall_ms();
  if (now - s->last_used_ms < TOUCH_EVERY_MS && now >= s->last_used_ms)
    return 0;
  s->last_used_ms = now;
  return write_meta(s, err);
}

int session_lock(struct session *s, int64_t wait_ms, mcp_error_t *err) {
  if (s->lock_fd >= 0)
    return 0;
  cleanup_close int fd = openat(s->dirfd, CALL_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open call lock");
  int64_t deadline = now_ms() + wait_ms;
  int pause = 2;
  for (;;) {
    int r = lock_try(fd);
    if (r == 0)
      break;
    if (r != -EWOULDBLOCK)
      return mcp_fail(err, MCP_ERR_INTERNAL, -r, "lock");
    if (now_ms() >= deadline)
      return mcp_fail_public(err, MCP_ERR_BUSY,
                             "The session is busy with another call; try again when it has finished.");
    poll(NULL, 0, pause);
    if (pause < 50)
      pause *= 2;
  }
  s->lock_fd = steal_fd(&fd);
  return 0;
}

void session_unlock(struct session *s) {
  if (s->lock_fd >= 0)
    close(s->lock_fd);
  s->lock_fd = -1;
}

void session_close(struct session *s) {
  session_unlock(s);
  if (s->dirfd >= 0)
    close(s->dirfd);
  s->dirfd = -1;
}

int session_destroy(struct store *st, const char *id, mcp_error_t *err) {
  if (!session_id_valid(id))
    return mcp_fail(err, MCP_ERR_NOT_FOUND, 0, "malformed session id");
  char name[SESSION_ID_MAX + 16], rnd[33];
  random_hex32(rnd);
  snprintf(name, sizeof(name), "%s~%.8s", id, rnd);
  if (renameat(st->sessions_fd, id, st->trash_fd, name) < 0) {
    if (errno == ENOENT)
      return mcp_fail(err, MCP_ERR_NOT_FOUND, 0, "session %s: no folder", id);
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "move session %s to trash", id);
  }
  /* It no longer counts for its token (the keeper mends what a crash
   * between the two steps leaves: session_owners_mend). */
  struct session gone = {.dirfd = openat(st->trash_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)};
  mcp_error_t merr = NULL;
  if (gone.dirfd >= 0 && read_meta(&gone, &merr) == 0)
    owner_remove(st, gone.token_id, id);
  mcp_error_release(&merr);
  if (gone.dirfd >= 0)
    close(gone.dirfd);
  return trash_remove(st, name, err);
}

/* Owner entries whose session is gone (a crash between the two steps of
 * session_destroy, or of session_create). */
void session_owners_mend(struct store *st) {
  cleanup_dir DIR *owners = dir_open_at(st->state_fd, "owners");
  struct dirent *t;
  while (owners != NULL && (t = readdir(owners)) != NULL) {
    if (strncmp(t->d_name, "t-", 2) != 0)
      continue;
    char dir[80];
    snprintf(dir, sizeof(dir), "owners/%.70s", t->d_name);
    cleanup_dir DIR *d = dir_open_at(st->state_fd, dir);
    cleanup_close int dfd = d != NULL ? openat(st->state_fd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    struct dirent *e;
    while (d != NULL && dfd >= 0 && (e = readdir(d)) != NULL) {
      struct stat sb;
      if (session_id_valid(e->d_name) && fstatat(st->sessions_fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 &&
          errno == ENOENT)
        unlinkat(dfd, e->d_name, 0);
    }
  }
}

bool folder_sandbox_id(int dfd, char id[33]) {
  cleanup_free char *text = NULL;
  mcp_error_t err = NULL;
  if (read_file_at(dfd, SANDBOX_ID_FILE, 64, &text, NULL, &err) < 0) {
    mcp_error_release(&err);
    return false;
  }
  text[strcspn(text, "\n")] = '\0';
  if (!is_hex32(text))
    return false;
  memcpy(id, text, 33);
  return true;
}

/* What runsc keeps of the sandbox of a supervisor that died (a kill, a
 * crash: the sandbox ended with its pipes, its state and cgroups stay) goes
 * with its folder, not at the keeper's next reap (up to a minute later). */
static void orphan_remove(struct store *st, int dfd) {
  char id[33], cid[40];
  if (strcmp(st->cfg->backend, "runsc") != 0 || !folder_sandbox_id(dfd, id))
    return;
  snprintf(cid, sizeof(cid), "mcp%s", id);
  if (!runsc_container_exists(st->cfg, cid))
    return;
  mcp_error_t err = NULL;
  fprintf(stderr, "trash_remove: removing container %s, whose supervisor is gone\n", cid);
  if (runsc_remove(st->cfg, cid, &err) < 0)
    mcp_error_log_release(&err, "trash_remove");
}

int trash_remove(struct store *st, const char *name, mcp_error_t *err) {
  cleanup_close int dfd = openat(st->trash_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd >= 0) {
    /* Removing through a mounted workspace would empty the image first. */
    workspace_unmount(dfd);
    mcp_error_t qerr = NULL;
    if (supervisor_quit(dfd, 10000, &qerr) < 0)
      mcp_error_log_release(&qerr, "trash_remove");
    /* A supervisor that did not answer still holds sup.lock: leave the
     * folder for the keeper, which retries. */
    cleanup_close int lock = openat(dfd, SUPERVISOR_LOCK, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (lock >= 0 && lock_held_elsewhere(lock))
      return mcp_fail(err, MCP_ERR_BUSY, 0, "trash/%s: supervisor still running", name);
    workspace_unmount(dfd);
    orphan_remove(st, dfd);
  }
  return remove_tree_at(st->trash_fd, name, err);
}
