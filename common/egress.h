/* Egress policy lists: the host names and ports a call's code may reach
 * through the filtering proxy (README.md, "Network by policy").
 *
 * A list is entries separated by commas (spaces around them ignored):
 *   host            data.example.org: that name, ports 80 and 443
 *   host:port       that name, that port only
 *   *.suffix[:port] every name below suffix (not suffix itself)
 *   192.0.2.10[:port], [2001:db8::1][:port]   an IP literal (refused unless listed)
 * Names compare case-insensitively and without a trailing dot.  The word
 * `none`, or an empty list, allows nothing.
 *
 * Used by the responders (the tokens' and calls' lists, and whether a
 * call's policy reaches a host with a credential), by the proxy's policy
 * helper (egress/helper.c: every request Squid asks about) and by the
 * supervisor's relay.  Pure functions: no I/O, no allocation. */
#ifndef MCP_EGRESS_H
#define MCP_EGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

#define EGRESS_LIST_MAX 4096 /* bytes of a list */
#define EGRESS_ENTRIES_MAX 64
#define EGRESS_HOST_MAX 253

struct egress_entry {
  char host[EGRESS_HOST_MAX + 1]; /* lower case; a wildcard's suffix without "*." */
  bool wildcard;
  bool ip;  /* an IP literal (brackets removed) */
  int port; /* 0: 80 and 443 */
};

/* One entry of len bytes; -1 with a sentence (MCP_ERR_INVALID) when it is
 * not one of the forms above. */
int egress_entry_parse(const char *text, size_t len, struct egress_entry *out, mcp_error_t *err);
/* A whole list: the number of entries (0 for `none` or empty), or -1 with
 * a sentence naming the bad entry. */
int egress_list_check(const char *list, mcp_error_t *err);
/* Whether host (as the request names it: a name, an IPv4 literal or a
 * bracketed IPv6 one) and port are allowed by some entry of list.  A
 * list that does not parse allows nothing. */
bool egress_list_allows(const char *list, const char *host, int port);
/* Whether some name and port allowed by an entry of a are also allowed by
 * an entry of b (a call's narrowing that can allow something; a host with
 * a credential that a call's policy reaches). */
bool egress_lists_overlap(const char *a, const char *b);
/* The same, whatever the ports (a host with a credential: the proxy
 * terminates TLS for its name on any port). */
bool egress_names_overlap(const char *a, const char *b);
/* Whether host is an IP literal (IPv4, or IPv6 with or without brackets). */
bool egress_host_is_ip(const char *host);

#endif
