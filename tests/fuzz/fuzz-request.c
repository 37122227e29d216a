/* Fuzz harness: one HTTP request, from raw headers and body to the
 * response bytes, through mcp_serve() as a responder runs it.
 *
 * Input: optional header lines, a blank line, then the body:
 *
 *   method: POST            REQUEST_METHOD
 *   content-type: ...       CONTENT_TYPE
 *   accept: ...             HTTP_ACCEPT
 *   origin: ...             HTTP_ORIGIN
 *   host: ...               HTTP_HOST
 *   session: @              HTTP_MCP_SESSION_ID; "@" is the harness's live session
 *   version: ...            HTTP_MCP_PROTOCOL_VERSION
 *   token: ...              MCP_TOKEN_ID (the name of nginx's accepted token)
 *   endpoint: ...           MCP_ENDPOINT (metrics, healthz)
 *   too-large: 1            the body was over max_body
 *
 *   {"jsonrpc":"2.0", ...}
 *
 * A name with an empty value leaves the field unset; a field not named
 * takes what a well-behaved client sends (POST, JSON, both Accept types,
 * the live session, the latest version, token "fuzz").  Without a blank
 * line the whole input is the body.
 *
 * The state folder is private; the backend is "direct" but libexec_dir is
 * an empty folder and the live session's call.lock is held by the harness
 * with busy_wait = 0, so tools/call gets its arguments validated and then a
 * "busy" tool error: no process ever starts (tests/fuzz/fuzz-args.c fuzzes
 * the argument checks directly).  Every response must be well-formed
 * (fuzz_check_response).  Sessions that initialize creates are ended at
 * once, and the live session is recreated when a DELETE ended it. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/metrics.h"
#include "fcgi/mcp.h"
#include "fuzz.h"

#define TOKEN "fuzz"
#define ACCEPT_BOTH "application/json, text/event-stream"

static struct mcp_config cfg;
static struct store store;
static struct mcp_ctx ctx;
static char live[37];
static int live_lock = -1;

static void set(const char *key, const char *value) {
  mcp_error_t err = NULL;
  if (config_set(&cfg, key, value, &err) < 0)
    fuzz_fail("config %s = %s: %s", key, value, err->msg);
}

static void write_at(int dirfd, const char *name, const char *data, size_t len) {
  mcp_error_t err = NULL;
  if (write_file_atomic(dirfd, name, data, len, 0644, &err) < 0)
    fuzz_fail("write %s: %s", name, err->msg);
}

/* Output files for resources/list and resources/read to find. */
static void fill_workspace(int session_fd) {
  int work = openat(session_fd, WORKSPACE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (work < 0 || (mkdirat(work, "output", 0755) < 0 && errno != EEXIST) ||
      (mkdirat(work, "output/sub", 0755) < 0 && errno != EEXIST))
    fuzz_fail("workspace: %s", strerror(errno));
  static const char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
  write_at(work, "output/plot.png", png, sizeof(png) - 1);
  write_at(work, "output/data.csv", "a,b\n1,2\n", 8);
  write_at(work, "output/sub/bad\xff.txt", "caf\xc3\xa9 \xff\xfe\n", 10);
  write_at(work, "notes.md", "# notes\n", 8);
  if (symlinkat("/etc/passwd", work, "output/link") < 0 && errno != EEXIST)
    fuzz_fail("symlink: %s", strerror(errno));
  close(work);
}

static void make_live_session(void) {
  struct session s;
  mcp_error_t err = NULL;
  if (session_create(&store, TOKEN, &s, &err) < 0)
    fuzz_fail("session_create: %s", err->msg);
  memcpy(live, s.id, sizeof(live));
  fill_workspace(s.dirfd);
  /* Held here, every tools/call finds the session busy at once. */
  live_lock = openat(s.dirfd, CALL_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (live_lock < 0 || lock_try(live_lock) < 0)
    fuzz_fail("call lock: %s", strerror(errno));
  session_close(&s);
}

static bool live_exists(void) {
  struct session s;
  mcp_error_t err = NULL;
  if (session_open(&store, live, TOKEN, &s, &err) < 0) {
    mcp_error_release(&err);
    return false;
  }
  session_close(&s);
  return true;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *root = fuzz_tmpdir("request");
  char state[1200], libexec[1200], uid[32], gid[32];
  snprintf(state, sizeof(state), "%s/state", root);
  snprintf(libexec, sizeof(libexec), "%s/libexec-empty", root);
  if (mkdir(libexec, 0755) < 0)
    fuzz_fail("mkdir %s: %s", libexec, strerror(errno));
  config_defaults(&cfg);
  set("state_dir", state);
  set("libexec_dir", libexec);
  set("backend", "direct");
  set("pool_size", "0");
  set("cgroup_parent", "");
  set("busy_wait", "0");
  set("capacity_wait", "0");
  set("ready_wait", "5");
  set("max_sessions", "4");
  set("allowed_origins", "https://app.example");
  set("audit_log", "/dev/null");
  /* packages_fetch() fails at once: this user does not exist. */
  set("package_user", "mcp-fuzz-no-such-user");
  snprintf(uid, sizeof(uid), "%u", getuid() == 0 ? 1000U : (unsigned)getuid());
  snprintf(gid, sizeof(gid), "%u", getuid() == 0 ? 1000U : (unsigned)getgid());
  set("sandbox_uid", uid);
  set("sandbox_gid", gid);
  mcp_error_t err = NULL;
  if (store_prepare(&cfg, &err) < 0 || store_open(&cfg, &store, &err) < 0 || metrics_create(&cfg, &err) < 0)
    fuzz_fail("state folder: %s", err->msg);
  ctx.cfg = &cfg;
  ctx.store = &store;
  make_live_session();
  return 0;
}

struct fields {
  const char *method, *content_type, *accept, *origin, *host, *session, *version, *token, *endpoint;
  bool too_large;
};

/* "name: value" -> the field; values are C strings, as FastCGI gives them. */
static void header_line(struct fields *f, char *line) {
  char *colon = strchr(line, ':');
  if (colon == NULL)
    return;
  *colon = '\0';
  char *v = colon + 1;
  while (*v == ' ')
    v++;
  const char *value = *v ? v : NULL;
  static const struct {
    const char *name;
    size_t offset;
  } names[] = {
      {"method", offsetof(struct fields, method)},     {"content-type", offsetof(struct fields, content_type)},
      {"accept", offsetof(struct fields, accept)},     {"origin", offsetof(struct fields, origin)},
      {"host", offsetof(struct fields, host)},         {"session", offsetof(struct fields, session)},
      {"version", offsetof(struct fields, version)},   {"token", offsetof(struct fields, token)},
      {"endpoint", offsetof(struct fields, endpoint)},
  };
  for (size_t i = 0; i < ARRAY_SIZE(names); i++)
    if (strcasecmp(line, names[i].name) == 0) {
      const char **slot = (const char **)((char *)f + names[i].offset);
      *slot = value != NULL && strcmp(value, "@") == 0 && strcmp(names[i].name, "session") == 0 ? live : value;
      return;
    }
  if (strcasecmp(line, "too-large") == 0)
    f->too_large = value != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fields f = {"POST", "application/json", ACCEPT_BOTH, NULL, "127.0.0.1:8443",
                     live,   MCP_LATEST_VERSION, TOKEN,       NULL, false};
  const char *body = (const char *)data;
  size_t body_len = size;
  /* Header lines (before the first blank line) as NUL-terminated copies;
   * a NUL inside one ends its value, as in a FastCGI parameter. */
  cleanup_free char *head = NULL;
  const char *blank = memmem(data, size, "\n\n", 2);
  if (blank != NULL) {
    size_t hl = (size_t)(blank - (const char *)data);
    head = xstrndup((const char *)data, hl);
    if (head == NULL)
      return 0;
    char *save = NULL;
    for (char *line = strtok_r(head, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
      header_line(&f, line);
    body = blank + 2;
    body_len = size - hl - 2;
  }
  /* The body exactly as long as it is: no terminating NUL to lean on. */
  cleanup_free char *copy = malloc(body_len ? body_len : 1);
  if (copy == NULL)
    return 0;
  memcpy(copy, body, body_len);
  struct http_request req = {
      .method = f.method,
      .content_type = f.content_type,
      .accept = f.accept,
      .origin = f.origin,
      .host = f.host,
      .session_id = f.session,
      .protocol_version = f.version,
      .token_id = f.token,
      .request_id = "fuzz",
      .endpoint = f.endpoint,
      .body = copy,
      .body_len = body_len,
      .body_too_large = f.too_large,
  };
  struct fuzz_sink out;
  fuzz_sink_init(&out);
  mcp_serve(&ctx, &req, &out.sink);
  fuzz_check_response(out.out.data ? out.out.data : "", out.out.len);

  /* Sessions initialize made: end them, or max_sessions stops the next. */
  char sid[64];
  if (fuzz_response_header(out.out.data ? out.out.data : "", out.out.len, "Mcp-Session-Id", sid, sizeof(sid)) &&
      strcmp(sid, live) != 0) {
    if (!session_id_valid(sid))
      fuzz_fail("initialize answered a malformed session id: %s", sid);
    mcp_error_t err = NULL;
    if (session_destroy(&store, sid, &err) < 0)
      fuzz_fail("ending session %s: %s", sid, err->msg);
  }
  fuzz_sink_free(&out);
  if (!live_exists()) {
    close(live_lock);
    live_lock = -1;
    mcp_error_t err = NULL;
    if (session_destroy(&store, live, &err) < 0)
      mcp_error_release(&err);
    make_live_session();
  }
  return 0;
}
