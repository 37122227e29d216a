#include "config.h"

#include "common/settings.h"
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#ifndef MCP_LIBEXEC_DIR
#define MCP_LIBEXEC_DIR "/usr/local/libexec/mcp-sandbox"
#endif

enum ctype { C_STR, C_INT, C_SIZE };

struct key {
  const char *name;
  enum ctype type;
  size_t offset;
  size_t size; /* for strings */
  int64_t min, max;
};

#define STR(n)                                                                                                         \
  { #n, C_STR, offsetof(struct mcp_config, n), sizeof(((struct mcp_config *)0)->n), 0, 0 }
#define INT(n, lo, hi)                                                                                                 \
  { #n, C_INT, offsetof(struct mcp_config, n), 0, lo, hi }
#define SIZE(n, lo, hi)                                                                                                \
  { #n, C_SIZE, offsetof(struct mcp_config, n), 0, lo, hi }

static const struct key keys[] = {
    STR(state_dir),
    STR(fcgi_socket),
    STR(socket_group),
    STR(libexec_dir),
    STR(backend),
    STR(runsc),
    STR(runsc_platform),
    STR(allowed_origins),
    STR(python),
    STR(preload_modules),
    STR(learn_modules),
    STR(cgroup_parent),
    STR(audit_log),
    STR(package_index),
    STR(package_user),
    STR(npm_registry),
    STR(node),
    INT(package_timeout, 5, 3600),
    INT(responders, 0, 256),
    INT(responder_threads, 1, 256),
    INT(idle_timeout, 5, 7 * 86400),
    INT(timeout_default, 1, 86400),
    INT(timeout_max, 1, 86400),
    INT(busy_wait, 0, 3600),
    INT(pool_size, 0, 64),
    INT(max_sessions, 1, 100000),
    INT(max_concurrent, 0, 4096),
    INT(capacity_wait, 0, 3600),
    INT(cpu_limit, 1, 86400),
    INT(nproc_limit, 8, 100000),
    INT(nofile_limit, 16, 1048576),
    INT(sandbox_uid, 1, 65534),
    INT(sandbox_gid, 1, 65534),
    INT(sandbox_pids, 0, 1 << 22),
    INT(sandboxes_pids, 0, 1 << 22),
    SIZE(max_body, 1024, (int64_t)1 << 32),
    SIZE(output_limit, 1024, (int64_t)1 << 32),
    SIZE(memory_limit, (int64_t)32 << 20, (int64_t)1 << 40),
    SIZE(fsize_limit, (int64_t)1 << 20, (int64_t)1 << 40),
    SIZE(tmp_size, (int64_t)1 << 20, (int64_t)1 << 40),
    SIZE(shm_size, (int64_t)1 << 20, (int64_t)1 << 40),
    SIZE(workspace_quota, (int64_t)1 << 20, (int64_t)1 << 50),
    SIZE(max_code, 1024, (int64_t)1 << 30),
    SIZE(output_file_max, 0, (int64_t)1 << 32),
    SIZE(output_total_max, 0, (int64_t)1 << 32),
    INT(output_files_max, 0, 10000),
    INT(input_files_max, 0, 10000),
    SIZE(sandbox_memory, 0, (int64_t)1 << 50),
    SIZE(sandboxes_memory, 0, (int64_t)1 << 50),
};

void config_defaults(struct mcp_config *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  snprintf(cfg->state_dir, sizeof(cfg->state_dir), "/var/lib/mcp-sandbox");
  snprintf(cfg->socket_group, sizeof(cfg->socket_group), "www-data");
  snprintf(cfg->libexec_dir, sizeof(cfg->libexec_dir), "%s", MCP_LIBEXEC_DIR);
  snprintf(cfg->backend, sizeof(cfg->backend), "runsc");
  snprintf(cfg->runsc, sizeof(cfg->runsc), "/usr/bin/runsc");
  snprintf(cfg->runsc_platform, sizeof(cfg->runsc_platform), "ptrace");
  snprintf(cfg->python, sizeof(cfg->python), "/usr/bin/python3");
  /* Heavy template modules are imported by a session's executor only after
   * the session used them: idle sessions stay small, warm calls fast. */
  snprintf(cfg->learn_modules, sizeof(cfg->learn_modules),
           "numpy,pandas,matplotlib,matplotlib.pyplot,PIL,PIL.Image,scipy");
  cfg->responders = 0;
  cfg->responder_threads = 8;
  cfg->idle_timeout = 600;
  cfg->timeout_default = 60;
  cfg->timeout_max = 300;
  cfg->busy_wait = 60;
  cfg->pool_size = 2;
  cfg->max_sessions = 256;
  cfg->max_concurrent = 0;
  cfg->capacity_wait = 10;
  cfg->cpu_limit = 60;
  /* A fork bomb of Python processes must hit this before the sandbox's
   * memory backstop (each forked interpreter soon owns ~6 MiB). */
  cfg->nproc_limit = 128;
  cfg->nofile_limit = 1024;
  cfg->sandbox_uid = 1000;
  cfg->sandbox_gid = 1000;
  /* "auto": mcp-sandbox-<hash of state_dir>, so that two services on one
   * machine never touch each other's cgroups (see validate()). */
  snprintf(cfg->cgroup_parent, sizeof(cfg->cgroup_parent), "auto");
  snprintf(cfg->package_index, sizeof(cfg->package_index), "https://pypi.org/simple");
  snprintf(cfg->audit_log, sizeof(cfg->audit_log), "default"); /* <state>/logs/audit.log */
  snprintf(cfg->package_user, sizeof(cfg->package_user), "nobody");
  snprintf(cfg->npm_registry, sizeof(cfg->npm_registry), "https://registry.npmjs.org/");
  snprintf(cfg->node, sizeof(cfg->node), "/usr/bin/node");
  cfg->package_timeout = 120;
  /* Host tasks, not sandbox processes: the sentry needs ~65 of its own,
   * about six per idle sandbox process on the ptrace platform, and many
   * more while processes keep calling fork (measured: a fork bomb held at
   * 128 processes by RLIMIT_NPROC peaks at ~3,600 host tasks).  The call's
   * RLIMIT_NPROC must stop a bomb well before this backstop, which kills
   * the whole sandbox.  0 = 32 x nproc_limit + 512. */
  cfg->sandbox_pids = 0;
  /* All sandboxes together stay well below the host's pid_max: 0 = 3/4. */
  cfg->sandboxes_pids = 0;

  cfg->max_body = 10 << 20;
  cfg->output_limit = 1 << 20;
  cfg->memory_limit = (uint64_t)512 << 20;
  cfg->fsize_limit = (uint64_t)1 << 30;
  cfg->tmp_size = (uint64_t)256 << 20;
  cfg->shm_size = (uint64_t)64 << 20;
  cfg->workspace_quota = (uint64_t)1 << 30;
  cfg->max_code = 1 << 20;
  cfg->output_file_max = 10 << 20;
  cfg->output_total_max = 20 << 20;
  cfg->output_files_max = 20;
  cfg->input_files_max = 100;
}

static int parse_number(const char *v, bool size_units, int64_t *out) {
  errno = 0;
  char *end = NULL;
  long long n = strtoll(v, &end, 10);
  if (errno != 0 || end == v || n < 0)
    return -1;
  int64_t mult = 1;
  if (size_units && *end != '\0') {
    switch (toupper((unsigned char)*end)) {
    case 'K':
      mult = 1024;
      break;
    case 'M':
      mult = 1024 * 1024;
      break;
    case 'G':
      mult = 1024LL * 1024 * 1024;
      break;
    default:
      return -1;
    }
    end++;
    if (toupper((unsigned char)*end) == 'I')
      end++;
    if (toupper((unsigned char)*end) == 'B')
      end++;
  }
  if (*end != '\0')
    return -1;
  if (n > INT64_MAX / mult)
    return -1;
  *out = n * mult;
  return 0;
}

int config_set(struct mcp_config *cfg, const char *key, const char *value, mcp_error_t *err) {
  for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
    const struct key *k = &keys[i];
    if (strcasecmp(k->name, key) != 0)
      continue;
    char *field = (char *)cfg + k->offset;
    if (k->type == C_STR) {
      size_t n = strlen(value);
      if (n >= k->size)
        return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key %s: value is too long", k->name);
      memcpy(field, value, n + 1);
      return 0;
    }
    int64_t n;
    if (parse_number(value, k->type == C_SIZE, &n) < 0 || n < k->min || n > k->max)
      return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key %s: `%s` is not a number between %lld and %lld",
                             k->name, value, (long long)k->min, (long long)k->max);
    if (k->type == C_INT)
      *(int *)field = (int)n;
    else
      *(uint64_t *)field = (uint64_t)n;
    return 0;
  }
  return mcp_fail_public(err, MCP_ERR_INVALID, "unknown configuration key %s", key);
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1]))
    *--e = '\0';
  return s;
}

static int load_file(struct mcp_config *cfg, const char *path, bool must_exist, mcp_error_t *err) {
  cleanup_fclose FILE *f = fopen(path, "re");
  if (f == NULL) {
    if (!must_exist && errno == ENOENT)
      return 0;
    return mcp_fail_public(err, MCP_ERR_INVALID, "cannot read the configuration file %s: %s", path, strerror(errno));
  }
  char line[2048];
  int lineno = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    lineno++;
    char *s = trim(line);
    if (*s == '\0' || *s == '#')
      continue;
    char *eq = strchr(s, '=');
    if (eq == NULL)
      return mcp_fail_public(err, MCP_ERR_INVALID, "%s:%d: expected `key = value`", path, lineno);
    *eq = '\0';
    char *k = trim(s), *v = trim(eq + 1);
    if (config_set(cfg, k, v, err) < 0)
      return mcp_error_wrap(err, -1, "%s:%d", path, lineno);
  }
  return 0;
}

static int validate(struct mcp_config *cfg, mcp_error_t *err) {
  if (cfg->state_dir[0] != '/')
    return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key state_dir must be an absolute path");
  if (cfg->fcgi_socket[0] == '\0' && config_path(cfg, cfg->fcgi_socket, sizeof(cfg->fcgi_socket), "sock/fcgi.sock") < 0)
    return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key state_dir is too long");
  if (strcmp(cfg->backend, "runsc") != 0 && strcmp(cfg->backend, "direct") != 0)
    return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key backend must be runsc or direct");
  if (cfg->timeout_default > cfg->timeout_max)
    cfg->timeout_default = cfg->timeout_max;
  if (strcmp(cfg->audit_log, "default") == 0 &&
      config_path(cfg, cfg->audit_log, sizeof(cfg->audit_log), "logs/audit.log") < 0)
    return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key state_dir is too long");
  if (cfg->sandbox_pids == 0)
    cfg->sandbox_pids = 32 * cfg->nproc_limit + 512;
  if (cfg->sandboxes_pids == 0) {
    long pid_max = 32768;
    FILE *f = fopen("/proc/sys/kernel/pid_max", "re");
    if (f != NULL) {
      if (fscanf(f, "%ld", &pid_max) != 1)
        pid_max = 32768;
      fclose(f);
    }
    cfg->sandboxes_pids = (int)(pid_max / 4 * 3 > (1 << 22) ? (1 << 22) : pid_max / 4 * 3);
  }
  if (strcmp(cfg->cgroup_parent, "auto") == 0) {
    uint32_t h = 2166136261u; /* FNV-1a of the state folder */
    for (const char *p = cfg->state_dir; *p; p++)
      h = (h ^ (unsigned char)*p) * 16777619u;
    snprintf(cfg->cgroup_parent, sizeof(cfg->cgroup_parent), "mcp-sandbox-%08x", h);
  }
  if (strchr(cfg->cgroup_parent, '.') != NULL || cfg->cgroup_parent[0] == '/')
    return mcp_fail_public(err, MCP_ERR_INVALID,
                           "configuration key cgroup_parent must be a relative name without dots");
  if (cfg->max_concurrent == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->max_concurrent = (int)(n > 0 ? 4 * n : 4);
  }
  if (cfg->responders == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->responders = (int)(n > 0 ? 2 * n : 2);
  }
  return 0;
}

int config_load(struct mcp_config *cfg, mcp_error_t *err) {
  config_defaults(cfg);
  const char *sd = getenv("MCP_STATE_DIR");
  if (sd != NULL && config_set(cfg, "state_dir", sd, err) < 0)
    return -1;
  const char *file = getenv("MCP_CONFIG");
  if (file != NULL && *file != '\0') {
    if (load_file(cfg, file, true, err) < 0)
      return -1;
  } else {
    char path[PATH_MAX];
    if (config_path(cfg, path, sizeof(path), "mcp.conf") == 0 && load_file(cfg, path, false, err) < 0)
      return -1;
  }
  for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
    char env[64] = "MCP_";
    size_t j = 4;
    for (const char *p = keys[i].name; *p && j + 1 < sizeof(env); p++)
      env[j++] = (char)toupper((unsigned char)*p);
    env[j] = '\0';
    const char *v = getenv(env);
    if (v != NULL && config_set(cfg, keys[i].name, v, err) < 0)
      return mcp_error_wrap(err, -1, "environment variable %s", env);
  }
  return validate(cfg, err);
}

void config_print(const struct mcp_config *cfg, FILE *out) {
  for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
    const struct key *k = &keys[i];
    const char *field = (const char *)cfg + k->offset;
    if (k->type == C_STR)
      fprintf(out, "%s = %s\n", k->name, field);
    else if (k->type == C_INT)
      fprintf(out, "%s = %d\n", k->name, *(const int *)field);
    else
      fprintf(out, "%s = %llu\n", k->name, (unsigned long long)*(const uint64_t *)field);
  }
}

int config_path(const struct mcp_config *cfg, char *buf, size_t size, const char *name) {
  int n = snprintf(buf, size, "%s/%s", cfg->state_dir, name);
  if (n < 0 || (size_t)n >= size)
    return -ENAMETOOLONG;
  return 0;
}
