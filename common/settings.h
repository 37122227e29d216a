/* Configuration of the service: every limit, path, pool size and timeout.
 *
 * Sources, later ones win: built-in defaults, the file named by MCP_CONFIG
 * (or <state_dir>/mcp.conf when it exists), then environment variables
 * MCP_<KEY> (upper case).  The file holds `key = value` lines and # comments.
 * Sizes accept K, M, G suffixes (powers of 1024).  config_load() fails with
 * a sentence naming the bad key. */
#ifndef MCP_SETTINGS_H
#define MCP_SETTINGS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"

struct mcp_config {
  char state_dir[PATH_MAX];   /* sessions, pool, runsc root, skeleton root */
  char fcgi_socket[PATH_MAX]; /* the FastCGI socket nginx connects to */
  char socket_group[64];      /* group that may connect to it (nginx's workers) */
  char libexec_dir[PATH_MAX]; /* mcp-sandboxd, executor/, libmcpstatx.so */
  char backend[16];           /* "runsc", or "direct" (no isolation: tests only) */
  char runsc[PATH_MAX];       /* the runsc binary */
  char runsc_platform[16];
  char allowed_origins[1024]; /* comma-separated Origin values accepted besides localhost */
  char python[PATH_MAX];      /* the interpreter inside the sandbox */
  char preload_modules[512];  /* comma-separated modules the executor imports before its first call */
  char learn_modules[512];    /* ... and these once a call of the session has used them */
  char cgroup_parent[128];    /* parent cgroup of all sandboxes; "" = none; "auto" = per state folder */
  char audit_log[PATH_MAX];   /* one JSON line per tools/call; "" = none */
  char package_index[512];    /* PEP 503 index wheels are fetched from */
  char package_user[64];      /* unprivileged user that fetches them */
  char npm_registry[512];     /* npm registry for execute_javascript's packages */
  char node[PATH_MAX];        /* Node.js inside the sandbox (the host's /usr) */
  int package_timeout;        /* seconds for one fetch */
  int responders;             /* FastCGI responder processes; 0 = 2 x cores */
  int responder_threads;      /* requests each responder serves at once */
  int idle_timeout;           /* seconds without a request before a session expires */
  int timeout_default;        /* seconds, when a call gives no timeout_seconds */
  int timeout_max;            /* seconds, cap on timeout_seconds */
  int busy_wait;              /* seconds a call waits for a busy session */
  int pool_size;              /* sandboxes started ahead of demand */
  int max_sessions;
  int max_concurrent; /* executions at once across the server; 0 = 4 x cores */
  int capacity_wait;  /* seconds a call waits for a free execution slot */
  int cpu_limit;      /* CPU seconds per call */
  int nproc_limit;    /* processes/threads of the sandbox user */
  int nofile_limit;
  int sandbox_uid;
  int sandbox_gid;
  int sandbox_pids;          /* pids backstop of one sandbox (cgroup) */
  int sandboxes_pids;        /* pids of all sandboxes together (cgroup) */
  uint64_t max_body;         /* request body bytes */
  uint64_t output_limit;     /* bytes of stdout, and of stderr, returned per call */
  uint64_t memory_limit;     /* address space per call */
  uint64_t fsize_limit;      /* largest file a call may write */
  uint64_t tmp_size;         /* tmpfs /tmp */
  uint64_t shm_size;         /* tmpfs /dev/shm */
  uint64_t workspace_quota;  /* bytes of /work per session */
  uint64_t max_code;         /* bytes of `code` */
  uint64_t output_file_max;  /* largest output file inlined in a result */
  uint64_t output_total_max; /* output bytes inlined per call */
  int output_files_max;      /* output files returned per call */
  int input_files_max;       /* files a call may send */
  uint64_t sandbox_memory;   /* memory backstop of one sandbox (cgroup); 0 = 2 x memory_limit + 256M */
  uint64_t sandboxes_memory; /* memory of all sandboxes together (cgroup); 0 = 3/4 of RAM */
};

/* Fill cfg from defaults, file and environment. */
int config_load(struct mcp_config *cfg, mcp_error_t *err);
/* Apply one `key`, `value` pair (used by the loader and by tests). */
int config_set(struct mcp_config *cfg, const char *key, const char *value, mcp_error_t *err);
void config_defaults(struct mcp_config *cfg);
/* Print every key with its effective value, one `key = value` per line. */
void config_print(const struct mcp_config *cfg, FILE *out);
/* Join state_dir and a relative name. */
int config_path(const struct mcp_config *cfg, char *buf, size_t size, const char *name);

#endif
