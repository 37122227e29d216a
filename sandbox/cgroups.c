/* Host cgroups around the sandboxes, through libcgroup.
 *
 * Every sandbox runs in <parent>/<container-id> (runsc creates it from the
 * bundle's cgroupsPath and sets the per-sandbox memory and pids limits); the
 * parent caps all sandboxes of this service together.  These limits are a
 * backstop only: in this gVisor build, reaching a cgroup limit kills the
 * whole sandbox (memory) or panics its kernel (pids), so the graceful limits
 * are the rlimits the executor sets for each call (sandbox/GVISOR.md). */
#include "config.h"

#include "sandbox/cgroups.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libcgroup.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

static bool initialized;

static int init(mcp_error_t *err) {
  if (initialized)
    return 0;
  int r = cgroup_init();
  if (r != 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, 0, "libcgroup: %s", cgroup_strerror(r));
  initialized = true;
  return 0;
}

bool cgroups_unified(void) {
  /* cgroup v2 only: the memory controller is not mounted as v1. */
  return access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 && access("/sys/fs/cgroup/memory", F_OK) != 0;
}

uint64_t cgroups_sandbox_memory(const struct mcp_config *cfg) {
  if (cfg->sandbox_memory > 0)
    return cfg->sandbox_memory;
  /* Room for a call's processes beyond one address-space limit, plus the
   * sentry and gofer themselves. */
  return cfg->memory_limit * 2 + ((uint64_t)256 << 20);
}

static uint64_t total_memory(const struct mcp_config *cfg) {
  if (cfg->sandboxes_memory > 0)
    return cfg->sandboxes_memory;
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || size <= 0)
    return (uint64_t)8 << 30;
  return (uint64_t)pages * (uint64_t)size / 4 * 3;
}

int cgroups_prepare_parent(const struct mcp_config *cfg, mcp_error_t *err) {
  if (cfg->cgroup_parent[0] == '\0')
    return 0;
  if (init(err) < 0)
    return -1;
  struct cgroup *cg = cgroup_new_cgroup(cfg->cgroup_parent);
  if (cg == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "cgroup %s", cfg->cgroup_parent);
  bool v2 = cgroups_unified();
  struct cgroup_controller *mem = cgroup_add_controller(cg, "memory");
  struct cgroup_controller *pids = cgroup_add_controller(cg, "pids");
  int r = ECGFAIL;
  if (mem != NULL && pids != NULL &&
      cgroup_add_value_uint64(mem, v2 ? "memory.max" : "memory.limit_in_bytes", total_memory(cfg)) == 0 &&
      cgroup_add_value_uint64(pids, "pids.max", (uint64_t)cfg->sandboxes_pids) == 0)
    r = cgroup_create_cgroup(cg, 0);
  cgroup_free(&cg);
  if (r != 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, 0, "create cgroup %s: %s", cfg->cgroup_parent, cgroup_strerror(r));
  return 0;
}

/* <controller mount>/<parent>/<name> */
static int controller_path(const struct mcp_config *cfg, const char *controller, const char *name, char *buf,
                           size_t size, mcp_error_t *err) {
  if (init(err) < 0)
    return -1;
  char *mnt = NULL;
  int r = cgroup_get_subsys_mount_point(controller, &mnt);
  if (r != 0 || mnt == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, 0, "%s cgroup mount: %s", controller, cgroup_strerror(r));
  int n = snprintf(buf, size, "%s/%s%s%s", mnt, cfg->cgroup_parent, name ? "/" : "", name ? name : "");
  free(mnt);
  if (n < 0 || (size_t)n >= size)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "cgroup path");
  return 0;
}

int cgroups_oom_kills(const struct mcp_config *cfg, const char *container_id, uint64_t *count, mcp_error_t *err) {
  *count = 0;
  if (cfg->cgroup_parent[0] == '\0')
    return 0;
  char dir[PATH_MAX], file[PATH_MAX + 32];
  if (controller_path(cfg, "memory", container_id, dir, sizeof(dir), err) < 0)
    return -1;
  /* v1: memory.oom_control has "oom_kill N"; v2: memory.events has it. */
  snprintf(file, sizeof(file), "%s/%s", dir, cgroups_unified() ? "memory.events" : "memory.oom_control");
  cleanup_fclose FILE *f = fopen(file, "re");
  if (f == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open %s", file);
  char key[64];
  unsigned long long v;
  while (fscanf(f, "%63s %llu", key, &v) == 2) {
    if (strcmp(key, "oom_kill") == 0) {
      *count = v;
      return 0;
    }
  }
  return 0; /* a kernel without the counter: no OOM kill can be told */
}

uint64_t cgroups_boot_shares(enum boot_weight w) {
  static const uint64_t v1_shares[] = {[BOOT_AHEAD] = 256, [BOOT_AWAITED] = 4096, [BOOT_DONE] = 1024};
  return v1_shares[w];
}

int cgroups_boot_weight(const struct mcp_config *cfg, const char *container_id, enum boot_weight w, mcp_error_t *err) {
  if (cfg->cgroup_parent[0] == '\0')
    return 0;
  char dir[PATH_MAX], file[PATH_MAX + 32];
  if (controller_path(cfg, "cpu", container_id, dir, sizeof(dir), err) < 0)
    return -1;
  /* v1 cpu.shares (default 1024), v2 cpu.weight (default 100). */
  bool v2 = cgroups_unified();
  snprintf(file, sizeof(file), "%s/%s", dir, v2 ? "cpu.weight" : "cpu.shares");
  static const unsigned v2_weight[] = {[BOOT_AHEAD] = 25, [BOOT_AWAITED] = 400, [BOOT_DONE] = 100};
  char value[24];
  snprintf(value, sizeof(value), "%" PRIu64, v2 ? v2_weight[w] : cgroups_boot_shares(w));
  cleanup_close int fd = open(file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open %s", file);
  int r = write_all(fd, value, strlen(value));
  return r < 0 ? mcp_fail(err, MCP_ERR_INTERNAL, -r, "write %s", file) : 0;
}

/* A count in a cgroup file (pids.current, memory.current, ...). */
static int read_count(const char *file, uint64_t *count, mcp_error_t *err) {
  char text[32];
  ssize_t r = read_kernel_file(file, text, sizeof(text));
  if (r < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, (int)-r, "read %s", file);
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text)
    return mcp_fail(err, MCP_ERR_INTERNAL, EPROTO, "read %s: not a count", file);
  *count = v;
  return 0;
}

int cgroups_tasks(const struct mcp_config *cfg, const char *container_id, uint64_t *count, mcp_error_t *err) {
  *count = 0;
  if (cfg->cgroup_parent[0] == '\0')
    return 0;
  char dir[PATH_MAX], file[PATH_MAX + 32];
  if (controller_path(cfg, "pids", container_id, dir, sizeof(dir), err) < 0)
    return -1;
  snprintf(file, sizeof(file), "%s/pids.current", dir);
  return read_count(file, count, err);
}

int64_t cgroups_memory_left(void) {
  mcp_error_t err = NULL;
  char *mnt = NULL, *rel = NULL;
  if (init(&err) < 0 || cgroup_get_subsys_mount_point("memory", &mnt) != 0 || mnt == NULL) {
    mcp_error_release(&err);
    free(mnt);
    return -1;
  }
  if (cgroup_get_current_controller_path(getpid(), "memory", &rel) != 0) {
    free(rel);
    rel = NULL;
  }
  bool v2 = cgroups_unified();
  /* Where /proc/self/cgroup says, else the root: a container that mounts
   * its own cgroup finds it there. */
  const char *at[] = {rel != NULL && strcmp(rel, "/") != 0 ? rel : "", ""};
  int64_t left = -1;
  for (int k = 0; k < 2; k++) {
    char limit_file[PATH_MAX * 2 + 32], usage_file[PATH_MAX * 2 + 32];
    snprintf(limit_file, sizeof(limit_file), "%s%s/%s", mnt, at[k], v2 ? "memory.max" : "memory.limit_in_bytes");
    snprintf(usage_file, sizeof(usage_file), "%s%s/%s", mnt, at[k], v2 ? "memory.current" : "memory.usage_in_bytes");
    uint64_t limit = 0, usage = 0;
    if (read_count(usage_file, &usage, &err) < 0) {
      mcp_error_release(&err);
      continue;
    }
    /* v2's "max", v1's page-rounded LONG_MAX: no limit. */
    if (read_count(limit_file, &limit, &err) == 0 && limit < ((uint64_t)1 << 60))
      left = limit > usage ? (int64_t)(limit - usage) : 0;
    mcp_error_release(&err);
    break;
  }
  free(mnt);
  free(rel);
  return left;
}

/* Every mounted cgroup hierarchy, v1 controllers, named ones such as
 * name=systemd (runsc creates its cgroups there too), or the v2 tree. */
static int each_hierarchy(void (*fn)(const char *mount, void *opaque), void *opaque) {
  cleanup_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
  if (f == NULL)
    return -errno;
  char line[4096];
  while (fgets(line, sizeof(line), f) != NULL) {
    /* "id parent maj:min root mountpoint opts... - fstype source superopts" */
    char mnt[PATH_MAX], fstype[64];
    const char *dash = strstr(line, " - ");
    if (dash == NULL || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 || sscanf(dash + 3, "%63s", fstype) != 1)
      continue;
    if (strcmp(fstype, "cgroup") == 0 || strcmp(fstype, "cgroup2") == 0)
      fn(mnt, opaque);
  }
  return 0;
}

struct rm_ctx {
  const char *rel; /* parent/container, or the parent */
  int failed_errno;
};

static void rm_in(const char *mount, void *opaque) {
  struct rm_ctx *c = opaque;
  char path[PATH_MAX];
  if (snprintf(path, sizeof(path), "%s/%s", mount, c->rel) >= (int)sizeof(path))
    return;
  if (rmdir(path) < 0 && errno != ENOENT)
    c->failed_errno = errno;
}

int cgroups_remove(const struct mcp_config *cfg, const char *container_id, mcp_error_t *err) {
  if (cfg->cgroup_parent[0] == '\0')
    return 0;
  char rel[PATH_MAX];
  if (snprintf(rel, sizeof(rel), "%s/%s", cfg->cgroup_parent, container_id) >= (int)sizeof(rel))
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "cgroup path");
  /* runsc makes flat per-container cgroups: an empty one goes with rmdir;
   * one that still has tasks (a live sandbox) refuses, which is right. */
  struct rm_ctx c = {.rel = rel, .failed_errno = 0};
  int r = each_hierarchy(rm_in, &c);
  if (r < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, -r, "read /proc/self/mountinfo");
  if (c.failed_errno != 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, c.failed_errno, "remove cgroup %s", rel);
  return 0;
}

struct list_ctx {
  const char *parent;
  char (*ids)[40];
  size_t n, cap;
  bool oom;
};

static void list_in(const char *mount, void *opaque) {
  struct list_ctx *c = opaque;
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof(dir), "%s/%s", mount, c->parent) >= (int)sizeof(dir))
    return;
  cleanup_dir DIR *d = opendir(dir);
  struct dirent *de;
  while (d != NULL && (de = readdir(d)) != NULL) {
    if (de->d_type != DT_DIR || strncmp(de->d_name, "mcp", 3) != 0 || strlen(de->d_name) != 35 ||
        !is_hex32(de->d_name + 3))
      continue;
    bool seen = false;
    for (size_t i = 0; i < c->n && !seen; i++)
      seen = strcmp(c->ids[i], de->d_name) == 0;
    if (seen)
      continue;
    if (c->n == c->cap) {
      size_t cap = c->cap ? c->cap * 2 : 32;
      void *p = realloc(c->ids, cap * sizeof(*c->ids));
      if (p == NULL) {
        c->oom = true;
        return;
      }
      c->ids = p;
      c->cap = cap;
    }
    memcpy(c->ids[c->n++], de->d_name, 36); /* "mcp" + 32 hex + NUL, checked above */
  }
}

int cgroups_list(const struct mcp_config *cfg, char (**ids)[40], size_t *n, mcp_error_t *err) {
  *ids = NULL;
  *n = 0;
  if (cfg->cgroup_parent[0] == '\0')
    return 0;
  struct list_ctx c = {.parent = cfg->cgroup_parent};
  int r = each_hierarchy(list_in, &c);
  if (r < 0 || c.oom) {
    free(c.ids);
    return mcp_fail(err, MCP_ERR_INTERNAL, r < 0 ? -r : ENOMEM, "list the sandboxes' cgroups");
  }
  *ids = c.ids;
  *n = c.n;
  return 0;
}

int cgroups_remove_parent(const struct mcp_config *cfg, mcp_error_t *err) {
  if (cfg->cgroup_parent[0] == '\0')
    return 0;
  char(*ids)[40] = NULL;
  size_t n = 0;
  if (cgroups_list(cfg, &ids, &n, err) < 0)
    return -1;
  /* Empty ones go (runsc leaves a failed create's); one with tasks stays,
   * and so does the parent then. */
  for (size_t i = 0; i < n; i++) {
    mcp_error_t ignored = NULL;
    cgroups_remove(cfg, ids[i], &ignored);
    mcp_error_release(&ignored);
  }
  free(ids);
  struct rm_ctx c = {.rel = cfg->cgroup_parent, .failed_errno = 0};
  int r = each_hierarchy(rm_in, &c);
  if (r < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, -r, "read /proc/self/mountinfo");
  if (c.failed_errno != 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, c.failed_errno, "remove cgroup %s", cfg->cgroup_parent);
  return 0;
}
