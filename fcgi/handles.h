/* Sandboxes as explicit handles (2026-07-28).  A handle IS a session id of
 * the store (session.h): the same folder, sandbox, workspace, limits
 * (max_sessions, the token's share) and expiry (idle_timeout), so the two
 * eras share everything below the protocol.  Its 128 random bits come after
 * an optional cell name and a dot (the routing prefix).  A handle is bound
 * to the token that made it and checked on every use: an unknown, expired
 * or foreign handle is an isError result that says to omit `sandbox`.
 *
 * Over a 2025 session the session is the sandbox: a `sandbox` argument, when
 * given, must name the session's own. */
#ifndef MCP_HANDLES_H
#define MCP_HANDLES_H

#include "fcgi/rpc.h"

/* Bind c->session for a call: the sandbox named by `handle` (NULL: a new
 * one, made for this call).  0, or -1 with c->result set (isError). */
int handles_bind(struct rpc_call *c, const char *handle, struct session *s);
/* Release what handles_bind bound (c->session back to NULL). */
void handles_release(struct rpc_call *c);
/* 2025 era: 0 when `handle` is NULL or the session's own id, else -1 with
 * c->result set (isError). */
int handles_check_own(struct rpc_call *c, const char *handle);
/* Name the call's sandbox in its result: structuredContent.sandbox (when
 * the result has structuredContent) and a sentence in the text. */
void handles_note(struct rpc_call *c);
/* The close_sandbox tool: end the sandbox named by arguments.sandbox. */
int handles_close(struct rpc_call *c, const cJSON *args);
/* The sentence that says how long an idle sandbox lives (tool texts). */
void handles_lifetime(const struct mcp_config *cfg, char *buf, size_t size);

#endif
