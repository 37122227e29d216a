/* Python packages for a session.
 *
 * Each requirement is checked to be a plain PEP 508 requirement (name,
 * extras, version specifiers): options such as -r or --index-url, paths,
 * URLs and environment markers are refused before anything runs.  Wheels
 * only are fetched (no build script runs anywhere) from the configured
 * index by `pip download` running as an unprivileged user (package_user)
 * that can reach neither the sessions nor the tokens.  Each request is
 * resolved against the index; exactly the wheels pip resolved are copied
 * into the call's folder of the session (pkgtools.h), which only that
 * session's sandbox sees, read-only, below /opt/mcp/packages.  The
 * executor installs them from there, as the sandbox user, into
 * /work/.local. */
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
#include "fcgi/pkgtools.h"

#define MAX_PACKAGES 32
#define MAX_REQUIREMENT 200

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

int packages_fetch(const struct mcp_config *cfg, const cJSON *packages, int dst_fd, mcp_error_t *err) {
  struct package_user pu;
  if (package_user_get(cfg, &pu, err) < 0)
    return -1;
  /* Installs share the cache; its trim waits for none of them to run. */
  cleanup_close int lock = package_cache_lock(cfg, false, err);
  if (lock < 0)
    return -1;
  struct package_work w;
  if (package_work_open(cfg, &pu, &w, err) < 0)
    return -1;
  char dest[PATH_MAX + 80], cache[PATH_MAX];
  snprintf(dest, sizeof(dest), "%s/dl", w.path);
  config_path(cfg, cache, sizeof(cache), PACKAGE_CACHE "/pip");
  cleanup_argv struct argv argv = {0};
  /* Resolved against the index for this request: no --find-links, no
   * other tenant's files; pip's own HTTP cache (package_user's) revalidates
   * as the index says.  A registry that cannot be reached fails within
   * seconds: one retry, a short socket timeout. */
  static const char *const pip[] = {"-m",
                                    "pip",
                                    "download",
                                    "--only-binary=:all:",
                                    "--disable-pip-version-check",
                                    "--no-input",
                                    "--progress-bar",
                                    "off",
                                    "--timeout",
                                    PACKAGE_NET_TIMEOUT_S,
                                    "--retries",
                                    "1",
                                    "--dest"};
  argv_add(&argv, cfg->python);
  for (size_t i = 0; i < ARRAY_SIZE(pip); i++)
    argv_add(&argv, pip[i]);
  argv_add(&argv, dest);
  argv_add(&argv, "--cache-dir");
  argv_add(&argv, cache);
  argv_add(&argv, "--index-url");
  argv_add(&argv, cfg->package_index);
  tool_host_options(cfg, TOOL_PIP, &argv);
  argv_add(&argv, "--");
  const cJSON *p;
  cJSON_ArrayForEach(p, packages) { argv_add(&argv, p->valuestring); }
  static const char *const extra[] = {"PIP_CONFIG_FILE=/dev/null", NULL};
  cleanup_tool_env struct tool_env env = {0};
  if (argv.oom || tool_env_build(cfg, TOOL_PIP, w.path, extra, &env) < 0) {
    package_work_close(&w);
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "pip's command line");
  }
  cleanup_buf struct buf out = {0};
  struct proc_opts o = {.argv = argv.v,
                        .envp = (const char *const *)env.v,
                        .stdin_fd = -1,
                        .stderr_fd = -1,
                        .capture = &out,
                        .capture_stderr = true,
                        .capture_max = 1 << 20,
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
                          "The packages could not be downloaded as wheels from the package index; nothing was "
                          "installed and the code did not run. pip said:\n%s",
                          said ? said : "(nothing)");
  }
  if (ret == 0) {
    /* Exactly the files pip resolved, copied into root's own. */
    cleanup_close int dl = openat(w.fd, "dl", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dl < 0)
      ret = mcp_fail(err, MCP_ERR_INTERNAL, errno, "open the download folder");
    else if (package_copy_wheels(dl, dst_fd, err) < 0)
      ret = -1;
  }
  package_work_close(&w);
  close(steal_fd(&lock));
  mcp_error_t trim = NULL;
  if (package_cache_trim(cfg, &trim) < 0)
    mcp_error_log_release(&trim, "packages: trim the cache");
  return ret < 0 ? -1 : 0;
}
