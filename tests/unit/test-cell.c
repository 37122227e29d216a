/* A cell's part of routing and draining through mcp_serve() (fcgi/forward.h,
 * common/cell.h): requests that name another cell's session or sandbox are
 * answered with the X-Accel-Redirect that makes nginx replay them to that
 * cell; a forwarded request that is still not ours is misrouted (503);
 * without a cell name nothing is forwarded; while the cell drains, new
 * sessions and calls get 503 with Retry-After, other requests are served,
 * /healthz and /cell say so; calls in flight are counted per responder. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "common/cell.h"
#include "common/metrics.h"
#include "common/util.h"
#include "mcp-harness.h"
#include "tap.h"

#define OTHER "cell-b.0123456789abcdef0123456789abcdef"
#define META                                                                                                           \
  "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/"                   \
  "clientCapabilities\":{}}"

static struct harness h;

static struct http_request modern(const char *body, const char *method, const char *name) {
  struct http_request req = post_request(body, NULL);
  req.protocol_version = "2026-07-28";
  req.mcp_method = method;
  req.mcp_name = name;
  return req;
}

static void modern_call(const char *sandbox, bool mirror, struct response *r) {
  char body[1024];
  snprintf(body, sizeof(body),
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\","
           "\"arguments\":{\"code\":\"print(1)\"%s%s%s}," META "}}",
           sandbox ? ",\"sandbox\":\"" : "", sandbox ? sandbox : "", sandbox ? "\"" : "");
  struct http_request req = modern(body, "tools/call", "execute_python");
  req.param_sandbox = mirror ? sandbox : NULL;
  serve(&h, &req, r);
}

static uint64_t forwarded(void) { return atomic_load(&metrics_get()->forwarded); }

static void no_cell_tests(void) {
  struct response r;
  h.cfg.cell[0] = '\0';
  post(&h, OTHER, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", &r);
  is_int(r.status, 404, "without a cell name, another cell's session is unknown here (404)");
  ok(header(&r, "X-Accel-Redirect") == NULL, "and nothing is forwarded");
  response_free(&r);
}

static void forward_tests(void) {
  struct response r;
  snprintf(h.cfg.cell, sizeof(h.cfg.cell), "cell-a");
  uint64_t before = forwarded();
  post(&h, OTHER, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", &r);
  is_int(r.status, 200, "2025: another cell's session id: answered for nginx");
  is_str(header(&r, "X-Accel-Redirect"), "/.mcp-forward/cell-b/POST", "2025: replayed to cell-b as a POST");
  is_int(r.body_len, 0, "with an empty body");
  response_free(&r);

  struct http_request del = post_request(NULL, OTHER);
  del.method = "DELETE";
  serve(&h, &del, &r);
  is_str(header(&r, "X-Accel-Redirect"), "/.mcp-forward/cell-b/DELETE", "2025: a DELETE is replayed as a DELETE");
  response_free(&r);

  struct http_request get = post_request(NULL, OTHER);
  get.method = "GET";
  get.accept = "text/event-stream";
  get.last_event_id = "0123456789ab-0";
  serve(&h, &get, &r);
  is_str(header(&r, "X-Accel-Redirect"), "/.mcp-forward/cell-b/GET",
         "2025: a GET that resumes a stream is replayed as a GET");
  response_free(&r);

  modern_call(OTHER, false, &r);
  is_str(header(&r, "X-Accel-Redirect"), "/.mcp-forward/cell-b/POST",
         "2026: arguments.sandbox of cell-b without Mcp-Param-Sandbox: forwarded (the owner checks the header)");
  response_free(&r);
  modern_call(OTHER, true, &r);
  is_str(header(&r, "X-Accel-Redirect"), "/.mcp-forward/cell-b/POST", "2026: with the header too");
  response_free(&r);

  const char *read =
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":{\"uri\":\"sandbox://" OTHER
      "/f.txt\"," META "}}";
  struct http_request rr = modern(read, "resources/read", "sandbox://" OTHER "/f.txt");
  serve(&h, &rr, &r);
  is_str(header(&r, "X-Accel-Redirect"), "/.mcp-forward/cell-b/POST", "2026: a sandbox:// URI of cell-b: forwarded");
  response_free(&r);
  is_int(forwarded() - before, 6, "mcp_requests_forwarded_total counts them");

  modern_call("cell-a.0123456789abcdef0123456789abcdef", true, &r);
  ok(header(&r, "X-Accel-Redirect") == NULL, "a handle of this cell is served here");
  like(jstr(rpc_result(&r, "own cell"), "content.0.text"), "Unknown sandbox", "(an unknown one: isError)");
  response_free(&r);

  struct http_request again = post_request("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", OTHER);
  again.forwarded_by = "cell-c";
  serve(&h, &again, &r);
  is_int(r.status, 503, "forwarded once and still another cell's: misrouted, 503");
  ok(header(&r, "X-Accel-Redirect") == NULL, "never a second hop");
  ok(header(&r, "Retry-After") != NULL, "with Retry-After");
  response_free(&r);
}

static void endpoint(const char *name, struct response *r) {
  struct http_request req = {.method = "GET", .endpoint = name};
  serve(&h, &req, r);
}

static void drain_tests(void) {
  struct response r;
  char id[SESSION_ID_MAX];
  ok(initialize(&h, TEST_TOKEN, id), "a session before the drain");
  cell_drain_begin();
  ok(cell_draining(), "draining");
  post(&h, NULL,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\","
       "\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
       &r);
  is_int(r.status, 503, "draining: initialize gets 503");
  ok(header(&r, "Retry-After") != NULL, "with Retry-After");
  ok(header(&r, "Mcp-Session-Id") == NULL, "and no session");
  response_free(&r);
  modern_call(NULL, false, &r);
  is_int(r.status, 503, "draining: a 2026 call that would make a sandbox gets 503");
  ok(header(&r, "Retry-After") != NULL, "with Retry-After");
  response_free(&r);
  post(&h, id,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\","
       "\"arguments\":{\"code\":\"print(1)\"}}}",
       &r);
  is_int(r.status, 503, "draining: a new call of an existing session gets 503 (come back later)");
  response_free(&r);
  post(&h, id, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}", &r);
  is_int(r.status, 200, "draining: other requests of a session are served");
  response_free(&r);
  endpoint("healthz", &r);
  is_int(r.status, 503, "/healthz: 503 while draining");
  like(r.body, "draining", "and says why");
  response_free(&r);
  endpoint("cell", &r);
  is_int(r.status, 200, "/cell answers while draining");
  like(r.body, "\"cell\":\"cell-a\"", "/cell names the cell");
  like(r.body, "\"draining\":true", "/cell: draining");
  response_free(&r);
  is_int(delete_session(&h, TEST_TOKEN, id), 204, "draining: DELETE is served");
}

static void in_flight_tests(void) {
  is_int(cell_calls_in_flight(), 0, "no call in flight");
  cell_responder_index(3);
  cell_call_begin();
  cell_call_begin();
  is_int(cell_calls_in_flight(), 2, "calls are counted");
  cell_call_end();
  is_int(cell_calls_in_flight(), 1, "and uncounted");
  cell_responder_reset(3);
  is_int(cell_calls_in_flight(), 0, "a responder that died takes its count with it");
}

/* A token's requests in progress, counted across the responders' threads. */
static void requests_tests(void) {
  struct mcp_config cfg = h.cfg;
  cfg.responders = 4;
  cfg.responder_threads = 8;
  cell_responder_index(0);
  int admitted = 0;
  for (int t = 0; t < 3; t++)
    admitted += cell_request_begin(&cfg, t, "alice", 3) == 0;
  is_int(admitted, 3, "a token's requests up to its share are admitted");
  ok(cell_request_begin(&cfg, 3, "alice", 3) < 0, "one more of the same token is refused");
  ok(cell_request_begin(&cfg, 3, "bob", 3) == 0, "another token's is not");
  cell_responder_index(2);
  ok(cell_request_begin(&cfg, 7, "alice", 3) < 0, "the count is the cell's: another responder refuses it too");
  cell_responder_index(0);
  cell_request_end(1);
  cell_responder_index(2);
  ok(cell_request_begin(&cfg, 7, "alice", 3) == 0, "once one has ended, the next is admitted");
  ok(cell_request_begin(&cfg, 6, "alice", 3) < 0, "and the share holds again");
  cell_responder_reset(2);
  ok(cell_request_begin(&cfg, 6, "alice", 3) == 0, "a responder that died takes its requests with it");
  ok(cell_request_begin(&cfg, 5, "alice", 0) == 0, "without a bound (0) a request is admitted");
  ok(cell_request_begin(&cfg, 4, "alice", 3) < 0, "and not counted: the bound of 3 holds as before");
  ok(cell_request_begin(&cfg, 5, "", 0) == 0 && cell_request_begin(&cfg, 4, NULL, 0) == 0,
     "a request without a token (an endpoint) is not counted");
  cell_responder_reset(0);
  cell_responder_reset(2);
}

int main(void) {
  harness_setup(&h);
  mcp_error_t err = NULL;
  if (metrics_create(&h.cfg, &err) < 0)
    bail_out("counters: %s", err->msg);
  no_cell_tests();
  forward_tests();
  in_flight_tests();
  requests_tests();
  drain_tests();
  harness_teardown(&h);
  return done_testing();
}
