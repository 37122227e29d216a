#include "config.h"

#include "common/settings.h"

#include "common/cpus.h"
#include "common/egress.h"
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
  int64_t dflt;          /* numbers */
  const char *dflt_text; /* strings */
  const char *shown;     /* the default as the README shows it, or NULL */
  const char *doc;
};

#define SETTING_INT(n, d, lo, hi, sh, doc) {#n, C_INT, offsetof(struct mcp_config, n), 0, lo, hi, d, NULL, sh, doc},
#define SETTING_SIZE(n, d, lo, hi, sh, doc)                                                                            \
  {#n, C_SIZE, offsetof(struct mcp_config, n), 0, lo, hi, (int64_t)(d), NULL, sh, doc},
#define SETTING_STR(n, sz, d, sh, doc)                                                                                 \
  {#n, C_STR, offsetof(struct mcp_config, n), sizeof(((struct mcp_config *)0)->n), 0, 0, 0, d, sh, doc},
static const struct key keys[] = {
#include "common/settings.def"
};
#undef SETTING_INT
#undef SETTING_SIZE
#undef SETTING_STR

void config_defaults(struct mcp_config *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
    const struct key *k = &keys[i];
    char *field = (char *)cfg + k->offset;
    if (k->type == C_STR)
      snprintf(field, k->size, "%s", k->dflt_text);
    else if (k->type == C_INT)
      *(int *)field = (int)k->dflt;
    else
      *(uint64_t *)field = (uint64_t)k->dflt;
  }
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

/* The egress settings that reach the proxy's configuration or every call. */
static int egress_settings_check(const struct mcp_config *cfg, mcp_error_t *err) {
  mcp_error_t why = NULL;
  if (egress_list_check(cfg->egress_allow, &why) < 0) {
    int r = mcp_fail_public(err, MCP_ERR_INVALID, "configuration key egress_allow: %s", mcp_error_public(why));
    mcp_error_release(&why);
    return r;
  }
  static const char cidr[] = "0123456789abcdefABCDEF:./, ";
  if (strspn(cfg->egress_networks, cidr) != strlen(cfg->egress_networks))
    return mcp_fail_public(err, MCP_ERR_INVALID,
                           "configuration key egress_networks must be CIDRs (192.0.2.0/24, fd00::/8) "
                           "separated by commas");
  static const char hostport[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]";
  if (strspn(cfg->egress_proxy, hostport) != strlen(cfg->egress_proxy))
    return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key egress_proxy must be host:port");
  return 0;
}

/* A log setting: a file (absolute: the processes that write it do not
 * share a working folder), stderr (log_open) or empty (no log). */
static bool log_setting_valid(const char *v) { return v[0] == '\0' || v[0] == '/' || strcmp(v, "stderr") == 0; }

static int validate(struct mcp_config *cfg, mcp_error_t *err) {
  if (cfg->state_dir[0] != '/')
    return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key state_dir must be an absolute path");
  if (cfg->fcgi_socket[0] == '\0' && config_path(cfg, cfg->fcgi_socket, sizeof(cfg->fcgi_socket), "sock/fcgi.sock") < 0)
    return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key state_dir is too long");
  if (cfg->cell[0] != '\0' && !cell_name_valid(cfg->cell))
    return mcp_fail_public(err, MCP_ERR_INVALID,
                           "configuration key cell must be a DNS label: 1-40 of a-z, 0-9 and -, not starting or "
                           "ending with -");
  if (strcmp(cfg->backend, "runsc") != 0 && strcmp(cfg->backend, "direct") != 0)
    return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key backend must be runsc or direct");
  if (cfg->timeout_default > cfg->timeout_max)
    cfg->timeout_default = cfg->timeout_max;
  if (strcmp(cfg->audit_log, "default") == 0 &&
      config_path(cfg, cfg->audit_log, sizeof(cfg->audit_log), "logs/audit.log") < 0)
    return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key state_dir is too long");
  if (strcmp(cfg->egress_log, "default") == 0 &&
      config_path(cfg, cfg->egress_log, sizeof(cfg->egress_log), "logs/egress.log") < 0)
    return mcp_fail_public(err, MCP_ERR_INVALID, "configuration key state_dir is too long");
  if (!log_setting_valid(cfg->audit_log))
    return mcp_fail_public(err, MCP_ERR_INVALID,
                           "configuration key audit_log must be an absolute path, stderr or empty (none)");
  if (!log_setting_valid(cfg->egress_log))
    return mcp_fail_public(err, MCP_ERR_INVALID,
                           "configuration key egress_log must be an absolute path, stderr or empty (none)");
  if (egress_settings_check(cfg, err) < 0)
    return -1;
  if (strcmp(cfg->token_policy, "default") == 0 &&
      config_path(cfg, cfg->token_policy, sizeof(cfg->token_policy), "token-policy") < 0)
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
    /* FNV-1a of the state folder and the cell: cells in containers of
     * one host have the same state folder path and share the host's
     * cgroups, and must never reap each other's sandboxes. */
    uint32_t h = 2166136261u;
    for (const char *p = cfg->state_dir; *p; p++)
      h = (h ^ (unsigned char)*p) * 16777619u;
    for (const char *p = cfg->cell; *p; p++)
      h = (h ^ (unsigned char)*p) * 16777619u;
    snprintf(cfg->cgroup_parent, sizeof(cfg->cgroup_parent), "mcp-sandbox-%08x", h);
  }
  if (strchr(cfg->cgroup_parent, '.') != NULL || cfg->cgroup_parent[0] == '/')
    return mcp_fail_public(err, MCP_ERR_INVALID,
                           "configuration key cgroup_parent must be a relative name without dots");
  if (cfg->max_concurrent == 0) {
    long n = cpus_usable();
    cfg->max_concurrent = (int)(n > 0 ? 4 * n : 4);
  }
  if (cfg->token_busy_concurrent == 0) {
    long n = cpus_usable();
    cfg->token_busy_concurrent = (int)(n > 0 ? n : 1);
  }
  if (cfg->max_starting == 0) {
    long n = cpus_usable();
    /* Not the cores alone: a boot waits on I/O as well (2 at a time on 2
     * cores took 32 new sessions over 120 s; all 32 at once, over 40 s). */
    cfg->max_starting = (int)(n > 0 ? 4 * n : 4);
  }
  if (cfg->responders == 0) {
    long n = cpus_usable();
    cfg->responders = (int)(n > 0 ? 2 * n : 2);
  }
  if (cfg->responder_threads == 0)
    cfg->responder_threads = config_auto_responder_threads(cfg->responders);
  return 0;
}

int config_auto_responder_threads(int responders) {
  int all = MCP_NGINX_TOKEN_REQUESTS + MCP_NGINX_TOKEN_REQUESTS / 2;
  int each = responders > 0 ? (all + responders - 1) / responders : all;
  return each < 8 ? 8 : each > 256 ? 256 : each;
}

int config_ops_socket(const struct mcp_config *cfg, char *buf, size_t size) {
  const char *p = cfg->fcgi_socket;
  size_t n = strlen(p);
  bool sock = n > 5 && strcmp(p + n - 5, ".sock") == 0;
  int r = sock ? snprintf(buf, size, "%.*s-ops.sock", (int)(n - 5), p) : snprintf(buf, size, "%s-ops", p);
  return r < 0 || (size_t)r >= size ? -1 : 0;
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

/* 1G, 512M, 1K: sizes as a person writes them. */
static void size_text(uint64_t v, char *buf, size_t size) {
  static const char units[] = "GMK";
  for (int i = 0; i < 3; i++) {
    uint64_t unit = (uint64_t)1 << (10 * (3 - i));
    if (v >= unit && v % unit == 0) {
      snprintf(buf, size, "%llu%c", (unsigned long long)(v / unit), units[i]);
      return;
    }
  }
  snprintf(buf, size, "%llu", (unsigned long long)v);
}

void config_markdown(FILE *out) {
  fprintf(out, "| key | default | meaning |\n|---|---|---|\n");
  for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
    const struct key *k = &keys[i];
    char dflt[160];
    if (k->shown != NULL)
      snprintf(dflt, sizeof(dflt), "%s", k->shown);
    else if (k->type == C_INT)
      snprintf(dflt, sizeof(dflt), "%lld", (long long)k->dflt);
    else if (k->type == C_SIZE)
      size_text((uint64_t)k->dflt, dflt, sizeof(dflt));
    else if (k->dflt_text[0] == '\0')
      snprintf(dflt, sizeof(dflt), "(none)");
    else
      snprintf(dflt, sizeof(dflt), "`%.150s`", k->dflt_text);
    fprintf(out, "| `%s` | %s | %s |\n", k->name, dflt, k->doc);
  }
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
