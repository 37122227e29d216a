/* The HTTP side of Streamable HTTP, independent of FastCGI: what a request
 * carries (filled from FastCGI parameters by responder.c, or by tests and
 * fuzzers directly), where the response bytes go, and the header rules. */
#ifndef MCP_HTTP_H
#define MCP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/settings.h"

struct http_request {
  const char *method;           /* REQUEST_METHOD */
  const char *content_type;     /* CONTENT_TYPE */
  const char *accept;           /* HTTP_ACCEPT */
  const char *origin;           /* HTTP_ORIGIN */
  const char *host;             /* HTTP_HOST */
  const char *session_id;       /* HTTP_MCP_SESSION_ID */
  const char *protocol_version; /* HTTP_MCP_PROTOCOL_VERSION */
  const char *last_event_id;    /* HTTP_LAST_EVENT_ID: a GET that resumes a stream */
  /* 2026-07-28: the method, the name (tool, resource URI) and the
   * `sandbox` argument mirrored from the body (modern.c checks them). */
  const char *mcp_method;    /* HTTP_MCP_METHOD */
  const char *mcp_name;      /* HTTP_MCP_NAME */
  const char *param_sandbox; /* HTTP_MCP_PARAM_SANDBOX */
  const char *token_id;      /* MCP_TOKEN_ID: the name of the bearer token nginx accepted */
  const char *request_id;    /* nginx's $request_id, for logs */
  const char *forwarded_by;  /* HTTP_MCP_FORWARDED_BY: the cell that forwarded it (fcgi/forward.h) */
  const char *endpoint;      /* MCP_ENDPOINT: "metrics" or "healthz" from their nginx locations */
  const char *body;
  size_t body_len;
  bool body_too_large; /* more than max_body bytes were sent */
};

/* Where response bytes go: the FastCGI stream, or a buffer in tests.  A
 * responder cuts a connection that is still being written to after its
 * deadline (a client that reads slowly must not hold a responder thread
 * for long): set_deadline moves it, for a call that may run that long. */
struct http_sink {
  int (*write)(void *opaque, const char *data, size_t len);
  int (*flush)(void *opaque);
  void *opaque;
  void (*set_deadline)(void *guard, int64_t deadline_ms); /* may be NULL */
  /* Has the client gone away (nginx closed its connection)?  May be NULL. */
  bool (*peer_gone)(void *guard);
  void *guard;
};
/* Give this response until deadline_ms (now_ms() based) to be written. */
void http_set_deadline(struct http_sink *sink, int64_t deadline_ms);
/* True when the connection the response goes to was closed by the peer. */
bool http_peer_gone(struct http_sink *sink);

/* Does the Accept header admit `type` ("application/json")?  A missing
 * header admits nothing; q=0 excludes; wildcards match. */
bool http_accepts(const char *accept, const char *type);
/* Is the media type application/json (parameters such as charset allowed)? */
bool http_is_json(const char *content_type);
/* Origin absent, localhost, or listed in allowed_origins. */
bool http_origin_allowed(const struct mcp_config *cfg, const char *origin);
/* Reason phrase of a status code. */
const char *http_reason(int status);

/* Write a complete response: status line, headers ("Name: value" strings,
 * NULL-terminated list), Content-Type when not NULL, and body. */
int http_send(struct http_sink *sink, int status, const char *content_type, const char *const *headers,
              const char *body, size_t len);
/* Write the head only (for streams); the body follows with sink->write. */
int http_begin(struct http_sink *sink, int status, const char *content_type, const char *const *headers);

#endif
