#include "config.h"

#include "common/util.h"
#include "sandbox/bundle.h"
#include "sandbox/seccomp_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

/* Entries of the host's /etc that Python and its libraries read.  Bound
 * read-only when the host has them; passwd/group/hosts are generated
 * instead so no host account names leak into the sandbox. */
static const char *const etc_entries[] = {
    "ld.so.cache",                   /* the dynamic loader's cache */
    "nsswitch.conf",                 /* getpwuid() and friends */
    "localtime",                     /* time.localtime() */
    "ssl/certs",                     /* CA certificates (libraries load them); not ssl/private */
    "alternatives",                  /* numpy's BLAS and LAPACK are reached through /etc/alternatives */
    "python3",                       /* Debian's sitecustomize */
    "python3.11",    "matplotlibrc", /* Debian moves matplotlib's rc file here */
    "fonts",                         /* fontconfig, for matplotlib text */
    "mime.types",                    /* the mimetypes module */
};

static int add_mount(cJSON *mounts, const char *dst, const char *type, const char *src, const char *const *opts) {
  cJSON *m = cJSON_CreateObject();
  if (m == NULL)
    return -1;
  cJSON_AddItemToArray(mounts, m);
  if (!cJSON_AddStringToObject(m, "destination", dst) || !cJSON_AddStringToObject(m, "type", type) ||
      !cJSON_AddStringToObject(m, "source", src))
    return -1;
  if (opts != NULL) {
    cJSON *o = cJSON_AddArrayToObject(m, "options");
    if (o == NULL)
      return -1;
    for (; *opts; opts++)
      cJSON_AddItemToArray(o, cJSON_CreateString(*opts));
  }
  return 0;
}

static int add_bind_ro(cJSON *mounts, const char *dst, const char *src) {
  static const char *const ro[] = {"rbind", "ro", "nosuid", "nodev", NULL};
  return add_mount(mounts, dst, "bind", src, ro);
}

static int add_tmpfs(cJSON *mounts, const char *dst, uint64_t size) {
  char sz[64];
  snprintf(sz, sizeof(sz), "size=%llu", (unsigned long long)size);
  const char *opts[] = {"nosuid", "nodev", "mode=1777", sz, NULL};
  return add_mount(mounts, dst, "tmpfs", "tmpfs", opts);
}

static int add_rlimit(cJSON *arr, const char *type, uint64_t soft, uint64_t hard) {
  cJSON *r = cJSON_CreateObject();
  if (r == NULL)
    return -1;
  cJSON_AddItemToArray(arr, r);
  if (!cJSON_AddStringToObject(r, "type", type) || !cJSON_AddNumberToObject(r, "soft", (double)soft) ||
      !cJSON_AddNumberToObject(r, "hard", (double)hard))
    return -1;
  return 0;
}

static int build_process(cJSON *root, const struct bundle_spec *s) {
  cJSON *p = cJSON_AddObjectToObject(root, "process");
  if (p == NULL)
    return -1;
  cJSON_AddBoolToObject(p, "terminal", 0);
  /* The executor is the sandbox's PID 1 and runs as root inside gVisor with
   * only the capabilities it needs to start each call as the unprivileged
   * user: gVisor does not protect PID 1 from SIGKILL sent inside the
   * sandbox, so a same-uid executor could be killed by the code it runs. */
  cJSON *user = cJSON_AddObjectToObject(p, "user");
  cJSON_AddNumberToObject(user, "uid", 0);
  cJSON_AddNumberToObject(user, "gid", 0);
  cJSON *args = cJSON_AddArrayToObject(p, "args");
  cJSON_AddItemToArray(args, cJSON_CreateString(s->python));
  cJSON_AddItemToArray(args, cJSON_CreateString("-I"));
  cJSON_AddItemToArray(args, cJSON_CreateString("-B"));
  cJSON_AddItemToArray(args, cJSON_CreateString(SANDBOX_EXECUTOR));
  char uid[32], gid[32];
  snprintf(uid, sizeof(uid), "--uid=%d", s->uid);
  snprintf(gid, sizeof(gid), "--gid=%d", s->gid);
  cJSON_AddItemToArray(args, cJSON_CreateString(uid));
  cJSON_AddItemToArray(args, cJSON_CreateString(gid));
  if (s->preload_lib != NULL)
    cJSON_AddItemToArray(args, cJSON_CreateString("--statx-fix"));
  if (s->learn_modules != NULL && *s->learn_modules) {
    char mods[600];
    snprintf(mods, sizeof(mods), "--learn=%s", s->learn_modules);
    cJSON_AddItemToArray(args, cJSON_CreateString(mods));
  }
  if (s->preload_modules != NULL && *s->preload_modules) {
    char mods[600];
    snprintf(mods, sizeof(mods), "--preload=%s", s->preload_modules);
    cJSON_AddItemToArray(args, cJSON_CreateString(mods));
  }
  /* The executor needs no environment (each call's is built from scratch),
   * and gVisor lets the calls read /proc/1/environ: keep it empty.  Python
   * starts in UTF-8 mode under the C locale by itself (PEP 538/540). */
  cJSON_AddArrayToObject(p, "env");
  cJSON_AddStringToObject(p, "cwd", "/");
  cJSON_AddBoolToObject(p, "noNewPrivileges", 1);
  cJSON *caps = cJSON_AddObjectToObject(p, "capabilities");
  static const char *const sets[] = {"bounding", "effective", "permitted"};
  static const char *const needed[] = {"CAP_SETUID", "CAP_SETGID", "CAP_KILL"};
  for (size_t i = 0; i < ARRAY_SIZE(sets); i++) {
    cJSON *a = cJSON_AddArrayToObject(caps, sets[i]);
    for (size_t j = 0; j < ARRAY_SIZE(needed); j++)
      cJSON_AddItemToArray(a, cJSON_CreateString(needed[j]));
  }
  cJSON_AddArrayToObject(caps, "inheritable");
  cJSON_AddArrayToObject(caps, "ambient");
  /* Generous ceilings for the executor; it lowers them for each call. */
  cJSON *rl = cJSON_AddArrayToObject(p, "rlimits");
  if (rl == NULL || add_rlimit(rl, "RLIMIT_NOFILE", (uint64_t)s->nofile, (uint64_t)s->nofile) < 0 ||
      add_rlimit(rl, "RLIMIT_CORE", 0, 0) < 0)
    return -1;
  return 0;
}

static int build_mounts(cJSON *root, const struct bundle_spec *s) {
  cJSON *m = cJSON_AddArrayToObject(root, "mounts");
  if (m == NULL)
    return -1;
  static const char *const sysopts[] = {"nosuid", "noexec", "nodev", "ro", NULL};
  static const char *const rw[] = {"rbind", "rw", "nosuid", "nodev", NULL};
  if (add_mount(m, "/proc", "proc", "proc", NULL) < 0 || add_mount(m, "/dev", "tmpfs", "tmpfs", NULL) < 0 ||
      add_mount(m, "/sys", "sysfs", "sysfs", sysopts) < 0 || add_tmpfs(m, "/tmp", s->tmp_size) < 0 ||
      add_tmpfs(m, "/dev/shm", s->shm_size) < 0 || add_bind_ro(m, "/usr", "/usr") < 0)
    return -1;
  for (size_t i = 0; i < ARRAY_SIZE(etc_entries); i++) {
    char src[PATH_MAX];
    snprintf(src, sizeof(src), "/etc/%s", etc_entries[i]);
    struct stat st;
    /* A host symlink (localtime) is recreated in the skeleton instead. */
    if (lstat(src, &st) < 0 || S_ISLNK(st.st_mode))
      continue;
    if (add_bind_ro(m, src, src) < 0)
      return -1;
  }
  if (add_bind_ro(m, SANDBOX_EXECUTOR, s->executor) < 0)
    return -1;
  if (s->preload_lib != NULL && add_bind_ro(m, SANDBOX_PRELOAD, s->preload_lib) < 0)
    return -1;
  /* What the host resolved for this session's calls: its own folder,
   * never another session's, never writable inside (the host adds each
   * call's folder while the sandbox runs: a bind mount shows that). */
  if (s->packages != NULL && add_bind_ro(m, SANDBOX_PACKAGES, s->packages) < 0)
    return -1;
  /* Read-only: the host puts the egress relay's socket there (connecting
   * to it needs runsc --host-uds=open), the sandbox changes nothing. */
  if (s->egress != NULL && add_bind_ro(m, SANDBOX_EGRESS, s->egress) < 0)
    return -1;
  /* The workspace stays a plain bind mount with runsc's default (shared)
   * file access: an overlay would keep the files in sandbox memory only. */
  return add_mount(m, SANDBOX_WORKDIR, "bind", s->workspace, rw);
}

static int build_linux(cJSON *root, const struct bundle_spec *s) {
  cJSON *l = cJSON_AddObjectToObject(root, "linux");
  if (l == NULL)
    return -1;
  cJSON *ns = cJSON_AddArrayToObject(l, "namespaces");
  static const char *const kinds[] = {"pid", "network", "ipc", "uts", "mount"};
  for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
    cJSON *n = cJSON_CreateObject();
    cJSON_AddStringToObject(n, "type", kinds[i]);
    cJSON_AddItemToArray(ns, n);
  }
  if (s->seccomp) {
    mcp_error_t err = NULL;
    cJSON *sc = seccomp_policy(&err);
    if (sc == NULL) {
      mcp_error_log_release(&err, "bundle");
      return -1;
    }
    cJSON_AddItemToObject(l, "seccomp", sc);
  }
  if (s->cgroups_path != NULL) {
    cJSON_AddStringToObject(l, "cgroupsPath", s->cgroups_path);
    cJSON *res = cJSON_AddObjectToObject(l, "resources");
    if (s->memory_backstop > 0) {
      cJSON *mem = cJSON_AddObjectToObject(res, "memory");
      cJSON_AddNumberToObject(mem, "limit", (double)s->memory_backstop);
    }
    if (s->pids_backstop > 0) {
      cJSON *pids = cJSON_AddObjectToObject(res, "pids");
      cJSON_AddNumberToObject(pids, "limit", (double)s->pids_backstop);
    }
    if (s->cpu_shares > 0) {
      cJSON *cpu = cJSON_AddObjectToObject(res, "cpu");
      cJSON_AddNumberToObject(cpu, "shares", (double)s->cpu_shares);
    }
  }
  return 0;
}

cJSON *bundle_config(const struct bundle_spec *s, mcp_error_t *err) {
  if (s->rootfs == NULL || s->workspace == NULL || s->executor == NULL || s->python == NULL) {
    mcp_fail(err, MCP_ERR_INTERNAL, EINVAL, "incomplete bundle specification");
    return NULL;
  }
  cleanup_cjson cJSON *root = cJSON_CreateObject();
  if (root == NULL || !cJSON_AddStringToObject(root, "ociVersion", "1.0.2") ||
      !cJSON_AddStringToObject(root, "hostname", "sandbox")) {
    mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "bundle configuration");
    return NULL;
  }
  cJSON *r = cJSON_AddObjectToObject(root, "root");
  cJSON_AddStringToObject(r, "path", s->rootfs);
  cJSON_AddBoolToObject(r, "readonly", 1);
  if (build_process(root, s) < 0 || build_mounts(root, s) < 0 || build_linux(root, s) < 0) {
    mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "bundle configuration");
    return NULL;
  }
  return steal_pointer(&root);
}

int bundle_write(int dirfd, const struct bundle_spec *spec, mcp_error_t *err) {
  cleanup_cjson cJSON *cfg = bundle_config(spec, err);
  if (cfg == NULL)
    return -1;
  cleanup_free char *text = cJSON_PrintUnformatted(cfg);
  if (text == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "print bundle configuration");
  return write_file_atomic(dirfd, "config.json", text, strlen(text), 0600, err);
}

/* Create path as an empty file (mount point) when missing. */
static int touch_at(int dirfd, const char *name, mcp_error_t *err) {
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "create mount point `%s`", name);
  int r = fchmod(fd, 0644);
  close(fd);
  if (r < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "chmod `%s`", name);
  return 0;
}

/* Modes are set explicitly: the sandbox user must traverse the skeleton
 * whatever umask the service was started with. */
static int mkdir_at(int dirfd, const char *name, mode_t mode, mcp_error_t *err) {
  if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir `%s`", name);
  if (fchmodat(dirfd, name, mode, 0) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "chmod `%s`", name);
  return 0;
}

static int symlink_at(int dirfd, const char *target, const char *name, mcp_error_t *err) {
  char cur[PATH_MAX];
  ssize_t n = readlinkat(dirfd, name, cur, sizeof(cur) - 1);
  if (n >= 0) {
    cur[n] = '\0';
    if (strcmp(cur, target) == 0)
      return 0;
    unlinkat(dirfd, name, 0);
  }
  if (symlinkat(target, dirfd, name) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "symlink `%s`", name);
  return 0;
}

static int write_if_changed(int dirfd, const char *name, const char *text, mcp_error_t *err) {
  cleanup_free char *cur = NULL;
  mcp_error_t ignored = NULL;
  if (read_file_at(dirfd, name, 1 << 16, &cur, NULL, &ignored) == 0 && strcmp(cur, text) == 0) {
    /* Same content: still repair the mode an older version may have left. */
    if (fchmodat(dirfd, name, 0644, 0) < 0)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "chmod `%s`", name);
    return 0;
  }
  mcp_error_release(&ignored);
  return write_file_atomic(dirfd, name, text, strlen(text), 0644, err);
}

int rootfs_prepare(const char *path, int uid, int gid, mcp_error_t *err) {
  if (mkdir_p(path, 0755, err) < 0)
    return -1;
  cleanup_close int root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (root < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open `%s`", path);
  if (fchmod(root, 0755) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "chmod `%s`", path);
  /* Mount points among them: the executor's folder, the session's packages,
   * the egress folder. */
  static const char *const dirs[] = {"usr",
                                     "etc",
                                     "work",
                                     "tmp",
                                     "dev",
                                     "proc",
                                     "sys",
                                     "opt",
                                     "opt/mcp",
                                     "opt/mcp/executor",
                                     "opt/mcp/packages",
                                     "opt/mcp/egress",
                                     "root"};
  for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
    if (mkdir_at(root, dirs[i], 0755, err) < 0)
      return -1;
  /* The mount points of the caches all sessions shared before (empty). */
  unlinkat(root, "opt/mcp/wheels", AT_REMOVEDIR);
  unlinkat(root, "opt/mcp/npm", AT_REMOVEDIR);
  static const char *const links[][2] = {
      {"usr/bin", "bin"}, {"usr/lib", "lib"}, {"usr/lib64", "lib64"}, {"usr/sbin", "sbin"}, {"usr/lib32", "lib32"}};
  for (size_t i = 0; i < ARRAY_SIZE(links); i++)
    if (symlink_at(root, links[i][0], links[i][1], err) < 0)
      return -1;
  if (touch_at(root, "opt/mcp/libmcpstatx.so", err) < 0)
    return -1;
  if (mkdir_at(root, "etc/ssl", 0755, err) < 0)
    return -1;
  for (size_t i = 0; i < ARRAY_SIZE(etc_entries); i++) {
    char host[PATH_MAX], inside[PATH_MAX];
    snprintf(host, sizeof(host), "/etc/%s", etc_entries[i]);
    snprintf(inside, sizeof(inside), "etc/%s", etc_entries[i]);
    struct stat st;
    if (lstat(host, &st) < 0)
      continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlink(host, target, sizeof(target) - 1);
      if (n < 0)
        continue;
      target[n] = '\0';
      if (symlink_at(root, target, inside, err) < 0)
        return -1;
    } else if (S_ISDIR(st.st_mode)) {
      if (mkdir_at(root, inside, 0755, err) < 0)
        return -1;
    } else if (touch_at(root, inside, err) < 0) {
      return -1;
    }
  }
  char passwd[512], group[256];
  snprintf(passwd, sizeof(passwd),
           "root:x:0:0:root:/root:/usr/sbin/nologin\n"
           "sandbox:x:%d:%d:sandbox:" SANDBOX_WORKDIR ":/bin/sh\n"
           "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
           uid, gid);
  snprintf(group, sizeof(group), "root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", gid);
  if (write_if_changed(root, "etc/passwd", passwd, err) < 0 || write_if_changed(root, "etc/group", group, err) < 0 ||
      write_if_changed(root, "etc/hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost\n", err) < 0 ||
      write_if_changed(root, "etc/hostname", "sandbox\n", err) < 0)
    return -1;
  return 0;
}
