/* Python packages for a session.
 *
 * Each requirement is checked to be a plain PEP 508 requirement (name,
 * extras, version specifiers): options such as -r or --index-url, paths,
 * URLs and environment markers are refused before anything runs.  Wheels
 * only are fetched (no build script runs anywhere) from the configured
 * index by `pip download` running as an unprivileged user (package_user)
 * that can reach neither the sessions nor the tokens; the wheels land in
 * <state>/wheels, owned by root, which sandboxes see read-only at
 * /opt/mcp/wheels.  The executor then installs them inside the session's
 * sandbox, as the sandbox user, into /work/.local. */
#include "config.h"

#include "fcgi/packages.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <string.h>
#include <sys/stat.h>

#include "common/proc.h"
#include "common/util.h"

#define MAX_PACKAGES 32
#define MAX_REQUIREMENT 200
#define MAX_WHEEL (512ULL << 20)

static bool name_char(int c) { return isalnum(c) || c == '.' || c == '_' || c == '-'; }

/* name: [A-Za-z0-9] ([A-Za-z0-9._-]* [A-Za-z0-9])? */
static const char *scan_name(const char *p) {
  if (!isalnum((unsigned char)*p))
    return NULL;
  const char *start = p;
  while (name_char((unsigned char)*p))
    p++;
  if (!isalnum((unsigned char)p[-1]) || p - start > 100)
    return NULL;
  return p;
}

static const char *skip_ws(const char *p) {
  while (*p == ' ' || *p == '\t')
    p++;
  return p;
}

/* One version clause: operator then a version of [A-Za-z0-9.*+!_-]. */
static const char *scan_clause(const char *p) {
  static const char *const ops[] = {"===", "~=", "==", "!=", "<=", ">=", "<", ">"};
  size_t n = 0;
  for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
    if (strncmp(p, ops[i], strlen(ops[i])) == 0) {
      n = strlen(ops[i]);
      break;
    }
  if (n == 0)
    return NULL;
  p = skip_ws(p + n);
  const char *v = p;
  while (isalnum((unsigned char)*p) || (*p != '\0' && strchr(".*+!_-", *p) != NULL))
    p++;
  return p == v ? NULL : p;
}

#define STR_(x) #x
#define STR(x) STR_(x)

const char *package_problem(const char *req) {
  size_t len = strlen(req);
  if (len == 0 || len > MAX_REQUIREMENT)
    return "must be 1 to " STR(MAX_REQUIREMENT) " characters";
  const char *p = skip_ws(req);
  if (*p == '-')
    return "options such as -r or --index-url are not accepted";
  if (strpbrk(p, "/\\:@;") != NULL)
    return "paths, URLs and environment markers are not accepted; give a name and version, e.g. requests>=2.31";
  if ((p = scan_name(p)) == NULL)
    return "does not start with a valid package name";
  p = skip_ws(p);
  if (*p == '[') {
    do {
      p = skip_ws(p + 1);
      if ((p = scan_name(p)) == NULL)
        return "has an invalid extra";
      p = skip_ws(p);
    } while (*p == ',');
    if (*p != ']')
      return "has an unclosed [extras] list";
    p = skip_ws(p + 1);
  }
  if (*p == '(') /* "name (>=1.0)" is old but valid PEP 508 */
    p = skip_ws(p + 1);
  while (*p != '\0' && *p != ')') {
    if ((p = scan_clause(p)) == NULL)
      return "has an invalid version specifier (use ==, >=, <=, !=, ~=, <, >)";
    p = skip_ws(p);
    if (*p != ',')
      break;
    p = skip_ws(p + 1);
    if (*p == '\0' || *p == ')')
      return "has a comma without a version specifier after it";
  }
  if (*p == ')')
    p = skip_ws(p + 1);
  if (*p != '\0')
    return "has unexpected text after the version specifier";
  return NULL;
}

int package_list_validate(const cJSON *packages, int max, const char *(*problem)(const char *), mcp_error_t *err) {
  if (!cJSON_IsArray(packages))
    return mcp_fail_public(err, MCP_ERR_INVALID, "packages must be an array of strings");
  int i = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, packages) {
    if (!cJSON_IsString(p))
      return mcp_fail_public(err, MCP_ERR_INVALID, "packages must be an array of strings");
    if (i >= max)
      return mcp_fail_public(err, MCP_ERR_INVALID, "packages: at most %d per call", max);
    const char *why = problem(p->valuestring);
    if (why != NULL)
      return mcp_fail_public(err, MCP_ERR_INVALID, "packages[%d] `%.80s` %s", i, p->valuestring, why);
    i++;
  }
  return 0;
}

int packages_validate(const cJSON *packages, mcp_error_t *err) {
  return package_list_validate(packages, MAX_PACKAGES, package_problem, err);
}

/* Move the *.whl files pip left in tmp into the shared cache, as root's
 * read-only files; anything else pip wrote is dropped. */
static int adopt_wheels(int wheels_fd, const char *tmp, mcp_error_t *err) {
  cleanup_close int tfd = openat(wheels_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (tfd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open the download folder");
  int dfd = dup(tfd);
  cleanup_dir DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (d == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "list the download folder");
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    if (n < 5 || strcmp(de->d_name + n - 4, ".whl") != 0 || de->d_name[0] == '.')
      continue;
    struct stat st;
    if (fstatat(tfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size > MAX_WHEEL)
      continue;
    /* A wheel's name is unique for its content's version and tags; an
     * existing one in the cache is kept (first writer wins). */
    if (fchownat(tfd, de->d_name, 0, 0, AT_SYMLINK_NOFOLLOW) < 0 || fchmodat(tfd, de->d_name, 0644, 0) < 0)
      continue;
    if (renameat2(tfd, de->d_name, wheels_fd, de->d_name, RENAME_NOREPLACE) < 0 && errno != EEXIST)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "move %s into the wheel cache", de->d_name);
  }
  return 0;
}

char *package_tool_words(const struct buf *out, const char *hide) {
  const char *text = out->data ? out->data : "";
  size_t len = out->len;
  size_t start = len > 1500 ? len - 1500 : 0;
  const char *nl = start ? memchr(text + start, '\n', len - start) : NULL;
  if (nl != NULL)
    start = (size_t)(nl - text) + 1;
  char *tail = xstrndup(text + start, len - start);
  if (tail == NULL)
    return NULL;
  /* Hide the host path of the download folder. */
  char *hit;
  size_t tl = strlen(hide);
  while (tl > 0 && (hit = strstr(tail, hide)) != NULL)
    memmove(hit, hit + tl, strlen(hit + tl) + 1);
  return tail;
}

int packages_fetch(const struct mcp_config *cfg, const cJSON *packages, mcp_error_t *err) {
  struct passwd pwbuf, *pw = NULL;
  char pwtext[1024];
  if (getpwnam_r(cfg->package_user, &pwbuf, pwtext, sizeof(pwtext), &pw) != 0)
    pw = NULL;
  if (pw == NULL || pw->pw_uid == 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, 0, "package_user %s does not exist or is root", cfg->package_user);
  char wheels[PATH_MAX], tmp[64], tmp_path[PATH_MAX + 64], rnd[33];
  config_path(cfg, wheels, sizeof(wheels), "wheels");
  if (mkdir(wheels, 0755) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir %s", wheels);
  cleanup_close int wfd = open(wheels, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (wfd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open %s", wheels);
  random_hex32(rnd);
  snprintf(tmp, sizeof(tmp), ".dl-%.16s", rnd);
  snprintf(tmp_path, sizeof(tmp_path), "%s/%s", wheels, tmp);
  if (mkdirat(wfd, tmp, 0700) < 0 || fchownat(wfd, tmp, pw->pw_uid, pw->pw_gid, AT_SYMLINK_NOFOLLOW) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "make the download folder");

  cleanup_argv struct argv argv = {0};
  static const char *const pip[] = {"-m",
                                    "pip",
                                    "download",
                                    "--only-binary=:all:",
                                    "--disable-pip-version-check",
                                    "--no-input",
                                    "--progress-bar",
                                    "off",
                                    "--no-cache-dir",
                                    "--dest"};
  argv_add(&argv, cfg->python);
  for (size_t i = 0; i < ARRAY_SIZE(pip); i++)
    argv_add(&argv, pip[i]);
  argv_add(&argv, tmp_path);
  argv_add(&argv, "--index-url");
  argv_add(&argv, cfg->package_index);
  argv_add(&argv, "--find-links");
  argv_add(&argv, wheels);
  argv_add(&argv, "--");
  const cJSON *p;
  cJSON_ArrayForEach(p, packages) { argv_add(&argv, p->valuestring); }
  if (argv.oom)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "pip's command line");
  char home[PATH_MAX + 96];
  snprintf(home, sizeof(home), "HOME=%s", tmp_path);
  const char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", home, "PIP_CONFIG_FILE=/dev/null", NULL};
  cleanup_buf struct buf out = {0};
  struct proc_opts o = {.argv = argv.v,
                        .envp = envp,
                        .stdin_fd = -1,
                        .stderr_fd = -1,
                        .capture = &out,
                        .capture_stderr = true,
                        .capture_max = 1 << 20,
                        .timeout_ms = (int64_t)cfg->package_timeout * 1000,
                        .cwd = tmp_path,
                        .set_ids = true,
                        .uid = pw->pw_uid,
                        .gid = pw->pw_gid};
  int st = 0;
  int ret = run_process(&o, &st, err);
  if (ret == 0 && st != 0) {
    cleanup_free char *said = package_tool_words(&out, tmp_path);
    ret = mcp_fail_public(err, MCP_ERR_INVALID,
                          "The packages could not be downloaded as wheels from the package index; nothing was "
                          "installed and the code did not run. pip said:\n%s",
                          said ? said : "(nothing)");
  }
  if (ret == 0)
    ret = adopt_wheels(wfd, tmp, err);
  mcp_error_t rm = NULL;
  if (remove_tree_at(wfd, tmp, &rm) < 0)
    mcp_error_log_release(&rm, "packages: cleanup");
  return ret;
}
