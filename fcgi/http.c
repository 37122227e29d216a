#include "config.h"

#include "fcgi/http.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Compare [s, s+n) case-insensitively with a NUL-terminated word. */
static bool span_eq(const char *s, size_t n, const char *word) {
  return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

static void trim_span(const char **s, size_t *n) {
  while (*n > 0 && isspace((unsigned char)**s)) {
    (*s)++;
    (*n)--;
  }
  while (*n > 0 && isspace((unsigned char)(*s)[*n - 1]))
    (*n)--;
}

/* q=0 in a media range's parameters means "not acceptable". */
static bool q_zero(const char *params, size_t n) {
  while (n > 0) {
    const char *semi = memchr(params, ';', n);
    size_t len = semi ? (size_t)(semi - params) : n;
    const char *p = params;
    size_t pl = len;
    trim_span(&p, &pl);
    if (pl >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
      const char *v = p + 2;
      size_t vl = pl - 2;
      bool nonzero = false;
      for (size_t i = 0; i < vl; i++)
        if (v[i] >= '1' && v[i] <= '9')
          nonzero = true;
      return !nonzero;
    }
    if (semi == NULL)
      break;
    n -= len + 1;
    params = semi + 1;
  }
  return false;
}

bool http_accepts(const char *accept, const char *type) {
  if (accept == NULL)
    return false;
  const char *slash = strchr(type, '/');
  size_t major = slash ? (size_t)(slash - type) : strlen(type);
  /* The most specific matching range decides (RFC 9110 12.5.1): exact 3,
   * type/star 2, star/star 1; its q=0 excludes. */
  int best = 0;
  bool best_ok = false;
  const char *p = accept;
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    const char *semi = memchr(p, ';', len);
    const char *range = p;
    size_t rl = semi ? (size_t)(semi - p) : len;
    trim_span(&range, &rl);
    int spec =
        span_eq(range, rl, type) ? 3
        : (rl == major + 2 && strncasecmp(range, type, major) == 0 && range[major] == '/' && range[major + 1] == '*')
            ? 2
        : span_eq(range, rl, "*/*") ? 1
                                    : 0;
    if (spec > best) {
      best = spec;
      best_ok = !(semi && q_zero(semi + 1, len - (size_t)(semi - p) - 1));
    }
    if (comma == NULL)
      break;
    p = comma + 1;
  }
  return best_ok;
}

bool http_is_json(const char *ct) {
  if (ct == NULL)
    return false;
  const char *s = ct;
  size_t n = strcspn(ct, ";");
  trim_span(&s, &n);
  return span_eq(s, n, "application/json");
}

/* The host part of an origin "scheme://host[:port]". */
static bool origin_is_local(const char *origin) {
  const char *p = strstr(origin, "://");
  if (p == NULL)
    return false;
  p += 3;
  size_t n;
  if (*p == '[') {
    const char *close = strchr(p, ']');
    if (close == NULL)
      return false;
    n = (size_t)(close - p) + 1;
  } else {
    n = strcspn(p, ":/");
  }
  return span_eq(p, n, "localhost") || span_eq(p, n, "127.0.0.1") || span_eq(p, n, "[::1]");
}

bool http_origin_allowed(const struct mcp_config *cfg, const char *origin) {
  if (origin == NULL || *origin == '\0')
    return true; /* not a browser: CLI clients send no Origin */
  if (origin_is_local(origin))
    return true;
  const char *p = cfg->allowed_origins;
  size_t olen = strlen(origin);
  while (*p) {
    const char *comma = strchr(p, ',');
    const char *item = p;
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    trim_span(&item, &len);
    if (len > 0 && (span_eq(item, len, "*") || (len == olen && strncasecmp(item, origin, len) == 0)))
      return true;
    if (comma == NULL)
      break;
    p = comma + 1;
  }
  return false;
}

const char *http_reason(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 202:
    return "Accepted";
  case 204:
    return "No Content";
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 403:
    return "Forbidden";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 406:
    return "Not Acceptable";
  case 413:
    return "Content Too Large";
  case 415:
    return "Unsupported Media Type";
  case 429:
    return "Too Many Requests";
  case 503:
    return "Service Unavailable";
  default:
    return "Internal Server Error";
  }
}

int http_begin(struct http_sink *sink, int status, const char *content_type, const char *const *headers) {
  char head[2048];
  int n = snprintf(head, sizeof(head), "Status: %d %s\r\n", status, http_reason(status));
  if (content_type != NULL)
    n += snprintf(head + n, sizeof(head) - (size_t)n, "Content-Type: %s\r\n", content_type);
  for (; headers != NULL && *headers != NULL && n < (int)sizeof(head); headers++)
    n += snprintf(head + n, sizeof(head) - (size_t)n, "%s\r\n", *headers);
  if (n >= (int)sizeof(head) - 2)
    return -1;
  n += snprintf(head + n, sizeof(head) - (size_t)n, "\r\n");
  return sink->write(sink->opaque, head, (size_t)n);
}

int http_send(struct http_sink *sink, int status, const char *content_type, const char *const *headers,
              const char *body, size_t len) {
  if (http_begin(sink, status, content_type, headers) < 0)
    return -1;
  if (len > 0 && sink->write(sink->opaque, body, len) < 0)
    return -1;
  return 0;
}

void http_set_deadline(struct http_sink *sink, int64_t deadline_ms) {
  if (sink->set_deadline != NULL)
    sink->set_deadline(sink->guard, deadline_ms);
}

bool http_peer_gone(struct http_sink *sink) { return sink->peer_gone != NULL && sink->peer_gone(sink->guard); }
