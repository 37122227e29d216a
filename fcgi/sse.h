/* Server-sent events for one response (a tools/call answered as a stream):
 * the head, an optional priming event, JSON-RPC messages as events, each
 * flushed at once (nginx passes them through unbuffered).  A client that
 * went away only makes later writes no-ops: the call goes on. */
#ifndef MCP_SSE_H
#define MCP_SSE_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "fcgi/http.h"

struct sse {
  struct http_sink *sink;
  bool started;
  bool broken; /* a write failed: the client is gone */
  bool no_ids; /* 2026-07-28: events carry no ids (streams do not resume) */
  unsigned next;
  char prefix[20];
};

/* Send the head; with priming, an event with an id and empty data first
 * (2025-11-25: lets a client resume). */
int sse_begin(struct sse *s, struct http_sink *sink, bool priming);
/* The same with extra response headers ("Name: value", NULL-terminated). */
int sse_begin_with(struct sse *s, struct http_sink *sink, bool priming, const char *const *extra);
/* 2026-07-28: the head and a comment; events without ids, no priming. */
int sse_begin_modern(struct sse *s, struct http_sink *sink);
/* A resumed stream (a GET with Last-Event-ID): the head, then events
 * whose ids go on from next under the stream's own prefix. */
int sse_resume(struct sse *s, struct http_sink *sink, const char *prefix, unsigned next);
/* A comment line (":"): keeps intermediaries and clients from timing out. */
int sse_keepalive(struct sse *s);
/* One JSON-RPC message as an event. */
int sse_send(struct sse *s, const cJSON *msg);

/* The position of a log level of notifications/message (RFC 5424's
 * order, "debug" first), or -1 when name is none of them. */
int log_level_index(const char *name);

#endif
