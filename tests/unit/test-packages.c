/* fcgi/pkgtools.c, packages.c and npm.c on the host: what root does in the
 * folders package_user writes (never through a link), the package caches'
 * size cap (least recently used first, never while an install runs), and
 * pip and npm against registries that fail or sit behind the host's proxy
 * (the latter as root, with package_user, pip and npm present). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fcgi/npm.h"
#include "fcgi/packages.h"
#include "fcgi/pkgtools.h"
#include "fcgi/session.h"
#include "tap.h"

static char tmp[256];
static int tmp_fd;

static void put(int dirfd, const char *name, const char *text, mode_t mode) {
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0 || write_all(fd, text, strlen(text)) < 0)
    bail_out("write %s: %s", name, strerror(errno));
  fchmod(fd, mode);
  close(fd);
}

static int sub(int dirfd, const char *name) {
  mkdirat(dirfd, name, 0755);
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    bail_out("open %s: %s", name, strerror(errno));
  return fd;
}

/* The hook swaps `evil.whl` for a link to the secret between the listing
 * and the open, as a process of package_user's could. */
static int hook_dir = -1;
static char secret_path[512];
static void swap_for_link(int dirfd, const char *name) {
  if (strcmp(name, "evil.whl") != 0)
    return;
  hook_dir = dirfd;
  unlinkat(dirfd, name, 0);
  if (symlinkat(secret_path, dirfd, name) < 0)
    bail_out("symlink: %s", strerror(errno));
}

static void copy_wheels_tests(void) {
  int dl = sub(tmp_fd, "dl"), dst = sub(tmp_fd, "wheels-out"), outside = sub(tmp_fd, "outside");
  put(outside, "secret", "root's secret", 0600);
  snprintf(secret_path, sizeof(secret_path), "%s/outside/secret", tmp);
  put(dl, "good-1.0-py3-none-any.whl", "a wheel", 0600);
  put(dl, "evil.whl", "looked like a wheel", 0600);
  if (symlinkat(secret_path, dl, "link.whl") < 0)
    bail_out("symlink: %s", strerror(errno));
  package_copy_hook = swap_for_link;
  mcp_error_t err = NULL;
  int n = package_copy_wheels(dl, dst, &err);
  package_copy_hook = NULL;
  is_int(n, 1, "one wheel copied: the links (one planted between the listing and the open) are not");
  struct stat st = {0};
  int sr = fstatat(outside, "secret", &st, 0);
  ok(sr == 0 && (st.st_mode & 07777) == 0600,
     "the link's target keeps its mode 0600 (got %o): root never changed a file through a link",
     (unsigned)(st.st_mode & 07777));
  ok(fstatat(dst, "evil.whl", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT,
     "nothing named evil.whl in the session's folder");
  ok(fstatat(dst, "link.whl", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT, "nor link.whl");
  ok(fstatat(dst, "good-1.0-py3-none-any.whl", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
         (st.st_mode & 07777) == 0644 && st.st_uid == geteuid(),
     "the wheel is a new regular file of ours, 0644");
  ok(fstatat(dl, "good-1.0-py3-none-any.whl", &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & 07777) == 0600,
     "the tool's own file is left as it was");
  mcp_error_release(&err);
  close(dl);
  close(dst);
  close(outside);
}

static void copy_tree_tests(void) {
  int src = sub(tmp_fd, "nm"), dst = sub(tmp_fd, "nm-out");
  int pkg = sub(src, "pkg"), bin = sub(src, ".bin");
  put(pkg, "index.js", "module.exports = 1;\n", 0600);
  put(pkg, "cli.js", "#!/usr/bin/env node\n", 0700);
  if (symlinkat("../pkg/cli.js", bin, "cli") < 0 || symlinkat("/etc/shadow", pkg, "shadow") < 0 ||
      mkfifoat(pkg, "fifo", 0600) < 0)
    bail_out("links: %s", strerror(errno));
  mcp_error_t err = NULL;
  is_int(package_copy_tree(src, dst, 1 << 20, &err), 0, "the tree is copied");
  char target[64] = "";
  ssize_t n = readlinkat(dst, ".bin/cli", target, sizeof(target) - 1);
  target[n > 0 ? n : 0] = '\0';
  is_str(target, "../pkg/cli.js", ".bin/cli is a link again, with its target");
  struct stat st;
  ok(fstatat(dst, "pkg/shadow", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode),
     "a link to /etc/shadow stays a link (never read)");
  ok(fstatat(dst, "pkg/fifo", &st, AT_SYMLINK_NOFOLLOW) < 0, "a FIFO is left out");
  ok(fstatat(dst, "pkg/index.js", &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & 07777) == 0644, "files are 0644");
  ok(fstatat(dst, "pkg/cli.js", &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & 07777) == 0755, "executables 0755");
  int small = sub(tmp_fd, "nm-small");
  int r = package_copy_tree(src, small, 10, &err);
  ok(r < 0 && err != NULL && err->kind == MCP_ERR_INVALID, "beyond max_bytes it fails (%d: %s)", r,
     err ? err->msg : "no error");
  mcp_error_release(&err);
  close(small);
  close(pkg);
  close(bin);
  close(src);
  close(dst);
}

static void config_for(struct mcp_config *cfg, const char *state) {
  config_defaults(cfg);
  snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", state);
}

static void aged(int dirfd, const char *name, size_t size, time_t age) {
  char *data = malloc(size);
  memset(data, 'x', size);
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write_all(fd, data, size) < 0)
    bail_out("write %s", name);
  free(data);
  struct timespec t[2] = {{.tv_sec = time(NULL) - age}, {.tv_sec = time(NULL) - age}};
  futimens(fd, t);
  close(fd);
}

static bool exists(int dirfd, const char *name) {
  struct stat st;
  return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void trim_tests(void) {
  char state[300];
  snprintf(state, sizeof(state), "%s/state", tmp);
  int sfd = sub(tmp_fd, "state");
  int cache = sub(sfd, PACKAGE_CACHE);
  int pip = sub(cache, "pip"), deep = sub(pip, "a");
  int outside = sub(tmp_fd, "trim-outside");
  aged(deep, "oldest", 40000, 3000);
  aged(pip, "old", 40000, 2000);
  aged(cache, "recent", 40000, 10);
  aged(cache, "newest", 40000, 0);
  aged(outside, "target", 100, 5000);
  if (symlinkat("../../trim-outside", cache, "link") < 0)
    bail_out("symlink");
  struct mcp_config cfg;
  config_for(&cfg, state);
  cfg.package_cache_max = 100000;
  mcp_error_t err = NULL;
  /* An install holds the cache: nothing goes. */
  int held = package_cache_lock(&cfg, false, &err);
  ok(held >= 0, "an install's shared lock");
  is_int(package_cache_trim(&cfg, &err), 0, "the trim does not run while an install holds the cache");
  ok(exists(deep, "oldest") && exists(pip, "old"), "nothing was removed meanwhile");
  close(held);
  is_int(package_cache_trim(&cfg, &err), 1, "once it is free, the trim runs");
  ok(!exists(deep, "oldest") && !exists(pip, "old"), "the least recently used files went");
  ok(exists(cache, "recent") && exists(cache, "newest"), "the recent ones stay (80 kB <= 100 kB)");
  ok(exists(outside, "target"), "nothing outside the cache was touched through a link");
  is_int(package_cache_trim(&cfg, &err), 1, "under the cap, a trim removes nothing");
  ok(exists(cache, "recent") && exists(cache, "newest"), "both still there");
  mcp_error_release(&err);
  close(deep);
  close(pip);
  close(cache);
  close(outside);
  close(sfd);
}

/* A registry that fails: it counts the connections, reads the request and
 * closes the connection without an answer (mode 0), answers 502 (mode
 * 1) or never answers (mode 2), and remembers the first request line. */
struct server {
  int fd, port, count, mode;
  char first[512];
  pthread_t thread;
  volatile int stop;
};

static void *serve(void *arg) {
  struct server *s = arg;
  for (;;) {
    int c = accept(s->fd, NULL, NULL);
    if (c < 0 || s->stop) {
      if (c >= 0)
        close(c);
      return NULL;
    }
    __atomic_add_fetch(&s->count, 1, __ATOMIC_SEQ_CST);
    char req[2048];
    struct timeval tv = {.tv_sec = 2};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssize_t n = read(c, req, sizeof(req) - 1);
    if (n > 0 && s->first[0] == '\0') {
      req[n] = '\0';
      char *eol = strpbrk(req, "\r\n");
      if (eol)
        *eol = '\0';
      snprintf(s->first, sizeof(s->first), "%.400s", req);
    }
    static const char answer[] = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    if (s->mode == 1)
      (void)!write(c, answer, sizeof(answer) - 1);
    if (s->mode == 2) {
      /* Silent: hold the connection without a word until the client
       * gives up (or the server stops). */
      char sink[512];
      while (!s->stop && read(c, sink, sizeof(sink)) != 0)
        ;
    }
    close(c);
  }
}

static void server_start(struct server *s, int mode) {
  memset(s, 0, sizeof(*s));
  s->mode = mode;
  s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->fd, 64) < 0 ||
      getsockname(s->fd, (struct sockaddr *)&a, &len) < 0)
    bail_out("server: %s", strerror(errno));
  s->port = ntohs(a.sin_port);
  pthread_create(&s->thread, NULL, serve, s);
}

static void server_stop(struct server *s) {
  s->stop = 1;
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons((uint16_t)s->port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  connect(c, (struct sockaddr *)&a, sizeof(a));
  close(c);
  pthread_join(s->thread, NULL);
  close(s->fd);
}

typedef int (*fetch_fn)(const struct mcp_config *cfg, const cJSON *packages, int dst_fd, mcp_error_t *err);

static int fetch_one(struct mcp_config *cfg, fetch_fn fn, const char *spec, int64_t *ms) {
  cJSON *pk = cJSON_CreateArray();
  cJSON_AddItemToArray(pk, cJSON_CreateString(spec));
  char name[40];
  snprintf(name, sizeof(name), "out-%d", rand());
  int dst = sub(tmp_fd, name);
  mcp_error_t err = NULL;
  int64_t t0 = now_ms();
  int r = fn(cfg, pk, dst, &err);
  *ms = now_ms() - t0;
  if (err != NULL)
    diag("%s: %.300s", spec, mcp_error_public(err));
  mcp_error_release(&err);
  cJSON_Delete(pk);
  close(dst);
  return r;
}

static void network_tests(void) {
  struct passwd *pw = getpwnam("nobody");
  if (geteuid() != 0 || pw == NULL || access("/usr/bin/npm", X_OK) != 0 || access("/usr/bin/python3", X_OK) != 0) {
    diag("skipped: pip and npm runs need root, the user nobody, /usr/bin/npm and python3");
    return;
  }
  char state[300];
  snprintf(state, sizeof(state), "%s/net-state", tmp);
  mkdir(state, 0711);
  chmod(tmp, 0711); /* package_user reaches its folders below */
  struct mcp_config cfg;
  config_for(&cfg, state);
  mcp_error_t err = NULL;
  if (store_prepare(&cfg, &err) < 0)
    bail_out("store_prepare: %s", err->msg);
  /* The host's settings are asked once (npm config, pip config): not
   * part of the timings below. */
  package_host_settings_load(&cfg);
  struct server s;
  static const struct {
    const char *what;
    fetch_fn fn;
  } tools[] = {{"pip", packages_fetch}, {"npm", npm_fetch}};
  for (size_t i = 0; i < ARRAY_SIZE(tools); i++) {
    /* A registry that drops every connection: the call fails within
     * seconds, after at most one retry (not a minute of retries). */
    server_start(&s, 0);
    char url[128];
    if (i == 0)
      snprintf(url, sizeof(url), "http://127.0.0.1:%d/simple", s.port);
    else
      snprintf(url, sizeof(url), "http://127.0.0.1:%d/", s.port);
    snprintf(i == 0 ? cfg.package_index : cfg.npm_registry, 512, "%s", url);
    int64_t ms = 0;
    int r = fetch_one(&cfg, tools[i].fn, "mcp-test-nothing", &ms);
    server_stop(&s);
    ok(r < 0, "%s: a failing registry fails the fetch", tools[i].what);
    ok(ms < 30000, "%s: within seconds, not a minute of retries (%lld ms)", tools[i].what, (long long)ms);
    ok(s.count >= 1 && s.count <= 2, "%s: tried at most twice (%d connections)", tools[i].what, s.count);
    /* A registry that takes the connection and never answers: the same. */
    server_start(&s, 2);
    if (i == 0)
      snprintf(url, sizeof(url), "http://127.0.0.1:%d/simple", s.port);
    else
      snprintf(url, sizeof(url), "http://127.0.0.1:%d/", s.port);
    snprintf(i == 0 ? cfg.package_index : cfg.npm_registry, 512, "%s", url);
    r = fetch_one(&cfg, tools[i].fn, "mcp-test-silent", &ms);
    server_stop(&s);
    ok(r < 0, "%s: a silent registry fails the fetch", tools[i].what);
    ok(ms < 30000, "%s: silent: within seconds, not a minute of waiting (%lld ms)", tools[i].what, (long long)ms);
    /* The host's proxy (HTTPS_PROXY of the service's environment) is used:
     * the registry's name is never resolved here, the proxy is asked to
     * connect to it. */
    server_start(&s, 1);
    char proxy[64];
    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", s.port);
    setenv("HTTPS_PROXY", proxy, 1);
    setenv("https_proxy", proxy, 1);
    snprintf(i == 0 ? cfg.package_index : cfg.npm_registry, 512, "%s",
             i == 0 ? "https://registry.invalid/simple" : "https://registry.invalid/");
    r = fetch_one(&cfg, tools[i].fn, "mcp-test-proxied", &ms);
    unsetenv("HTTPS_PROXY");
    unsetenv("https_proxy");
    server_stop(&s);
    ok(r < 0, "%s: through a proxy that answers 502 the fetch fails", tools[i].what);
    like(s.first, "registry.invalid", "%s: the proxy got the request (%s)", tools[i].what, s.first);
  }
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  snprintf(tmp, sizeof(tmp), "/tmp/mcp-test-packages-XXXXXX");
  if (mkdtemp(tmp) == NULL)
    bail_out("mkdtemp: %s", strerror(errno));
  tmp_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  copy_wheels_tests();
  copy_tree_tests();
  trim_tests();
  network_tests();
  mcp_error_t err = NULL;
  int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  close(tmp_fd);
  if (remove_tree_at(root, tmp + 1, &err) < 0)
    diag("cleanup: %s", err->msg);
  close(root);
  return done_testing();
}
