/* A tools/call answered as a stream (see stream.c).  In the 2026-07-28 era
 * (c->modern) the stream has no priming event and no event ids, log lines
 * go out only when the request's _meta set a level, progress messages
 * carry the newest output line, and a client that goes away (a failed
 * write, or its connection closed) cancels the call: every process of it
 * is killed and nothing more is sent.  Its head goes out with its first
 * event, or once the call has run MODERN_STREAM_AFTER_S, and then a
 * comment keeps it alive about once a second; a call over before either
 * is answered as plain JSON (the client may take either), so that a call
 * whose cell or responder is lost before it answers gets nginx's error at
 * once rather than a broken stream, which this era's clients do not
 * resume.
 *
 * A 2025 stream resumes (the transport's resumability): each has a record,
 * streams/<prefix> in the session's folder, that its responder holds
 * locked while the call runs and writes the answer into when it is over,
 * so that a client whose stream broke (a proxy's timeout, a dropped
 * connection, a cell or responder that died) and that comes back with GET
 * and Last-Event-ID gets the answer: once the call is over, or at once
 * when it is.  The record stays after its stream delivered the answer
 * too, for a shorter time and only among the session's newest: nginx took
 * it, but a cell or router killed a moment later loses it on the way.  A
 * resume that got the answer removes the record.  A record left unlocked
 * without a response is a call whose responder died: the client gets an
 * error for its request rather than waiting for its own timeout. */
#ifndef MCP_STREAM_H
#define MCP_STREAM_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "common/util.h"
#include "fcgi/rpc.h"
#include "fcgi/sse.h"

struct call_stream {
  struct rpc_call *c;
  struct sse sse;
  bool sse_on;
  const cJSON *progress_token; /* params._meta.progressToken, or NULL */
  int log_min;                 /* the session's log level index, -1: none set */
  int timeout_s;
  int last_progress;
  int last_keepalive;    /* modern: seconds, for a comment about once a second */
  bool cancelled;        /* modern: the client went away and the call was cancelled */
  char last_output[256]; /* modern: the newest whole output line, for progress messages */
  struct buf line[2];    /* partial stdout and stderr lines */
  int record_fd;         /* the stream's record, locked; -1: none */
};

#define STREAMS_DIR "streams"
/* Well inside the idle and first-byte timeouts of common proxies (30-60 s) */
#define MODERN_STREAM_AFTER_S 5

/* Decide how to answer; when the client accepts SSE, send the head now. */
void call_stream_init(struct call_stream *cs, struct rpc_call *c, int timeout_s);
/* call_event_fn for sandbox_call(). */
void call_stream_event(void *opaque, int type, const char *data, size_t len);
/* Send c->result (or its error) on the stream; nothing when cancelled.
 * Returns 1 when answered on the stream, 0 or -1 (rpc error) otherwise. */
int call_stream_finish(struct call_stream *cs, bool cancelled);

/* A GET with Last-Event-ID on a session's folder: the stream it names
 * answered (the call's response, once the call is over; an error for its
 * request when the call's responder died), waiting up to wait_ms while
 * the call runs.  0 when answered; else an HTTP status (400: not an event
 * id of ours, 404: no such stream in this session) with *why set and
 * nothing sent. */
int stream_resume(int session_dirfd, const char *last_event_id, struct http_sink *sink, int64_t wait_ms,
                  const char **why);

/* Remove the session's stream records that no client came back for:
 * unlocked (their call is over, or their responder died) and unchanged for
 * keep_ms, or delivered_keep_ms when their stream delivered the answer.
 * The keeper runs it (fcgi/keeper.c), so that answers do not pile up on
 * disk for the session's whole life. */
void stream_records_sweep(int session_dirfd, int64_t keep_ms, int64_t delivered_keep_ms);

/* logging/setLevel: the session's level for notifications/message. */
int logging_set_level(struct rpc_call *c);

#endif
