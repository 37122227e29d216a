/* What pip and npm share on the host (see pkgtools.c): the unprivileged
 * package_user and its folders, the host's network settings the tools
 * honour, the package caches with their size cap, and the copy of what a
 * tool resolved into the session's own folder.
 *
 *   <state>/package-cache/        package_user's, 0700: pip's HTTP cache (pip/) and npm's (npm/),
 *                                 capped at package_cache_max, least recently used first out
 *   <state>/package-cache.lock    installs hold it shared, the trim exclusively
 *   <state>/package-work/<rnd>/   one tool run's folder, package_user's, removed after it
 *   <state>/sessions/<id>/packages/<call>/   what the host resolved for one call, root's and
 *                                 read-only, bound (the packages folder) at /opt/mcp/packages
 *                                 into that session's sandbox only; removed when the call ends */
#ifndef MCP_PKGTOOLS_H
#define MCP_PKGTOOLS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/proc.h"
#include "common/settings.h"

#define PACKAGE_CACHE "package-cache"
#define PACKAGE_CACHE_LOCK "package-cache.lock"
#define PACKAGE_WORK "package-work"

struct package_user {
  uid_t uid;
  gid_t gid;
};
/* package_user, which must exist and not be root. */
int package_user_get(const struct mcp_config *cfg, struct package_user *pu, mcp_error_t *err);

/* The host's settings the tools honour, read once per process (the master
 * reads them at start, before it forks): the system's CA bundle, npm's and
 * pip's own configured proxy and CA (asked from `npm config get` and `pip
 * config list` as root), and the proxy variables of the service's
 * environment. */
void package_host_settings_load(const struct mcp_config *cfg);

/* A tool's environment and the options it adds for the host's settings. */
enum package_tool { TOOL_PIP, TOOL_NPM };
struct tool_env {
  char *v[40]; /* NULL-terminated, owned */
  size_t n;
};
void tool_env_free(struct tool_env *e);
static inline void cleanup_tool_envp(struct tool_env *e) { tool_env_free(e); }
#define cleanup_tool_env __attribute__((cleanup(cleanup_tool_envp)))
/* PATH, LANG, HOME=home, the proxy variables, and for npm
 * NODE_EXTRA_CA_CERTS (the system's CA bundle); extra: more NAME=value
 * strings, NULL-terminated (may be NULL).  -1 when out of memory. */
int tool_env_build(const struct mcp_config *cfg, enum package_tool tool, const char *home, const char *const *extra,
                   struct tool_env *e);
/* Options for the host's proxy and CA (pip: --cert, --proxy; npm:
 * --cafile, --proxy, --https-proxy, --noproxy), appended to argv; the
 * strings stay valid for the process's life. */
void tool_host_options(const struct mcp_config *cfg, enum package_tool tool, struct argv *argv);

/* One tool run's folder, <state>/package-work/<rnd>, made by root and
 * handed to package_user (0700). */
struct package_work {
  int fd;        /* the folder */
  int parent_fd; /* <state>/package-work */
  char name[40]; /* its name there */
  char path[PATH_MAX + 64];
};
int package_work_open(const struct mcp_config *cfg, const struct package_user *pu, struct package_work *w,
                      mcp_error_t *err);
/* Remove the folder (without following anything package_user left in it). */
void package_work_close(struct package_work *w);

/* The cache lock: shared for an install (waits), exclusive for the trim
 * (does not wait).  The descriptor, -1 with err, or -EWOULDBLOCK when an
 * exclusive lock is not to be had now. */
int package_cache_lock(const struct mcp_config *cfg, bool exclusive, mcp_error_t *err);
/* Remove the least recently used files of <state>/package-cache until it
 * holds at most package_cache_max bytes, when no install runs: 1 when it
 * checked (and trimmed), 0 when an install holds the cache (nothing
 * removed), -1 on error.  Never follows a link; never leaves the cache's
 * file system. */
int package_cache_trim(const struct mcp_config *cfg, mcp_error_t *err);

/* Called after an entry was listed and before it is opened (tests swap
 * it for a link there).  NULL in the service. */
extern void (*package_copy_hook)(int dirfd, const char *name);
/* Copy the *.whl regular files of src (package_user's) into dst as root's
 * 0644 files; anything else is left.  Never follows a link, never changes
 * anything below src.  The number of wheels copied, or -1. */
int package_copy_wheels(int src_fd, int dst_fd, mcp_error_t *err);
/* Copy the tree src into dst (an empty folder of root's): folders 0755,
 * regular files 0644 (0755 when executable), links as links, nothing else;
 * at most max_bytes of file content.  Never follows a link. */
int package_copy_tree(int src_fd, int dst_fd, uint64_t max_bytes, mcp_error_t *err);

#endif
