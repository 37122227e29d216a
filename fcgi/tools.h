/* The tools this server offers (execute_python), their schemas, argument
 * validation and result building. */
#ifndef MCP_TOOLS_H
#define MCP_TOOLS_H

#include <cjson/cJSON.h>

#include "fcgi/mcp.h"
#include "fcgi/call.h"

#define MAX_ENV_VARS 256
#define MAX_ENV_NAME 256
#define MAX_ENV_VALUE 32768

/* The result of tools/list. */
cJSON *tools_list(const struct mcp_config *cfg);
/* execute_javascript exists only where Node.js is installed. */
bool tools_javascript_available(const struct mcp_config *cfg);
/* tools/call: 0 with c->result set (tool failures are results with
 * isError), -1 with c->error_* for protocol errors (unknown tool). */
int tools_call(struct rpc_call *c);
/* A notification for a session (notifications/cancelled, ...). */
void tools_notification(struct mcp_ctx *ctx, struct session *s, const char *method, const cJSON *params);

enum tool_lang { LANG_PYTHON, LANG_JAVASCRIPT };

/* Validated arguments of execute_python and execute_javascript. */
struct python_args {
  enum tool_lang lang;
  const char *code;
  const cJSON *env;
  const cJSON *packages;
  const cJSON *files;
  int timeout_s;
};
/* 0, or -1 with a client-facing sentence in msg. */
int code_args_parse(const struct mcp_config *cfg, enum tool_lang lang, const cJSON *args, struct python_args *out,
                    char *msg, size_t msg_size);
/* code_args_parse for execute_python. */
int python_args_parse(const struct mcp_config *cfg, const cJSON *args, struct python_args *out, char *msg,
                      size_t msg_size);
/* The CallToolResult for a finished call. */
cJSON *python_result(const struct mcp_config *cfg, const struct call_result *r);
/* A CallToolResult with isError and one sentence. */
cJSON *tool_error_result(const char *sentence);
/* Add what the call left in output/ to c->result; returns the bytes inlined. */
uint64_t results_add_outputs(struct rpc_call *c);
/* Bytes to a JSON-safe string: invalid UTF-8 and NUL become U+FFFD. */
char *utf8_sanitize(const char *data, size_t len);

#endif
