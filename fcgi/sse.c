#include "config.h"

#include "fcgi/sse.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"

static int put(struct sse *s, const char *data, size_t len) {
  if (s->broken)
    return -1;
  if (s->sink->write(s->sink->opaque, data, len) < 0 || (s->sink->flush && s->sink->flush(s->sink->opaque) < 0)) {
    s->broken = true;
    return -1;
  }
  return 0;
}

int sse_begin(struct sse *s, struct http_sink *sink, bool priming) { return sse_begin_with(s, sink, priming, NULL); }

int sse_begin_with(struct sse *s, struct http_sink *sink, bool priming, const char *const *extra) {
  memset(s, 0, sizeof(*s));
  s->sink = sink;
  char rnd[33];
  random_hex32(rnd);
  snprintf(s->prefix, sizeof(s->prefix), "%.12s", rnd);
  const char *headers[8] = {"Cache-Control: no-cache, no-transform", "X-Accel-Buffering: no", NULL};
  for (int i = 2; extra != NULL && *extra != NULL && i < 7; i++)
    headers[i] = *extra++;
  if (http_begin(sink, 200, "text/event-stream", headers) < 0) {
    s->broken = true;
    return -1;
  }
  s->started = true;
  if (!priming)
    return put(s, ": stream\n\n", 10);
  char ev[64];
  int n = snprintf(ev, sizeof(ev), "id: %s-%u\ndata: \n\n", s->prefix, s->next++);
  return put(s, ev, (size_t)n);
}

int sse_resume(struct sse *s, struct http_sink *sink, const char *prefix, unsigned next) {
  int r = sse_begin_with(s, sink, false, NULL);
  snprintf(s->prefix, sizeof(s->prefix), "%s", prefix);
  s->next = next;
  return r;
}

int sse_begin_modern(struct sse *s, struct http_sink *sink) {
  int r = sse_begin_with(s, sink, false, NULL);
  s->no_ids = true;
  return r;
}

int sse_keepalive(struct sse *s) { return put(s, ":\n\n", 3); }

int sse_send(struct sse *s, const cJSON *msg) {
  cleanup_free char *json = cJSON_PrintUnformatted(msg);
  if (json == NULL)
    return -1;
  /* cJSON escapes newlines inside strings: the data is one line. */
  char head[64];
  int n = s->no_ids ? snprintf(head, sizeof(head), "event: message\ndata: ")
                    : snprintf(head, sizeof(head), "id: %s-%u\nevent: message\ndata: ", s->prefix, s->next++);
  cleanup_buf struct buf ev = {0};
  if (buf_append(&ev, head, (size_t)n) < 0 || buf_append(&ev, json, strlen(json)) < 0 || buf_append(&ev, "\n\n", 2) < 0)
    return -1;
  return put(s, ev.data, ev.len);
}

static const char *const levels[] = {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};

int log_level_index(const char *name) {
  for (size_t i = 0; i < ARRAY_SIZE(levels); i++)
    if (strcmp(levels[i], name) == 0)
      return (int)i;
  return -1;
}
