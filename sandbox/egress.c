/* The supervisor's egress relay (see egress.h). */
#include "config.h"

#include "sandbox/egress.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/metrics.h"
#include "common/util.h"

#define PUMP_SIZE (64 << 10)
#define HEAD_MAX 8192
#define HEAD_WAIT_MS 10000
#define ANSWER_LINGER_MS 2000
#define CA_BUNDLE_MAX (4 << 20)

enum conn_state { CONN_HEAD, CONN_CONNECTING, CONN_PUMP, CONN_ANSWER };

/* Bytes on their way from one side to the other. */
struct pump {
  char data[PUMP_SIZE];
  size_t len, off;
  bool eof;  /* the source has ended */
  bool shut; /* ... and the destination's write side is shut */
};

struct egress_conn {
  int in;  /* the sandbox's side (the unix socket) */
  int out; /* the proxy's side, -1 before the connection */
  enum conn_state state;
  struct pump up;   /* to the proxy; the request head first */
  struct pump down; /* to the sandbox */
  char host[EGRESS_HOST_MAX + 3];
  int port;
  int local_port;    /* registered in conns/ while > 0 */
  char answer[1024]; /* the start of the proxy's answer */
  size_t answer_len;
  const char *verdict; /* set here (limits, refusals), else taken from the answer */
  char reason[64];
  int64_t started, deadline;
  uint64_t out_bytes, in_bytes;
};

void egress_init(struct egress *e, const struct mcp_config *cfg, int session_dirfd) {
  memset(e, 0, sizeof(*e));
  e->cfg = cfg;
  e->session_dirfd = session_dirfd;
  e->listen_fd = -1;
  e->conns_dirfd = -1;
}

/* ---- the socket, the conns folder, the CA bundle ---- */

static int bind_socket(struct egress *e) {
  if (mkdirat(e->session_dirfd, EGRESS_DIR, 0755) < 0 && errno != EEXIST)
    return -errno;
  cleanup_close int dfd = openat(e->session_dirfd, EGRESS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd < 0)
    return -errno;
  fchmod(dfd, 0755);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (fd_path(sa.sun_path, sizeof(sa.sun_path), dfd, EGRESS_SOCKET) < 0)
    return -ENAMETOOLONG;
  unlinkat(dfd, EGRESS_SOCKET, 0);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  /* Owner only: the executor (root inside) connects; the calls' user cannot. */
  mode_t old = umask(0077);
  int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ? -errno : 0;
  umask(old);
  if (r < 0) {
    close(fd);
    return r;
  }
  e->listen_fd = fd;
  return 0;
}

static int open_conns_dir(struct egress *e) {
  if (e->conns_dirfd >= 0)
    return 0;
  char path[PATH_MAX];
  if (config_path(e->cfg, path, sizeof(path), "egress/conns") < 0)
    return -ENAMETOOLONG;
  e->conns_dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return e->conns_dirfd < 0 ? -errno : 0;
}

/* The CA bundle the call's clients trust when the proxy terminates TLS
 * for a host with a credential: the system's CAs and the deployment's. */
static void copy_ca_bundle(struct egress *e) {
  char path[PATH_MAX], dst[64];
  cleanup_free char *text = NULL;
  size_t len = 0;
  mcp_error_t err = NULL;
  snprintf(dst, sizeof(dst), "%s/%s", EGRESS_DIR, EGRESS_CA_BUNDLE);
  if (faccessat(e->session_dirfd, dst, R_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
      config_path(e->cfg, path, sizeof(path), "egress/" EGRESS_CA_BUNDLE) < 0)
    return;
  if (read_file_at(AT_FDCWD, path, CA_BUNDLE_MAX, &text, &len, &err) < 0 ||
      write_file_atomic(e->session_dirfd, dst, text, len, 0644, &err) < 0)
    mcp_error_log_release(&err, "mcp-sandboxd: egress CA bundle");
}

void egress_call_start(struct egress *e, const cJSON *req, const char *token, const char *session) {
  const cJSON *eg = cJSON_GetObjectItemCaseSensitive(req, "egress");
  const cJSON *allow = cJSON_GetObjectItemCaseSensitive(eg, "allow");
  const cJSON *narrow = cJSON_GetObjectItemCaseSensitive(eg, "narrow");
  e->on = false;
  e->out = e->in = 0;
  e->limited = NULL;
  e->connections = 0;
  snprintf(e->token, sizeof(e->token), "%s", token ? token : "");
  snprintf(e->session, sizeof(e->session), "%s", session ? session : "");
  if (!cJSON_IsString(allow) || e->cfg->egress_proxy[0] == '\0')
    return;
  int n = snprintf(e->policy, sizeof(e->policy), "allow %s\n", allow->valuestring);
  if (cJSON_IsString(narrow) && n > 0 && (size_t)n < sizeof(e->policy))
    snprintf(e->policy + n, sizeof(e->policy) - (size_t)n, "narrow %s\n", narrow->valuestring);
  int r = e->listen_fd >= 0 ? 0 : bind_socket(e);
  if (r < 0) {
    fprintf(stderr, "mcp-sandboxd: egress socket: %s\n", strerror(-r));
    return;
  }
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(eg, "ca")))
    copy_ca_bundle(e);
  e->on = true;
}

/* ---- one connection ---- */

static void hit_limit(struct egress *e, struct egress_conn *c, const char *which) {
  if (e->limited == NULL)
    e->limited = which;
  c->verdict = "limited";
  snprintf(c->reason, sizeof(c->reason), "%s", which);
  c->up.shut = c->down.shut = true; /* closed by the caller */
}

/* Answer the sandbox with an HTTP error and end the connection. */
static void answer(struct egress_conn *c, int status, const char *text, const char *verdict, const char *reason) {
  static const char *const titles[] = {
      [0] = "Bad Request", [1] = "Forbidden", [2] = "Request Timeout", [3] = "Too Many Requests", [4] = "Bad Gateway"};
  int t = status == 403 ? 1 : status == 408 ? 2 : status == 429 ? 3 : status == 502 ? 4 : 0;
  char body[400];
  int bl = snprintf(body, sizeof(body), "egress %s: %s\n", verdict, text);
  int n = snprintf(c->down.data, sizeof(c->down.data),
                   "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n"
                   "X-Egress-Refused: %s\r\n\r\n%s",
                   status, titles[t], bl, reason, body);
  c->down.len = n > 0 ? (size_t)n : 0;
  c->down.off = 0;
  c->down.eof = true;
  c->verdict = verdict;
  snprintf(c->reason, sizeof(c->reason), "%s", reason);
  c->state = CONN_ANSWER;
  c->deadline = now_ms() + ANSWER_LINGER_MS;
}

/* A proxy request's target: CONNECT host:port, or an absolute URL. */
static int parse_target(struct egress_conn *c, const char *method, const char *target) {
  const char *hp = target;
  int dflt = 443;
  if (strcmp(method, "CONNECT") != 0) {
    if (strncasecmp(target, "http://", 7) == 0) {
      hp = target + 7;
      dflt = 80;
    } else if (strncasecmp(target, "https://", 8) == 0) {
      hp = target + 8;
    } else {
      return -1;
    }
  }
  size_t hl = strcspn(hp, "/?#");
  const char *at = memchr(hp, '@', hl);
  if (at != NULL) { /* user:password@ is the client's business, not the host */
    hl -= (size_t)(at + 1 - hp);
    hp = at + 1;
  }
  const char *colon = hp[0] == '[' ? memchr(hp, ']', hl) : hp;
  colon = colon != NULL ? memchr(colon, ':', hl - (size_t)(colon - hp)) : NULL;
  size_t namelen = colon ? (size_t)(colon - hp) : hl;
  c->port = colon ? atoi(colon + 1) : strcmp(method, "CONNECT") == 0 ? 0 : dflt;
  if (namelen == 0 || namelen >= sizeof(c->host) || c->port < 1 || c->port > 65535)
    return -1;
  memcpy(c->host, hp, namelen);
  c->host[namelen] = '\0';
  return 0;
}

/* The request line of the head in c->up: 0 with host and port set. */
static int parse_head(struct egress_conn *c) {
  char line[HEAD_MAX], method[32], target[HEAD_MAX], version[16];
  size_t n = strcspn(c->up.data, "\r\n");
  if (n >= sizeof(line))
    return -1;
  memcpy(line, c->up.data, n);
  line[n] = '\0';
  if (sscanf(line, "%31s %8191s %15s", method, target, version) != 3 || strncmp(version, "HTTP/1.", 7) != 0)
    return -1;
  return parse_target(c, method, target);
}

/* What came so far can be the start of an HTTP request: a method of
 * capital letters and a space. */
static bool looks_like_http(const char *data, size_t len) {
  size_t i = 0;
  while (i < len && i < 20 && data[i] >= 'A' && data[i] <= 'Z')
    i++;
  return i == len ? len < 20 : i > 0 && data[i] == ' ';
}

static int proxy_address(const char *hostport, struct addrinfo **out) {
  char host[80];
  snprintf(host, sizeof(host), "%s", hostport);
  char *colon = strrchr(host, ':');
  if (colon == NULL)
    return -EINVAL;
  *colon = '\0';
  char *h = host;
  if (h[0] == '[' && colon > h && colon[-1] == ']') {
    h++;
    colon[-1] = '\0';
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
  return getaddrinfo(h, colon + 1, &hints, out) == 0 ? 0 : -EINVAL;
}

/* The proxy learns whose connection this is from its local port. */
static int register_conn(struct egress *e, struct egress_conn *c) {
  union {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
  } addr;
  memset(&addr, 0, sizeof(addr));
  socklen_t sl = sizeof(addr);
  if (getsockname(c->out, &addr.sa, &sl) < 0)
    return -errno;
  uint16_t port_be = addr.sa.sa_family == AF_INET6 ? addr.in6.sin6_port : addr.in.sin_port;
  int port = ntohs(port_be);
  char name[16];
  snprintf(name, sizeof(name), "%d", port);
  mcp_error_t err = NULL;
  if (open_conns_dir(e) < 0 || write_file_atomic(e->conns_dirfd, name, e->policy, strlen(e->policy), 0640, &err) < 0) {
    mcp_error_log_release(&err, "mcp-sandboxd: egress registration");
    return -EIO;
  }
  c->local_port = port;
  return 0;
}

static void connect_proxy(struct egress *e, struct egress_conn *c) {
  struct addrinfo *ai = NULL;
  if (proxy_address(e->cfg->egress_proxy, &ai) < 0) {
    answer(c, 502, "egress_proxy is not host:port", "failed", "setup");
    return;
  }
  c->out = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int r = c->out < 0 ? -1 : connect(c->out, ai->ai_addr, ai->ai_addrlen);
  int saved = errno;
  freeaddrinfo(ai);
  if (r < 0 && saved != EINPROGRESS) {
    answer(c, 502, "the egress proxy is not running", "failed", "proxy_unavailable");
    return;
  }
  if (register_conn(e, c) < 0) {
    answer(c, 502, "egress is not set up on this host (see the service log)", "failed", "setup");
    return;
  }
  c->state = CONN_CONNECTING;
  c->deadline = c->started + (int64_t)e->cfg->egress_connection_time * 1000;
}

static void on_head(struct egress *e, struct egress_conn *c) {
  ssize_t n = read(c->in, c->up.data + c->up.len, HEAD_MAX - c->up.len);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0) {
    c->verdict = "refused";
    snprintf(c->reason, sizeof(c->reason), "closed");
    c->up.eof = c->down.shut = c->up.shut = true;
    return;
  }
  c->up.len += (size_t)n;
  c->up.data[c->up.len] = '\0';
  if (!looks_like_http(c->up.data, c->up.len)) {
    answer(c, 400, "the proxy speaks HTTP only (CONNECT host:port, or a method with an absolute http:// URL)",
           "refused", "not_http");
    return;
  }
  if (strstr(c->up.data, "\r\n\r\n") == NULL) {
    if (c->up.len >= HEAD_MAX)
      answer(c, 400, "the request head is too large", "refused", "not_http");
    return;
  }
  if (parse_head(c) < 0) {
    answer(c, 400, "not a proxy request (CONNECT host:port, or a method with an absolute http:// URL)", "refused",
           "not_http");
    return;
  }
  if (c->up.len > e->cfg->egress_bytes_out - (e->out < e->cfg->egress_bytes_out ? e->out : e->cfg->egress_bytes_out)) {
    hit_limit(e, c, "bytes_out");
    return;
  }
  e->out += c->up.len; /* the head counts as bytes out */
  c->out_bytes += c->up.len;
  connect_proxy(e, c);
}

/* ---- pumping, against the call's limits ---- */

/* Read from fd into p, at most `allow` bytes; 0, or -1 when the
 * connection is over. */
static int pump_read(int fd, struct pump *p, uint64_t allow) {
  size_t want = sizeof(p->data) - p->len;
  if (want > allow + 1)
    want = (size_t)allow + 1;
  ssize_t n = read(fd, p->data + p->len, want);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return 0;
  if (n < 0)
    return -1;
  if (n == 0)
    p->eof = true;
  p->len += (size_t)n;
  return 0;
}

static int pump_write(int fd, struct pump *p) {
  while (p->off < p->len) {
    ssize_t w = write(fd, p->data + p->off, p->len - p->off);
    if (w < 0 && (errno == EAGAIN || errno == EINTR))
      return 0;
    if (w <= 0)
      return -1;
    p->off += (size_t)w;
  }
  p->len = p->off = 0;
  if (p->eof && !p->shut) {
    shutdown(fd, SHUT_WR);
    p->shut = true;
  }
  return 0;
}

static void note_answer(struct egress_conn *c, const struct pump *p, size_t before) {
  size_t take = p->len - before;
  if (take > sizeof(c->answer) - 1 - c->answer_len)
    take = sizeof(c->answer) - 1 - c->answer_len;
  memcpy(c->answer + c->answer_len, p->data + before, take);
  c->answer_len += take;
  c->answer[c->answer_len] = '\0';
}

static void pump_up(struct egress *e, struct egress_conn *c) {
  uint64_t cap = e->cfg->egress_bytes_out, left = e->out < cap ? cap - e->out : 0;
  size_t before = c->up.len;
  if (pump_read(c->in, &c->up, left) < 0) {
    c->up.shut = c->down.shut = true;
    return;
  }
  size_t got = c->up.len - before;
  if (got > left) {
    hit_limit(e, c, "bytes_out");
    return;
  }
  e->out += got;
  c->out_bytes += got;
}

/* The proxy refuses with 407 rather than 403: Squid answers a refused
 * CONNECT on its TLS-inspecting port by inspecting the tunnel to show the
 * error inside, which the code could not read (it does not trust the
 * deployment's CA), except for 407.  Its refusals (X-Squid-Error:
 * 407:ERR_...) become the 403 they mean, here, in the first chunk. */
static void rewrite_refusal(struct pump *p) {
  static const char from[] = "HTTP/1.1 407 Proxy Authentication Required\r\n";
  static const char to[] = "HTTP/1.1 403 Forbidden\r\n";
  char *end = memmem(p->data, p->len, "\r\n\r\n", 4);
  if (p->len < sizeof(from) || memcmp(p->data, from, sizeof(from) - 1) != 0 || end == NULL ||
      memmem(p->data, (size_t)(end - p->data), "X-Squid-Error: 407:ERR_", 23) == NULL)
    return;
  size_t cut = sizeof(from) - sizeof(to);
  memcpy(p->data, to, sizeof(to) - 1);
  memmove(p->data + sizeof(to) - 1, p->data + sizeof(from) - 1, p->len - (sizeof(from) - 1));
  p->len -= cut;
}

static void pump_down(struct egress *e, struct egress_conn *c) {
  uint64_t cap = e->cfg->egress_bytes_in, left = e->in < cap ? cap - e->in : 0;
  size_t before = c->down.len;
  if (pump_read(c->out, &c->down, left) < 0) {
    c->up.shut = c->down.shut = true;
    return;
  }
  if (c->answer_len == 0 && before == 0)
    rewrite_refusal(&c->down);
  size_t got = c->down.len - before;
  note_answer(c, &c->down, before);
  if (got > left) {
    hit_limit(e, c, "bytes_in");
    return;
  }
  e->in += got;
  c->in_bytes += got;
}

static void on_connected(struct egress_conn *c) {
  int soerr = 0;
  socklen_t sl = sizeof(soerr);
  if (getsockopt(c->out, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0) {
    close(c->out);
    c->out = -1;
    answer(c, 502, "the egress proxy is not running", "failed", "proxy_unavailable");
    return;
  }
  c->state = CONN_PUMP;
  /* The head (and what followed it) goes out first; it counts as bytes out. */
}

/* ---- the verdict and the audit line ---- */

static void answer_verdict(struct egress_conn *c) {
  const char *err = strcasestr(c->answer, "\r\nX-Squid-Error: ");
  const char *head_end = strstr(c->answer, "\r\n\r\n");
  if (c->answer_len == 0 || strncmp(c->answer, "HTTP/1.", 7) != 0) {
    c->verdict = "failed";
    snprintf(c->reason, sizeof(c->reason), "no_answer");
  } else if (err == NULL || (head_end != NULL && err > head_end)) {
    c->verdict = "allowed";
  } else {
    err += strlen("\r\nX-Squid-Error: ");
    if (strchr("0123456789", err[0]) != NULL && strchr(err, ':') != NULL && strchr(err, ':') < err + 4)
      err = strchr(err, ':') + 1; /* 407:ERR_... */
    size_t n = strcspn(err, " \r\n");
    snprintf(c->reason, sizeof(c->reason), "%.*s", (int)n, err);
    for (char *r = c->reason; *r; r++)
      *r = (char)tolower((unsigned char)*r);
    bool denied = strncmp(c->reason, "err_egress_", 11) == 0 || strcmp(c->reason, "err_access_denied") == 0;
    c->verdict = denied ? "denied" : "failed";
    const char *bare = strncmp(c->reason, "err_egress_", 11) == 0 ? c->reason + 11 : c->reason + 4;
    memmove(c->reason, bare, strlen(bare) + 1); /* policy, address, dns_fail, connect_fail, ... */
  }
}

/* Unregister the connection; the helper's note about a refused TLS
 * server name is the verdict. */
static void unregister(struct egress *e, struct egress_conn *c) {
  if (c->local_port <= 0 || e->conns_dirfd < 0)
    return;
  char name[24];
  snprintf(name, sizeof(name), "%d.sni", c->local_port);
  if (faccessat(e->conns_dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 && c->verdict == NULL) {
    c->verdict = "denied";
    snprintf(c->reason, sizeof(c->reason), "tls_server_name");
  }
  unlinkat(e->conns_dirfd, name, 0);
  snprintf(name, sizeof(name), "%d", c->local_port);
  unlinkat(e->conns_dirfd, name, 0);
  c->local_port = 0;
}

static void audit_line(struct egress *e, const struct egress_conn *c) {
  if (e->cfg->egress_log[0] == '\0')
    return;
  cleanup_cjson cJSON *o = log_entry_new();
  cJSON_AddStringToObject(o, "session_id", e->session);
  cJSON_AddStringToObject(o, "token", e->token);
  cJSON_AddStringToObject(o, "host", c->host);
  cJSON_AddNumberToObject(o, "port", c->port);
  cJSON_AddStringToObject(o, "verdict", c->verdict);
  cJSON_AddStringToObject(o, "reason", c->reason);
  cJSON_AddNumberToObject(o, "bytes_out", (double)c->out_bytes);
  cJSON_AddNumberToObject(o, "bytes_in", (double)c->in_bytes);
  cJSON_AddNumberToObject(o, "duration_ms", (double)(now_ms() - c->started));
  cleanup_close int fd = log_open(e->cfg->egress_log);
  if (fd >= 0)
    (void)log_entry_write(fd, o);
}

static void conn_close(struct egress *e, int i) {
  struct egress_conn *c = e->conns[i];
  unregister(e, c);
  if (c->verdict == NULL)
    answer_verdict(c);
  if (c->out >= 0)
    close(c->out);
  close(c->in);
  audit_line(e, c);
  metrics_egress(c->verdict, c->out_bytes, c->in_bytes);
  free(c);
  e->conns[i] = NULL;
}

/* ---- accepting ---- */

static int open_count(const struct egress *e) {
  int n = 0;
  for (int i = 0; i < EGRESS_CONNS_MAX; i++)
    n += e->conns[i] != NULL && e->conns[i]->state != CONN_ANSWER;
  return n;
}

static void refuse_or_start(struct egress *e, struct egress_conn *c) {
  char text[160];
  if (!e->on) {
    answer(c, 403, "egress is not enabled for this call", "refused", "no_egress");
  } else if (e->limited != NULL) {
    snprintf(text, sizeof(text), "this call has used its egress limit (%s)", e->limited);
    answer(c, 429, text, "limited", e->limited);
  } else if (open_count(e) > e->cfg->egress_connections) {
    snprintf(text, sizeof(text), "at most %d egress connections at once", e->cfg->egress_connections);
    answer(c, 429, text, "limited", "connections");
    e->limited = "connections";
  }
  if (c->state != CONN_ANSWER)
    e->connections++;
}

static void on_accept(struct egress *e) {
  for (;;) {
    int fd = accept4(e->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return;
    int slot = -1;
    for (int i = 0; i < EGRESS_CONNS_MAX && slot < 0; i++)
      if (e->conns[i] == NULL)
        slot = i;
    struct egress_conn *c = slot >= 0 ? calloc(1, sizeof(*c)) : NULL;
    if (c == NULL) {
      close(fd); /* 64 open at once: the relay itself is full */
      continue;
    }
    c->in = fd;
    c->out = -1;
    c->started = now_ms();
    c->deadline = c->started + HEAD_WAIT_MS;
    e->conns[slot] = c;
    refuse_or_start(e, c);
  }
}

/* ---- the poll loop's side ---- */

static void add(struct pollfd *p, int *n, int room, int fd, short events) {
  if (*n < room && fd >= 0)
    p[(*n)++] = (struct pollfd){fd, events, 0};
}

int egress_poll_fill(struct egress *e, struct pollfd *p, int room) {
  int n = 0;
  add(p, &n, room, e->listen_fd, POLLIN);
  for (int i = 0; i < EGRESS_CONNS_MAX; i++) {
    struct egress_conn *c = e->conns[i];
    if (c == NULL)
      continue;
    short in_ev = 0, out_ev = 0;
    if (c->state == CONN_HEAD || c->state == CONN_ANSWER || (c->state == CONN_PUMP && c->up.len == 0 && !c->up.eof))
      in_ev |= POLLIN;
    if ((c->state == CONN_PUMP || c->state == CONN_ANSWER) && c->down.len > c->down.off)
      in_ev |= POLLOUT;
    if (c->state == CONN_CONNECTING || (c->state == CONN_PUMP && c->up.len > c->up.off))
      out_ev |= POLLOUT;
    if (c->state == CONN_PUMP && c->down.len == 0 && !c->down.eof)
      out_ev |= POLLIN;
    /* A descriptor with nothing wanted is left out: poll would report
     * its hang-up again and again while the other side drains. */
    if (in_ev != 0)
      add(p, &n, room, c->in, in_ev);
    if (out_ev != 0 && (c->state == CONN_CONNECTING || c->state == CONN_PUMP))
      add(p, &n, room, c->out, out_ev);
  }
  return n;
}

static short revents_of(const struct pollfd *p, int n, int fd) {
  for (int k = 0; k < n; k++)
    if (p[k].fd == fd)
      return p[k].revents;
  return 0;
}

static void answer_step(struct egress_conn *c, short rin) {
  if ((rin & POLLOUT) && pump_write(c->in, &c->down) < 0)
    c->up.shut = true;
  if (rin & (POLLIN | POLLHUP | POLLERR)) { /* what the client still sends is dropped */
    char sink[4096];
    ssize_t n = read(c->in, sink, sizeof(sink));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      c->up.shut = true;
  }
  if (c->down.len == 0 && c->up.shut)
    c->down.shut = true;
}

static void pump_step(struct egress *e, struct egress_conn *c, short rin, short rout) {
  if ((rin & (POLLIN | POLLHUP | POLLERR)) && c->up.len == 0 && !c->up.eof)
    pump_up(e, c);
  if (!c->up.shut && (rout & (POLLOUT | POLLERR | POLLHUP)) && c->up.len > c->up.off && pump_write(c->out, &c->up) < 0)
    c->up.shut = c->down.shut = true;
  if (!c->down.shut && (rout & (POLLIN | POLLHUP | POLLERR)) && c->down.len == 0 && !c->down.eof)
    pump_down(e, c);
  if (!c->down.shut && (rin & (POLLOUT | POLLERR | POLLHUP)) && c->down.len > c->down.off &&
      pump_write(c->in, &c->down) < 0)
    c->up.shut = c->down.shut = true;
  /* An end with nothing left to write is passed on at once. */
  if (c->up.eof && c->up.len == 0 && !c->up.shut)
    pump_write(c->out, &c->up);
  if (c->down.eof && c->down.len == 0 && !c->down.shut)
    pump_write(c->in, &c->down);
}

static void conn_step(struct egress *e, struct egress_conn *c, short rin, short rout, int64_t now) {
  if (c->state == CONN_HEAD && rin != 0)
    on_head(e, c);
  else if (c->state == CONN_CONNECTING && rout != 0)
    on_connected(c);
  else if (c->state == CONN_PUMP)
    pump_step(e, c, rin, rout);
  else if (c->state == CONN_ANSWER)
    answer_step(c, rin);
  if (now >= c->deadline && !(c->up.shut && c->down.shut)) {
    if (c->state == CONN_HEAD)
      answer(c, 408, "no complete request head within 10 s", "refused", "not_http");
    else if (c->state == CONN_ANSWER)
      c->up.shut = c->down.shut = true;
    else
      hit_limit(e, c, "connection_time");
  }
}

void egress_poll_done(struct egress *e, const struct pollfd *p, int n) {
  if (e->listen_fd >= 0 && (revents_of(p, n, e->listen_fd) & POLLIN))
    on_accept(e);
  int64_t now = now_ms();
  for (int i = 0; i < EGRESS_CONNS_MAX; i++) {
    struct egress_conn *c = e->conns[i];
    if (c == NULL)
      continue;
    short rin = revents_of(p, n, c->in), rout = c->out >= 0 ? revents_of(p, n, c->out) : 0;
    conn_step(e, c, rin, rout, now);
    if (c->up.shut && c->down.shut)
      conn_close(e, i);
  }
}

int egress_timeout_ms(const struct egress *e) {
  int64_t soonest = -1, now = now_ms();
  for (int i = 0; i < EGRESS_CONNS_MAX; i++)
    if (e->conns[i] != NULL && (soonest < 0 || e->conns[i]->deadline < soonest))
      soonest = e->conns[i]->deadline;
  if (soonest < 0)
    return -1;
  return soonest <= now ? 0 : (int)(soonest - now < 60000 ? soonest - now : 60000);
}

void egress_call_end(struct egress *e, char *out, size_t size) {
  for (int i = 0; i < EGRESS_CONNS_MAX; i++)
    if (e->conns[i] != NULL) {
      e->conns[i]->up.shut = e->conns[i]->down.shut = true;
      conn_close(e, i);
    }
  out[0] = '\0';
  if (e->limited != NULL)
    snprintf(out, size, "\"egress_limited\":true,\"egress_limit\":\"%s\"", e->limited);
  e->on = false;
}

void egress_close(struct egress *e) {
  char ignored[8];
  egress_call_end(e, ignored, sizeof(ignored));
  if (e->listen_fd >= 0) {
    close(e->listen_fd);
    e->listen_fd = -1;
    char name[64];
    snprintf(name, sizeof(name), "%s/%s", EGRESS_DIR, EGRESS_SOCKET);
    unlinkat(e->session_dirfd, name, 0);
  }
  if (e->conns_dirfd >= 0)
    close(e->conns_dirfd);
  e->conns_dirfd = -1;
}
