/* mcp-egress-helper: Squid's external ACL helper that applies each call's
 * egress policy (README.md, "Network by policy").
 *
 *   external_acl_type ... concurrency=N %>a %>p %>rd %>rP %>rm %ssl::>sni \
 *       mcp-egress-helper <state>/egress/conns
 *
 * Squid runs it as its own user and asks it about every request: CONNECT
 * (then again with the TLS server name the client sent, at ssl_bump step 2)
 * and each plain or bumped HTTP request.  A request line is
 *   <channel> <client ip> <client port> <host> <port> <method> <sni> [<data>]
 * with each value URL-escaped and `-` for one that is not known.
 *
 * Who is asking: the supervisor's relay (sandbox/egress.c) connects to
 * Squid from 127.0.0.1 and, before it sends a byte, writes the running
 * call's policy to conns/<its local port>:
 *   allow <list>       the token's (or the deployment's) list
 *   narrow <list>      the call's own egress_allow, when it gave one
 * Only the relay (root) writes there; a connection of anything else on the
 * host finds no file and is refused.
 *
 * The answer: `<channel> OK`, or `<channel> ERR message="<one line>"`,
 * which Squid puts in its 403 page.  A TLS server name that the policy does
 * not allow is also written to conns/<port>.sni, so that the relay's audit
 * line says why the tunnel ended.  Never blocks on anything but stdin. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/egress.h"
#include "common/util.h"

#define LINE_MAX_LEN 8192
#define POLICY_MAX (3 * EGRESS_LIST_MAX)

struct query {
  char channel[16];
  char ip[64];
  char port[16];
  char host[EGRESS_HOST_MAX + 3];
  char rport[16];
  char method[32];
  char sni[EGRESS_HOST_MAX + 3];
};

struct policy {
  char allow[EGRESS_LIST_MAX + 1];
  char narrow[EGRESS_LIST_MAX + 1];
  bool narrowed;
};

static int hexval(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  c = tolower(c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Copy the next space-separated field of *p into out, URL-decoded. */
static void field(const char **p, char *out, size_t size) {
  const char *s = *p + strspn(*p, " ");
  size_t n = 0;
  while (*s && *s != ' ' && *s != '\n') {
    int c = (unsigned char)*s++;
    if (c == '%' && hexval(s[0]) >= 0 && hexval(s[1]) >= 0) {
      c = hexval(s[0]) * 16 + hexval(s[1]);
      s += 2;
    }
    if (n + 1 < size && c != '\0')
      out[n++] = (char)c;
  }
  out[n] = '\0';
  *p = s;
}

static void parse_query(const char *line, struct query *q) {
  const char *p = line;
  field(&p, q->channel, sizeof(q->channel));
  field(&p, q->ip, sizeof(q->ip));
  field(&p, q->port, sizeof(q->port));
  field(&p, q->host, sizeof(q->host));
  field(&p, q->rport, sizeof(q->rport));
  field(&p, q->method, sizeof(q->method));
  field(&p, q->sni, sizeof(q->sni));
}

static bool from_loopback(const char *ip) {
  return strcmp(ip, "127.0.0.1") == 0 || strcmp(ip, "::1") == 0 || strcmp(ip, "::ffff:127.0.0.1") == 0;
}

static bool port_valid(const char *s) {
  size_t n = strlen(s);
  return n >= 1 && n <= 5 && strspn(s, "0123456789") == n && atoi(s) >= 1 && atoi(s) <= 65535;
}

/* The line of `key ` in text, copied into out ("" when missing). */
static bool policy_line(const char *text, const char *key, char *out, size_t size) {
  size_t k = strlen(key);
  for (const char *l = text; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "") {
    if (strncmp(l, key, k) == 0 && l[k] == ' ') {
      size_t n = strcspn(l + k + 1, "\n");
      snprintf(out, size, "%.*s", (int)n, l + k + 1);
      return true;
    }
  }
  out[0] = '\0';
  return false;
}

static int load_policy(int conns, const char *port, struct policy *pol) {
  cleanup_free char *text = NULL;
  mcp_error_t err = NULL;
  if (read_file_at(conns, port, POLICY_MAX, &text, NULL, &err) < 0) {
    mcp_error_release(&err);
    return -1;
  }
  policy_line(text, "allow", pol->allow, sizeof(pol->allow));
  pol->narrowed = policy_line(text, "narrow", pol->narrow, sizeof(pol->narrow));
  return 0;
}

static bool allowed(const struct policy *pol, const char *host, int port) {
  return egress_list_allows(pol->allow, host, port) && (!pol->narrowed || egress_list_allows(pol->narrow, host, port));
}

static void note_sni(int conns, const char *port, const char *sni) {
  char name[32];
  snprintf(name, sizeof(name), "%s.sni", port);
  mcp_error_t err = NULL;
  if (write_file_atomic(conns, name, sni, strlen(sni), 0640, &err) < 0)
    mcp_error_release(&err);
}

/* NULL when the request may go on, else the one-line reason. */
static const char *decide(int conns, const struct query *q, char *why, size_t size) {
  struct policy pol;
  if (!from_loopback(q->ip) || !port_valid(q->port) || load_policy(conns, q->port, &pol) < 0)
    return "this connection does not belong to a running call with egress";
  int port = port_valid(q->rport) ? atoi(q->rport) : 0;
  if (q->host[0] == '\0' || strcmp(q->host, "-") == 0 || port == 0)
    return "the request names no host and port";
  if (!allowed(&pol, q->host, port)) {
    snprintf(why, size, "%.253s port %d is not allowed for this call (egress_allow%s)", q->host, port,
             egress_host_is_ip(q->host) ? "; IP literals must be listed" : "");
    return why;
  }
  if (q->sni[0] != '\0' && strcmp(q->sni, "-") != 0 && !allowed(&pol, q->sni, port)) {
    note_sni(conns, q->port, q->sni);
    snprintf(why, size, "the TLS server name %.253s is not allowed for this call", q->sni);
    return why;
  }
  return NULL;
}

/* A value for message="...": no quotes or backslashes in it. */
static void answer(const struct query *q, const char *reason) {
  if (reason == NULL) {
    printf("%s OK\n", q->channel);
  } else {
    printf("%s ERR message=\"", q->channel);
    for (const char *r = reason; *r; r++)
      putchar(*r == '"' || *r == '\\' || *r == '\n' ? '_' : *r);
    printf("\"\n");
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: mcp-egress-helper CONNS-FOLDER\n");
    return 2;
  }
  int conns = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (conns < 0) {
    fprintf(stderr, "mcp-egress-helper: %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  static char line[LINE_MAX_LEN];
  while (fgets(line, sizeof(line), stdin) != NULL) {
    struct query q;
    char why[600];
    parse_query(line, &q);
    answer(&q, decide(conns, &q, why, sizeof(why)));
  }
  return 0;
}
