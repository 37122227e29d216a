/* libmcpegressguard.so: preloaded into the filtering proxy (Squid) by
 * scripts/lib/common.sh, it refuses (EACCES) every connect() to a loopback,
 * private, link-local, multicast, reserved or cloud metadata address that
 * is not inside MCP_EGRESS_NETWORKS (the setting egress_networks).
 *
 * Squid's own `dst` ACL already refuses such destinations with a clear 403
 * when it resolves the request's name; it checks the addresses in its DNS
 * cache, though, not the one it connects to.  A name whose answer changes
 * between the check and the connection (DNS rebinding), or that resolves
 * to a public and a private address, would slip through that check: this
 * is the check on the address actually connected to, in the kernel call.
 * Squid then answers 503 (connection failed) instead of connecting.
 *
 * Port 53 of the name servers in /etc/resolv.conf stays reachable (Squid
 * falls back to DNS over TCP), and so do the loopback listeners Squid
 * itself opened on a port the kernel chose: its helpers talk to it over
 * them (external_acl_type helpers use TCP on loopback).  Unix sockets and
 * other families pass. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define NETS_MAX 64

struct net {
  int family;
  unsigned char addr[16];
  int prefix;
};

static struct net allowed[NETS_MAX];
static int n_allowed;
static struct net resolvers[8];
static int n_resolvers;
/* Squid's own loopback listeners on kernel-chosen ports (for its helpers):
 * descriptors bound so, then their ports once listening. */
#define FDS_TRACKED 4096
static bool ephemeral_fd[FDS_TRACKED];
static int own_ports[256];
static int n_own_ports;

/* Ranges no sandbox may reach unless the operator lists them. */
static const char *const denied_text[] = {
    "0.0.0.0/8",      "10.0.0.0/8",   "100.64.0.0/10",  "127.0.0.0/8",    "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24",   "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",  "198.51.100.0/24",
    "203.0.113.0/24", "224.0.0.0/3",  "::/127",         "64:ff9b::/96",   "100::/64",       "2001::/23",
    "2001:db8::/32",  "fc00::/7",     "fe80::/10",      "fec0::/10",      "ff00::/8",
};
static struct net denied[sizeof(denied_text) / sizeof(denied_text[0])];

static int parse_net(const char *text, struct net *out) {
  char buf[80];
  snprintf(buf, sizeof(buf), "%s", text);
  char *slash = strchr(buf, '/');
  if (slash != NULL)
    *slash = '\0';
  memset(out, 0, sizeof(*out));
  if (inet_pton(AF_INET, buf, out->addr) == 1)
    out->family = AF_INET;
  else if (inet_pton(AF_INET6, buf, out->addr) == 1)
    out->family = AF_INET6;
  else
    return -1;
  int max = out->family == AF_INET ? 32 : 128;
  out->prefix = slash != NULL ? atoi(slash + 1) : max;
  return out->prefix >= 0 && out->prefix <= max ? 0 : -1;
}

static bool in_net(const struct net *n, int family, const unsigned char *addr) {
  if (n->family != family)
    return false;
  int full = n->prefix / 8, rest = n->prefix % 8;
  if (memcmp(n->addr, addr, (size_t)full) != 0)
    return false;
  unsigned char mask = (unsigned char)(0xff << (8 - rest));
  return rest == 0 || (n->addr[full] & mask) == (addr[full] & mask);
}

static void load_allowed(void) {
  const char *env = getenv("MCP_EGRESS_NETWORKS");
  char buf[1024];
  snprintf(buf, sizeof(buf), "%s", env ? env : "");
  char *save = NULL;
  for (char *t = strtok_r(buf, ", ", &save); t && n_allowed < NETS_MAX; t = strtok_r(NULL, ", ", &save))
    if (parse_net(t, &allowed[n_allowed]) == 0)
      n_allowed++;
}

static void load_resolvers(void) {
  FILE *f = fopen("/etc/resolv.conf", "re");
  char line[256], addr[80];
  while (f != NULL && fgets(line, sizeof(line), f) != NULL && n_resolvers < 8)
    if (sscanf(line, " nameserver %79s", addr) == 1 && parse_net(addr, &resolvers[n_resolvers]) == 0)
      n_resolvers++;
  if (f != NULL)
    fclose(f);
}

/* The guard is Squid's own: its helpers (the policy helper, the
 * certificate generator) connect to nothing but Squid, and a helper built
 * with AddressSanitizer refuses to start when another library comes before
 * ASan's runtime.  So this library leaves the LD_PRELOAD its children
 * inherit, keeping the other entries. */
static void leave_preload(void) {
  const char *env = getenv("LD_PRELOAD");
  if (env == NULL || strstr(env, "libmcpegressguard") == NULL)
    return;
  char buf[4096], out[4096] = "";
  snprintf(buf, sizeof(buf), "%s", env);
  char *save = NULL;
  for (char *t = strtok_r(buf, ": ", &save); t != NULL; t = strtok_r(NULL, ": ", &save))
    if (strstr(t, "libmcpegressguard") == NULL)
      snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", out[0] ? ":" : "", t);
  if (out[0] != '\0')
    setenv("LD_PRELOAD", out, 1);
  else
    unsetenv("LD_PRELOAD");
}

__attribute__((constructor)) static void guard_init(void) {
  leave_preload();
  for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
    parse_net(denied_text[i], &denied[i]);
  load_allowed();
  load_resolvers();
}

static bool any(const struct net *nets, int n, int family, const unsigned char *addr) {
  for (int i = 0; i < n; i++)
    if (in_net(&nets[i], family, addr))
      return true;
  return false;
}

/* The address and port of an IPv4 or IPv6 sockaddr (IPv4-mapped IPv6
 * as IPv4); the family, or 0. */
static int inet_of(const struct sockaddr *sa, socklen_t len, unsigned char addr[16], int *port) {
  if (sa == NULL)
    return 0;
  if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    const struct sockaddr_in *in = (const void *)sa;
    memcpy(addr, &in->sin_addr, 4);
    *port = ntohs(in->sin_port);
    return AF_INET;
  }
  if (sa->sa_family != AF_INET6 || len < sizeof(struct sockaddr_in6))
    return 0;
  const struct sockaddr_in6 *in6 = (const void *)sa;
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  *port = ntohs(in6->sin6_port);
  if (memcmp(&in6->sin6_addr, mapped, 12) == 0) {
    memcpy(addr, (const unsigned char *)&in6->sin6_addr + 12, 4);
    return AF_INET;
  }
  memcpy(addr, &in6->sin6_addr, 16);
  return AF_INET6;
}

static bool loopback(int family, const unsigned char *addr) {
  static const unsigned char v6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return family == AF_INET ? addr[0] == 127 : memcmp(addr, v6, 16) == 0;
}

static bool own_port(int port) {
  for (int i = 0; i < n_own_ports; i++)
    if (own_ports[i] == port)
      return true;
  return false;
}

/* Whether connecting to sa is refused. */
static bool refused(const struct sockaddr *sa, socklen_t len) {
  unsigned char addr[16];
  int port = 0;
  int family = inet_of(sa, len, addr, &port);
  if (family == 0)
    return false;
  if (loopback(family, addr) && own_port(port))
    return false;
  if (port == 53 && any(resolvers, n_resolvers, family, addr))
    return false;
  if (!any(denied, (int)(sizeof(denied) / sizeof(denied[0])), family, addr))
    return false;
  return !any(allowed, n_allowed, family, addr);
}

int connect(int fd, const struct sockaddr *sa, socklen_t len) {
  static int (*real)(int, const struct sockaddr *, socklen_t);
  if (real == NULL)
    real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
  if (refused(sa, len)) {
    errno = EACCES;
    return -1;
  }
  return real != NULL ? real(fd, sa, len) : (errno = ENOSYS, -1);
}

int bind(int fd, const struct sockaddr *sa, socklen_t len) {
  static int (*real)(int, const struct sockaddr *, socklen_t);
  if (real == NULL)
    real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
  unsigned char addr[16];
  int port = -1;
  int family = inet_of(sa, len, addr, &port);
  if (fd >= 0 && fd < FDS_TRACKED)
    ephemeral_fd[fd] = family != 0 && port == 0 && loopback(family, addr);
  return real != NULL ? real(fd, sa, len) : (errno = ENOSYS, -1);
}

int listen(int fd, int backlog) {
  static int (*real)(int, int);
  if (real == NULL)
    real = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
  int r = real != NULL ? real(fd, backlog) : (errno = ENOSYS, -1);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof(ss);
  unsigned char addr[16];
  int port = 0;
  if (r == 0 && fd >= 0 && fd < FDS_TRACKED && ephemeral_fd[fd] && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
      inet_of((struct sockaddr *)&ss, sl, addr, &port) != 0 && !own_port(port) &&
      n_own_ports < (int)(sizeof(own_ports) / sizeof(own_ports[0])))
    own_ports[n_own_ports++] = port;
  return r;
}
