/* tools/call answered as server-sent events (the 2025-11-25 transport: a priming event in
 * 2025-11-25, progress only with a progressToken and strictly increasing,
 * log lines after logging/setLevel, a cancelled request gets no response). */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "fcgi/keeper.h"
#include "mcp-harness.h"
#include "tap.h"

static struct harness h;
static char sid[SESSION_ID_MAX];

static void tools_call(const char *version, const char *accept, const char *id, const char *params_extra,
                       const char *args, struct response *r) {
  char body[2048];
  snprintf(body, sizeof(body),
           "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"tools/call\",\"params\":{%s\"name\":\"execute_python\","
           "\"arguments\":%s}}",
           id, params_extra ? params_extra : "", args);
  struct http_request req = post_request(body, sid);
  req.protocol_version = version;
  req.accept = accept;
  serve(&h, &req, r);
}

static void framing_tests(void) {
  struct response r;
  tools_call("2025-11-25", ACCEPT_BOTH, "\"s1\"", NULL, "{\"code\":\"print('hi')\"}", &r);
  is_str(header(&r, "Content-Type"), "text/event-stream", "a client that takes both gets a stream");
  like(header(&r, "Cache-Control"), "no-cache", "that no cache keeps");
  ok(memchr(r.body, '\0', r.body_len) == NULL, "2025-11-25: no NUL byte in the stream");
  ok(r.sse_valid, "every event is JSON, the response is the last one");
  ok(r.sse_primed, "2025-11-25: a priming event (an id, empty data) comes first");
  is_str(jstr(r.json, "id"), "s1", "the response carries the request id");
  is_str(jstr(r.json, "result.structuredContent.stdout"), "hi\n", "and the result");
  is_int(cJSON_GetArraySize(r.events), 0, "no notifications were asked for");
  response_free(&r);

  tools_call("2025-06-18", ACCEPT_BOTH, "2", NULL, "{\"code\":\"print('hi')\"}", &r);
  ok(memchr(r.body, '\0', r.body_len) == NULL, "2025-06-18: no NUL byte in the stream");
  if (!ok(r.sse && r.sse_valid && !r.sse_primed, "2025-06-18: a stream without a priming event"))
    diag("got: %.*s", (int)(r.raw_len < 400 ? r.raw_len : 400), r.raw);
  response_free(&r);

  tools_call("2025-11-25", "application/json", "3", NULL, "{\"code\":\"print('hi')\"}", &r);
  is_str(header(&r, "Content-Type"), "application/json", "a client that takes only JSON gets JSON");
  is_str(jstr(r.json, "result.structuredContent.stdout"), "hi\n", "with the result");
  response_free(&r);
}

static void progress_tests(void) {
  struct response r;
  tools_call("2025-11-25", ACCEPT_BOTH, "4", "\"_meta\":{\"progressToken\":\"tok\"},",
             "{\"code\":\"import time; time.sleep(2.5); print('done')\",\"timeout_seconds\":10}", &r);
  ok(r.sse_valid, "a call with a progressToken streams");
  int n = 0;
  double last = 0;
  bool increasing = true, tokens = true;
  const cJSON *ev;
  cJSON_ArrayForEach(ev, r.events) {
    if (jstr(ev, "method") == NULL || strcmp(jstr(ev, "method"), "notifications/progress") != 0)
      continue;
    n++;
    double p = jnum(ev, "params.progress");
    increasing &= p > last;
    last = p;
    tokens &= jstr(ev, "params.progressToken") != NULL && strcmp(jstr(ev, "params.progressToken"), "tok") == 0;
  }
  ok(n >= 1, "notifications/progress arrive during the call (%d)", n);
  ok(increasing, "progress strictly increases");
  ok(tokens, "each names the request's progressToken");
  is_str(jstr(r.json, "result.structuredContent.stdout"), "done\n", "then the result");
  response_free(&r);

  tools_call("2025-11-25", ACCEPT_BOTH, "5", NULL, "{\"code\":\"import time; time.sleep(1.5)\"}", &r);
  n = 0;
  cJSON_ArrayForEach(ev, r.events) n += jstr(ev, "method") && !strcmp(jstr(ev, "method"), "notifications/progress");
  is_int(n, 0, "no progress without a progressToken");
  response_free(&r);
}

static void logging_tests(void) {
  struct response r;
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"logging/setLevel\",\"params\":{\"level\":\"loud\"}}", &r);
  is_rpc_error(&r, 200, -32602, "level must be one of", "logging/setLevel with an unknown level");
  response_free(&r);
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"logging/setLevel\",\"params\":{\"level\":\"info\"}}", &r);
  ok(rpc_result(&r, "logging/setLevel info") != NULL, "logging/setLevel info");
  response_free(&r);
  tools_call("2025-11-25", ACCEPT_BOTH, "8", NULL,
             "{\"code\":\"import sys; print('one'); print('two'); print('oops', file=sys.stderr)\"}", &r);
  ok(r.sse_valid, "a call after setLevel streams");
  struct buf out = {0}, err = {0};
  const cJSON *ev;
  cJSON_ArrayForEach(ev, r.events) {
    if (jstr(ev, "method") == NULL || strcmp(jstr(ev, "method"), "notifications/message") != 0)
      continue;
    const char *logger = jstr(ev, "params.logger"), *data = jstr(ev, "params.data");
    const char *level = jstr(ev, "params.level");
    if (logger && data && level && !strcmp(logger, "stdout") && !strcmp(level, "info")) {
      buf_append(&out, data, strlen(data));
      buf_append(&out, "|", 1);
    }
    if (logger && data && level && !strcmp(logger, "stderr") && !strcmp(level, "warning")) {
      buf_append(&err, data, strlen(data));
      buf_append(&err, "|", 1);
    }
  }
  is_str(out.data, "one|two|", "stdout lines arrive as info messages, one per line");
  is_str(err.data, "oops|", "stderr lines as warnings");
  buf_free(&out);
  buf_free(&err);
  response_free(&r);
  post(&h, sid, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"logging/setLevel\",\"params\":{\"level\":\"error\"}}", &r);
  response_free(&r);
  tools_call("2025-11-25", ACCEPT_BOTH, "10", NULL, "{\"code\":\"print('quiet')\"}", &r);
  is_int(cJSON_GetArraySize(r.events), 0, "at level error, no info lines");
  response_free(&r);
}

struct bg {
  const char *accept;
  struct response r;
  int64_t took;
};

static void *cancel_target(void *opaque) {
  struct bg *b = opaque;
  int64_t t0 = now_ms();
  tools_call("2025-11-25", b->accept, "77", NULL,
             "{\"code\":\"import os, time; open('sleeper.pid', 'w').write(str(os.getpid())); time.sleep(30)\","
             "\"timeout_seconds\":60}",
             &b->r);
  b->took = now_ms() - t0;
  return NULL;
}

static void cancel_tests(const char *accept) {
  struct bg b = {.accept = accept};
  pthread_t t;
  pthread_create(&t, NULL, cancel_target, &b);
  usleep(1000000);
  struct response r;
  post(&h, sid,
       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":77,\"reason\":\"unit\"}}",
       &r);
  is_int(r.status, 202, "%s: notifications/cancelled is accepted", accept);
  response_free(&r);
  pthread_join(t, NULL);
  ok(b.took < 10000, "%s: the cancelled call ends soon (%lld ms)", accept, (long long)b.took);
  if (b.r.sse) {
    ok(b.r.json == NULL, "%s: a cancelled request gets no response on its stream", accept);
  } else {
    is_int(jnum(b.r.json, "error.code"), -32800, "%s: without a stream, the request ends with -32800", accept);
  }
  response_free(&b.r);
  tools_call("2025-11-25", ACCEPT_BOTH, "78", NULL, "{\"code\":\"print(open('sleeper.pid').read())\"}", &r);
  int pid = jstr(r.json, "result.structuredContent.stdout") ? atoi(jstr(r.json, "result.structuredContent.stdout")) : 0;
  ok(pid > 0, "%s: the session works after the cancellation", accept);
  response_free(&r);
  char p[64];
  snprintf(p, sizeof(p), "/proc/%d/cmdline", pid);
  bool alive = true;
  for (int i = 0; i < 100 && alive; i++) {
    FILE *f = fopen(p, "r");
    alive = f != NULL && fgetc(f) != EOF; /* a zombie has an empty command line */
    if (f)
      fclose(f);
    if (alive)
      usleep(20000);
  }
  ok(pid > 0 && !alive, "%s: the cancelled code is no longer running", accept);
}

/* ---- resuming a stream (GET with Last-Event-ID) ---- */

static struct http_request get_request(const char *session, const char *last_event_id) {
  struct http_request req = post_request(NULL, session);
  req.method = "GET";
  req.accept = "text/event-stream";
  req.protocol_version = "2025-11-25";
  req.last_event_id = last_event_id;
  return req;
}

static void resume(const char *session, const char *last_event_id, struct response *r) {
  struct http_request req = get_request(session, last_event_id);
  serve(&h, &req, r);
}

/* The id of a stream's first event ("" when it has none). */
static void first_event_id(const struct response *r, char out[32]) {
  out[0] = '\0';
  const char *p = r->body ? strstr(r->body, "id: ") : NULL;
  if (p != NULL)
    sscanf(p + 4, "%31[0-9a-f-]", out);
}

/* How many stream records the session's folder holds. */
static int records(const char *session) {
  char dir[PATH_MAX + 200];
  snprintf(dir, sizeof(dir), "%s/sessions/%.80s/streams", h.state, session);
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  if (d != NULL)
    closedir(d);
  return n;
}

/* Remove the session's stream records (those of delivered answers stay
 * 3 minutes). */
static void clear_records(const char *session) {
  char dir[PATH_MAX + 200];
  snprintf(dir, sizeof(dir), "%s/sessions/%.80s/streams", h.state, session);
  DIR *d = opendir(dir);
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.')
      unlinkat(dirfd(d), e->d_name, 0);
  if (d != NULL)
    closedir(d);
}

/* The first event id of the session's one stream with a record. */
static void running_stream_id(char id[32]) {
  id[0] = '\0';
  char dir[PATH_MAX + 200];
  snprintf(dir, sizeof(dir), "%s/sessions/%.80s/streams", h.state, sid);
  DIR *d = opendir(dir);
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.')
      snprintf(id, 32, "%.12s-0", e->d_name);
  if (d != NULL)
    closedir(d);
}

struct resumed_call {
  struct response r;
};

static void *broken_call(void *opaque) {
  struct resumed_call *b = opaque;
  tools_call("2025-11-25", ACCEPT_BOTH, "\"late\"", NULL,
             "{\"code\":\"import time; time.sleep(2); print('late')\",\"timeout_seconds\":20}", &b->r);
  return NULL;
}

/* A record in the session's streams/, its mtime age_s seconds ago. */
static void old_record(const char *name, const char *text, int age_s) {
  char path[PATH_MAX + 200];
  snprintf(path, sizeof(path), "%s/sessions/%.80s/streams/%s", h.state, sid, name);
  FILE *f = fopen(path, "w");
  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
  struct timespec ts[2] = {{.tv_sec = time(NULL) - age_s}, {.tv_sec = time(NULL) - age_s}};
  utimensat(AT_FDCWD, path, ts, 0);
}

/* Mode 0400, as a stream that delivered its answer leaves its record. */
static void mark_delivered(const char *name) {
  char path[PATH_MAX + 200];
  snprintf(path, sizeof(path), "%s/sessions/%.80s/streams/%s", h.state, sid, name);
  chmod(path, 0400);
}

/* The mode of a record in the session's streams/, -1: none. */
static int record_mode(const char *name) {
  char path[PATH_MAX + 200];
  snprintf(path, sizeof(path), "%s/sessions/%.80s/streams/%s", h.state, sid, name);
  struct stat sb;
  return stat(path, &sb) == 0 ? (int)(sb.st_mode & 07777) : -1;
}

static bool record_exists(const char *name) {
  char path[PATH_MAX + 200];
  snprintf(path, sizeof(path), "%s/sessions/%.80s/streams/%s", h.state, sid, name);
  return access(path, F_OK) == 0;
}

/* The keeper's minute: answers nobody came back for in 10 minutes go, and
 * delivered ones in 3; a younger one, and a call still running (locked),
 * stay. */
static void sweep_tests(void) {
  old_record("00000000000a", "1\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n", 11 * 60);
  old_record("00000000000b", "2\n", 11 * 60);
  old_record("00000000000c", "3\n{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n", 9 * 60);
  old_record("00000000000d", "4\n", 11 * 60);
  old_record("00000000000e", "5\n{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n", 4 * 60);
  old_record("00000000000f", "6\n{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}\n", 2 * 60);
  mark_delivered("00000000000e");
  mark_delivered("00000000000f");
  char path[PATH_MAX + 200];
  snprintf(path, sizeof(path), "%s/sessions/%.80s/streams/00000000000d", h.state, sid);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  ok(fd >= 0 && lock_try(fd) == 0, "a record held by a running call");
  keeper_tick(&h.store, true);
  ok(!record_exists("00000000000a"), "the keeper removes an answer nobody came back for in 10 minutes");
  ok(!record_exists("00000000000b"), "and a dead responder's record as old");
  ok(record_exists("00000000000c"), "a younger answer stays");
  ok(!record_exists("00000000000e"), "a delivered answer goes after 3 minutes");
  ok(record_exists("00000000000f"), "a younger delivered one stays");
  ok(record_exists("00000000000d"), "a running call's record stays, however old");
  if (fd >= 0)
    close(fd);
  keeper_tick(&h.store, true);
  ok(!record_exists("00000000000d"), "once that call is over, it goes too");
  snprintf(path, sizeof(path), "%s/sessions/%.80s/streams/00000000000c", h.state, sid);
  unlink(path);
  snprintf(path, sizeof(path), "%s/sessions/%.80s/streams/00000000000f", h.state, sid);
  unlink(path);
}

/* A session keeps its 16 newest delivered answers, of 16 MiB in all at
 * most; the records of other streams are not counted. */
static void trim_tests(void) {
  clear_records(sid);
  char name[16];
  for (int i = 1; i <= 20; i++) {
    snprintf(name, sizeof(name), "0000000001%02d", i);
    old_record(name, "1\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n", i);
    mark_delivered(name);
  }
  old_record("0000000002aa", "2\n", 30);
  struct response r;
  tools_call("2025-11-25", ACCEPT_BOTH, "\"t1\"", NULL, "{\"code\":\"print('trim')\"}", &r);
  is_str(jstr(r.json, "result.structuredContent.stdout"), "trim\n", "a streamed call");
  response_free(&r);
  is_int(records(sid), 17, "then 16 delivered answers are kept, and the record of a broken stream");
  ok(record_exists("000000000115") && !record_exists("000000000116"), "the newest: the call's own and 15 more");
  ok(record_exists("0000000002aa"), "a broken stream's record is not counted");

  /* One answer of more than 16 MiB, delivered a second ago. */
  char path[PATH_MAX + 200];
  snprintf(path, sizeof(path), "%s/sessions/%.80s/streams/0000000003bb", h.state, sid);
  FILE *f = fopen(path, "w");
  ok(f != NULL && ftruncate(fileno(f), (off_t)17 << 20) == 0, "an answer of 17 MiB");
  if (f != NULL)
    fclose(f);
  mark_delivered("0000000003bb");
  tools_call("2025-11-25", ACCEPT_BOTH, "\"t2\"", NULL, "{\"code\":\"print('trim')\"}", &r);
  response_free(&r);
  ok(!record_exists("0000000003bb"), "the next call's trim removes it: more than 16 MiB in all");
  is_int(records(sid), 17, "the newest 16 others stay");
  ok(record_exists("000000000114") && !record_exists("000000000115"), "the call's own, t1's and 14 more");
  clear_records(sid);
}

static void resume_tests(void) {
  struct response r;
  char id[32];
  ok(records(sid) > 0, "the streams of the tests before delivered their answers and kept their records (%d)",
     records(sid));
  clear_records(sid);
  tools_call("2025-11-25", ACCEPT_BOTH, "\"d1\"", NULL, "{\"code\":\"print('delivered')\"}", &r);
  first_event_id(&r, id);
  ok(id[0] != '\0', "a 2025-11-25 stream's priming event has an id (%s)", id);
  is_int(records(sid), 1, "a stream that delivered its answer keeps its record");
  char name[32];
  snprintf(name, sizeof(name), "%.12s", id);
  is_int(record_mode(name), 0400, "marked delivered by its mode");
  response_free(&r);
  /* nginx took the answer, but the client may not have got it: a cell or
   * the router killed a moment later loses it on the way. */
  resume(sid, id, &r);
  is_str(header(&r, "Content-Type"), "text/event-stream", "resuming a delivered stream: a stream");
  is_str(jstr(r.json, "id"), "d1", "with the answer to its request");
  is_str(jstr(r.json, "result.structuredContent.stdout"), "delivered\n", "again");
  is_int(records(sid), 0, "then its record is gone");
  response_free(&r);
  resume(sid, id, &r);
  is_rpc_error(&r, 404, -32600, "no stream to resume", "resuming it once more: 404");
  response_free(&r);

  /* A stream that breaks while the call runs: the call goes on, and its
   * answer waits for the client. */
  h.writes_fail_after_ms = 500;
  tools_call("2025-11-25", ACCEPT_BOTH, "\"b1\"", NULL,
             "{\"code\":\"import time; time.sleep(1.5); print('kept')\",\"timeout_seconds\":20}", &r);
  h.writes_fail_after_ms = 0;
  first_event_id(&r, id);
  ok(r.json == NULL, "a broken stream: the client got no answer on it");
  is_int(records(sid), 1, "its record is kept");
  response_free(&r);
  resume(sid, id, &r);
  is_str(header(&r, "Content-Type"), "text/event-stream", "GET with its Last-Event-ID: a stream");
  ok(r.sse_valid, "whose last event is the answer");
  is_str(jstr(r.json, "id"), "b1", "for the request");
  is_str(jstr(r.json, "result.structuredContent.stdout"), "kept\n", "with the call's result");
  char next[32];
  first_event_id(&r, next);
  char want[32];
  snprintf(want, sizeof(want), "%.12s-1", id);
  is_str(next, want, "its events' ids go on from the Last-Event-ID");
  is_int(records(sid), 0, "the answer delivered, the record is gone");
  response_free(&r);

  /* A client that comes back while the call runs waits for its answer. */
  struct resumed_call b;
  pthread_t t;
  h.writes_fail_after_ms = 300;
  pthread_create(&t, NULL, broken_call, &b);
  usleep(800000);
  h.writes_fail_after_ms = 0;
  running_stream_id(id);
  int64_t t0 = now_ms();
  resume(sid, id, &r);
  int64_t waited = now_ms() - t0;
  pthread_join(t, NULL);
  ok(b.r.json == NULL, "a call whose stream broke at 300 ms");
  is_str(jstr(r.json, "result.structuredContent.stdout"), "late\n",
         "resumed while it ran: the answer came once the call was over");
  ok(waited >= 700, "after waiting for it (%lld ms)", (long long)waited);
  response_free(&b.r);
  response_free(&r);

  /* A client whose connection dropped without a word comes back while its
   * stream still takes writes (nginx learns of it late): the answer goes
   * out on the old stream as if delivered, and the resume gets it too. */
  h.writes_fail_after_ms = 0;
  pthread_create(&t, NULL, broken_call, &b);
  usleep(800000);
  running_stream_id(id);
  resume(sid, id, &r);
  pthread_join(t, NULL);
  is_str(jstr(b.r.json, "result.structuredContent.stdout"), "late\n", "a call whose stream never failed");
  is_str(jstr(r.json, "result.structuredContent.stdout"), "late\n",
         "resumed while its stream still took writes: the answer, not the lost-call error");
  is_int(records(sid), 0, "and no record is left");
  response_free(&b.r);
  response_free(&r);

  /* A record without an answer and without its lock: its responder died
   * (the cell or the process was killed): an error for the request. */
  char dir[PATH_MAX + 200];
  snprintf(dir, sizeof(dir), "%s/sessions/%.80s/streams/0123456789ab", h.state, sid);
  FILE *f = fopen(dir, "w");
  if (f != NULL) {
    fputs("{\"n\":[9]}\n", f);
    fclose(f);
  }
  resume(sid, "0123456789ab-3", &r);
  is_rpc_error(&r, 200, -32603, "was lost", "a stream whose responder died: its request gets an error at once");
  ok(cJSON_IsObject(jget(r.json, "id")) && jnum(r.json, "id.n.0") == 9, "with the request's own id");
  is_int(records(sid), 0, "and its record is gone");
  response_free(&r);

  /* A record whose responder died before it wrote the request's id. */
  snprintf(dir, sizeof(dir), "%s/sessions/%.80s/streams/0123456789ac", h.state, sid);
  f = fopen(dir, "w");
  if (f != NULL)
    fclose(f);
  resume(sid, "0123456789ac-0", &r);
  is_rpc_error(&r, 404, -32600, "no record", "a record without its request's id: 404 (after a wait for its maker)");
  response_free(&r);

  static const char *const bad[] = {"x",        "0123456789ab", "0123456789AB-1", "0123456789ab-", "0123456789ab-1x",
                                    "../../x-1"};
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    resume(sid, bad[i], &r);
    is_rpc_error(&r, 400, -32600, "Last-Event-ID", bad[i]);
    response_free(&r);
  }
  /* Another session's stream is not found from this one. */
  char other[SESSION_ID_MAX];
  if (initialize(&h, TEST_TOKEN, other)) {
    h.writes_fail_after_ms = 300;
    tools_call("2025-11-25", ACCEPT_BOTH, "\"o1\"", NULL,
               "{\"code\":\"import time; time.sleep(0.8)\",\"timeout_seconds\":20}", &r);
    h.writes_fail_after_ms = 0;
    first_event_id(&r, id);
    response_free(&r);
    resume(other, id, &r);
    is_rpc_error(&r, 404, -32600, "no stream", "another session's stream: 404");
    response_free(&r);
    delete_session(&h, TEST_TOKEN, other);
  }
  sweep_tests();
  trim_tests();
  struct http_request modern = get_request(NULL, "0123456789ab-1");
  modern.protocol_version = "2026-07-28";
  serve(&h, &modern, &r);
  is_int(r.status, 405, "2026-07-28 resumes nothing: 405");
  response_free(&r);
}

int main(void) {
  harness_setup(&h);
  if (!initialize(&h, TEST_TOKEN, sid))
    bail_out("initialize does not work; nothing else can be tested");
  framing_tests();
  progress_tests();
  logging_tests();
  cancel_tests(ACCEPT_BOTH);
  cancel_tests("application/json");
  resume_tests();
  is_int(delete_session(&h, TEST_TOKEN, sid), 204, "DELETE the session");
  is_int(processes_after_delete(&h, sid, 3000), 0, "its supervisor and executor are gone");
  harness_teardown(&h);
  return done_testing();
}
