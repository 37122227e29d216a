/* What each bearer token may use, by the token's name.
 *
 * The tokens file holds `name token [option=value ...]` lines; the renderer
 * (systemd/mcp-sandbox-tokens) writes the nginx map and, for the service,
 * the policy file (setting token_policy) with one line per token and no
 * token in it:  `name option=value ...`.  The options read here:
 *   max_sessions=N     live sessions of the token
 *   max_concurrent=N   calls of the token running at once
 *   max_requests=N     requests of the token a cell serves at once
 *   egress_allow=LIST  the hosts its calls may reach (common/egress.h;
 *                      replaces the setting egress_allow; `none`: none)
 * A token without an option gets the setting token_max_sessions,
 * token_max_concurrent or token_max_requests, and when that is 0 its fair
 * share: the larger of a quarter of the global limit and an equal share
 * among the configured tokens (one token alone gets the whole); requests
 * have no fair share (0: no bound of ours).  Options this file does not
 * know are kept for their readers.
 *
 * The file is read again when it changes (by its inode, size and mtime); a
 * missing file means one token and no options.  Thread-safe. */
#ifndef MCP_POLICY_H
#define MCP_POLICY_H

#include <stdbool.h>

#include "common/error.h"
#include "common/settings.h"

#define POLICY_NAME_MAX 64

struct token_policy {
  int max_sessions;   /* resolved: at least 1 */
  int max_concurrent; /* resolved: at least 1 */
  int max_requests;   /* resolved: 0 when none */
  int tokens;         /* tokens in the policy file (1 when there is none) */
};

/* The policy of the token named `name`.  A name the file does not list
 * gets the defaults (nginx accepted it: the file may lag behind). */
int policy_for(const struct mcp_config *cfg, const char *name, struct token_policy *out, mcp_error_t *err);
/* A string option of the token's line (egress_allow=...): 1 with its
 * value in buf, 0 when the token's line does not have it. */
int policy_string(const struct mcp_config *cfg, const char *name, const char *key, char *buf, size_t size,
                  mcp_error_t *err);
/* A token name as nginx passes it: 1-64 of [A-Za-z0-9_.-]. */
bool policy_name_valid(const char *name);
/* The share of a global limit that a token gets by default. */
int policy_fair_share(int global, int tokens);

#endif
