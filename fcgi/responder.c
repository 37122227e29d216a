#include "config.h"

#include "fcgi/responder.h"

#include <errno.h>
#include <fcgiapp.h>
#include <fcntl.h>
#include <grp.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/cell.h"
#include "common/metrics.h"
#include "common/policy.h"
#include "common/util.h"
#include "fcgi/audit.h"
#include "fcgi/http.h"
#include "fcgi/mcp.h"

#if defined(__SANITIZE_ADDRESS__)
#define MCP_LEAK_CHECK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MCP_LEAK_CHECK 1
#endif
#endif
#ifdef MCP_LEAK_CHECK
#include <sanitizer/lsan_interface.h>
#endif

/* A responder leaves with _exit(), which skips LeakSanitizer's check at
 * exit(): a sanitizer build (configure --enable-sanitizers) runs the check
 * here, so whatever the requests leaked is reported when the responder
 * stops (scripts/test looks for the reports).  Not async-signal-safe: in
 * that build only. */
static __attribute__((noreturn)) void responder_exit(int status) {
#ifdef MCP_LEAK_CHECK
  __lsan_do_leak_check();
#endif
  _exit(status);
}

/* Requests in progress in this process, and whether SIGTERM came: the
 * last request to finish after SIGTERM ends the process; idle threads sit
 * in accept() and need no goodbye. */
static atomic_int busy;
static atomic_int stop_requested;

static void on_term(int sig) {
  (void)sig;
  atomic_store(&stop_requested, 1);
  if (atomic_load(&busy) == 0)
    responder_exit(0); /* idle in accept(): nothing to finish */
}
static void on_hangup(int sig) {
  (void)sig;
  audit_reopen(); /* log rotation */
}

static int fcgx_write(void *opaque, const char *data, size_t len) {
  FCGX_Stream *out = opaque;
  while (len > 0) {
    int chunk = len > (1 << 30) ? (1 << 30) : (int)len;
    if (FCGX_PutStr(data, chunk, out) != chunk)
      return -1;
    data += chunk;
    len -= (size_t)chunk;
  }
  return 0;
}

static int fcgx_flush(void *opaque) { return FCGX_FFlush((FCGX_Stream *)opaque); }

/* The request a worker thread is answering: its connection to nginx and
 * the time after which the watchdog cuts it.  Writing to a client that
 * reads slowly blocks in the kernel; a cut connection makes that write
 * fail at once, so no client holds a thread past its request's deadline. */
struct guard {
  pthread_mutex_t lock;
  int fd;           /* -1 between requests */
  int64_t deadline; /* now_ms() based */
};

#define MAX_GUARDS CELL_THREADS_MAX
#define REQUEST_DEADLINE_MS 60000 /* a request that is not a call */
#define WATCHDOG_TICK_MS 250

static struct guard *guards[MAX_GUARDS];
static atomic_int guards_n;

static void guard_set_deadline(void *opaque, int64_t deadline_ms) {
  struct guard *g = opaque;
  pthread_mutex_lock(&g->lock);
  g->deadline = deadline_ms;
  pthread_mutex_unlock(&g->lock);
}

/* The guard holds a descriptor of its own for the connection (a dup): the
 * watchdog can never shut down a number that was closed and reused. */
static void guard_watch(struct guard *g, int conn_fd) {
  pthread_mutex_lock(&g->lock);
  if (g->fd >= 0)
    close(g->fd);
  g->fd = conn_fd >= 0 ? fcntl(conn_fd, F_DUPFD_CLOEXEC, 3) : -1;
  g->deadline = now_ms() + REQUEST_DEADLINE_MS;
  pthread_mutex_unlock(&g->lock);
}

/* nginx closes the FastCGI connection when its client goes away (a
 * modern client that closes its stream cancels the call). */
static bool guard_peer_gone(void *opaque) {
  struct guard *g = opaque;
  pthread_mutex_lock(&g->lock);
  struct pollfd p = {.fd = g->fd, .events = POLLRDHUP};
  bool gone = g->fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  pthread_mutex_unlock(&g->lock);
  return gone;
}

static void *watchdog(void *arg) {
  (void)arg;
  for (;;) {
    poll(NULL, 0, WATCHDOG_TICK_MS);
    int64_t now = now_ms();
    int n = atomic_load(&guards_n);
    for (int i = 0; i < n; i++) {
      struct guard *g = guards[i];
      pthread_mutex_lock(&g->lock);
      if (g->fd >= 0 && now > g->deadline) {
        fprintf(stderr, "responder: a client did not take its response in time; its connection is cut\n");
        shutdown(g->fd, SHUT_RDWR);
        g->deadline = INT64_MAX;
      }
      pthread_mutex_unlock(&g->lock);
    }
  }
  return NULL;
}

/* Read the body, at most max_body bytes; beyond that only note it. */
static int read_body(FCGX_Request *r, const struct mcp_config *cfg, struct buf *body, bool *too_large) {
  const char *cl = FCGX_GetParam("CONTENT_LENGTH", r->envp);
  unsigned long long want = cl ? strtoull(cl, NULL, 10) : 0;
  if (want > cfg->max_body) {
    *too_large = true;
    return 0;
  }
  char tmp[65536];
  while (body->len < want) {
    size_t ask = want - body->len < sizeof(tmp) ? (size_t)(want - body->len) : sizeof(tmp);
    int n = FCGX_GetStr(tmp, (int)ask, r->in);
    if (n <= 0)
      break;
    if (buf_append(body, tmp, (size_t)n) < 0)
      return -1;
  }
  return 0;
}

/* A token's requests in progress in this cell, each in a responder
 * thread, are bounded by its policy's max_requests when it has one
 * (common/cell.h): beyond it, 429 at once, before the body is read.  False
 * when refused. */
static bool token_admitted(const struct mcp_config *cfg, int thread, const char *token, struct http_sink *sink) {
  struct token_policy pol;
  mcp_error_t err = NULL;
  if (policy_for(cfg, token, &pol, &err) < 0) {
    mcp_error_log_release(&err, "responder: token policy");
    return true; /* the calls' own limits still hold */
  }
  if (cell_request_begin(cfg, thread, token, pol.max_requests) == 0)
    return true;
  static const char *const retry[] = {"Retry-After: 1", NULL};
  char body[320];
  int n = snprintf(body, sizeof(body),
                   "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32000,\"message\":\"Too Many Requests: this "
                   "token already has %d requests in progress on this server, its share (max_requests); retry "
                   "once some have ended\"}}\n",
                   pol.max_requests);
  metrics_reject_reason(REJECT_TOKEN_REQUESTS);
  http_send(sink, 429, "application/json", retry, body, (size_t)n);
  return false;
}

static void serve_one(struct mcp_ctx *ctx, FCGX_Request *r, struct guard *g, int thread) {
  const struct mcp_config *cfg = ctx->cfg;
  cleanup_buf struct buf body = {0};
  bool too_large = false;
  struct http_sink sink = {fcgx_write, fcgx_flush, r->out, guard_set_deadline, guard_peer_gone, g};
  /* Without a valid token (nginx names it) the body is not even read. */
  const char *token = FCGX_GetParam("MCP_TOKEN_ID", r->envp);
  const char *endpoint = FCGX_GetParam("MCP_ENDPOINT", r->envp);
  bool authorized = (token != NULL && *token != '\0') || (endpoint != NULL && *endpoint != '\0');
  if (token != NULL && *token != '\0' && !token_admitted(cfg, thread, token, &sink))
    return;
  if (authorized && read_body(r, cfg, &body, &too_large) < 0) {
    static const char oom[] =
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"Internal error\"}}";
    http_send(&sink, 500, "application/json", NULL, oom, sizeof(oom) - 1);
    return;
  }
  struct http_request req = {
      .method = FCGX_GetParam("REQUEST_METHOD", r->envp),
      .content_type = FCGX_GetParam("CONTENT_TYPE", r->envp),
      .accept = FCGX_GetParam("HTTP_ACCEPT", r->envp),
      .origin = FCGX_GetParam("HTTP_ORIGIN", r->envp),
      .host = FCGX_GetParam("HTTP_HOST", r->envp),
      .session_id = FCGX_GetParam("HTTP_MCP_SESSION_ID", r->envp),
      .protocol_version = FCGX_GetParam("HTTP_MCP_PROTOCOL_VERSION", r->envp),
      .last_event_id = FCGX_GetParam("HTTP_LAST_EVENT_ID", r->envp),
      .mcp_method = FCGX_GetParam("HTTP_MCP_METHOD", r->envp),
      .mcp_name = FCGX_GetParam("HTTP_MCP_NAME", r->envp),
      .param_sandbox = FCGX_GetParam("HTTP_MCP_PARAM_SANDBOX", r->envp),
      .token_id = FCGX_GetParam("MCP_TOKEN_ID", r->envp),
      .request_id = FCGX_GetParam("REQUEST_ID", r->envp),
      .forwarded_by = FCGX_GetParam("HTTP_MCP_FORWARDED_BY", r->envp),
      .endpoint = endpoint,
      .body = body.data,
      .body_len = body.len,
      .body_too_large = too_large,
  };
  mcp_serve(ctx, &req, &sink);
}

/* ---- who may talk to us ---- */

static int add_user(struct peer_policy *p, uid_t uid) {
  for (int i = 0; i < p->n; i++)
    if (p->uids[i] == uid)
      return 0;
  if (p->n >= PEER_USERS_MAX)
    return -1;
  p->uids[p->n++] = uid;
  return 0;
}

static int add_user_named(struct peer_policy *p, const char *name, const char *source) {
  char text[16384];
  struct passwd pwbuf, *pw = NULL;
  if (getpwnam_r(name, &pwbuf, text, sizeof(text), &pw) != 0 || pw == NULL) {
    fprintf(stderr, "mcp-server: %s names the user '%s', who does not exist; refusing to start\n", source, name);
    return -1;
  }
  if (add_user(p, pw->pw_uid) < 0) {
    fprintf(stderr, "mcp-server: more than %d users may talk to the FastCGI socket; refusing to start\n",
            PEER_USERS_MAX);
    return -1;
  }
  return 0;
}

int peer_policy_load(const struct mcp_config *cfg, struct peer_policy *p) {
  p->n = 0;
  size_t size = 1 << 20; /* a group's members are all in this buffer */
  cleanup_free char *text = malloc(size);
  struct group grbuf, *g = NULL;
  if (text == NULL || getgrnam_r(cfg->socket_group, &grbuf, text, size, &g) != 0 || g == NULL) {
    fprintf(stderr,
            "mcp-server: the group '%s' of the FastCGI socket does not exist; refusing to start (the socket would be "
            "open to every local user). Create it and add nginx's worker user to it: groupadd --system %s && "
            "usermod -aG %s www-data, then restart nginx (or set socket_group)\n",
            cfg->socket_group, cfg->socket_group, cfg->socket_group);
    return -1;
  }
  p->group = g->gr_gid;
  if (cfg->socket_peer_user[0] != '\0') {
    char list[sizeof(cfg->socket_peer_user)];
    snprintf(list, sizeof(list), "%s", cfg->socket_peer_user);
    char *save = NULL;
    for (char *name = strtok_r(list, ", ", &save); name != NULL; name = strtok_r(NULL, ", ", &save))
      if (add_user_named(p, name, "socket_peer_user") < 0)
        return -1;
    return 0;
  }
  for (char **m = g->gr_mem; *m != NULL; m++)
    if (add_user_named(p, *m, "the group of the FastCGI socket") < 0)
      return -1;
  /* Users whose primary group it is (nginx's `user www-data mcp-sandbox;`). */
  char pwtext[16384];
  struct passwd pwbuf, *pw = NULL;
  setpwent();
  while (getpwent_r(&pwbuf, pwtext, sizeof(pwtext), &pw) == 0 && pw != NULL)
    if (pw->pw_gid == p->group && pw->pw_uid != 0 && add_user(p, pw->pw_uid) < 0)
      break;
  endpwent();
  if (p->n == 0) {
    fprintf(stderr,
            "mcp-server: the group '%s' of the FastCGI socket has no member, so nginx could not talk to the "
            "responders; refusing to start. Add nginx's worker user to it (usermod -aG %s www-data, then restart "
            "nginx), or name that user in socket_peer_user\n",
            cfg->socket_group, cfg->socket_group);
    return -1;
  }
  return 0;
}

/* Root, or a user of the policy: the peer of a FastCGI connection. */
static bool peer_allowed(const struct peer_policy *peers, int fd) {
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred))
    return false;
  if (cred.uid == 0)
    return true;
  for (int i = 0; i < peers->n; i++)
    if (peers->uids[i] == cred.uid)
      return true;
  METRIC_INC(peers_refused);
  /* Counted every time, said at most once a minute per responder. */
  static _Atomic int64_t last_said;
  int64_t now = now_ms(), last = atomic_load(&last_said);
  if (now - last >= 60000 && atomic_compare_exchange_strong(&last_said, &last, now))
    fprintf(stderr,
            "responder: dropped a FastCGI connection from uid %u (pid %d): only root and the users of "
            "socket_group / socket_peer_user may talk to the responders\n",
            (unsigned)cred.uid, (int)cred.pid);
  return false;
}

struct worker {
  const struct mcp_config *cfg;
  const struct peer_policy *peers;
  struct store *store;
  int listen_fd;
  pthread_mutex_t *accept_lock;
};

/* One thread: accept a connection, check its peer, read and answer its
 * request, again.  accept() is serialized as in libfcgi's threaded
 * example; the peer is checked before libfcgi reads anything from it. */
static void *worker_loop(void *arg) {
  struct worker *w = arg;
  struct mcp_ctx ctx = {.cfg = w->cfg, .store = w->store};
  FCGX_Request r;
  FCGX_InitRequest(&r, w->listen_fd, FCGI_FAIL_ACCEPT_ON_INTR);
  /* Never freed: the watchdog may look at it until the process ends. */
  struct guard *g = calloc(1, sizeof(*g));
  if (g == NULL)
    return NULL;
  pthread_mutex_init(&g->lock, NULL);
  g->fd = -1;
  int slot = atomic_fetch_add(&guards_n, 1);
  if (slot < MAX_GUARDS)
    guards[slot] = g;
  else
    atomic_fetch_sub(&guards_n, 1);
  for (;;) {
    if (r.ipcFd < 0) { /* else: a kept connection (FCGI_KEEP_CONN) of a peer checked before */
      pthread_mutex_lock(w->accept_lock);
      int fd = accept4(w->listen_fd, NULL, NULL, SOCK_CLOEXEC);
      pthread_mutex_unlock(w->accept_lock);
      if (fd < 0) {
        if (atomic_load(&stop_requested))
          break;
        if (errno != EINTR && errno != ECONNABORTED)
          poll(NULL, 0, 10); /* a failed accept: do not spin */
        continue;
      }
      if (!peer_allowed(w->peers, fd)) {
        close(fd);
        continue;
      }
      /* libfcgi reads the request from it.  FCGX_Accept_r() first
       * finishes the previous request, closing its connection unless it is
       * kept: as one kept, this one stays open (the request's own flags set
       * keepConnection again once read). */
      r.ipcFd = fd;
      r.keepConnection = 1;
    }
    int ok = FCGX_Accept_r(&r);
    if (ok < 0) {
      if (atomic_load(&stop_requested))
        break;
      poll(NULL, 0, 10);
      continue;
    }
    /* When the connection it was given carried no valid request, libfcgi
     * accepts the next one itself: check whichever it read from. */
    if (!peer_allowed(w->peers, r.ipcFd)) {
      r.detached = 1; /* close without draining what the peer sends */
      FCGX_Free(&r, 1);
      continue;
    }
    atomic_fetch_add(&busy, 1);
    guard_watch(g, r.ipcFd);
    serve_one(&ctx, &r, g, slot);
    cell_request_end(slot); /* its token's count, when it was admitted */
    FCGX_Finish_r(&r);
    guard_watch(g, -1);
    if (atomic_fetch_sub(&busy, 1) == 1 && atomic_load(&stop_requested))
      responder_exit(0);
  }
  return NULL;
}

int responder_main(const struct mcp_config *cfg, const struct peer_policy *peers, int listen_fd, int ops_fd) {
  struct sigaction sa = {.sa_handler = on_term}; /* no SA_RESTART: accept() returns EINTR */
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  struct sigaction hup = {.sa_handler = on_hangup, .sa_flags = SA_RESTART};
  sigaction(SIGHUP, &hup, NULL);
  /* Bodies of up to max_body: glibc raises its mmap threshold to the size
   * of each big block freed (up to 32 MiB), so later big buffers come from
   * the serving thread's arena and stay resident after free(): about
   * 100 MB per responder once its threads have seen a few 5 MiB bodies.
   * A fixed threshold gives blocks of 1 MiB and more back at free(). */
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  if (FCGX_Init() != 0) {
    fprintf(stderr, "responder: FCGX_Init failed\n");
    return 1;
  }
  struct store st;
  mcp_error_t err = NULL;
  if (store_open(cfg, &st, &err) < 0) {
    mcp_error_log_release(&err, "responder");
    return 1;
  }
  pthread_mutex_t accept_lock = PTHREAD_MUTEX_INITIALIZER;
  struct worker w = {.cfg = cfg, .peers = peers, .store = &st, .listen_fd = listen_fd, .accept_lock = &accept_lock};
  /* Calls block their thread for their whole duration: several threads
   * per process keep short requests (ping, initialize) answered meanwhile. */
  pthread_t wd;
  if (pthread_create(&wd, NULL, watchdog, NULL) == 0)
    pthread_detach(wd);
  /* The endpoints without a token (/healthz, /cell, /metrics) come on a
   * socket of their own, served by a thread of their own: a probe is
   * answered while every other thread holds a request. */
  pthread_mutex_t ops_lock = PTHREAD_MUTEX_INITIALIZER;
  struct worker ops = {.cfg = cfg, .peers = peers, .store = &st, .listen_fd = ops_fd, .accept_lock = &ops_lock};
  int n = cfg->responder_threads;
  for (int i = 0; i < n; i++) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 1 << 20);
    if (pthread_create(&t, &attr, worker_loop, i == 0 ? &ops : &w) != 0)
      fprintf(stderr, "responder: only %d threads\n", i);
    pthread_attr_destroy(&attr);
  }
  worker_loop(&w);
  /* SIGTERM reached this thread in accept(): requests other threads still
   * serve are finished first (the last one to end exits the process; the
   * master's grace period bounds the wait). */
  while (atomic_load(&busy) > 0)
    poll(NULL, 0, 10);
  store_close(&st);
  responder_exit(0);
}
