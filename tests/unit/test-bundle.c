/* sandbox/bundle.c: the OCI config of a sandbox and its skeleton root. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/bundle.h"
#include "tap.h"

static const struct bundle_spec base = {
    .rootfs = "/state/rootfs",
    .workspace = "/state/sessions/s1/work",
    .executor = "/usr/libexec/mcp-sandbox/executor",
    .preload_lib = NULL,
    .python = "/usr/bin/python3",
    .preload_modules = "numpy,pandas",
    .cgroups_path = NULL,
    .uid = 1234,
    .gid = 2345,
    .tmp_size = 256 << 20,
    .shm_size = 64 << 20,
    .nofile = 1024,
};

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static const char *str(const cJSON *o, const char *k) {
  const cJSON *v = get(o, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *mount_at(const cJSON *cfg, const char *dst) {
  const cJSON *m;
  cJSON_ArrayForEach(m, get(cfg, "mounts")) {
    const char *d = str(m, "destination");
    if (d != NULL && strcmp(d, dst) == 0)
      return m;
  }
  return NULL;
}

static bool has_option(const cJSON *mount, const char *opt) {
  const cJSON *o;
  cJSON_ArrayForEach(o, get(mount, "options")) {
    if (cJSON_IsString(o) && strcmp(o->valuestring, opt) == 0)
      return true;
  }
  return false;
}

/* The array of strings as one comma-separated string. */
static char *joined(const cJSON *arr) {
  struct buf b = {0};
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    if (b.len > 0)
      buf_append(&b, ",", 1);
    const char *s = cJSON_IsString(it) ? it->valuestring : "?";
    buf_append(&b, s, strlen(s));
  }
  return b.data ? b.data : strdup("");
}

static void is_joined(const cJSON *arr, const char *expected, const char *what) {
  char *s = joined(arr);
  is_str(s, expected, "%s", what);
  free(s);
}

static void process_tests(const cJSON *cfg) {
  const cJSON *p = get(cfg, "process");
  const cJSON *user = get(p, "user");
  ok(cJSON_IsNumber(get(user, "uid")) && get(user, "uid")->valueint == 0, "the executor runs as uid 0 in the sandbox");
  ok(cJSON_IsNumber(get(user, "gid")) && get(user, "gid")->valueint == 0, "and gid 0");
  ok(cJSON_IsTrue(get(p, "noNewPrivileges")), "noNewPrivileges");
  ok(cJSON_IsFalse(get(p, "terminal")), "no terminal");
  const cJSON *caps = get(p, "capabilities");
  is_joined(get(caps, "bounding"), "CAP_SETUID,CAP_SETGID,CAP_KILL", "bounding set is SETUID, SETGID, KILL only");
  is_joined(get(caps, "effective"), "CAP_SETUID,CAP_SETGID,CAP_KILL", "effective set is the same");
  is_joined(get(caps, "permitted"), "CAP_SETUID,CAP_SETGID,CAP_KILL", "permitted set is the same");
  ok(cJSON_IsArray(get(caps, "inheritable")) && cJSON_GetArraySize(get(caps, "inheritable")) == 0,
     "inheritable set is empty");
  ok(cJSON_IsArray(get(caps, "ambient")) && cJSON_GetArraySize(get(caps, "ambient")) == 0, "ambient set is empty");
  is_joined(get(p, "args"), "/usr/bin/python3,-I,-B,/opt/mcp/executor,--uid=1234,--gid=2345,--preload=numpy,pandas",
            "args run the executor with the code's uid and gid");
  is_str(str(p, "cwd"), "/", "cwd");
  /* The sandbox's initial environment is fixed by the bundle: nothing of
   * the host's (a token in the service's environment) reaches it. */
  ok(cJSON_IsArray(get(p, "env")), "env is an array");
  int leaked = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, get(p, "env")) {
    const char *v = cJSON_IsString(e) ? e->valuestring : "";
    if (strstr(v, "MCP_UNIT_SECRET") != NULL || strncmp(v, "LD_", 3) == 0)
      leaked++;
  }
  is_int(leaked, 0, "no host variable is passed to the sandbox");
  char *rl = NULL;
  {
    struct buf b = {0};
    const cJSON *r;
    cJSON_ArrayForEach(r, get(p, "rlimits")) {
      char one[128];
      snprintf(one, sizeof(one), "%s%s=%.0f/%.0f", b.len ? "," : "", str(r, "type") ? str(r, "type") : "?",
               cJSON_GetNumberValue(get(r, "soft")), cJSON_GetNumberValue(get(r, "hard")));
      buf_append(&b, one, strlen(one));
    }
    rl = b.data;
  }
  is_str(rl, "RLIMIT_NOFILE=1024/1024,RLIMIT_CORE=0/0", "rlimits: nofile from the spec, no core files");
  free(rl);
}

static void mount_tests(const cJSON *cfg) {
  const cJSON *root = get(cfg, "root");
  is_str(str(root, "path"), "/state/rootfs", "root is the skeleton");
  ok(cJSON_IsTrue(get(root, "readonly")), "root is read-only");
  is_str(str(cfg, "hostname"), "sandbox", "hostname");

  const cJSON *w = mount_at(cfg, "/work");
  ok(w != NULL, "the workspace is mounted at /work");
  is_str(str(w, "type"), "bind", "as a bind mount");
  is_str(str(w, "source"), "/state/sessions/s1/work", "of the session's workspace");
  ok(has_option(w, "rw") && !has_option(w, "ro"), "read-write");
  ok(has_option(w, "nosuid") && has_option(w, "nodev"), "nosuid, nodev");

  const cJSON *t = mount_at(cfg, "/tmp");
  is_str(str(t, "type"), "tmpfs", "/tmp is a tmpfs");
  ok(has_option(t, "size=268435456"), "/tmp has the configured size");
  ok(has_option(t, "mode=1777") && has_option(t, "nosuid") && has_option(t, "nodev"), "/tmp is sticky, nosuid, nodev");
  const cJSON *shm = mount_at(cfg, "/dev/shm");
  is_str(str(shm, "type"), "tmpfs", "/dev/shm is a tmpfs");
  ok(has_option(shm, "size=67108864"), "/dev/shm has the configured size");

  const cJSON *ex = mount_at(cfg, "/opt/mcp/executor");
  is_str(str(ex, "source"), "/usr/libexec/mcp-sandbox/executor", "the executor's folder is bound from the host");
  ok(has_option(ex, "ro"), "read-only");
  ok(mount_at(cfg, "/opt/mcp/libmcpstatx.so") == NULL, "no preload library mount without one");
  ok(has_option(mount_at(cfg, "/usr"), "ro"), "/usr is read-only");
  ok(has_option(mount_at(cfg, "/sys"), "ro"), "/sys is read-only");

  /* The workspace is the only writable host path. */
  int writable_binds = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, get(cfg, "mounts")) {
    const char *type = str(m, "type");
    if (type != NULL && strcmp(type, "bind") == 0 && !has_option(m, "ro")) {
      writable_binds++;
      is_str(str(m, "destination"), "/work", "writable bind mount");
    }
  }
  is_int(writable_binds, 1, "exactly one writable bind mount");
}

static void linux_tests(const cJSON *cfg) {
  const cJSON *l = get(cfg, "linux");
  char *kinds;
  {
    struct buf b = {0};
    const cJSON *n;
    cJSON_ArrayForEach(n, get(l, "namespaces")) {
      if (b.len)
        buf_append(&b, ",", 1);
      const char *t = str(n, "type");
      buf_append(&b, t ? t : "?", strlen(t ? t : "?"));
      ok(get(n, "path") == NULL, "namespace %s is new, not joined", t ? t : "?");
    }
    kinds = b.data;
  }
  is_str(kinds, "pid,network,ipc,uts,mount", "namespaces: pid, network, ipc, uts, mount");
  free(kinds);
  ok(get(l, "cgroupsPath") == NULL, "no cgroupsPath when the spec has none");
  ok(get(l, "resources") == NULL, "no resources without a cgroup");
}

static void variant_tests(void) {
  mcp_error_t err = NULL;
  struct bundle_spec s = base;
  s.preload_lib = "/usr/lib/mcp/libmcpstatx.so";
  s.preload_modules = "";
  s.cgroups_path = "/mcp/abc";
  s.memory_backstop = (uint64_t)3 << 30;
  s.pids_backstop = 512;
  s.cpu_shares = 256;
  cJSON *cfg = bundle_config(&s, &err);
  ok(cfg != NULL, "bundle_config with a cgroup and a preload library");
  const cJSON *pre = mount_at(cfg, "/opt/mcp/libmcpstatx.so");
  is_str(str(pre, "source"), "/usr/lib/mcp/libmcpstatx.so", "the preload library is bound");
  ok(has_option(pre, "ro"), "read-only");
  is_joined(get(get(cfg, "process"), "args"),
            "/usr/bin/python3,-I,-B,/opt/mcp/executor,--uid=1234,--gid=2345,--statx-fix",
            "the executor is told to preload the library; no --preload with empty preload_modules");
  const cJSON *l = get(cfg, "linux");
  is_str(str(l, "cgroupsPath"), "/mcp/abc", "cgroupsPath");
  is_int(cJSON_GetNumberValue(get(get(get(l, "resources"), "memory"), "limit")), (int64_t)3 << 30, "memory backstop");
  is_int(cJSON_GetNumberValue(get(get(get(l, "resources"), "pids"), "limit")), 512, "pids backstop");
  is_int(cJSON_GetNumberValue(get(get(get(l, "resources"), "cpu"), "shares")), 256, "the cgroup's CPU weight");
  cJSON_Delete(cfg);

  s = base;
  s.workspace = NULL;
  cfg = bundle_config(&s, &err);
  ok(cfg == NULL && err != NULL, "an incomplete spec is refused");
  cJSON_Delete(cfg);
  mcp_error_release(&err);
}

static void write_tests(const char *dir) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  mcp_error_t err = NULL;
  is_int(bundle_write(dfd, &base, &err), 0, "bundle_write");
  char *text = NULL;
  size_t len = 0;
  is_int(read_file_at(dfd, "config.json", 1 << 20, &text, &len, &err), 0, "config.json is there");
  cJSON *written = cJSON_ParseWithLength(text, len);
  cJSON *expected = bundle_config(&base, &err);
  ok(written != NULL && cJSON_Compare(written, expected, 1), "config.json is bundle_config's output");
  struct stat st;
  ok(fstatat(dfd, "config.json", &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & 0777) == 0600, "mode 0600");
  cJSON_Delete(written);
  cJSON_Delete(expected);
  free(text);
  close(dfd);
}

static char *read_text(const char *root, const char *name) {
  int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  char *text = NULL;
  mcp_error_t err = NULL;
  if (read_file_at(dfd, name, 1 << 16, &text, NULL, &err) < 0)
    mcp_error_release(&err);
  close(dfd);
  return text;
}

static bool exists(const char *root, const char *name, mode_t type) {
  char p[4096];
  snprintf(p, sizeof(p), "%s/%s", root, name);
  struct stat st;
  return lstat(p, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

static void rootfs_tests(const char *tmp) {
  char root[2048];
  snprintf(root, sizeof(root), "%s/state/rootfs", tmp);
  mcp_error_t err = NULL;
  is_int(rootfs_prepare(root, 1234, 2345, &err), 0, "rootfs_prepare creates the skeleton and its parents");
  if (err != NULL)
    diag("%s", err->msg);
  static const char *const dirs[] = {"usr", "etc", "work", "tmp", "dev", "proc", "sys", "opt/mcp", "opt/mcp/executor",
                                     "root"};
  for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
    ok(exists(root, dirs[i], S_IFDIR), "mount point %s/ exists", dirs[i]);
  static const char *const links[][2] = {
      {"bin", "usr/bin"}, {"lib", "usr/lib"}, {"lib64", "usr/lib64"}, {"sbin", "usr/sbin"}, {"lib32", "usr/lib32"}};
  for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
    char p[4096], target[256] = "";
    snprintf(p, sizeof(p), "%s/%s", root, links[i][0]);
    ssize_t n = readlink(p, target, sizeof(target) - 1);
    if (n >= 0)
      target[n] = '\0';
    is_str(target, links[i][1], "usr-merge link %s", links[i][0]);
  }
  ok(exists(root, "opt/mcp/libmcpstatx.so", S_IFREG), "preload mount point is a file");

  char *passwd = read_text(root, "etc/passwd");
  like(passwd, "\nsandbox:x:1234:2345:sandbox:/work:/bin/sh\n", "passwd names the sandbox uid and gid");
  like(passwd, "root:x:0:0:", "passwd has root");
  char *group = read_text(root, "etc/group");
  like(group, "\nsandbox:x:2345:\n", "group names the sandbox gid");
  char *hosts = read_text(root, "etc/hosts");
  like(hosts, "127.0.0.1\tlocalhost", "hosts");
  char *hostname = read_text(root, "etc/hostname");
  is_str(hostname, "sandbox\n", "hostname");
  free(group);
  free(hosts);
  free(hostname);

  /* Every mount destination outside /dev exists in the skeleton: runsc
   * would otherwise create it, on the host, inside root.path. */
  struct bundle_spec s = base;
  s.rootfs = root;
  s.preload_lib = "/x/libmcpstatx.so";
  cJSON *cfg = bundle_config(&s, &err);
  const cJSON *m;
  int missing = 0;
  cJSON_ArrayForEach(m, get(cfg, "mounts")) {
    const char *d = str(m, "destination");
    if (d == NULL || strncmp(d, "/dev/", 5) == 0)
      continue;
    struct stat st;
    char p[4096];
    snprintf(p, sizeof(p), "%s%s", root, d);
    if (lstat(p, &st) < 0) {
      diag("mount point %s is missing from the skeleton", d);
      missing++;
    }
  }
  is_int(missing, 0, "every mount destination exists in the skeleton");
  cJSON_Delete(cfg);

  /* A second run changes nothing. */
  struct stat before, after;
  char pw[4096];
  snprintf(pw, sizeof(pw), "%s/etc/passwd", root);
  stat(pw, &before);
  is_int(rootfs_prepare(root, 1234, 2345, &err), 0, "a second run succeeds");
  stat(pw, &after);
  ok(before.st_ino == after.st_ino, "and leaves an unchanged passwd alone");
  char *again = read_text(root, "etc/passwd");
  is_str(again, passwd, "with the same content");
  free(again);
  free(passwd);

  /* A changed uid rewrites it. */
  is_int(rootfs_prepare(root, 4321, 5432, &err), 0, "a run with another uid");
  passwd = read_text(root, "etc/passwd");
  like(passwd, "\nsandbox:x:4321:5432:", "passwd follows the new uid");
  free(passwd);

  /* A wrong link is replaced. */
  char bin[4096], target[256] = "";
  snprintf(bin, sizeof(bin), "%s/bin", root);
  unlink(bin);
  if (symlink("/somewhere/else", bin) < 0)
    diag("symlink: %s", strerror(errno));
  is_int(rootfs_prepare(root, 4321, 5432, &err), 0, "a run over a wrong link");
  ssize_t n = readlink(bin, target, sizeof(target) - 1);
  if (n >= 0)
    target[n] = '\0';
  is_str(target, "usr/bin", "the link is corrected");
  mcp_error_release(&err);
}

static mode_t mode_of(const char *root, const char *name) {
  char p[4096];
  snprintf(p, sizeof(p), "%s/%s", root, name);
  struct stat st;
  return lstat(p, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

/* The sandbox user must traverse the skeleton whatever umask the service
 * was started with. */
static void umask_tests(const char *tmp) {
  char root[2048];
  snprintf(root, sizeof(root), "%s/strict/rootfs", tmp);
  mode_t old = umask(077);
  mcp_error_t err = NULL;
  is_int(rootfs_prepare(root, 1234, 2345, &err), 0, "rootfs_prepare under umask 077");
  umask(old);
  mcp_error_release(&err);
  is_int(mode_of(root, "."), 0755, "the root is 0755");
  static const char *const dirs[] = {"etc", "usr", "opt", "opt/mcp", "opt/mcp/executor", "work", "tmp"};
  for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
    is_int(mode_of(root, dirs[i]), 0755, "%s/ is 0755", dirs[i]);
  is_int(mode_of(root, "etc/passwd"), 0644, "etc/passwd is 0644");
  is_int(mode_of(root, "etc/group"), 0644, "etc/group is 0644");
  is_int(mode_of(root, "etc/hosts"), 0644, "etc/hosts is 0644");
  struct stat st;
  if (stat("/etc/ssl/certs", &st) == 0 && S_ISDIR(st.st_mode))
    is_int(mode_of(root, "etc/ssl/certs"), 0755, "etc/ssl/certs/ is 0755");
  ok(!exists(root, "etc/ssl/private", S_IFDIR), "no mount point for /etc/ssl/private");
}

int main(void) {
  mcp_error_t err = NULL;
  setenv("MCP_UNIT_SECRET", "token", 1);
  cJSON *cfg = bundle_config(&base, &err);
  if (cfg == NULL)
    bail_out("bundle_config failed");
  process_tests(cfg);
  mount_tests(cfg);
  linux_tests(cfg);
  cJSON_Delete(cfg);
  variant_tests();

  const char *t = getenv("TMPDIR");
  char tmp[1024];
  snprintf(tmp, sizeof(tmp), "%s/mcp-bundle-XXXXXX", t && *t ? t : "/tmp");
  if (mkdtemp(tmp) == NULL)
    bail_out("mkdtemp");
  write_tests(tmp);
  rootfs_tests(tmp);
  umask_tests(tmp);
  int dfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  remove_tree_at(dfd, tmp + 1, &err);
  close(dfd);
  return done_testing();
}
