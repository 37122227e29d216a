/* The 2026-07-28 era of MCP ("modern"), beside the 2025 era on the same
 * /mcp, decided per request.  A modern request is stateless: it carries its
 * protocol version and client capabilities in params._meta and mirrors its
 * method, its name and the `sandbox` argument in headers; state lives in
 * sandbox handles that tools mint and take as arguments (fcgi/handles.c).
 *
 * mcp.c hands a POST to modern_post() when modern_request() says so; every
 * other POST goes the 2025 way (sessions, initialize).  modern_post()
 * checks in the order of the specification, each failure a JSON-RPC error
 * with HTTP 400 unless said otherwise:
 *   1. no MCP-Protocol-Version header                       -32020 HeaderMismatch
 *   2. _meta missing or malformed (protocolVersion, clientCapabilities,
 *      clientInfo, logLevel)                                 -32602 Invalid params
 *   3. header and _meta versions differ                     -32020
 *   4. a version this era does not serve                    -32022, data {supported, requested}
 *   5. Mcp-Method missing or different from the body        -32020
 *   6. Mcp-Name missing or different (tools/call: params.name,
 *      resources/read: params.uri, prompts/get)             -32020
 *   7. an unknown or removed method (initialize, ping,
 *      logging/setLevel, resources/subscribe, ...)          404, -32601
 *   8. tools/call: Mcp-Param-Sandbox and arguments.sandbox  -32020
 * Header values are compared after trimming spaces and tabs; Mcp-Name and
 * Mcp-Param-Sandbox may be "=?base64?<base64 with padding>?=".  A modern
 * notification gets 202; results carry resultType, serverInfo in _meta and,
 * for lists and reads, ttlMs and cacheScope. */
#ifndef MCP_MODERN_H
#define MCP_MODERN_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "fcgi/rpc.h"

#define MCP_MODERN_VERSION "2026-07-28"
#define HEADER_MISMATCH (-32020)
#define UNSUPPORTED_PROTOCOL_VERSION (-32022)

/* Is this POST of the modern era: params._meta names a protocol version,
 * or modern_by_headers()? */
bool modern_request(const struct http_request *req, const cJSON *msg);
/* Without an Mcp-Session-Id, does the MCP-Protocol-Version header name a
 * version that is not of the 2025 era (also for GET and DELETE)? */
bool modern_by_headers(const struct http_request *req);
/* Answer a modern POST completely (msg: a JSON-RPC object, jsonrpc 2.0). */
int modern_post(struct mcp_ctx *ctx, const struct http_request *req, struct http_sink *sink, const cJSON *msg);
/* Add resultType, serverInfo and the method's cache hints to c->result. */
void modern_decorate(struct rpc_call *c);
/* A header value: trimmed, and with `decode` (Mcp-Name, Mcp-Param-*: the
 * only headers that may carry it) "=?base64?...?=" decoded.  NULL when the
 * value is malformed (bad base64, bytes outside visible ASCII, space, tab). */
char *modern_header_value(const char *raw, bool decode, size_t *len);

#endif
