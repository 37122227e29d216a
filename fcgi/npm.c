/* npm packages for execute_javascript.
 *
 * A spec is a package name (optionally @scope/) with an optional version,
 * range or tag after '@'; git URLs, tarball URLs, paths, aliases (npm:)
 * and options are refused before anything runs.  The host side installs
 * each request's specs with --ignore-scripts (no install script runs
 * anywhere), as the unprivileged package_user, resolved against the
 * registry for that request; the tree npm made is copied into root's
 * read-only files in the call's folder of the session (pkgtools.h), which
 * only that session's sandbox sees below /opt/mcp/packages.  The executor
 * copies it into the session's /work/node_modules as the sandbox user. */
#include "config.h"

#include "fcgi/npm.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/proc.h"
#include "common/util.h"
#include "fcgi/packages.h"
#include "fcgi/pkgtools.h"

#define MAX_SPECS 32
#define MAX_SPEC 214

static bool name_char(int c) { return islower(c) || isdigit(c) || c == '-' || c == '.' || c == '_'; }

/* [a-z0-9][a-z0-9._-]* (npm names are lower case) */
static const char *scan_part(const char *p) {
  if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p))
    return NULL;
  while (name_char((unsigned char)*p))
    p++;
  return p;
}

#define STR_(x) #x
#define STR(x) STR_(x)

const char *npm_spec_problem(const char *spec) {
  size_t len = strlen(spec);
  if (len == 0 || len > MAX_SPEC)
    return "must be 1 to " STR(MAX_SPEC) " characters";
  if (spec[0] == '-')
    return "options are not accepted";
  if (strpbrk(spec, ":\\#") != NULL || strstr(spec, "..") != NULL)
    return "URLs, git and file specs and aliases are not accepted; give a name and version, e.g. lodash@4";
  const char *p = spec;
  if (*p == '@') { /* @scope/name */
    p = scan_part(p + 1);
    if (p == NULL || *p != '/')
      return "has an invalid @scope/name";
    p++;
  }
  p = scan_part(p);
  if (p == NULL)
    return "does not start with a valid package name (lower case letters, digits, - . _)";
  if (*p == '\0')
    return NULL;
  if (*p != '@' || p[1] == '\0')
    return "has unexpected text after the name (use name@version)";
  for (p++; *p; p++) /* version, range or tag */
    if (!isalnum((unsigned char)*p) && strchr(".*+^~<>=| -_", *p) == NULL)
      return "has an invalid version range";
  return NULL;
}

int npm_validate(const cJSON *packages, mcp_error_t *err) {
  return package_list_validate(packages, MAX_SPECS, npm_spec_problem, err);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* 32 hex of SHA-256 over the sorted specs: the same set, the same tree. */
static int stage_name(const cJSON *packages, char out[33]) {
  const char *v[MAX_SPECS];
  int n = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, packages) {
    if (n < MAX_SPECS)
      v[n++] = p->valuestring;
  }
  qsort(v, (size_t)n, sizeof(v[0]), cmp_str);
  cleanup_buf struct buf joined = {0};
  for (int i = 0; i < n; i++)
    if (buf_append(&joined, v[i], strlen(v[i])) < 0 || buf_append(&joined, "\n", 1) < 0)
      return -1;
  char hex[65];
  sha256_hex(joined.data ? joined.data : "", joined.len, hex);
  if (hex[0] == '\0')
    return -1;
  memcpy(out, hex, 32);
  out[32] = '\0';
  return 0;
}

int npm_set_key(const cJSON *packages, char key[33]) { return stage_name(packages, key); }

int npm_fetch(const struct mcp_config *cfg, const cJSON *packages, int dst_fd, mcp_error_t *err) {
  struct package_user pu;
  if (package_user_get(cfg, &pu, err) < 0)
    return -1;
  cleanup_close int lock = package_cache_lock(cfg, false, err);
  if (lock < 0)
    return -1;
  struct package_work w;
  if (package_work_open(cfg, &pu, &w, err) < 0)
    return -1;
  char cache[PATH_MAX], user[PATH_MAX + 128];
  config_path(cfg, cache, sizeof(cache), PACKAGE_CACHE "/npm");
  cleanup_argv struct argv argv = {0};
  /* Resolved against the registry for this request (--prefer-online: npm's
   * cache, package_user's, revalidates every document it holds); a registry
   * that cannot be reached fails within seconds: one retry after a second. */
  static const char *const npm[] = {"/usr/bin/npm",
                                    "install",
                                    "--ignore-scripts",
                                    "--no-audit",
                                    "--no-fund",
                                    "--no-package-lock",
                                    "--no-save",
                                    "--omit=dev",
                                    "--prefer-online",
                                    "--fetch-retries",
                                    "1",
                                    "--fetch-retry-mintimeout",
                                    "1000",
                                    "--fetch-retry-maxtimeout",
                                    "2000",
                                    "--fetch-timeout",
                                    PACKAGE_NET_TIMEOUT_MS,
                                    "--prefix"};
  for (size_t i = 0; i < ARRAY_SIZE(npm); i++)
    argv_add(&argv, npm[i]);
  argv_add(&argv, w.path);
  argv_add(&argv, "--registry");
  argv_add(&argv, cfg->npm_registry);
  argv_add(&argv, "--cache");
  argv_add(&argv, cache);
  tool_host_options(cfg, TOOL_NPM, &argv);
  argv_add(&argv, "--");
  const cJSON *p;
  cJSON_ArrayForEach(p, packages) { argv_add(&argv, p->valuestring); }
  /* No host npm configuration file (the host's proxy and CA come as
   * options): an absent user file and an empty global one (npm refuses the
   * same file for both). */
  snprintf(user, sizeof(user), "NPM_CONFIG_USERCONFIG=%s/.npmrc-none", w.path);
  const char *extra[] = {user,
                         "NPM_CONFIG_GLOBALCONFIG=/dev/null",
                         "NPM_CONFIG_UPDATE_NOTIFIER=false",
                         "NPM_CONFIG_FUND=false",
                         "NPM_CONFIG_AUDIT=false",
                         NULL};
  cleanup_tool_env struct tool_env env = {0};
  if (argv.oom || tool_env_build(cfg, TOOL_NPM, w.path, extra, &env) < 0) {
    package_work_close(&w);
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "npm's command line");
  }
  cleanup_buf struct buf out = {0};
  struct proc_opts o = {.argv = argv.v,
                        .envp = (const char *const *)env.v,
                        .stdin_fd = -1,
                        .stderr_fd = -1,
                        .capture = &out,
                        .capture_max = 1 << 20,
                        .capture_stderr = true,
                        .timeout_ms = (int64_t)cfg->package_timeout * 1000,
                        .cwd = w.path,
                        .set_ids = true,
                        .uid = pu.uid,
                        .gid = pu.gid};
  int st = 0;
  int ret = run_process(&o, &st, err);
  if (ret == 0 && st != 0) {
    cleanup_free char *said = package_tool_words(&out, w.path);
    ret = mcp_fail_public(err, MCP_ERR_INVALID,
                          "The npm packages could not be installed from the registry (install scripts never run); "
                          "nothing was installed and the code did not run. npm said:\n%s",
                          said ? said : "(nothing)");
  }
  if (ret == 0) {
    /* The tree npm resolved, copied into root's own files (the workspace
     * quota bounds it: the executor copies it into /work). */
    cleanup_close int nm = openat(w.fd, "node_modules", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (nm < 0)
      ret = mcp_fail(err, MCP_ERR_INTERNAL, errno, "open the installed tree");
    else if (mkdirat(dst_fd, "node_modules", 0755) < 0)
      ret = mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir node_modules");
    else {
      cleanup_close int dnm = openat(dst_fd, "node_modules", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (dnm < 0 || fchmod(dnm, 0755) < 0)
        ret = mcp_fail(err, MCP_ERR_INTERNAL, errno, "open node_modules");
      else if (package_copy_tree(nm, dnm, cfg->workspace_quota, err) < 0)
        ret = -1;
    }
  }
  package_work_close(&w);
  close(steal_fd(&lock));
  mcp_error_t trim = NULL;
  if (package_cache_trim(cfg, &trim) < 0)
    mcp_error_log_release(&trim, "npm: trim the cache");
  return ret < 0 ? -1 : 0;
}
