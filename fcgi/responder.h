/* A FastCGI responder process: accept requests on the shared socket and
 * answer each with mcp_serve().  Runs until SIGTERM; a request in progress
 * is finished first.
 *
 * The socket trusts what its peer sends, MCP_TOKEN_ID included: each
 * connection's peer (SO_PEERCRED) must be root or one of the users of
 * struct peer_policy (nginx's workers); any other is dropped unanswered
 * and counted (mcp_fastcgi_peers_refused_total). */
#ifndef MCP_RESPONDER_H
#define MCP_RESPONDER_H

#include <sys/types.h>

#include "common/settings.h"

#define PEER_USERS_MAX 64

/* Who may talk to the responders besides root. */
struct peer_policy {
  gid_t group; /* socket_group: the socket's group */
  uid_t uids[PEER_USERS_MAX];
  int n;
};

/* The users of socket_peer_user, or else the members of socket_group
 * (listed in it, or with it as their primary group).  -1, with the reason
 * on stderr, when the group or a user does not exist or nobody but root
 * could talk to the responders: the master then refuses to start. */
int peer_policy_load(const struct mcp_config *cfg, struct peer_policy *p);

int responder_main(const struct mcp_config *cfg, const struct peer_policy *peers, int listen_fd, int ops_fd);

#endif
