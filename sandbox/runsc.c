#include "config.h"

#include "common/proc.h"
#include "common/util.h"
#include "sandbox/backend.h"
#include "sandbox/bundle.h"
#include "sandbox/cgroups.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define RUNSC_TIMEOUT_MS 30000
/* Writing or reading a checkpoint image takes longer than other commands
 * (~150 ms to 3 s for a sandbox with numpy and pandas loaded; more for a
 * large heap), but must not hold a supervisor for ever either. */
#define RUNSC_IMAGE_TIMEOUT_MS 60000

int runsc_cmdline_init(struct runsc_cmdline *c, const struct mcp_config *cfg) {
  memset(&c->argv, 0, sizeof(c->argv));
  if (snprintf(c->root, sizeof(c->root), "--root=%s/runsc", cfg->state_dir) >= (int)sizeof(c->root) ||
      snprintf(c->platform, sizeof(c->platform), "--platform=%s", cfg->runsc_platform) >= (int)sizeof(c->platform))
    return -ENAMETOOLONG;
  argv_add(&c->argv, cfg->runsc);
  argv_add(&c->argv, c->root);
  argv_add(&c->argv, "--network=none");
  /* The sandbox may connect to host unix sockets under its bind mounts:
   * the only one there is the egress relay's (sandbox/egress.h), bound in
   * the session's egress folder while a call has egress.  Always given,
   * so that every command of every container has the same flags. */
  argv_add(&c->argv, "--host-uds=open");
  argv_add(&c->argv, "--oci-seccomp"); /* load the bundle's seccomp policy inside */
  /* gVisor's own cgroupfs at /sys/fs/cgroup inside (not the host's): the
   * executor puts each activity (a call, a background run, a persistent
   * interpreter) in a cgroup of its own, to end exactly its processes
   * (executor/mcp_executor/cgroups.py). */
  argv_add(&c->argv, "--cgroupfs");
  argv_add(&c->argv, c->platform);
  /* Without a parent cgroup, runsc must not create per-container ones. */
  if (cfg->cgroup_parent[0] == '\0')
    argv_add(&c->argv, "--ignore-cgroups");
  return c->argv.oom ? -ENOMEM : 0;
}

/* Only a process that is a subreaper for the sandbox (the supervisor) may
 * reap every child; others (the keeper) must not steal their children. */
static bool reap_orphans;

void runsc_set_reaper(bool on) { reap_orphans = on; }

static int runsc_cmd_timed(const struct mcp_config *cfg, const char *const *sub, int in, int out, bool quiet,
                           int64_t timeout_ms, int *status, mcp_error_t *err) {
  struct runsc_cmdline c;
  int r = runsc_cmdline_init(&c, cfg);
  for (; r == 0 && *sub; sub++)
    argv_add(&c.argv, *sub);
  if (r < 0 || c.argv.oom) {
    argv_free(&c.argv);
    return mcp_fail(err, MCP_ERR_INTERNAL, r < 0 ? -r : ENOMEM, "runsc command line");
  }
  cleanup_close int devnull = quiet ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
  struct proc_opts o = {.argv = c.argv.v,
                        .stdin_fd = in,
                        .stdout_fd = out,
                        .stderr_fd = devnull,
                        .timeout_ms = timeout_ms,
                        .reap_orphans = reap_orphans};
  r = run_process(&o, status, err);
  argv_free(&c.argv);
  return r;
}

static int runsc_cmd(const struct mcp_config *cfg, const char *const *sub, int in, int out, bool quiet, int *status,
                     mcp_error_t *err) {
  return runsc_cmd_timed(cfg, sub, in, out, quiet, RUNSC_TIMEOUT_MS, status, err);
}

/* runsc keeps <root>/<id>_sandbox:<id>.state while a container exists. */
bool runsc_container_exists(const struct mcp_config *cfg, const char *cid) {
  char path[PATH_MAX];
  int n = snprintf(path, sizeof(path), "%s/runsc/%s_sandbox:%s.state", cfg->state_dir, cid, cid);
  return n > 0 && (size_t)n < sizeof(path) && access(path, F_OK) == 0;
}

int runsc_remove(const struct mcp_config *cfg, const char *cid, mcp_error_t *err) {
  if (!runsc_container_exists(cfg, cid))
    return cgroups_remove(cfg, cid, err);
  /* `delete --force` kills a sandbox that still runs (SIGKILL to its
   * processes from the host) and removes it: no `kill` before it. */
  const char *del_args[] = {"delete", "--force", cid, NULL};
  int st = 0;
  if (runsc_cmd(cfg, del_args, -1, -1, false, &st, err) < 0)
    return mcp_error_wrap(err, -1, "runsc delete %s", cid);
  if (st != 0 && runsc_container_exists(cfg, cid))
    return mcp_fail(err, MCP_ERR_INTERNAL, 0, "runsc delete %s exited with %d", cid, status_to_exit_code(st));
  /* runsc leaves the cgroups of a sandbox whose create failed. */
  return cgroups_remove(cfg, cid, err);
}

/* Which boot and which PID namespace this is:
 * "<boot id> <pid ns inode> <start time of its PID 1>". */
static int incarnation(char *out, size_t size, mcp_error_t *err) {
  char boot[64];
  ssize_t len = read_kernel_file("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
  if (len <= 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, len < 0 ? (int)-len : EPROTO, "read /proc/sys/kernel/random/boot_id");
  while (len > 0 && (boot[len - 1] == '\n' || boot[len - 1] == ' '))
    len--;
  boot[len] = '\0';
  struct stat ns;
  if (stat("/proc/self/ns/pid", &ns) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "stat /proc/self/ns/pid");
  /* The kernel hands a freed namespace's inode number to the next one (a
   * container started again often gets the same): the start time of the
   * namespace's PID 1 tells them apart. */
  char st[1024];
  ssize_t n = read_kernel_file("/proc/1/stat", st, sizeof(st));
  if (n <= 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, n < 0 ? (int)-n : EPROTO, "read /proc/1/stat");
  /* After "pid (comm) ", the start time is the 20th field (22nd of stat). */
  const char *p = strrchr(st, ')');
  unsigned long long started = 0;
  if (p == NULL ||
      sscanf(p + 2, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", &started) != 1)
    return mcp_fail(err, MCP_ERR_INTERNAL, EPROTO, "/proc/1/stat: no start time");
  snprintf(out, size, "%s %llu %llu", boot, (unsigned long long)ns.st_ino, started);
  return 0;
}

int runsc_forget_stale(const struct mcp_config *cfg, mcp_error_t *err) {
  char root[PATH_MAX], mark[PATH_MAX], now[128];
  if (config_path(cfg, root, sizeof(root), "runsc") < 0 || config_path(cfg, mark, sizeof(mark), RUNSC_INCARNATION) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "the runsc state folder's path");
  if (incarnation(now, sizeof(now), err) < 0)
    return -1;
  cleanup_free char *was = NULL;
  mcp_error_t missing = NULL;
  bool known = read_file_at(AT_FDCWD, mark, sizeof(now), &was, NULL, &missing) == 0;
  mcp_error_release(&missing);
  if (known && strcmp(was, now) != 0) {
    cleanup_dir DIR *d = opendir(root);
    int removed = 0;
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
        continue;
      mcp_error_t e = NULL;
      if (remove_tree_at(dirfd(d), de->d_name, &e) < 0)
        mcp_error_log_release(&e, "mcp-server: stale runsc state");
      else
        removed++;
    }
    if (removed > 0)
      fprintf(stderr,
              "mcp-server: removed %d entries of runsc state from an earlier boot or container (%s, now %s) without "
              "signalling the processes they name: those sandboxes are gone, and their PIDs are other processes' now\n",
              removed, was, now);
  }
  /* A state folder without the file (made before it existed): its
   * containers are reaped as before, and the next start knows. */
  int dfd = open(cfg->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open %s", cfg->state_dir);
  int r = write_file_atomic(dfd, RUNSC_INCARNATION, now, strlen(now), 0600, err);
  close(dfd);
  return r;
}

static int write_bundle(struct sandbox_ctx *ctx, char *bundle, size_t size, mcp_error_t *err) {
  const struct mcp_config *cfg = ctx->cfg;
  char rootfs[PATH_MAX], workspace[PATH_MAX], executor[PATH_MAX], preload[PATH_MAX], cgpath[256];
  char packages[PATH_MAX], egress[PATH_MAX];
  if (snprintf(bundle, size, "%s/bundle", ctx->dir) >= (int)size ||
      snprintf(rootfs, sizeof(rootfs), "%s/rootfs", cfg->state_dir) >= (int)sizeof(rootfs) ||
      snprintf(workspace, sizeof(workspace), "%s/work", ctx->dir) >= (int)sizeof(workspace) ||
      snprintf(executor, sizeof(executor), "%s/executor", cfg->libexec_dir) >= (int)sizeof(executor) ||
      snprintf(preload, sizeof(preload), "%s/libmcpstatx.so", cfg->libexec_dir) >= (int)sizeof(preload) ||
      snprintf(packages, sizeof(packages), "%s/" SESSION_PACKAGES_DIR, ctx->dir) >= (int)sizeof(packages) ||
      snprintf(egress, sizeof(egress), "%s/egress", ctx->dir) >= (int)sizeof(egress))
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "bundle paths");
  /* The session's packages folder (root's; each call's resolved packages
   * come and go in it while the sandbox runs). */
  if (mkdir(packages, 0755) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir `%s`", packages);
  cleanup_close int pfd = open(packages, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (pfd < 0 || fchmod(pfd, 0755) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open `%s`", packages);
  if (mkdir(bundle, 0700) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir `%s`", bundle);
  cleanup_close int bfd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (bfd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open `%s`", bundle);
  struct bundle_spec spec = {
      .rootfs = rootfs,
      .workspace = workspace,
      .executor = executor,
      .preload_lib = access(preload, R_OK) == 0 ? preload : NULL,
      .packages = packages,
      .egress = cfg->egress_proxy[0] != '\0' && access(egress, R_OK) == 0 ? egress : NULL,
      .python = cfg->python,
      .preload_modules = cfg->preload_modules,
      .learn_modules = cfg->learn_modules,
      .uid = cfg->sandbox_uid,
      .gid = cfg->sandbox_gid,
      .tmp_size = cfg->tmp_size,
      .shm_size = cfg->shm_size,
      .nofile = cfg->nofile_limit > 4096 ? cfg->nofile_limit : 4096,
      .seccomp = true,
  };
  if (cfg->cgroup_parent[0] != '\0') {
    snprintf(cgpath, sizeof(cgpath), "/%s/%s", cfg->cgroup_parent, ctx->container_id);
    spec.cgroups_path = cgpath;
    spec.memory_backstop = cgroups_sandbox_memory(cfg);
    spec.pids_backstop = cfg->sandbox_pids;
    spec.cpu_shares = ctx->cpu_shares;
  }
  return bundle_write(bfd, &spec, err);
}

static int runsc_start(struct sandbox_ctx *ctx, int stdin_fd, int stdout_fd, mcp_error_t *err) {
  char bundle[PATH_MAX];
  if (write_bundle(ctx, bundle, sizeof(bundle), err) < 0)
    return -1;
  if (runsc_remove(ctx->cfg, ctx->container_id, err) < 0)
    return -1;
  /* With terminal:false runsc hands our fds 0/1 to the sandbox's PID 1;
   * stderr (the executor's own diagnostics) goes to our log.  `run
   * --detach` is create and start in one runsc process (each runsc command
   * costs about 30 ms of CPU by itself). */
  const char *run[] = {"run", "--detach", "--bundle", bundle, ctx->container_id, NULL};
  int st = 0;
  if (runsc_cmd(ctx->cfg, run, stdin_fd, stdout_fd, false, &st, err) < 0)
    return mcp_error_wrap(err, -1, "runsc run");
  if (st != 0)
    return mcp_fail(err, MCP_ERR_SANDBOX, 0, "runsc run %s exited with %d", ctx->container_id, status_to_exit_code(st));
  return 0;
}

static int runsc_destroy(struct sandbox_ctx *ctx, mcp_error_t *err) {
  return runsc_remove(ctx->cfg, ctx->container_id, err);
}

/* `checkpoint` without --leave-running (broken in this build, GVISOR.md):
 * the sandbox stops once its image is written. */
static int runsc_checkpoint(struct sandbox_ctx *ctx, const char *image_dir, mcp_error_t *err) {
  char image[PATH_MAX + 16];
  if (snprintf(image, sizeof(image), "--image-path=%s", image_dir) >= (int)sizeof(image))
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "image path");
  const char *args[] = {"checkpoint", image, ctx->container_id, NULL};
  int st = 0;
  if (runsc_cmd_timed(ctx->cfg, args, -1, -1, false, RUNSC_IMAGE_TIMEOUT_MS, &st, err) < 0)
    return mcp_error_wrap(err, -1, "runsc checkpoint");
  if (st != 0)
    return mcp_fail(err, MCP_ERR_SANDBOX, 0, "runsc checkpoint %s exited with %d", ctx->container_id,
                    status_to_exit_code(st));
  return 0;
}

/* The bundle is written again with the folder's current paths (a session
 * folder moved from pool/ since the sandbox was created; after a reboot the
 * same paths hold new mounts): runsc restores into any bundle whose mounts
 * match the image's. */
static int runsc_restore(struct sandbox_ctx *ctx, const char *image_dir, int stdin_fd, int stdout_fd,
                         mcp_error_t *err) {
  char bundle[PATH_MAX], image[PATH_MAX + 16];
  if (snprintf(image, sizeof(image), "--image-path=%s", image_dir) >= (int)sizeof(image))
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "image path");
  if (write_bundle(ctx, bundle, sizeof(bundle), err) < 0)
    return -1;
  if (runsc_remove(ctx->cfg, ctx->container_id, err) < 0)
    return -1;
  /* --detach: return once the sandbox runs, as create + start do. */
  const char *args[] = {"restore", "--detach", image, "--bundle", bundle, ctx->container_id, NULL};
  int st = 0;
  if (runsc_cmd_timed(ctx->cfg, args, stdin_fd, stdout_fd, false, RUNSC_IMAGE_TIMEOUT_MS, &st, err) < 0)
    return mcp_error_wrap(err, -1, "runsc restore");
  if (st != 0)
    return mcp_fail(err, MCP_ERR_SANDBOX, 0, "runsc restore %s exited with %d", ctx->container_id,
                    status_to_exit_code(st));
  return 0;
}

const struct sandbox_ops sandbox_runsc_ops = {
    .name = "runsc",
    .start = runsc_start,
    .destroy = runsc_destroy,
    .checkpoint = runsc_checkpoint,
    .restore = runsc_restore,
};

const struct sandbox_ops *sandbox_ops_for(const char *name) {
  if (strcmp(name, "direct") == 0)
    return &sandbox_direct_ops;
  return &sandbox_runsc_ops;
}

int sandbox_ctx_init(struct sandbox_ctx *ctx, const struct mcp_config *cfg, const char *id, const char *dir,
                     mcp_error_t *err) {
  memset(ctx, 0, sizeof(*ctx));
  ctx->cfg = cfg;
  ctx->pid = -1;
  if (!is_hex32(id))
    return mcp_fail(err, MCP_ERR_INTERNAL, EINVAL, "bad sandbox id");
  memcpy(ctx->id, id, 33);
  snprintf(ctx->container_id, sizeof(ctx->container_id), "mcp%s", id);
  if (snprintf(ctx->dir, sizeof(ctx->dir), "%s", dir) >= (int)sizeof(ctx->dir))
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "session folder path");
  return 0;
}

pid_t runsc_sandbox_pid(const struct mcp_config *cfg, const char *container_id) {
  char path[PATH_MAX];
  int n = snprintf(path, sizeof(path), "%s/runsc/%s_sandbox:%s.state", cfg->state_dir, container_id, container_id);
  if (n < 0 || (size_t)n >= sizeof(path))
    return -1;
  cleanup_free char *text = NULL;
  size_t len = 0;
  mcp_error_t err = NULL;
  if (read_file_at(AT_FDCWD, path, 1 << 20, &text, &len, &err) < 0) {
    mcp_error_release(&err);
    return -1;
  }
  cleanup_cjson cJSON *st = cJSON_ParseWithLength(text, len);
  const cJSON *pid = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(st, "sandbox"), "pid");
  return cJSON_IsNumber(pid) && pid->valuedouble > 1 && pid->valuedouble < (1 << 30) ? (pid_t)pid->valuedouble : -1;
}
