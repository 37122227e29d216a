/* MCP over Streamable HTTP: the per-request entry point and the method
 * table.  One call to mcp_serve() answers one HTTP request completely. */
#ifndef MCP_MCP_H
#define MCP_MCP_H

#include <cjson/cJSON.h>

#include "fcgi/http.h"
#include "fcgi/session.h"
#include "common/settings.h"

#define MCP_SERVER_NAME "mcp-sandbox"
#define MCP_LATEST_VERSION "2025-11-25"

/* JSON-RPC and MCP error codes */
#define RPC_PARSE_ERROR (-32700)
#define RPC_INVALID_REQUEST (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS (-32602)
#define RPC_INTERNAL_ERROR (-32603)
#define MCP_SESSION_NOT_FOUND (-32001)

/* Long-lived state of one responder process. */
struct mcp_ctx {
  const struct mcp_config *cfg;
  struct store *store;
};

/* One JSON-RPC request being answered. */
struct rpc_call {
  struct mcp_ctx *ctx;
  const struct http_request *http;
  struct http_sink *sink;
  struct session *session; /* NULL for initialize */
  const cJSON *id;
  const char *method;
  const cJSON *params; /* NULL when absent */
  cJSON *result;       /* set by a handler on success */
  int error_code;      /* set by a handler on failure */
  char error_message[256];
  int http_status;      /* for errors; 200 by default */
  char new_session[37]; /* initialize: the id to announce */
};

typedef int (*rpc_handler)(struct rpc_call *c);

int mcp_serve(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink);

bool mcp_version_supported(const char *v);
/* A copy of a JSON-RPC id that prints exactly as it was sent. */
cJSON *rpc_id_copy(const cJSON *id);
/* Set c->error_* and return -1. */
int rpc_fail(struct rpc_call *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
