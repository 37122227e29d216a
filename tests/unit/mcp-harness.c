/* See mcp-harness.h. */
#include "config.h"

#include "mcp-harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "fcgi/keeper.h"
#include "tap.h"

#ifndef TEST_BUILDDIR
#error "TEST_BUILDDIR must name the build folder"
#endif
#ifndef TEST_SRCDIR
#error "TEST_SRCDIR must name the source folder"
#endif

extern char **environ;

static void clear_mcp_env(void) {
  for (;;) {
    char name[256] = "";
    for (char **e = environ; *e; e++) {
      if (strncmp(*e, "MCP_", 4) == 0) {
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
        break;
      }
    }
    if (name[0] == '\0')
      return;
    unsetenv(name);
  }
}

static void link_into(const char *dir, const char *name, const char *target) {
  char p[PATH_MAX + 64];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  if (symlink(target, p) < 0)
    bail_out("symlink %s -> %s: %s", p, target, strerror(errno));
}

void harness_setup(struct harness *h) {
  memset(h, 0, sizeof(*h));
  if (access("/usr/bin/python3", X_OK) < 0)
    skip_all("/usr/bin/python3, which the direct backend runs, is not installed");
  if (access(TEST_BUILDDIR "/mcp-sandboxd", X_OK) < 0)
    bail_out("%s/mcp-sandboxd is not built", TEST_BUILDDIR);
  signal(SIGPIPE, SIG_IGN);
  /* Supervisors are double-forked: as a subreaper we adopt them, as the
   * master does, and can reap them. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  const char *t = getenv("TMPDIR");
  snprintf(h->root, sizeof(h->root), "%s/mcp-unit-XXXXXX", t && *t ? t : "/tmp");
  if (mkdtemp(h->root) == NULL)
    bail_out("mkdtemp: %s", strerror(errno));
  snprintf(h->state, sizeof(h->state), "%s/state", h->root);
  snprintf(h->libexec, sizeof(h->libexec), "%s/libexec", h->root);
  if (mkdir(h->libexec, 0755) < 0)
    bail_out("mkdir: %s", strerror(errno));
  link_into(h->libexec, "mcp-sandboxd", TEST_BUILDDIR "/mcp-sandboxd");
  link_into(h->libexec, "executor", TEST_SRCDIR "/executor");

  clear_mcp_env();
  setenv("MCP_STATE_DIR", h->state, 1);
  setenv("MCP_LIBEXEC_DIR", h->libexec, 1);
  setenv("MCP_BACKEND", "direct", 1);
  setenv("MCP_POOL_SIZE", "0", 1);
  setenv("MCP_CGROUP_PARENT", "", 1); /* the direct backend puts no sandbox in a cgroup */
  if (getuid() != 0) {
    /* Workspaces are chowned to the sandbox user, which only root may do
     * for another uid. */
    char id[32];
    snprintf(id, sizeof(id), "%u", (unsigned)getuid());
    setenv("MCP_SANDBOX_UID", id, 1);
    snprintf(id, sizeof(id), "%u", (unsigned)getgid());
    setenv("MCP_SANDBOX_GID", id, 1);
  }
  mcp_error_t err = NULL;
  if (config_load(&h->cfg, &err) < 0 || store_prepare(&h->cfg, &err) < 0 || store_open(&h->cfg, &h->store, &err) < 0)
    bail_out("state folder: %s", err ? err->msg : "?");
  h->ctx.cfg = &h->cfg;
  h->ctx.store = &h->store;
}

/* ---- processes ---- */

static void reap(void) {
  while (waitpid(-1, NULL, WNOHANG) > 0)
    ;
}

/* pids (up to max) whose command line contains needle; returns the count. */
static int find_processes(const char *needle, pid_t *pids, int max, bool report) {
  int n = 0;
  DIR *d = opendir("/proc");
  if (d == NULL)
    return 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    pid_t pid = (pid_t)atoi(de->d_name);
    if (pid <= 0 || pid == getpid())
      continue;
    char p[64], cmd[4096];
    snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    ssize_t len = read(fd, cmd, sizeof(cmd) - 1);
    close(fd);
    if (len <= 0)
      continue;
    for (ssize_t i = 0; i < len; i++)
      if (cmd[i] == '\0')
        cmd[i] = ' ';
    cmd[len] = '\0';
    if (strstr(cmd, needle) == NULL)
      continue;
    if (report)
      diag("left running: pid %d: %s", (int)pid, cmd);
    if (n < max)
      pids[n] = pid;
    n++;
  }
  closedir(d);
  return n;
}

int processes_with(const char *needle, int wait_ms) {
  pid_t pids[64];
  int64_t deadline = now_ms() + wait_ms;
  for (;;) {
    reap();
    int n = find_processes(needle, pids, 64, false);
    if (n == 0 || now_ms() >= deadline)
      return find_processes(needle, pids, 64, n > 0);
    poll(NULL, 0, 20);
  }
}

int processes_now(const char *needle) {
  pid_t pids[64];
  return processes_pids(needle, pids, 64);
}

int processes_pids(const char *needle, pid_t *pids, int max) {
  reap();
  return find_processes(needle, pids, max, false);
}

int processes_after_delete(struct harness *h, const char *id, int wait_ms) {
  if (processes_with(id, wait_ms) == 0)
    return 0;
  diag("DELETE of %s returned while its supervisor still ran; running one keeper pass", id);
  keeper_tick(&h->store, false);
  return processes_with(id, wait_ms);
}

void harness_teardown(struct harness *h) {
  /* End the sessions a test left (expired ones cannot be deleted over HTTP). */
  DIR *d = opendir(h->state);
  if (d != NULL) {
    closedir(d);
    char p[PATH_MAX + 16];
    snprintf(p, sizeof(p), "%s/sessions", h->state);
    d = opendir(p);
  }
  if (d != NULL) {
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      if (!session_id_valid(de->d_name))
        continue;
      mcp_error_t err = NULL;
      if (session_destroy(&h->store, de->d_name, &err) < 0) {
        diag("teardown: session %s: %s", de->d_name, err->msg);
        mcp_error_release(&err);
      }
    }
    closedir(d);
  }
  /* What the keeper would finish within a second in the service. */
  keeper_tick(&h->store, false);
  int left = processes_with(h->root, 5000);
  is_int(left, 0, "no supervisor or executor outlives its session");
  if (left > 0) {
    pid_t pids[64];
    int n = find_processes(h->root, pids, 64, false);
    for (int i = 0; i < n && i < 64; i++)
      kill(pids[i], SIGKILL);
    processes_with(h->root, 2000);
  }
  store_close(&h->store);
  mcp_error_t err = NULL;
  int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (remove_tree_at(root, h->root + 1, &err) < 0) {
    diag("remove %s: %s", h->root, err->msg);
    mcp_error_release(&err);
  }
  close(root);
}

/* ---- requests ---- */

struct sink_buf {
  struct buf b;
  int64_t fail_at; /* > 0: writes fail from then on (the client is gone) */
};

static int sink_write(void *opaque, const char *data, size_t len) {
  struct sink_buf *s = opaque;
  if (s->fail_at > 0 && now_ms() >= s->fail_at)
    return -1;
  return buf_append(&s->b, data, len);
}

static int sink_flush(void *opaque) {
  (void)opaque;
  return 0;
}

struct http_request post_request(const char *body, const char *session_id) {
  struct http_request req = {
      .method = "POST",
      .content_type = "application/json",
      .accept = ACCEPT_BOTH,
      .session_id = session_id,
      .protocol_version = session_id ? MCP_LATEST_VERSION : NULL,
      .token_id = TEST_TOKEN,
      .request_id = "unit",
      .body = body,
      .body_len = body ? strlen(body) : 0,
  };
  return req;
}

/* Events are separated by a blank line; data: lines carry one JSON-RPC
 * message each.  The response (result or error) must be the last one. */
static void parse_sse(struct response *r) {
  r->sse = true;
  r->sse_valid = true;
  r->events = cJSON_CreateArray();
  /* NUL is no part of any event this server means to send: a client would
   * read it into the next field name. */
  if (memchr(r->body, '\0', r->body_len) != NULL)
    r->sse_valid = false;
  const char *p = r->body, *end = r->body + r->body_len;
  bool first = true;
  while (p < end) {
    const char *stop = memmem(p, (size_t)(end - p), "\n\n", 2);
    if (stop == NULL) {
      r->sse_valid = false; /* an unterminated event */
      break;
    }
    struct buf data = {0};
    bool has_id = false, has_data = false;
    for (const char *line = p; line < stop;) {
      const char *nl = memchr(line, '\n', (size_t)(stop - line));
      size_t n = nl ? (size_t)(nl - line) : (size_t)(stop - line);
      if (n >= 3 && strncmp(line, "id:", 3) == 0)
        has_id = true;
      if (n >= 5 && strncmp(line, "data:", 5) == 0) {
        const char *v = line + 5 + (n > 5 && line[5] == ' ');
        if (has_data)
          buf_append(&data, "\n", 1);
        buf_append(&data, v, n - (size_t)(v - line));
        has_data = true;
      }
      line += n + 1;
    }
    if (first)
      r->sse_primed = has_id && has_data && data.len == 0;
    first = false;
    if (data.len > 0) {
      cJSON *m = cJSON_ParseWithLength(data.data, data.len);
      if (m == NULL || r->json != NULL)
        r->sse_valid = false; /* not JSON, or something after the response */
      if (m != NULL && (jget(m, "result") != NULL || jget(m, "error") != NULL) && r->json == NULL)
        r->json = m;
      else if (m != NULL)
        cJSON_AddItemToArray(r->events, m);
    }
    buf_free(&data);
    p = stop + 2;
  }
  if (r->json == NULL)
    r->sse_valid = false;
}

static bool gone_after(void *at_ms) { return now_ms() >= *(int64_t *)at_ms; }

void serve(struct harness *h, const struct http_request *req, struct response *r) {
  memset(r, 0, sizeof(*r));
  struct sink_buf s = {{0}, h->writes_fail_after_ms > 0 ? now_ms() + h->writes_fail_after_ms : 0};
  int64_t gone_at = now_ms() + h->peer_gone_after_ms;
  struct http_sink sink = {sink_write, sink_flush, &s, NULL, h->peer_gone_after_ms > 0 ? gone_after : NULL, &gone_at};
  int ret = mcp_serve(&h->ctx, req, &sink);
  if (ret < 0)
    diag("mcp_serve returned %d", ret);
  r->raw = s.b.data ? s.b.data : strdup("");
  r->raw_len = s.b.len;
  if (sscanf(r->raw, "Status: %d ", &r->status) != 1)
    r->status = -1;
  const char *end = strstr(r->raw, "\r\n\r\n");
  if (end == NULL) {
    r->body = "";
    return;
  }
  r->body = end + 4;
  r->body_len = r->raw_len - (size_t)(r->body - r->raw);
  const char *ct = header(r, "Content-Type");
  if (ct != NULL && strcmp(ct, "text/event-stream") == 0)
    parse_sse(r);
  else
    r->json = cJSON_ParseWithLength(r->body, r->body_len);
}

void post(struct harness *h, const char *session_id, const char *body, struct response *r) {
  struct http_request req = post_request(body, session_id);
  serve(h, &req, r);
}

void response_free(struct response *r) {
  free(r->raw);
  cJSON_Delete(r->json);
  cJSON_Delete(r->events);
  memset(r, 0, sizeof(*r));
}

const char *header(struct response *r, const char *name) {
  const char *p = strstr(r->raw, "\r\n");
  const char *end = strstr(r->raw, "\r\n\r\n");
  size_t n = strlen(name);
  while (p != NULL && end != NULL && p < end) {
    p += 2;
    if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
      const char *v = p + n + 1;
      while (*v == ' ')
        v++;
      const char *eol = strstr(v, "\r\n");
      snprintf(r->value, sizeof(r->value), "%.*s", (int)(eol - v), v);
      return r->value;
    }
    p = strstr(p, "\r\n");
  }
  return NULL;
}

bool initialize(struct harness *h, const char *token, char out[SESSION_ID_MAX]) {
  struct http_request req = post_request("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                                         "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
                                         "\"clientInfo\":{\"name\":\"unit\",\"version\":\"0\"}}}",
                                         NULL);
  req.token_id = token;
  struct response r;
  serve(h, &req, &r);
  const char *sid = header(&r, "Mcp-Session-Id");
  bool good = r.status == 200 && sid != NULL && session_id_valid(sid);
  if (good)
    snprintf(out, SESSION_ID_MAX, "%s", sid);
  else
    diag("initialize failed: %.300s", r.raw);
  response_free(&r);
  return good;
}

int delete_session(struct harness *h, const char *token, const char *id) {
  struct http_request req = {
      .method = "DELETE", .session_id = id, .token_id = token, .protocol_version = MCP_LATEST_VERSION};
  struct response r;
  serve(h, &req, &r);
  int status = r.status;
  response_free(&r);
  return status;
}

/* ---- JSON ---- */

const cJSON *jget(const cJSON *o, const char *path) {
  char part[128];
  while (o != NULL && *path) {
    size_t n = strcspn(path, ".");
    snprintf(part, sizeof(part), "%.*s", (int)n, path);
    if (cJSON_IsArray(o) && part[0] >= '0' && part[0] <= '9')
      o = cJSON_GetArrayItem(o, atoi(part));
    else
      o = cJSON_GetObjectItemCaseSensitive(o, part);
    path += n;
    if (*path == '.')
      path++;
  }
  return o;
}

const char *jstr(const cJSON *o, const char *path) { return cJSON_GetStringValue(jget(o, path)); }

double jnum(const cJSON *o, const char *path) {
  const cJSON *v = jget(o, path);
  return cJSON_IsNumber(v) ? v->valuedouble : -12345.0;
}

void is_rpc_error(struct response *r, int status, int code, const char *message_part, const char *what) {
  is_int(r->status, status, "%s: HTTP %d", what, status);
  /* An error of a request may come on the request's stream, with 200. */
  const char *ct = header(r, "Content-Type");
  if (status == 200 && r->sse)
    ok(r->sse_valid, "%s: a well-formed event stream", what);
  else
    is_str(ct, "application/json", "%s: a JSON body", what);
  ok(r->json != NULL && cJSON_IsString(jget(r->json, "jsonrpc")) && strcmp(jstr(r->json, "jsonrpc"), "2.0") == 0 &&
         jget(r->json, "result") == NULL,
     "%s: a JSON-RPC error response", what);
  is_int(jnum(r->json, "error.code"), code, "%s: error code %d", what, code);
  like(jstr(r->json, "error.message"), message_part, "%s: message", what);
}

const cJSON *rpc_result(struct response *r, const char *what) {
  const cJSON *res = jget(r->json, "result");
  if (!ok(r->status == 200 && res != NULL && (!r->sse || r->sse_valid), "%s: HTTP 200 with a result", what))
    diag("got: %.500s", r->raw);
  return res;
}
