/* The header rules of fcgi/http.c: Accept, Content-Type, Origin, and the
 * response head written to a sink. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "fcgi/http.h"
#include "tap.h"

struct accept_case {
  const char *accept;
  const char *type;
  bool expected;
};

static const struct accept_case accepts[] = {
    {NULL, "application/json", false},
    {"", "application/json", false},
    {"application/json", "application/json", true},
    {"application/json", "text/event-stream", false},
    {"application/json, text/event-stream", "application/json", true},
    {"application/json, text/event-stream", "text/event-stream", true},
    {"text/event-stream,application/json", "application/json", true},
    {"  application/json  ,  text/event-stream  ", "text/event-stream", true},
    {"APPLICATION/JSON", "application/json", true},
    {"Text/Event-Stream", "text/event-stream", true},
    {"*/*", "application/json", true},
    {"*/*", "text/event-stream", true},
    {"application/*", "application/json", true},
    {"application/*", "text/event-stream", false},
    {"text/*", "text/event-stream", true},
    {"text/*", "application/json", false},
    {"*/json", "application/json", false},
    {"application/json;q=0", "application/json", false},
    {"application/json; q=0", "application/json", false},
    {"application/json;q=0.0", "application/json", false},
    {"application/json;q=0.000", "application/json", false},
    {"application/json;Q=0", "application/json", false},
    {"application/json;q=0.5", "application/json", true},
    {"application/json;q=0.001", "application/json", true},
    {"application/json;q=1", "application/json", true},
    {"application/json; charset=utf-8", "application/json", true},
    {"application/json; charset=utf-8; q=0", "application/json", false},
    {"*/*;q=0", "application/json", false},
    {"text/event-stream;q=0, application/json", "text/event-stream", false},
    {"text/event-stream;q=0, application/json", "application/json", true},
    {"*/*;q=0, application/json", "application/json", true},
    {"text/html", "application/json", false},
    {"text/html, application/xhtml+xml", "text/event-stream", false},
    {"application/jsonx", "application/json", false},
    {"application/json-seq", "application/json", false},
    {"application", "application/json", false},
    {"json", "application/json", false},
    {",,,", "application/json", false},
    {"application/json,", "application/json", true},
    /* RFC 9110 12.5.1: a more specific range overrides a wildcard, so
     * q=0 on the exact type excludes it whatever the wildcard says. */
    {"application/json;q=0, */*", "application/json", false},
    {"text/event-stream;q=0, text/*", "text/event-stream", false},
};

static void accept_tests(void) {
  for (size_t i = 0; i < ARRAY_SIZE(accepts); i++) {
    const struct accept_case *c = &accepts[i];
    is_int(http_accepts(c->accept, c->type), c->expected, "Accept '%s' %s %s", c->accept ? c->accept : "(none)",
           c->expected ? "admits" : "refuses", c->type);
  }
}

struct ct_case {
  const char *ct;
  bool expected;
};

static const struct ct_case cts[] = {
    {NULL, false},
    {"", false},
    {"application/json", true},
    {"application/json; charset=utf-8", true},
    {"application/json;charset=UTF-8", true},
    {"Application/JSON", true},
    {" application/json ", true},
    {"application/json ; charset=utf-8", true},
    {"text/plain", false},
    {"text/json", false},
    {"application/jsonx", false},
    {"application/json-patch+json", false},
    {"application/x-www-form-urlencoded", false},
    {"multipart/form-data; boundary=x", false},
    {"application/", false},
    {";application/json", false},
};

static void content_type_tests(void) {
  for (size_t i = 0; i < ARRAY_SIZE(cts); i++)
    is_int(http_is_json(cts[i].ct), cts[i].expected, "Content-Type '%s' is%s JSON", cts[i].ct ? cts[i].ct : "(none)",
           cts[i].expected ? "" : " not");
}

struct origin_case {
  const char *allowed; /* allowed_origins */
  const char *origin;
  bool expected;
};

static const struct origin_case origins[] = {
    {"", NULL, true},
    {"", "", true},
    {"", "http://localhost", true},
    {"", "http://localhost:3000", true},
    {"", "https://localhost:8443", true},
    {"", "http://LOCALHOST:3000", true},
    {"", "http://127.0.0.1", true},
    {"", "http://127.0.0.1:6274", true},
    {"", "http://[::1]", true},
    {"", "http://[::1]:8080", true},
    {"", "http://localhost.evil.example", false},
    {"", "http://localhost.evil.example:3000", false},
    {"", "http://127.0.0.1.evil.example", false},
    {"", "http://localhost@evil.example", false},
    {"", "http://evil.example", false},
    {"", "https://evil.example:443", false},
    {"", "http://evil.example/http://localhost", false},
    {"", "null", false},
    {"", "localhost", false},
    {"", "http://[::2]:8080", false},
    {"", "http://[::1", false},
    {"", "http://127.0.0.2", false},
    {"https://app.example", "https://app.example", true},
    {"https://app.example", "https://APP.example", true},
    {"https://app.example", "https://app.example:443", false},
    {"https://app.example", "http://app.example", false},
    {"https://app.example", "https://app.example.evil", false},
    {"https://app.example", "https://app.exampl", false},
    {"https://a.example, https://b.example", "https://b.example", true},
    {"https://a.example, https://b.example", "https://a.example", true},
    {"https://a.example , https://b.example", "https://a.example", true},
    {"https://a.example,https://b.example", "https://c.example", false},
    {"https://a.example,,", "https://c.example", false},
    {"https://a.example", "http://localhost:1", true},
    {"*", "https://anything.example", true},
    {"https://a.example, *", "https://anything.example", true},
};

static void origin_tests(void) {
  struct mcp_config cfg;
  config_defaults(&cfg);
  for (size_t i = 0; i < ARRAY_SIZE(origins); i++) {
    const struct origin_case *c = &origins[i];
    snprintf(cfg.allowed_origins, sizeof(cfg.allowed_origins), "%s", c->allowed);
    is_int(http_origin_allowed(&cfg, c->origin), c->expected, "Origin '%s' with allowed_origins '%s' is %s",
           c->origin ? c->origin : "(none)", c->allowed, c->expected ? "allowed" : "refused");
  }
}

/* ---- the response head ---- */

struct capture {
  struct buf b;
  int writes;
  int fail_after; /* fail the write after this many, -1: never */
};

static int cap_write(void *opaque, const char *data, size_t len) {
  struct capture *c = opaque;
  if (c->fail_after >= 0 && c->writes >= c->fail_after)
    return -1;
  c->writes++;
  return buf_append(&c->b, data, len);
}

static int cap_flush(void *opaque) {
  (void)opaque;
  return 0;
}

static void send_tests(void) {
  struct capture c = {.fail_after = -1};
  struct http_sink sink = {cap_write, cap_flush, &c, NULL, NULL, NULL};
  static const char *const hdrs[] = {"Mcp-Session-Id: abc", "X-Other: 1", NULL};
  is_int(http_send(&sink, 200, "application/json", hdrs, "{}", 2), 0, "http_send succeeds");
  static const char want[] = "Status: 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: abc\r\n"
                             "X-Other: 1\r\n\r\n{}";
  is_mem(c.b.data, c.b.len, want, sizeof(want) - 1, "status line, content type, headers, blank line, body");
  buf_free(&c.b);

  c.writes = 0;
  is_int(http_send(&sink, 202, NULL, NULL, NULL, 0), 0, "an empty response");
  static const char want202[] = "Status: 202 Accepted\r\n\r\n";
  is_mem(c.b.data, c.b.len, want202, sizeof(want202) - 1, "202 has no Content-Type and no body");
  is_int(c.writes, 1, "an empty body is not written");
  buf_free(&c.b);

  c.writes = 0;
  c.fail_after = 1;
  is_int(http_send(&sink, 200, "application/json", NULL, "{}", 2), -1, "a failing body write is reported");
  buf_free(&c.b);

  c.writes = 0;
  c.fail_after = -1;
  char huge[3000];
  memset(huge, 'h', sizeof(huge) - 1);
  huge[sizeof(huge) - 1] = '\0';
  const char *big[] = {huge, NULL};
  is_int(http_begin(&sink, 200, NULL, big), -1, "a head larger than its buffer is refused, not truncated");
  is_int(c.writes, 0, "nothing is written for a refused head");
  buf_free(&c.b);

  static const int codes[] = {200, 202, 204, 400, 401, 403, 404, 405, 406, 413, 415, 429, 500, 503};
  static const char *const reasons[] = {"OK",
                                        "Accepted",
                                        "No Content",
                                        "Bad Request",
                                        "Unauthorized",
                                        "Forbidden",
                                        "Not Found",
                                        "Method Not Allowed",
                                        "Not Acceptable",
                                        "Content Too Large",
                                        "Unsupported Media Type",
                                        "Too Many Requests",
                                        "Internal Server Error",
                                        "Service Unavailable"};
  for (size_t i = 0; i < ARRAY_SIZE(codes); i++)
    is_str(http_reason(codes[i]), reasons[i], "reason phrase of %d", codes[i]);
}

int main(void) {
  accept_tests();
  content_type_tests();
  origin_tests();
  send_tests();
  return done_testing();
}
