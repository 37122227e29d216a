/* Numbers a client sends are doubles (cJSON); converting one that is out of
 * range (1e300, 1e999 = infinity) to an integer type is undefined
 * behaviour.  This program is built with fcgi/mcp.c and fcgi/tools.c
 * compiled under -fsanitize=float-cast-overflow (which GCC's
 * -fsanitize=undefined does not include), and runs each input in a child:
 * the sanitizer kills the child at the first out-of-range conversion. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "fcgi/mcp.h"
#include "fcgi/tools.h"
#include "tap.h"

static int sink_write(void *opaque, const char *data, size_t len) { return buf_append(opaque, data, len); }
static int sink_flush(void *opaque) {
  (void)opaque;
  return 0;
}

/* The request is refused by the id check, before any session is needed. */
static int serve_id(const char *id) {
  struct mcp_config cfg;
  config_defaults(&cfg);
  struct mcp_ctx ctx = {.cfg = &cfg, .store = NULL};
  char body[128];
  snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}", id);
  struct http_request req = {.method = "POST",
                             .content_type = "application/json",
                             .accept = "application/json",
                             .token_id = "t",
                             .body = body,
                             .body_len = strlen(body)};
  struct buf out = {0};
  struct http_sink sink = {sink_write, sink_flush, &out, NULL, NULL, NULL};
  mcp_serve(&ctx, &req, &sink);
  int status = 0;
  sscanf(out.data ? out.data : "", "Status: %d", &status);
  buf_free(&out);
  return status == 400 ? 0 : 3;
}

static int parse_timeout(const char *value) {
  struct mcp_config cfg;
  config_defaults(&cfg);
  char text[128];
  snprintf(text, sizeof(text), "{\"code\":\"1\",\"timeout_seconds\":%s}", value);
  cJSON *args = cJSON_Parse(text);
  struct code_args pa;
  mcp_error_t err = NULL;
  int r = code_args_parse(&cfg, lang_by_tool("execute_python"), args, &pa, &err);
  mcp_error_release(&err);
  cJSON_Delete(args);
  return r == -1 ? 0 : 3;
}

/* 0: the child refused the input normally; 3: it accepted it; 1: the
 * sanitizer stopped it (its report is on stderr); 128+N: signal N. */
static int in_child(int (*fn)(const char *), const char *arg) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO); /* keep the sanitizer's report out of the TAP stream */
    _exit(fn(arg));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(void) {
  static const char *const values[] = {"1e300", "-1e300",          "1e999", "-1e999", "9223372036854775808",
                                       "1.5",   "9007199254740993"};
  for (size_t i = 0; i < ARRAY_SIZE(values); i++)
    is_int(in_child(serve_id, values[i]), 0, "request id %s is refused with 400, without undefined behaviour",
           values[i]);
  for (size_t i = 0; i < ARRAY_SIZE(values); i++)
    is_int(in_child(parse_timeout, values[i]), 0,
           "timeout_seconds %s is refused as invalid, without undefined behaviour", values[i]);
  return done_testing();
}
