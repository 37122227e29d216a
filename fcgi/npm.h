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
/* Install the specs (once per set) into <state>/npm/<hash>; hash names
 * the tree for the executor.  When npm fails: MCP_ERR_INVALID, with npm's
 * last words in the client's sentence. */
int npm_stage(const struct mcp_config *cfg, const cJSON *packages, char hash[33], mcp_error_t *err);

#endif
