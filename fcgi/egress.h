/* A call's network by policy, on the responder's side (README.md):
 * the optional `egress_allow` argument, and the policy the call gets from
 * the deployment (setting egress_allow), its token (`egress_allow=` in the
 * tokens file, which replaces the deployment's) and the argument, which
 * may only narrow it: a host is reachable when both the token's list and
 * the call's allow it.  The supervisor's relay (sandbox/egress.h) and the
 * proxy's helper (egress/helper.c) enforce it; this file decides it. */
#ifndef MCP_FCGI_EGRESS_H
#define MCP_FCGI_EGRESS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "common/egress.h"
#include "common/error.h"
#include "common/settings.h"

struct egress_plan {
  bool on;                          /* the call has egress: the relay and the proxy settings exist */
  char allow[EGRESS_LIST_MAX + 1];  /* the token's (or the deployment's) list */
  char narrow[EGRESS_LIST_MAX + 1]; /* the call's own list, when narrowed */
  bool narrowed;
  bool ca; /* a host with a credential is reachable: the call trusts the deployment's CA */
};

/* The `egress_allow` argument (an array of entries) as a list in out;
 * MCP_ERR_INVALID with a sentence when it is not one. */
int egress_arg_parse(const cJSON *arg, char *out, size_t size, mcp_error_t *err);
/* The plan of a call of `token` whose argument gave `narrow` (NULL: none);
 * MCP_ERR_INVALID with a sentence when the argument asks for what the
 * token does not have. */
int egress_plan_for(const struct mcp_config *cfg, const char *token, const char *narrow, struct egress_plan *out,
                    mcp_error_t *err);
/* The request's "egress" member (nothing when the plan is off). */
void egress_plan_json(const struct egress_plan *plan, cJSON *request);

#endif
