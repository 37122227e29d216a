/* The tools this server offers (a code tool per language, fcgi/langs.h),
 * their schemas (schema.c), argument validation and the call (tools.c),
 * and the results (results.c). */
#ifndef MCP_TOOLS_H
#define MCP_TOOLS_H

#include <cjson/cJSON.h>

#include "common/egress.h"
#include "fcgi/call.h"
#include "fcgi/langs.h"
#include "fcgi/rpc.h"

#define CLOSE_SANDBOX "close_sandbox" /* the modern era's tool that ends a sandbox */
#define MAX_ENV_VARS 256
#define MAX_ENV_NAME 256
#define MAX_ENV_VALUE 32768

/* The result of tools/list: one tool per language of fcgi/langs.c that
 * this host can run, in that order; modern (2026-07-28): with the texts of
 * that era and close_sandbox last. */
cJSON *tools_list(const struct mcp_config *cfg, bool modern);
/* tools/call: 0 with c->result set (tool failures are results with
 * isError), -1 with c->error_* for protocol errors (unknown tool). */
int tools_call(struct rpc_call *c);
/* How long a code call may keep its responder: its timeout, every wait
 * and grace (a persistent call's, its packages'). */
int64_t call_budget_s(const struct mcp_config *cfg, int timeout_s, bool persistent, bool packages);
/* A notification for a session (notifications/cancelled, ...). */
void tools_notification(struct mcp_ctx *ctx, struct session *s, const char *method, const cJSON *params);

/* Validated arguments of a code tool (execute_python, execute_javascript). */
struct code_args {
  const struct lang *lang;
  const char *code;
  const cJSON *env;
  const cJSON *packages;
  const cJSON *files;
  const char *sandbox; /* the `sandbox` argument, or NULL */
  int timeout_s;
  bool persistent;                        /* in the sandbox's persistent interpreter */
  bool reset;                             /* end that interpreter first */
  bool background;                        /* a background run: the call returns its id at once */
  bool task;                              /* ... as a task (fcgi/tasks.h): the call returns a CreateTaskResult */
  bool egress_given;                      /* the call narrowed its egress policy ... */
  char egress_allow[EGRESS_LIST_MAX + 1]; /* ... to these hosts (fcgi/egress.h) */
};
/* 0, or MCP_ERR_INVALID with a sentence for the client. */
int code_args_parse(const struct mcp_config *cfg, const struct lang *lang, const cJSON *args, struct code_args *out,
                    mcp_error_t *err);
/* The same; task: the call runs as a task (a background run, whatever its
 * `background` says). */
int code_args_parse_task(const struct mcp_config *cfg, const struct lang *lang, const cJSON *args, bool task,
                         struct code_args *out, mcp_error_t *err);
/* The CallToolResult of a finished call, whatever its language. */
cJSON *call_tool_result(const struct mcp_config *cfg, const struct call_result *r);
/* A CallToolResult with isError and one sentence. */
cJSON *tool_error_result(const char *sentence);
/* Add what the call left in output/ to c->result; returns the bytes inlined. */
uint64_t results_add_outputs(struct rpc_call *c);
/* The CallToolResult of a background start: the run's id and status. */
cJSON *run_started_result(const struct mcp_config *cfg, const struct call_result *r);
/* The sentence for a call the executor refused (call_result.refused). */
const char *refused_sentence(const char *why);
/* get_run and cancel_run (run_tools.c): 0 with c->result set. */
int run_tools_get(struct rpc_call *c, const cJSON *args);
int run_tools_cancel(struct rpc_call *c, const cJSON *args);
/* The files an ended run left in output/, into c->result (a CallToolResult
 * with structuredContent): collected once, then kept with the run. */
struct run;
void run_tools_add_files(struct rpc_call *c, struct run *r);
#define GET_RUN "get_run"
#define CANCEL_RUN "cancel_run"

#endif
