/* npm packages for execute_javascript (see npm.c). */
#ifndef MCP_NPM_H
#define MCP_NPM_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "common/error.h"
#include "common/settings.h"

/* What is wrong with one spec (name[@version|range|tag]), or NULL. */
const char *npm_spec_problem(const char *spec);
/* The packages argument of execute_javascript: 0, or MCP_ERR_INVALID. */
int npm_validate(const cJSON *packages, mcp_error_t *err);
/* 32 hex naming a set of specs (SHA-256 of the sorted specs): the
 * executor's node_modules/.mcp-stage says which set it holds. */
int npm_set_key(const cJSON *packages, char key[33]);
/* Install the specs, resolved against the registry now, and copy the
 * tree into dst_fd/node_modules.  When npm fails: MCP_ERR_INVALID, with
 * npm's last words in the client's sentence. */
int npm_fetch(const struct mcp_config *cfg, const cJSON *packages, int dst_fd, mcp_error_t *err);

#endif
