/* Fuzz harness: what the host reads back from a sandbox during a call.
 *
 * Input: the bytes a session's supervisor sends to the responder after the
 * request frame (frames O stdout, E stderr, D result, X error, ..., or
 * anything else).  The supervisor forwards the executor's O/E/D payloads
 * unchanged (sandbox/supervisor.c: on_exec_frame), so this is what
 * sandboxed code controls.
 *
 * The harness plays the supervisor: it listens on the session's ctl.sock,
 * and for each input a thread accepts the responder's connection, reads
 * its request frame, writes the input and hangs up.  The responder side is
 * the real one: sandbox_call() (frame_read, the bounded output buffers,
 * call_result_parse), with the stream events going to call_stream_event()
 * on an SSE stream (stdout/stderr lines as notifications/message,
 * utf8_sanitize), then call_tool_result() or the tool error, then
 * call_stream_finish().  The whole event stream must be well-formed JSON
 * for a client; output kept must respect output_limit.
 *
 * utf8_sanitize() also gets the raw input: its output must be valid UTF-8
 * without NUL, at most three bytes per input byte. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/frame.h"
#include "fcgi/call.h"
#include "fcgi/json_scan.h"
#include "fcgi/mcp.h"
#include "fcgi/stream.h"
#include "fcgi/tools.h"
#include "fuzz.h"

static struct mcp_config cfg;
static struct store store;
static struct session sess;
static int listen_fd = -1;

struct peer {
  const uint8_t *data;
  size_t size;
};

static void set(const char *key, const char *value) {
  mcp_error_t err = NULL;
  if (config_set(&cfg, key, value, &err) < 0)
    fuzz_fail("config %s = %s: %s", key, value, err->msg);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  signal(SIGPIPE, SIG_IGN);
  const char *root = fuzz_tmpdir("sandbox");
  char state[1200], libexec[1200], uid[32];
  snprintf(state, sizeof(state), "%s/state", root);
  snprintf(libexec, sizeof(libexec), "%s/libexec-empty", root);
  if (mkdir(libexec, 0755) < 0)
    fuzz_fail("mkdir: %s", strerror(errno));
  config_defaults(&cfg);
  set("state_dir", state);
  set("libexec_dir", libexec);
  set("backend", "direct");
  set("pool_size", "0");
  set("cgroup_parent", "");
  set("max_concurrent", "2");
  set("busy_wait", "0");
  set("capacity_wait", "0");
  set("ready_wait", "5");
  /* Small, so that fuzzed output reaches the limit. */
  set("output_limit", "4096");
  snprintf(uid, sizeof(uid), "%u", getuid() == 0 ? 1000U : (unsigned)getuid());
  set("sandbox_uid", uid);
  set("sandbox_gid", uid);
  mcp_error_t err = NULL;
  if (store_prepare(&cfg, &err) < 0 || store_open(&cfg, &store, &err) < 0 ||
      session_create(&store, "fuzz", &sess, &err) < 0)
    fuzz_fail("state folder: %s", err->msg);
  /* We are the supervisor: ours is the socket the responder connects to. */
  listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (listen_fd < 0 || fd_path(sa.sun_path, sizeof(sa.sun_path), sess.dirfd, SUPERVISOR_SOCKET) < 0 ||
      bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(listen_fd, 8) < 0)
    fuzz_fail("supervisor socket: %s", strerror(errno));
  return 0;
}

static void *supervisor(void *arg) {
  const struct peer *p = arg;
  /* Bounded: a call that fails before it connects must not hang us. */
  struct pollfd pfd = {listen_fd, POLLIN, 0};
  if (poll(&pfd, 1, 10000) != 1)
    return NULL;
  int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0)
    return NULL;
  /* The request first: closing with unread data would make the
   * responder's reads fail with ECONNRESET instead of seeing ours. */
  struct frame_reader rd;
  frame_reader_init(&rd, 1 << 20);
  struct frame f;
  int r = frame_read(&rd, fd, now_ms() + 10000, &f);
  frame_reader_free(&rd);
  if (r == 1 && f.type == FRAME_REQUEST)
    write_all(fd, p->data, p->size);
  close(fd);
  return NULL;
}

static void check_sanitize(const uint8_t *data, size_t size) {
  cleanup_free char *s = utf8_sanitize((const char *)data, size);
  if (s == NULL)
    fuzz_fail("utf8_sanitize returned NULL");
  size_t n = strlen(s);
  if (utf8_valid_prefix(s, n) != n || n > 3 * size)
    fuzz_fail("utf8_sanitize: output is not valid UTF-8 or too long (%zu bytes from %zu)", n, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check_sanitize(data, size);

  struct peer p = {data, size};
  pthread_t t;
  if (pthread_create(&t, NULL, supervisor, &p) != 0)
    fuzz_fail("pthread_create");

  struct fuzz_sink out;
  fuzz_sink_init(&out);
  cJSON *id = cJSON_CreateNumber(7);
  cJSON *params = cJSON_CreateObject();
  cJSON_AddItemToObject(cJSON_AddObjectToObject(params, "_meta"), "progressToken", cJSON_CreateString("tok"));
  struct mcp_ctx ctx = {.cfg = &cfg, .store = &store};
  struct http_request http = {.method = "POST",
                              .accept = "application/json, text/event-stream",
                              .protocol_version = MCP_LATEST_VERSION,
                              .token_id = "fuzz"};
  struct rpc_call c = {.ctx = &ctx,
                       .http = &http,
                       .sink = &out.sink,
                       .session = &sess,
                       .id = id,
                       .method = "tools/call",
                       .params = params};
  struct call_stream cs;
  call_stream_init(&cs, &c, 5);
  cs.log_min = 0; /* every stdout and stderr line becomes a notification */

  struct call_request req = {.code = "print(1)", .rpc_id = "7", .timeout_s = 5};
  struct call_result res;
  mcp_error_t err = NULL;
  bool cancelled = false;
  if (sandbox_call(&cfg, &sess, &req, call_stream_event, &cs, &res, &err) < 0) {
    c.result = tool_error_result(mcp_error_public(err));
    mcp_error_release(&err);
  } else {
    if (res.out.len > cfg.output_limit || res.err.len > cfg.output_limit)
      fuzz_fail("kept %zu + %zu bytes of output, over the limit", res.out.len, res.err.len);
    if (res.exit_code < 0 || res.exit_code > 255 || res.duration_ms < 0)
      fuzz_fail("result out of range: exit %d, duration %lld", res.exit_code, (long long)res.duration_ms);
    res.timeout_s = req.timeout_s;
    c.result = call_tool_result(&cfg, &res);
    cancelled = res.cancelled;
  }
  call_result_free(&res);
  session_unlock(&sess);
  if (c.result == NULL)
    rpc_fail(&c, RPC_INTERNAL_ERROR, "Internal error");
  call_stream_finish(&cs, cancelled);
  cJSON_Delete(c.result);
  pthread_join(t, NULL);

  if (out.out.len > 0)
    fuzz_check_response(out.out.data, out.out.len);
  fuzz_sink_free(&out);
  cJSON_Delete(id);
  cJSON_Delete(params);
  return 0;
}
