/* What pip and npm share on the host (see pkgtools.h).
 *
 * Root never acts by name in a folder package_user can write: what a tool
 * left is opened with O_NOFOLLOW relative to a descriptor, checked through
 * that descriptor, and copied into new files of root's; the original is
 * never chowned or chmodded.  The caches belong to package_user; the trim
 * walks them through descriptors and unlinks entries (unlink never follows
 * a link). */
#include "config.h"

#include "fcgi/pkgtools.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define MAX_WHEEL (512ULL << 20)
#define TREE_DEPTH_MAX 128
#define TREE_ENTRIES_MAX 200000
#define TRIM_ENTRIES_MAX 2000000

extern char **environ;

void (*package_copy_hook)(int dirfd, const char *name);

int package_user_get(const struct mcp_config *cfg, struct package_user *pu, mcp_error_t *err) {
  struct passwd pwbuf, *pw = NULL;
  char pwtext[1024];
  if (getpwnam_r(cfg->package_user, &pwbuf, pwtext, sizeof(pwtext), &pw) != 0)
    pw = NULL;
  if (pw == NULL || pw->pw_uid == 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, 0, "package_user %s does not exist or is root", cfg->package_user);
  pu->uid = pw->pw_uid;
  pu->gid = pw->pw_gid;
  return 0;
}

/* ---- the host's settings ---- */

static struct {
  char ca_bundle[PATH_MAX];
  char npm_proxy[512], npm_https_proxy[512], npm_noproxy[512], npm_cafile[PATH_MAX];
  char pip_proxy[512], pip_cert[PATH_MAX];
} host;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static const struct mcp_config *host_cfg;

static bool readable_file(const char *p) {
  struct stat st;
  return p != NULL && *p != '\0' && stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, R_OK) == 0;
}

/* The system's CA bundle: SSL_CERT_FILE when set, else the first of the
 * distributions' places. */
static void find_ca_bundle(void) {
  static const char *const places[] = {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                                       "/etc/ssl/ca-bundle.pem", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
                                       "/etc/ssl/cert.pem"};
  const char *env = getenv("SSL_CERT_FILE");
  if (readable_file(env)) {
    snprintf(host.ca_bundle, sizeof(host.ca_bundle), "%s", env);
    return;
  }
  for (size_t i = 0; i < ARRAY_SIZE(places); i++)
    if (readable_file(places[i])) {
      snprintf(host.ca_bundle, sizeof(host.ca_bundle), "%s", places[i]);
      return;
    }
}

/* Run a tool as root with the service's environment, in /, and capture
 * what it prints (nothing on failure). */
static void ask(const char *const *argv, struct buf *out) {
  mcp_error_t err = NULL;
  struct proc_opts o = {.argv = argv,
                        .stdin_fd = -1,
                        .stderr_fd = -1,
                        .capture = out,
                        .capture_max = 1 << 16,
                        .timeout_ms = 30000,
                        .cwd = "/"};
  int st = 0;
  if (access(argv[0], X_OK) != 0 || run_process(&o, &st, &err) < 0 || st != 0) {
    mcp_error_release(&err);
    buf_free(out);
  }
}

/* value of `key=value` (npm) or `key='value'` (pip) at the start of a line */
static void take(const struct buf *out, const char *key, char *dst, size_t size) {
  const char *text = out->data;
  size_t klen = strlen(key);
  for (size_t i = 0; text != NULL && i < out->len;) {
    const char *line = text + i;
    const char *nl = memchr(line, '\n', out->len - i);
    size_t len = nl ? (size_t)(nl - line) : out->len - i;
    if (len > klen + 1 && strncmp(line, key, klen) == 0 && line[klen] == '=') {
      const char *v = line + klen + 1;
      size_t vlen = len - klen - 1;
      if (vlen >= 2 && v[0] == '\'' && v[vlen - 1] == '\'') {
        v++;
        vlen -= 2;
      }
      if (vlen > 0 && vlen < size && !(vlen == 4 && strncmp(v, "null", 4) == 0) && memchr(v, '\0', vlen) == NULL) {
        memcpy(dst, v, vlen);
        dst[vlen] = '\0';
      }
    }
    i += len + 1;
  }
}

static void load_host(void) {
  find_ca_bundle();
  cleanup_buf struct buf npm = {0}, pip = {0};
  const char *npm_argv[] = {"/usr/bin/npm", "config", "get", "proxy", "https-proxy", "noproxy", "cafile", NULL};
  ask(npm_argv, &npm);
  take(&npm, "proxy", host.npm_proxy, sizeof(host.npm_proxy));
  take(&npm, "https-proxy", host.npm_https_proxy, sizeof(host.npm_https_proxy));
  take(&npm, "noproxy", host.npm_noproxy, sizeof(host.npm_noproxy));
  take(&npm, "cafile", host.npm_cafile, sizeof(host.npm_cafile));
  if (!readable_file(host.npm_cafile))
    host.npm_cafile[0] = '\0';
  const char *python = host_cfg != NULL ? host_cfg->python : "/usr/bin/python3";
  const char *pip_argv[] = {python, "-m", "pip", "config", "list", NULL};
  ask(pip_argv, &pip);
  /* later sources win, as in pip: the files, then the environment */
  static const char *const sections[] = {"global", "download", ":env:"};
  for (size_t i = 0; i < ARRAY_SIZE(sections); i++) {
    char key[64];
    snprintf(key, sizeof(key), "%s.proxy", sections[i]);
    take(&pip, key, host.pip_proxy, sizeof(host.pip_proxy));
    snprintf(key, sizeof(key), "%s.cert", sections[i]);
    take(&pip, key, host.pip_cert, sizeof(host.pip_cert));
  }
  if (!readable_file(host.pip_cert))
    host.pip_cert[0] = '\0';
}

void package_host_settings_load(const struct mcp_config *cfg) {
  host_cfg = cfg;
  pthread_once(&host_once, load_host);
}

void tool_env_free(struct tool_env *e) {
  for (size_t i = 0; i < e->n; i++)
    free(e->v[i]);
  e->n = 0;
  e->v[0] = NULL;
}

static int env_add(struct tool_env *e, const char *name, const char *value) {
  if (e->n + 1 >= ARRAY_SIZE(e->v))
    return -1;
  size_t len = strlen(name) + strlen(value) + 2;
  char *s = malloc(len);
  if (s == NULL)
    return -1;
  snprintf(s, len, "%s=%s", name, value);
  e->v[e->n++] = s;
  e->v[e->n] = NULL;
  return 0;
}

int tool_env_build(const struct mcp_config *cfg, enum package_tool tool, const char *home, const char *const *extra,
                   struct tool_env *e) {
  package_host_settings_load(cfg);
  memset(e, 0, sizeof(*e));
  int r = env_add(e, "PATH", "/usr/bin:/bin") | env_add(e, "LANG", "C.UTF-8") | env_add(e, "HOME", home);
  /* The service's proxy settings: both tools read these. */
  static const char *const proxies[] = {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                                        "NO_PROXY",    "no_proxy",    "ALL_PROXY",  "all_proxy"};
  for (size_t i = 0; i < ARRAY_SIZE(proxies); i++) {
    const char *v = getenv(proxies[i]);
    if (v != NULL && *v != '\0')
      r |= env_add(e, proxies[i], v);
  }
  /* Node.js trusts its own CA list only: add the system's (an intercepting
   * proxy's CA is there, as root's npm is told in the host's npmrc). */
  const char *extra_ca = getenv("NODE_EXTRA_CA_CERTS");
  if (tool == TOOL_NPM && (readable_file(extra_ca) || host.ca_bundle[0] != '\0'))
    r |= env_add(e, "NODE_EXTRA_CA_CERTS", readable_file(extra_ca) ? extra_ca : host.ca_bundle);
  for (; extra != NULL && *extra != NULL; extra++) {
    const char *eq = strchr(*extra, '=');
    char name[128];
    if (eq == NULL || (size_t)(eq - *extra) >= sizeof(name))
      return -1;
    snprintf(name, sizeof(name), "%.*s", (int)(eq - *extra), *extra);
    r |= env_add(e, name, eq + 1);
  }
  return r < 0 ? -1 : 0;
}

void tool_host_options(const struct mcp_config *cfg, enum package_tool tool, struct argv *argv) {
  package_host_settings_load(cfg);
  /* host is written once (package_host_settings_load), then only read. */
  if (tool == TOOL_PIP) {
    const char *cert = host.pip_cert[0] ? host.pip_cert : host.ca_bundle;
    if (cert[0] != '\0') {
      argv_add(argv, "--cert");
      argv_add(argv, cert);
    }
    if (host.pip_proxy[0] != '\0') {
      argv_add(argv, "--proxy");
      argv_add(argv, host.pip_proxy);
    }
    return;
  }
  static const struct {
    const char *flag;
    const char *value;
  } npm[] = {{"--cafile", host.npm_cafile},
             {"--proxy", host.npm_proxy},
             {"--https-proxy", host.npm_https_proxy},
             {"--noproxy", host.npm_noproxy}};
  for (size_t i = 0; i < ARRAY_SIZE(npm); i++)
    if (npm[i].value[0] != '\0') {
      argv_add(argv, npm[i].flag);
      argv_add(argv, npm[i].value);
    }
}

/* ---- a tool run's folder ---- */

static int open_state_dir(const struct mcp_config *cfg, const char *name, mcp_error_t *err) {
  cleanup_close int sfd = open(cfg->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (sfd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open `%s`", cfg->state_dir);
  int fd = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open `%s/%s`", cfg->state_dir, name);
  return fd;
}

int package_work_open(const struct mcp_config *cfg, const struct package_user *pu, struct package_work *w,
                      mcp_error_t *err) {
  memset(w, 0, sizeof(*w));
  w->fd = w->parent_fd = -1;
  if ((w->parent_fd = open_state_dir(cfg, PACKAGE_WORK, err)) < 0)
    return -1;
  char rnd[33];
  random_hex32(rnd);
  snprintf(w->name, sizeof(w->name), "w-%.16s", rnd);
  snprintf(w->path, sizeof(w->path), "%s/" PACKAGE_WORK "/%s", cfg->state_dir, w->name);
  if (mkdirat(w->parent_fd, w->name, 0700) < 0)
    goto fail;
  w->fd = openat(w->parent_fd, w->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (w->fd < 0 || fchown(w->fd, pu->uid, pu->gid) < 0 || fchmod(w->fd, 0700) < 0)
    goto fail;
  return 0;
fail:;
  int e = errno;
  package_work_close(w);
  return mcp_fail(err, MCP_ERR_INTERNAL, e, "make the download folder");
}

void package_work_close(struct package_work *w) {
  if (w->fd >= 0)
    close(w->fd);
  w->fd = -1;
  if (w->parent_fd >= 0 && w->name[0] != '\0') {
    mcp_error_t err = NULL;
    if (remove_tree_at(w->parent_fd, w->name, &err) < 0)
      mcp_error_log_release(&err, "packages: cleanup");
  }
  if (w->parent_fd >= 0)
    close(w->parent_fd);
  w->parent_fd = -1;
}

/* ---- the cache: lock and trim ---- */

int package_cache_lock(const struct mcp_config *cfg, bool exclusive, mcp_error_t *err) {
  cleanup_close int sfd = open(cfg->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (sfd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open `%s`", cfg->state_dir);
  cleanup_close int fd = openat(sfd, PACKAGE_CACHE_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open %s", PACKAGE_CACHE_LOCK);
  struct flock fl = {.l_type = exclusive ? F_WRLCK : F_RDLCK, .l_whence = SEEK_SET};
  while (fcntl(fd, exclusive ? F_OFD_SETLK : F_OFD_SETLKW, &fl) < 0) {
    if (errno == EINTR)
      continue;
    if (exclusive && (errno == EAGAIN || errno == EACCES))
      return -EWOULDBLOCK;
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "lock %s", PACKAGE_CACHE_LOCK);
  }
  return steal_fd(&fd);
}

struct cache_file {
  char *path; /* relative to the cache */
  uint64_t size;
  int64_t used; /* the later of its access and change times */
};

struct cache_list {
  struct cache_file *v;
  size_t n, cap;
  uint64_t total;
};

static int list_add(struct cache_list *l, const char *path, const struct stat *st) {
  if (l->n >= TRIM_ENTRIES_MAX)
    return -E2BIG;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 256;
    struct cache_file *v = realloc(l->v, cap * sizeof(*v));
    if (v == NULL)
      return -ENOMEM;
    l->v = v;
    l->cap = cap;
  }
  char *p = strdup(path);
  if (p == NULL)
    return -ENOMEM;
  int64_t a = (int64_t)st->st_atim.tv_sec, m = (int64_t)st->st_mtim.tv_sec;
  l->v[l->n++] = (struct cache_file){.path = p, .size = (uint64_t)st->st_blocks * 512, .used = a > m ? a : m};
  l->total += (uint64_t)st->st_blocks * 512;
  return 0;
}

/* Every file below dfd (path: its name from the cache's top), through
 * descriptors, on the cache's device only. */
static int list_files(int dfd, const char *path, dev_t dev, int depth, struct cache_list *l) {
  if (depth > TREE_DEPTH_MAX)
    return 0;
  cleanup_dir DIR *d = dir_stream(dfd);
  if (d == NULL)
    return -errno;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    char sub[PATH_MAX];
    if (snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "/" : "", de->d_name) >= (int)sizeof(sub))
      continue;
    struct stat st;
    if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != dev)
      continue;
    int r = 0;
    if (S_ISDIR(st.st_mode)) {
      cleanup_close int child = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child >= 0)
        r = list_files(child, sub, dev, depth + 1, l);
    } else {
      r = list_add(l, sub, &st);
    }
    if (r < 0)
      return r;
  }
  return 0;
}

/* unlink top/path, descending folder by folder with O_NOFOLLOW: a folder
 * swapped for a link on the way is not followed. */
static int unlink_below(int top, const char *path) {
  char buf[PATH_MAX];
  snprintf(buf, sizeof(buf), "%s", path);
  int cur = dup(top);
  if (cur < 0)
    return -errno;
  char *name = buf, *slash;
  while ((slash = strchr(name, '/')) != NULL) {
    *slash = '\0';
    int next = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(cur);
    if (next < 0)
      return -errno;
    cur = next;
    name = slash + 1;
  }
  int r = unlinkat(cur, name, 0) < 0 ? -errno : 0;
  close(cur);
  return r;
}

static int by_use(const void *a, const void *b) {
  const struct cache_file *x = a, *y = b;
  return x->used < y->used ? -1 : x->used > y->used ? 1 : strcmp(x->path, y->path);
}

int package_cache_trim(const struct mcp_config *cfg, mcp_error_t *err) {
  int lk = package_cache_lock(cfg, true, err);
  if (lk == -EWOULDBLOCK)
    return 0; /* an install runs: the next one's end trims */
  if (lk < 0)
    return -1;
  cleanup_close int lock = lk;
  cleanup_close int top = open_state_dir(cfg, PACKAGE_CACHE, err);
  if (top < 0)
    return -1;
  struct stat st;
  if (fstat(top, &st) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "stat the package cache");
  struct cache_list l = {0};
  int r = list_files(top, "", st.st_dev, 0, &l);
  if (r == 0 && l.total > cfg->package_cache_max) {
    qsort(l.v, l.n, sizeof(l.v[0]), by_use);
    /* down to 7/8 of the cap, so that the next install does not trim again */
    uint64_t goal = cfg->package_cache_max - cfg->package_cache_max / 8;
    for (size_t i = 0; i < l.n && l.total > goal; i++)
      if (unlink_below(top, l.v[i].path) == 0)
        l.total -= l.v[i].size;
  }
  for (size_t i = 0; i < l.n; i++)
    free(l.v[i].path);
  free(l.v);
  if (r < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, -r, "list the package cache");
  return 1;
}

/* ---- copying what a tool resolved ---- */

/* Open name below dfd for reading without following a link; -1 with errno
 * unless it is a regular file (or a folder, when dir). */
static int open_entry(int dfd, const char *name, bool dir, struct stat *st) {
  if (package_copy_hook != NULL)
    package_copy_hook(dfd, name);
  int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
  if (fd < 0)
    return -1;
  if (fstat(fd, st) < 0 || (dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

/* Copy the open file src into a new file name below dst (root's, mode). */
static int copy_file(int src, int dst_dir, const char *name, mode_t mode, uint64_t *budget, mcp_error_t *err) {
  cleanup_close int out = openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (out < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "create %s", name);
  char chunk[65536];
  for (;;) {
    ssize_t n = read_some(src, chunk, sizeof(chunk));
    if (n < 0)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "read %s", name);
    if (n == 0)
      break;
    if ((uint64_t)n > *budget)
      return mcp_fail_public(err, MCP_ERR_INVALID,
                             "The packages are larger than the workspace; nothing was installed "
                             "and the code did not run.");
    *budget -= (uint64_t)n;
    if (write_all(out, chunk, (size_t)n) < 0)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "write %s", name);
  }
  if (fchmod(out, mode) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "chmod %s", name);
  return 0;
}

int package_copy_wheels(int src_fd, int dst_fd, mcp_error_t *err) {
  cleanup_dir DIR *d = dir_stream(src_fd);
  if (d == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "list the download folder");
  int count = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    if (n < 5 || strcmp(de->d_name + n - 4, ".whl") != 0 || de->d_name[0] == '.')
      continue;
    struct stat st;
    cleanup_close int fd = open_entry(src_fd, de->d_name, false, &st);
    if (fd < 0 || (uint64_t)st.st_size > MAX_WHEEL)
      continue; /* a link, or anything but a regular file: not a wheel pip wrote */
    uint64_t budget = MAX_WHEEL;
    if (copy_file(fd, dst_fd, de->d_name, 0644, &budget, err) < 0)
      return -1;
    count++;
  }
  return count;
}

struct copy_state {
  uint64_t budget;
  size_t entries;
};

static int copy_dir(int src, int dst, int depth, struct copy_state *cs, mcp_error_t *err) {
  if (depth > TREE_DEPTH_MAX)
    return mcp_fail(err, MCP_ERR_INTERNAL, ELOOP, "the package tree is too deep");
  cleanup_dir DIR *d = dir_stream(src);
  if (d == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "list the package tree");
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (++cs->entries > TREE_ENTRIES_MAX)
      return mcp_fail_public(err, MCP_ERR_INVALID,
                             "The packages hold more than %d files; nothing was installed "
                             "and the code did not run.",
                             TREE_ENTRIES_MAX);
    struct stat lst;
    if (fstatat(src, de->d_name, &lst, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    if (S_ISLNK(lst.st_mode)) { /* npm's .bin links: copied as links, never followed */
      char target[PATH_MAX];
      ssize_t n = readlinkat(src, de->d_name, target, sizeof(target) - 1);
      if (n < 0)
        continue;
      target[n] = '\0';
      if (symlinkat(target, dst, de->d_name) < 0)
        return mcp_fail(err, MCP_ERR_INTERNAL, errno, "link %s", de->d_name);
      continue;
    }
    bool dir = S_ISDIR(lst.st_mode);
    if (!dir && !S_ISREG(lst.st_mode))
      continue;
    struct stat st;
    cleanup_close int fd = open_entry(src, de->d_name, dir, &st);
    if (fd < 0)
      continue; /* swapped meanwhile: left out */
    if (!dir) {
      if (copy_file(fd, dst, de->d_name, (st.st_mode & 0111) ? 0755 : 0644, &cs->budget, err) < 0)
        return -1;
      continue;
    }
    if (mkdirat(dst, de->d_name, 0755) < 0)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir %s", de->d_name);
    cleanup_close int sub = openat(dst, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0 || fchmod(sub, 0755) < 0)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open %s", de->d_name);
    if (copy_dir(fd, sub, depth + 1, cs, err) < 0)
      return -1;
  }
  return 0;
}

int package_copy_tree(int src_fd, int dst_fd, uint64_t max_bytes, mcp_error_t *err) {
  struct copy_state cs = {.budget = max_bytes};
  return copy_dir(src_fd, dst_fd, 0, &cs, err);
}
