/* The tasks extension of the 2026-07-28 era, `io.modelcontextprotocol/tasks`
 * (the ext-tasks repository, specification/draft/tasks.md): a tools/call
 * may be answered with a task (resultType "task"), which the client polls
 * with tasks/get, answers with tasks/update and ends with tasks/cancel.
 *
 * A task IS a background run (fcgi/runs.h), one mechanism underneath: its
 * taskId is the run id `<sandbox handle>.r<16 hex>`, so it carries the
 * handle and the cell's name before it (a router routes a task as it routes
 * its sandbox); it lives in the sandbox's session folder, written by the
 * supervisor before the answer goes out (a tasks/get right after the
 * CreateTaskResult finds it), so any responder serves it and it outlives
 * responders and service restarts as runs do; get_run and cancel_run take
 * its id too.  It is bound to its token: every request of the extension opens it for
 * the caller's token, and a task of another token is "not found" exactly
 * like one that never existed.
 *
 * Only a request that declares the extension in
 * _meta["io.modelcontextprotocol/clientCapabilities"].extensions gets a
 * task; tasks_plan() decides, for execute_python and execute_javascript:
 *   background: true                                     a task
 *   timeout_seconds above task_after, up to background_timeout_max
 *   (no egress_allow: a run has no network)               a task
 *   timeout_seconds above timeout_max (no egress_allow)   a task (the tool refuses one above
 *                                                        background_timeout_max); without the
 *                                                        extension -32021, up to that bound
 *                                                        (only a task could run it)
 * Everything else runs as a plain call (background: true without the
 * extension answers with a run id, as before).  Absent timeout_seconds
 * counts as timeout_default.
 *
 * A run as tasks/get shows it:
 *   running                    working    statusMessage: its age, its limit, its newest output line
 *   finished                   completed  result: the CallToolResult a plain call returns (isError when
 *                                         the code failed), its output files and sandbox included
 *   timed_out                  completed  result with timed_out: true, isError
 *   lost, done.json says so    completed  result with sandbox_restarted: true, isError (the sandbox
 *   (the sandbox died under it)           died under it: what a plain call returns then)
 *   lost, no done.json         failed     error -32603 (the service restarted under it: the
 *   (its supervisor died)                 request could not finish)
 *   cancelled                  cancelled
 * createdAt is the run's start, lastUpdatedAt its end (while it works: its
 * newest output).  ttlMs counts from createdAt to the earliest moment the
 * server may discard the task, with its sandbox: idle_timeout after the
 * later of the run's end and the sandbox's last use (while it works,
 * idle_timeout after now, so it grows).  pollIntervalMs is a tenth of the
 * task's age, at least 500 ms, at most task_poll_max.  No task of this
 * server asks the client for input: none is ever input_required, so every
 * inputResponses key of tasks/update is not outstanding and is ignored
 * (the specification's rule), and the ack is empty.  tasks/cancel asks the
 * supervisor to end the run (every process, within a second) and
 * acknowledges at once, for a task that ended already too.
 *
 * Errors, as JSON-RPC errors:
 *   tasks/get, tasks/update, tasks/cancel from a request that
 *   does not declare the extension                                 400, -32021, data.requiredCapabilities
 *   taskId missing or not a string; no such task (or another
 *   token's, or its sandbox ended or expired)                      200, -32602
 *   inputResponses missing or not an object (tasks/update)         200, -32602
 *   Mcp-Name missing or different from params.taskId (modern.c)    400, -32020
 * tasks/result and tasks/list, of the 2025-11-25 tasks, are unknown methods
 * (404, -32601); no task status notifications are sent (subscriptions/listen
 * is not served). */
#ifndef MCP_TASKS_H
#define MCP_TASKS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "common/settings.h"
#include "fcgi/rpc.h"

#define TASKS_EXTENSION "io.modelcontextprotocol/tasks"
#define MISSING_REQUIRED_CLIENT_CAPABILITY (-32021)

enum task_plan {
  TASK_PLAIN,           /* a plain call (or a run id, for background: true) */
  TASK_CREATE,          /* a task */
  TASK_NEEDS_EXTENSION, /* only as a task, and the request did not declare the extension: -32021 */
};

/* Does this request's _meta declare the extension (an object under
 * clientCapabilities.extensions)? */
bool tasks_declared(const cJSON *params);
/* What becomes of a code tool's call with these arguments (as sent; a
 * value of a wrong type is left to the tool, which refuses it). */
enum task_plan tasks_plan(const struct mcp_config *cfg, bool modern, bool declared, const cJSON *args);
/* -32021 with data.requiredCapabilities naming the extension, HTTP 400;
 * what: the sentence after "Missing required client capability: ".
 * Returns -1. */
int tasks_missing_extension(struct rpc_call *c, const char *what);
/* The CreateTaskResult for the run just started (its id), or NULL. */
cJSON *tasks_created(struct rpc_call *c, const char *run_id);
/* Add capabilities.extensions["io.modelcontextprotocol/tasks"] = {} (server/discover). */
void tasks_capability(cJSON *capabilities);
/* Is this one of the methods below (Mcp-Name mirrors params.taskId)? */
bool tasks_method(const char *method);

/* The methods, for modern.c's table: 0 with c->result, or -1 with c->error_*. */
int tasks_get(struct rpc_call *c);
int tasks_update(struct rpc_call *c);
int tasks_cancel(struct rpc_call *c);

#endif
