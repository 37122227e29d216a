/* npm packages for execute_javascript.
 *
 * A spec is a package name (optionally @scope/) with an optional version,
 * range or tag after '@'; git URLs, tarball URLs, paths, aliases (npm:)
 * and options are refused before anything runs.  The host side installs a
 * set of specs once, with --ignore-scripts (no install script runs
 * anywhere), as the unprivileged package_user, into a staging folder; the
 * finished tree is handed to root and kept read-only in
 * <state>/npm/<hash of the specs>, which sandboxes see at /opt/mcp/npm.
 * The executor copies it into the session's /work/node_modules as the
 * sandbox user. */
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

static int run_as(const struct mcp_config *cfg, const struct passwd *pw, const char *const *argv, const char *home,
                  struct buf *out, mcp_error_t *err) {
  char h[PATH_MAX + 64], user[PATH_MAX + 96];
  snprintf(h, sizeof(h), "HOME=%s", home);
  /* No host npm configuration: an absent user file and an empty global one
   * (npm refuses the same file for both). */
  snprintf(user, sizeof(user), "NPM_CONFIG_USERCONFIG=%s/.npmrc-none", home);
  const char *envp[] = {"PATH=/usr/bin:/bin",
                        "LANG=C.UTF-8",
                        h,
                        user,
                        "NPM_CONFIG_GLOBALCONFIG=/dev/null",
                        "NPM_CONFIG_UPDATE_NOTIFIER=false",
                        "NPM_CONFIG_FUND=false",
                        "NPM_CONFIG_AUDIT=false",
                        NULL};
  struct proc_opts o = {.argv = argv,
                        .envp = envp,
                        .stdin_fd = -1,
                        .stderr_fd = -1,
                        .capture = out,
                        .capture_max = 1 << 20,
                        .capture_stderr = true,
                        .timeout_ms = (int64_t)cfg->package_timeout * 1000,
                        .cwd = home,
                        .set_ids = pw != NULL,
                        .uid = pw ? pw->pw_uid : 0,
                        .gid = pw ? pw->pw_gid : 0};
  int st = 0;
  if (run_process(&o, &st, err) < 0)
    return -1;
  return st == 0 ? 0 : 1;
}

int npm_stage(const struct mcp_config *cfg, const cJSON *packages, char hash[33], mcp_error_t *err) {
  if (stage_name(packages, hash) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, EIO, "hash the package specs");
  char root[PATH_MAX], final[PATH_MAX + 40], tmp[PATH_MAX + 40], rnd[33];
  config_path(cfg, root, sizeof(root), "npm");
  snprintf(final, sizeof(final), "%s/%s", root, hash);
  if (access(final, F_OK) == 0)
    return 0; /* installed before, for any session */
  struct passwd pwbuf, *pw = NULL;
  char pwtext[1024];
  if (getpwnam_r(cfg->package_user, &pwbuf, pwtext, sizeof(pwtext), &pw) != 0 || pw == NULL || pw->pw_uid == 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, 0, "package_user %s does not exist or is root", cfg->package_user);
  random_hex32(rnd);
  snprintf(tmp, sizeof(tmp), "%s/.stage-%.16s", root, rnd);
  if (mkdir(tmp, 0700) < 0 || chown(tmp, pw->pw_uid, pw->pw_gid) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "make the staging folder");
  cleanup_argv struct argv argv = {0};
  static const char *const npm[] = {"/usr/bin/npm",      "install",   "--ignore-scripts", "--no-audit", "--no-fund",
                                    "--no-package-lock", "--no-save", "--omit=dev",       "--prefix"};
  for (size_t i = 0; i < ARRAY_SIZE(npm); i++)
    argv_add(&argv, npm[i]);
  argv_add(&argv, tmp);
  argv_add(&argv, "--registry");
  argv_add(&argv, cfg->npm_registry);
  argv_add(&argv, "--cache");
  argv_add(&argv, ".npm-cache");
  argv_add(&argv, "--");
  const cJSON *p;
  cJSON_ArrayForEach(p, packages) { argv_add(&argv, p->valuestring); }
  if (argv.oom)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "npm's command line");
  cleanup_buf struct buf out = {0};
  int r = run_as(cfg, pw, argv.v, tmp, &out, err);
  if (r == 1) {
    cleanup_free char *said = package_tool_words(&out, tmp);
    mcp_fail_public(err, MCP_ERR_INVALID,
                    "The npm packages could not be installed from the registry (install scripts never run); "
                    "nothing was installed and the code did not run. npm said:\n%s",
                    said ? said : "(nothing)");
  }
  if (r == 0) {
    /* The tree becomes root's and read-only to everyone else; the cache
     * and npm's scratch files go. */
    cleanup_close int tfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tfd < 0 || fchown(tfd, 0, 0) < 0 || fchmod(tfd, 0700) < 0 || remove_tree_at(tfd, ".npm-cache", err) < 0 ||
        chown_tree_at(AT_FDCWD, tmp, 0, 0, err) < 0 || fchmod(tfd, 0755) < 0 ||
        (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) < 0 && errno != EEXIST)) {
      if (err == NULL || *err == NULL)
        mcp_fail(err, MCP_ERR_INTERNAL, errno, "publish the packages");
      r = -1;
    }
  }
  mcp_error_t rm = NULL;
  if (access(tmp, F_OK) == 0 && remove_tree_at(AT_FDCWD, tmp, &rm) < 0)
    mcp_error_log_release(&rm, "npm: cleanup");
  return r == 0 ? 0 : -1;
}
