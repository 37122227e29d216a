/* Python packages for a session (see packages.c). */
#ifndef MCP_PACKAGES_H
#define MCP_PACKAGES_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "common/error.h"
#include "common/settings.h"
#include "common/util.h"

/* What is wrong with one requirement (a phrase such as "has an invalid
 * extra"), or NULL when it is acceptable. */
const char *package_problem(const char *req);
/* An array of at most max strings, each without a problem: 0, or
 * MCP_ERR_INVALID with a sentence (shared by the pip and npm checks). */
int package_list_validate(const cJSON *packages, int max, const char *(*problem)(const char *), mcp_error_t *err);
/* The last lines of a package tool's output, with the path `hide` removed
 * (a new string, NULL when out of memory). */
char *package_tool_words(const struct buf *out, const char *hide);
/* The packages argument of execute_python: 0, or MCP_ERR_INVALID. */
int packages_validate(const cJSON *packages, mcp_error_t *err);
/* How long a package tool waits for the network (each try; one retry). */
#define PACKAGE_NET_TIMEOUT_S "10"
#define PACKAGE_NET_TIMEOUT_MS "10000"
/* Resolve packages (and their dependencies) against the index and copy
 * the wheels into the folder dst_fd.  When pip fails: MCP_ERR_INVALID,
 * with pip's last words in the client's sentence. */
int packages_fetch(const struct mcp_config *cfg, const cJSON *packages, int dst_fd, mcp_error_t *err);

#endif
