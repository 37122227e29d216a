/* One JSON-RPC request being answered, as every method handler sees it
 * (the table of handlers is in mcp.c), and the JSON-RPC error codes. */
#ifndef MCP_RPC_H
#define MCP_RPC_H

#include <cjson/cJSON.h>

#include "common/settings.h"
#include "fcgi/http.h"
#include "fcgi/session.h"

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
  struct session *session; /* NULL for initialize, and for modern requests until a tool binds a sandbox */
  bool modern;             /* of the 2026-07-28 era (modern.h) */
  int log_level;           /* modern: _meta's logLevel as an index (stream.h), -1: none */
  const cJSON *id;
  const char *method;
  const cJSON *params; /* NULL when absent */
  cJSON *result;       /* set by a handler on success */
  int error_code;      /* set by a handler on failure */
  char error_message[256];
  cJSON *error_data;                /* optional error.data (modern), owned */
  int http_status;                  /* for errors; 200 by default */
  char new_session[SESSION_ID_MAX]; /* initialize: the id to announce */
};

typedef int (*rpc_handler)(struct rpc_call *c);

/* A copy of a JSON-RPC id that prints exactly as it was sent. */
cJSON *rpc_id_copy(const cJSON *id);
/* Set c->error_* and return -1. */
int rpc_fail(struct rpc_call *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
