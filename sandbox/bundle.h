/* OCI bundle of a session's sandbox, and the shared skeleton root it uses.
 *
 * The skeleton (<state>/rootfs) holds empty mount points, a few generated
 * files (passwd, group, hosts) and the usr-merge symlinks.  It is created
 * once and is the read-only root of every sandbox: runsc would otherwise
 * create missing mount points on the host inside root.path, and the root
 * mount caches host files, so nothing below it changes while sandboxes run.
 * What the code needs from the host comes in read-only bind mounts. */
#ifndef MCP_BUNDLE_H
#define MCP_BUNDLE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

#define SANDBOX_EXECUTOR "/opt/mcp/executor" /* a folder: python3 runs its __main__.py */
#define SANDBOX_PRELOAD "/opt/mcp/libmcpstatx.so"
#define SANDBOX_WORKDIR "/work"
/* The session's own resolved packages: <session>/packages (one folder per
 * call, fcgi/pkgtools.h), bound read-only here in that session's sandbox only. */
#define SANDBOX_PACKAGES "/opt/mcp/packages"
#define SESSION_PACKAGES_DIR "packages"
#define SANDBOX_EGRESS "/opt/mcp/egress" /* the session's egress folder: the relay's socket (sandbox/egress.h) */

struct bundle_spec {
  const char *rootfs;          /* skeleton root (host path) */
  const char *workspace;       /* the session's workspace (host path) */
  const char *executor;        /* host path of the executor folder (__main__.py, mcp_executor/) */
  const char *preload_lib;     /* host path of libmcpstatx.so, or NULL */
  const char *packages;        /* host path of the session's packages folder, or NULL */
  const char *egress;          /* host path of the session's egress folder, or NULL */
  const char *python;          /* interpreter inside the sandbox */
  const char *preload_modules; /* imported by the executor before its first call */
  const char *learn_modules;   /* imported by it after a call used them */
  const char *cgroups_path;    /* NULL: runsc runs with --ignore-cgroups */
  uint64_t memory_backstop;    /* cgroup memory limit of the whole sandbox, 0: none */
  int64_t pids_backstop;       /* cgroup pids limit, 0: none */
  uint64_t cpu_shares;         /* the cgroup's CPU weight from its creation (v1 shares), 0: the default */
  int uid, gid;                /* of the code; the executor itself runs as in-sandbox root */
  uint64_t tmp_size, shm_size;
  int nofile;
  bool seccomp; /* add the seccomp policy (runsc --oci-seccomp) */
};

/* The config.json object, or NULL with *err set. */
cJSON *bundle_config(const struct bundle_spec *spec, mcp_error_t *err);
/* Write config.json into the bundle directory dirfd, atomically. */
int bundle_write(int dirfd, const struct bundle_spec *spec, mcp_error_t *err);
/* Create or complete the skeleton root at path. */
int rootfs_prepare(const char *path, int uid, int gid, mcp_error_t *err);

#endif
