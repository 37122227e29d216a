/* npm packages for execute_javascript (see npm.c). */
#ifndef MCP_NPM_H
#define MCP_NPM_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "common/error.h"
#include "common/settings.h"

/* One spec (name[@version|range|tag]): 0, or -1 with the reason. */
int npm_spec_check(const char *spec, char *why, size_t size);
/* The packages argument of execute_javascript. */
int npm_validate(const cJSON *packages, char *msg, size_t size);
/* Install the specs (once per set) into <state>/npm/<hash>; hash names
 * the tree for the executor.  npm's failure: MCP_ERR_INVALID, its last
 * words in msg. */
int npm_stage(const struct mcp_config *cfg, const cJSON *packages, char hash[33], char *msg, size_t size,
              mcp_error_t *err);

#endif
