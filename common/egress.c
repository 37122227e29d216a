/* Egress policy lists (see egress.h). */
#include "config.h"

#include "common/egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* The binary form of an IP literal (brackets allowed), in a 16-byte
 * buffer: IPv4 in the first 4 bytes.  The family, or 0 when it is none. */
static int ip_parse(const char *host, unsigned char out[16]) {
  char tmp[EGRESS_HOST_MAX + 3];
  size_t n = strlen(host);
  if (n >= sizeof(tmp))
    return 0;
  memset(out, 0, 16);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    memcpy(tmp, host + 1, n - 2);
    tmp[n - 2] = '\0';
    return inet_pton(AF_INET6, tmp, out) == 1 ? AF_INET6 : 0;
  }
  if (inet_pton(AF_INET6, host, out) == 1)
    return AF_INET6;
  /* inet_aton: every form a client or Squid reads as IPv4 (127.1, 2130706433, 0x7f.1) */
  struct in_addr a;
  if (strchr(host, ':') == NULL && inet_aton(host, &a) != 0) {
    memcpy(out, &a, 4);
    return AF_INET;
  }
  return 0;
}

bool egress_host_is_ip(const char *host) {
  unsigned char b[16];
  return host != NULL && ip_parse(host, b) != 0;
}

static bool name_valid(const char *s) {
  size_t n = strlen(s), label = 0;
  if (n == 0 || n > EGRESS_HOST_MAX)
    return false;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '.') {
      if (label == 0)
        return false;
      label = 0;
    } else if (isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_') {
      if (++label > 63)
        return false;
    } else {
      return false;
    }
  }
  return label > 0;
}

/* Lower case, no trailing dot, no brackets. */
static void normalize(const char *in, size_t len, char out[EGRESS_HOST_MAX + 1]) {
  if (len >= 2 && in[0] == '[' && in[len - 1] == ']') {
    in++;
    len -= 2;
  }
  if (len > 0 && in[len - 1] == '.')
    len--;
  if (len > EGRESS_HOST_MAX)
    len = EGRESS_HOST_MAX;
  for (size_t i = 0; i < len; i++)
    out[i] = (char)tolower((unsigned char)in[i]);
  out[len] = '\0';
}

static int parse_port(const char *s, size_t len, int *port) {
  if (len == 0 || len > 5)
    return -1;
  int v = 0;
  for (size_t i = 0; i < len; i++) {
    if (!isdigit((unsigned char)s[i]))
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  if (v < 1 || v > 65535)
    return -1;
  *port = v;
  return 0;
}

/* Split text into its host part and port; -1 on a bad port or brackets. */
static int split_port(const char *text, size_t len, size_t *host_len, int *port) {
  *port = 0;
  *host_len = len;
  const char *end = text + len;
  if (len > 0 && text[0] == '[') {
    const char *close = memchr(text, ']', len);
    if (close == NULL)
      return -1;
    *host_len = (size_t)(close - text) + 1;
    if (close + 1 == end)
      return 0;
    return close[1] == ':' ? parse_port(close + 2, (size_t)(end - close - 2), port) : -1;
  }
  const char *colon = memchr(text, ':', len);
  if (colon == NULL)
    return 0;
  if (memchr(colon + 1, ':', (size_t)(end - colon - 1)) != NULL)
    return -1; /* an IPv6 literal must be in brackets */
  *host_len = (size_t)(colon - text);
  return parse_port(colon + 1, (size_t)(end - colon - 1), port);
}

int egress_entry_parse(const char *text, size_t len, struct egress_entry *out, mcp_error_t *err) {
  while (len > 0 && isspace((unsigned char)*text)) {
    text++;
    len--;
  }
  while (len > 0 && isspace((unsigned char)text[len - 1]))
    len--;
  memset(out, 0, sizeof(*out));
  size_t hl;
  if (len == 0 || len > EGRESS_HOST_MAX + 8 || split_port(text, len, &hl, &out->port) < 0 || hl == 0)
    return mcp_fail_public(err, MCP_ERR_INVALID, "`%.*s` is not a host[:port] entry", (int)(len > 80 ? 80 : len), text);
  bool bracket = text[0] == '[';
  out->wildcard = hl > 2 && text[0] == '*' && text[1] == '.';
  normalize(text + (out->wildcard ? 2 : 0), hl - (out->wildcard ? 2 : 0), out->host);
  unsigned char bin[16];
  int fam = ip_parse(out->host, bin);
  out->ip = fam != 0;
  bool ok = out->ip ? !out->wildcard && (bracket == (fam == AF_INET6)) : !bracket && name_valid(out->host);
  if (!ok)
    return mcp_fail_public(err, MCP_ERR_INVALID, "`%.*s` is not a host name, *.suffix or IP literal", (int)hl, text);
  return 0;
}

/* Call fn for each entry of list; stops at the first nonzero result,
 * which it returns.  -1 when an entry does not parse. */
typedef int (*entry_fn)(const struct egress_entry *e, const void *ctx);

static int each_entry(const char *list, entry_fn fn, const void *ctx, mcp_error_t *err) {
  if (list == NULL)
    return 0;
  size_t all = strlen(list);
  if (all > EGRESS_LIST_MAX)
    return mcp_fail_public(err, MCP_ERR_INVALID, "the list is longer than %d bytes", EGRESS_LIST_MAX);
  const char *p = list;
  while (*p == ' ')
    p++;
  if (strcmp(p, "none") == 0 || *p == '\0')
    return 0;
  int n = 0;
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    struct egress_entry e;
    if (++n > EGRESS_ENTRIES_MAX)
      return mcp_fail_public(err, MCP_ERR_INVALID, "more than %d entries", EGRESS_ENTRIES_MAX);
    if (egress_entry_parse(p, len, &e, err) < 0)
      return -1;
    int r = fn != NULL ? fn(&e, ctx) : 0;
    if (r != 0)
      return r;
    if (comma == NULL)
      return 0;
    p = comma + 1;
  }
}

int egress_list_check(const char *list, mcp_error_t *err) {
  int r = each_entry(list, NULL, NULL, err);
  if (r < 0)
    return -1;
  /* each_entry checked every entry: count the commas */
  const char *p = list != NULL ? list + strspn(list, " ") : "";
  if (*p == '\0' || strcmp(p, "none") == 0)
    return 0;
  int n = 1;
  for (; *p; p++)
    n += *p == ',';
  return n;
}

static bool ports_overlap(int a, int b) {
  if (a == 0 && b == 0)
    return true;
  if (a == 0)
    return b == 80 || b == 443;
  if (b == 0)
    return a == 80 || a == 443;
  return a == b;
}

/* name is below suffix (name = x.suffix). */
static bool below(const char *name, const char *suffix) {
  size_t n = strlen(name), s = strlen(suffix);
  return n > s + 1 && name[n - s - 1] == '.' && strcmp(name + n - s, suffix) == 0;
}

static bool entry_host_matches(const struct egress_entry *e, const char *host) {
  unsigned char a[16], b[16];
  int fa = ip_parse(host, a);
  if (e->ip || fa != 0)
    return e->ip && fa != 0 && ip_parse(e->host, b) == fa && memcmp(a, b, 16) == 0;
  return e->wildcard ? below(host, e->host) : strcmp(host, e->host) == 0;
}

struct probe {
  char host[EGRESS_HOST_MAX + 1];
  int port;
};

static int allows_one(const struct egress_entry *e, const void *ctx) {
  const struct probe *p = ctx;
  return ports_overlap(e->port, p->port) && entry_host_matches(e, p->host) ? 1 : 0;
}

bool egress_list_allows(const char *list, const char *host, int port) {
  if (host == NULL || port < 1 || port > 65535)
    return false;
  struct probe p = {.port = port};
  normalize(host, strlen(host), p.host);
  if (p.host[0] == '\0')
    return false;
  mcp_error_t err = NULL;
  int r = each_entry(list, allows_one, &p, &err);
  mcp_error_release(&err);
  return r == 1;
}

static bool entries_overlap(const struct egress_entry *a, const struct egress_entry *b, bool ports) {
  if (ports && !ports_overlap(a->port, b->port))
    return false;
  if (a->ip || b->ip)
    return a->ip && b->ip && entry_host_matches(a, b->host);
  if (a->wildcard && b->wildcard)
    return strcmp(a->host, b->host) == 0 || below(a->host, b->host) || below(b->host, a->host);
  if (a->wildcard)
    return below(b->host, a->host);
  if (b->wildcard)
    return below(a->host, b->host);
  return strcmp(a->host, b->host) == 0;
}

struct overlap {
  const struct egress_entry *a; /* overlaps_entry: the entry of the first list */
  const char *list;             /* overlaps_list: the second list */
  bool ports;
};

static int overlaps_entry(const struct egress_entry *b, const void *ctx) {
  const struct overlap *o = ctx;
  return entries_overlap(o->a, b, o->ports) ? 1 : 0;
}

static int overlaps_list(const struct egress_entry *a, const void *ctx) {
  const struct overlap *o = ctx;
  struct overlap inner = {.a = a, .ports = o->ports};
  mcp_error_t err = NULL;
  int r = each_entry(o->list, overlaps_entry, &inner, &err);
  mcp_error_release(&err);
  return r == 1 ? 1 : 0;
}

static bool lists_overlap(const char *a, const char *b, bool ports) {
  struct overlap o = {.list = b, .ports = ports};
  mcp_error_t err = NULL;
  int r = each_entry(a, overlaps_list, &o, &err);
  mcp_error_release(&err);
  return r == 1;
}

bool egress_lists_overlap(const char *a, const char *b) { return lists_overlap(a, b, true); }

bool egress_names_overlap(const char *a, const char *b) { return lists_overlap(a, b, false); }
