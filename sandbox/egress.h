/* The host side of a session's network by policy (README.md): the relay
 * between the sandbox and the filtering proxy, run inside the supervisor's
 * poll loop.  Nothing here blocks.
 *
 * A call with egress (its request has an "egress" object: the lists the
 * responder resolved) gets <session>/egress/proxy.sock, bound on the first
 * such call and seen inside the sandbox as /opt/mcp/egress/proxy.sock
 * (a read-only bind mount; runsc --host-uds=open).  The executor's relay on
 * the sandbox's loopback connects there once per client connection.  For
 * each, this relay reads the first request head (an HTTP proxy request:
 * CONNECT host:port, or a method with an absolute URL; anything else is
 * refused with 400), connects to egress_proxy from 127.0.0.1, writes the
 * call's lists to <state>/egress/conns/<its local port> for the proxy's
 * helper (egress/helper.c) before the first byte goes out, and pumps bytes
 * both ways against the call's limits: bytes out, bytes in, connections at
 * once, connection time.  A connection outside a call with egress, beyond
 * a limit, or that the proxy does not take gets an HTTP error with a
 * one-line reason, never silence.
 *
 * Every connection ends as one JSON line in egress_log (time, session,
 * token, host, port, verdict, reason, bytes each way, duration) and one
 * count by verdict in the metrics.  The verdict: what the proxy answered
 * first (its X-Squid-Error header), the helper's note about a TLS server
 * name it refused, or the limit this relay enforced. */
#ifndef MCP_SANDBOX_EGRESS_H
#define MCP_SANDBOX_EGRESS_H

#include <cjson/cJSON.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/egress.h"
#include "common/settings.h"

#define EGRESS_DIR "egress"        /* in the session folder; /opt/mcp/egress inside */
#define EGRESS_SOCKET "proxy.sock" /* in it */
#define EGRESS_CA_BUNDLE "ca-bundle.pem"
#define EGRESS_CONNS_MAX 64 /* the most egress_connections may be */
#define EGRESS_POLL_MAX (1 + 2 * EGRESS_CONNS_MAX)

struct egress_conn;

struct egress {
  const struct mcp_config *cfg;
  int session_dirfd;
  int listen_fd;                         /* -1 until the first call with egress */
  int conns_dirfd;                       /* <state>/egress/conns, -1 until needed */
  bool on;                               /* the running call has egress */
  char policy[2 * EGRESS_LIST_MAX + 32]; /* the text of conns/<port> */
  char token[72];
  char session[96];
  uint64_t out, in;    /* the call's bytes so far */
  const char *limited; /* the first limit the call hit, or NULL */
  int connections;     /* the call's connections */
  struct egress_conn *conns[EGRESS_CONNS_MAX];
};

void egress_init(struct egress *e, const struct mcp_config *cfg, int session_dirfd);
/* A call starts: req is its request (its "egress" member, when present,
 * turns egress on), token its token's name, session the session's id. */
void egress_call_start(struct egress *e, const cJSON *req, const char *token, const char *session);
/* The call ended: its connections close (each logged).  Writes the
 * members the call's result gains (`"egress_limited":true,...`) to out,
 * or "" when it hit no limit. */
void egress_call_end(struct egress *e, char *out, size_t size);
/* The poll entries of the relay (at most EGRESS_POLL_MAX), and their
 * handling once poll returned. */
int egress_poll_fill(struct egress *e, struct pollfd *p, int room);
void egress_poll_done(struct egress *e, const struct pollfd *p, int n);
/* Milliseconds until the relay must act without an event (a connection's
 * deadline), or -1. */
int egress_timeout_ms(const struct egress *e);
/* At exit: every connection closed, the socket removed. */
void egress_close(struct egress *e);

#endif
