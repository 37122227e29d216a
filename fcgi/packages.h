/* Python packages for a session (see packages.c). */
#ifndef MCP_PACKAGES_H
#define MCP_PACKAGES_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "common/error.h"
#include "common/settings.h"
#include "common/util.h"

/* One requirement: 0, or -1 with the reason in why. */
int package_check(const char *req, char *why, size_t size);
/* An array of at most max strings, each passing check: 0, or -1 with a
 * sentence in msg (shared by the pip and npm checks). */
int package_list_validate(const cJSON *packages, int max, int (*check)(const char *, char *, size_t), char *msg,
                          size_t size);
/* The last lines of a package tool's output, with the path `hide` removed. */
void package_tool_words(const struct buf *out, const char *hide, char *msg, size_t size);
/* The packages argument: 0, or -1 with a sentence in msg. */
int packages_validate(const cJSON *packages, char *msg, size_t size);
/* Download the wheels of packages (and their dependencies) into the
 * shared cache.  On a pip failure: MCP_ERR_INVALID, pip's last words in msg. */
int packages_fetch(const struct mcp_config *cfg, const cJSON *packages, char *msg, size_t size, mcp_error_t *err);

#endif
