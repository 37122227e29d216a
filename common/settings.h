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

/* The fields are declared in settings.def, once for every use. */
struct mcp_config {
#define SETTING_INT(name, dflt, lo, hi, shown, doc) int name;
#define SETTING_SIZE(name, dflt, lo, hi, shown, doc) uint64_t name;
#define SETTING_STR(name, size, dflt, shown, doc) char name[size];
#include "common/settings.def"
#undef SETTING_INT
#undef SETTING_SIZE
#undef SETTING_STR
};

/* Fill cfg from defaults, file and environment. */
int config_load(struct mcp_config *cfg, mcp_error_t *err);
/* Apply one `key`, `value` pair (used by the loader and by tests). */
int config_set(struct mcp_config *cfg, const char *key, const char *value, mcp_error_t *err);
void config_defaults(struct mcp_config *cfg);
/* Print every key with its effective value, one `key = value` per line. */
void config_print(const struct mcp_config *cfg, FILE *out);
/* The README's table of settings (key, default, meaning), in Markdown. */
void config_markdown(FILE *out);
/* Join state_dir and a relative name. */
int config_path(const struct mcp_config *cfg, char *buf, size_t size, const char *name);
/* The FastCGI socket of the endpoints without a token (/healthz, /cell,
 * /metrics) beside fcgi_socket: its name with "-ops" before a ".sock"
 * ending (fcgi.sock: fcgi-ops.sock), or after it.  Each responder serves
 * it with a thread of its own, so that probes and scrapes are answered
 * while every other thread holds a request.  -1 when too long. */
int config_ops_socket(const struct mcp_config *cfg, char *buf, size_t size);

/* nginx lets one token have this many requests at once (`limit_conn
 * mcp_token_conn` in the nginx templates; test-settings checks that they
 * agree), and each holds a responder thread in the cell. */
#define MCP_NGINX_TOKEN_REQUESTS 64
/* responder_threads "auto" for `responders` processes: at least 8, and
 * enough that all of them hold half as many again as one token may have
 * (96): a token without max_requests leaves the others 32. */
int config_auto_responder_threads(int responders);

#endif
