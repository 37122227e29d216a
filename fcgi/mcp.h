/* MCP over Streamable HTTP: the per-request entry point and the method
 * table (mcp.c).  One call to mcp_serve() answers one HTTP request
 * completely; each method's handler takes the request's struct rpc_call
 * (rpc.h). */
#ifndef MCP_MCP_H
#define MCP_MCP_H

#include <cjson/cJSON.h>

#include "fcgi/rpc.h"

#define MCP_SERVER_NAME "mcp-sandbox"
#define MCP_LATEST_VERSION "2025-11-25"
/* JSON values a request body may hold (json_scan.h): each becomes a cJSON
 * node, so this bounds the tree a body makes (about 8 MB) whatever its
 * size.  A tools/call with input_files_max files is a few hundred. */
#define MCP_MAX_JSON_VALUES 100000

int mcp_serve(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink);

bool mcp_version_supported(const char *v);
/* prompts/list of both eras: this server has no prompts. */
int mcp_prompts_list(struct rpc_call *c);

#endif
