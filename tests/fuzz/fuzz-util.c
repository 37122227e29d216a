/* See fuzz.h. */
#include "config.h"

#include "fuzz.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "fcgi/json_scan.h"

void fuzz_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fuzz: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

static int sink_write(void *opaque, const char *data, size_t len) {
  struct fuzz_sink *s = opaque;
  return buf_append(&s->out, data, len);
}

static int sink_flush(void *opaque) {
  (void)opaque;
  return 0;
}

void fuzz_sink_init(struct fuzz_sink *s) {
  memset(s, 0, sizeof(*s));
  s->sink.write = sink_write;
  s->sink.flush = sink_flush;
  s->sink.opaque = s;
}

void fuzz_sink_free(struct fuzz_sink *s) { buf_free(&s->out); }

cJSON *fuzz_check_json(const char *text, size_t len, const char *what) {
  size_t off = 0;
  int r = json_scan(text, len, 64, SIZE_MAX, &off); /* answers: any number of values */
  if (r != JSON_OK)
    fuzz_fail("%s: not valid JSON for a client (%s at byte %zu of %zu): %.300s", what, json_scan_strerror(r), off, len,
              text);
  cJSON *j = cJSON_ParseWithLength(text, len);
  if (j == NULL)
    fuzz_fail("%s: cJSON cannot parse it: %.300s", what, text);
  return j;
}

void fuzz_check_rpc(const cJSON *msg, const char *what) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");
  if (!cJSON_IsObject(msg) || !cJSON_IsString(v) || strcmp(v->valuestring, "2.0") != 0)
    fuzz_fail("%s: not a JSON-RPC 2.0 object", what);
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
  if (id == NULL || !(cJSON_IsNull(id) || cJSON_IsString(id) || cJSON_IsNumber(id)))
    fuzz_fail("%s: the id is missing or neither null, a string nor a number", what);
  const cJSON *result = cJSON_GetObjectItemCaseSensitive(msg, "result");
  const cJSON *error = cJSON_GetObjectItemCaseSensitive(msg, "error");
  if ((result == NULL) == (error == NULL))
    fuzz_fail("%s: needs exactly one of result and error", what);
  if (error != NULL) {
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(error, "message");
    if (!cJSON_IsNumber(code) || code->valuedouble != (double)(int)code->valuedouble || !cJSON_IsString(message) ||
        message->valuestring[0] == '\0')
      fuzz_fail("%s: error needs an integer code and a message", what);
  } else if (!cJSON_IsObject(result)) {
    fuzz_fail("%s: result is not an object", what);
  }
}

bool fuzz_response_header(const char *raw, size_t len, const char *name, char *out, size_t size) {
  const char *end = memmem(raw, len, "\r\n\r\n", 4);
  const char *p = memmem(raw, len, "\r\n", 2);
  size_t n = strlen(name);
  while (p != NULL && end != NULL && p < end) {
    p += 2;
    const char *eol = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
    if (eol == NULL)
      break;
    if ((size_t)(eol - p) > n && strncasecmp(p, name, n) == 0 && p[n] == ':') {
      const char *v = p + n + 1;
      while (v < eol && *v == ' ')
        v++;
      snprintf(out, size, "%.*s", (int)(eol - v), v);
      return true;
    }
    p = eol;
  }
  return false;
}

/* Each event: lines up to a blank line; "data:" lines carry one message. */
static void check_event_stream(const char *body, size_t len) {
  const char *p = body, *end = body + len;
  bool answered = false;
  while (p < end) {
    const char *stop = memmem(p, (size_t)(end - p), "\n\n", 2);
    if (stop == NULL)
      fuzz_fail("event stream: an unterminated event");
    for (const char *line = p; line < stop;) {
      const char *nl = memchr(line, '\n', (size_t)(stop - line));
      size_t n = nl ? (size_t)(nl - line) : (size_t)(stop - line);
      if (n > 6 && strncmp(line, "data: ", 6) == 0) {
        if (answered)
          fuzz_fail("event stream: a message after the response");
        cleanup_cjson cJSON *m = fuzz_check_json(line + 6, n - 6, "event data");
        if (cJSON_GetObjectItemCaseSensitive(m, "method") == NULL) {
          fuzz_check_rpc(m, "event stream response");
          answered = true;
        }
      } else if (!(n == 0 || (n >= 1 && line[0] == ':') || strncmp(line, "id: ", 4) == 0 ||
                   strncmp(line, "event: ", 7) == 0 || (n == 5 && strncmp(line, "data:", 5) == 0) ||
                   (n == 6 && strncmp(line, "data: ", 6) == 0))) {
        fuzz_fail("event stream: an unexpected line: %.*s", (int)(n < 200 ? n : 200), line);
      }
      line += n + 1;
    }
    p = stop + 2;
  }
}

int fuzz_check_response(const char *raw, size_t len) {
  int status = 0;
  if (len < 12 || strncmp(raw, "Status: ", 8) != 0 || sscanf(raw + 8, "%3d", &status) != 1)
    fuzz_fail("response: no status line: %.100s", raw);
  static const int known[] = {200, 202, 204, 400, 401, 403, 404, 405, 406, 413, 415, 503};
  bool ok = false;
  for (size_t i = 0; i < ARRAY_SIZE(known); i++)
    ok = ok || status == known[i];
  if (!ok)
    fuzz_fail("response: unexpected status %d: %.300s", status, raw);
  const char *head_end = memmem(raw, len, "\r\n\r\n", 4);
  if (head_end == NULL)
    fuzz_fail("response: the head does not end");
  if (memchr(raw, '\0', (size_t)(head_end - raw)) != NULL)
    fuzz_fail("response: a NUL in the head");
  const char *body = head_end + 4;
  size_t body_len = len - (size_t)(body - raw);
  char ct[128] = "";
  fuzz_response_header(raw, len, "Content-Type", ct, sizeof(ct));
  if (strcmp(ct, "text/event-stream") == 0) {
    if (status != 200)
      fuzz_fail("response: an event stream with status %d", status);
    check_event_stream(body, body_len);
  } else if (strcmp(ct, "application/json") == 0) {
    cleanup_cjson cJSON *j = fuzz_check_json(body, body_len, "response body");
    /* Besides JSON-RPC: /healthz {"status", "reason"} and the 404 of an
     * unknown endpoint {"error": "not_found"}. */
    if (cJSON_GetObjectItemCaseSensitive(j, "jsonrpc") != NULL)
      fuzz_check_rpc(j, "response body");
    else if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "status")) &&
             !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "error")))
      fuzz_fail("response: a JSON body that is neither JSON-RPC nor an endpoint's: %.300s", body);
  } else if (ct[0] == '\0') {
    if (body_len != 0)
      fuzz_fail("response: a body without a Content-Type");
    if (status != 202 && status != 204 && status != 405)
      fuzz_fail("response: status %d without a body", status);
  } else if (strncmp(ct, "text/plain", 10) != 0) {
    fuzz_fail("response: unexpected Content-Type %s", ct);
  }
  return status;
}

static char tmp_root[1024];

static void remove_tmp(void) {
  if (tmp_root[0] == '\0')
    return;
  int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  mcp_error_t err = NULL;
  if (root >= 0 && remove_tree_at(root, tmp_root + 1, &err) < 0)
    mcp_error_log_release(&err, "fuzz: cleanup");
  if (root >= 0)
    close(root);
  tmp_root[0] = '\0';
}

const char *fuzz_tmpdir(const char *tag) {
  if (tmp_root[0] != '\0')
    return tmp_root;
  const char *t = getenv("TMPDIR");
  snprintf(tmp_root, sizeof(tmp_root), "%s/mcp-fuzz-%s-XXXXXX", t && *t == '/' ? t : "/tmp", tag);
  if (mkdtemp(tmp_root) == NULL)
    fuzz_fail("mkdtemp %s: %s", tmp_root, strerror(errno));
  atexit(remove_tmp);
  return tmp_root;
}
