/* Python packages for a session (see packages.c). */
#ifndef MCP_PACKAGES_H
#define MCP_PACKAGES_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "error.h"
#include "settings.h"

/* One requirement: 0, or -1 with the reason in why. */
int package_check(const char *req, char *why, size_t size);
/* The packages argument: 0, or -1 with a sentence in msg. */
int packages_validate(const cJSON *packages, char *msg, size_t size);
/* Download the wheels of packages (and their dependencies) into the
 * shared cache.  On a pip failure: MCP_ERR_INVALID, pip's last words in msg. */
int packages_fetch(const struct mcp_config *cfg, const cJSON *packages, char *msg, size_t size, mcp_error_t *err);

#endif
