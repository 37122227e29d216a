/* A call's egress plan (see egress.h). */
#include "config.h"

#include "fcgi/egress.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "common/policy.h"
#include "common/util.h"

#define CREDENTIALS_MAX (1 << 20)

int egress_arg_parse(const cJSON *arg, char *out, size_t size, mcp_error_t *err) {
  if (!cJSON_IsArray(arg))
    return mcp_fail_public(err, MCP_ERR_INVALID, "egress_allow must be an array of host[:port] strings");
  if (cJSON_GetArraySize(arg) > EGRESS_ENTRIES_MAX)
    return mcp_fail_public(err, MCP_ERR_INVALID, "egress_allow: at most %d entries", EGRESS_ENTRIES_MAX);
  size_t n = 0;
  out[0] = '\0';
  const cJSON *it;
  cJSON_ArrayForEach(it, arg) {
    struct egress_entry e;
    mcp_error_t why = NULL;
    if (!cJSON_IsString(it) || strchr(it->valuestring, ',') != NULL ||
        egress_entry_parse(it->valuestring, strlen(it->valuestring), &e, &why) < 0) {
      int r = mcp_fail_public(err, MCP_ERR_INVALID, "egress_allow: %s",
                              why ? mcp_error_public(why) : "each entry must be one host[:port] string");
      mcp_error_release(&why);
      return r;
    }
    int w = snprintf(out + n, size - n, "%s%s", n ? "," : "", it->valuestring);
    if (w < 0 || (size_t)w >= size - n)
      return mcp_fail_public(err, MCP_ERR_INVALID, "egress_allow is longer than %zu bytes", size - 1);
    n += (size_t)w;
  }
  return 0;
}

/* The hosts of egress_credentials (the first field of each line), as a
 * list; the values are never read here. */
static void credential_hosts(const struct mcp_config *cfg, char *out, size_t size) {
  out[0] = '\0';
  cleanup_free char *text = NULL;
  mcp_error_t err = NULL;
  if (cfg->egress_credentials[0] == '\0' ||
      read_file_at(AT_FDCWD, cfg->egress_credentials, CREDENTIALS_MAX, &text, NULL, &err) < 0) {
    mcp_error_release(&err);
    return;
  }
  size_t n = 0;
  for (const char *l = text; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "") {
    l += strspn(l, " \t");
    size_t h = strcspn(l, " \t\n");
    if (h == 0 || *l == '#')
      continue;
    int w = snprintf(out + n, size - n, "%s%.*s", n ? "," : "", (int)h, l);
    if (w < 0 || (size_t)w >= size - n)
      break;
    n += (size_t)w;
  }
}

/* The token's list, or the deployment's. */
static int token_list(const struct mcp_config *cfg, const char *token, char *out, size_t size, mcp_error_t *err) {
  int r = policy_string(cfg, token, "egress_allow", out, size, err);
  if (r < 0)
    return -1;
  if (r == 0)
    snprintf(out, size, "%s", cfg->egress_allow);
  mcp_error_t why = NULL;
  if (egress_list_check(out, &why) < 0) { /* an operator's typo allows nothing */
    mcp_error_log_release(&why, "egress_allow of a token");
    out[0] = '\0';
  }
  return 0;
}

/* Every entry of the call's list must be one the token's list can allow. */
static int check_narrowing(const char *allow, const char *narrow, mcp_error_t *err) {
  for (const char *p = narrow; *p;) {
    size_t len = strcspn(p, ",");
    char one[EGRESS_HOST_MAX + 16];
    snprintf(one, sizeof(one), "%.*s", (int)(len < sizeof(one) - 1 ? len : sizeof(one) - 1), p);
    if (!egress_lists_overlap(one, allow))
      return mcp_fail_public(err, MCP_ERR_INVALID,
                             "egress_allow: `%.100s` is outside this token's egress policy (a call may only narrow it)",
                             one);
    p += len + (p[len] == ',');
  }
  return 0;
}

int egress_plan_for(const struct mcp_config *cfg, const char *token, const char *narrow, struct egress_plan *out,
                    mcp_error_t *err) {
  memset(out, 0, sizeof(*out));
  if (cfg->egress_proxy[0] != '\0' && token_list(cfg, token, out->allow, sizeof(out->allow), err) < 0)
    return -1;
  if (cfg->egress_proxy[0] == '\0' || egress_list_check(out->allow, NULL) <= 0) {
    if (narrow != NULL && narrow[0] != '\0')
      return mcp_fail_public(err, MCP_ERR_INVALID, "egress_allow: this token's calls have no network access");
    return 0;
  }
  if (narrow != NULL) {
    if (narrow[0] == '\0')
      return 0; /* [] : no network for this call */
    if (check_narrowing(out->allow, narrow, err) < 0)
      return -1;
    snprintf(out->narrow, sizeof(out->narrow), "%s", narrow);
    out->narrowed = true;
  }
  char creds[EGRESS_LIST_MAX + 1];
  credential_hosts(cfg, creds, sizeof(creds));
  out->ca = creds[0] != '\0' && egress_names_overlap(creds, out->allow) &&
            (!out->narrowed || egress_names_overlap(creds, out->narrow));
  out->on = true;
  return 0;
}

void egress_plan_json(const struct egress_plan *plan, cJSON *request) {
  if (plan == NULL || !plan->on)
    return;
  cJSON *e = cJSON_AddObjectToObject(request, "egress");
  cJSON_AddStringToObject(e, "allow", plan->allow);
  if (plan->narrowed)
    cJSON_AddStringToObject(e, "narrow", plan->narrow);
  cJSON_AddBoolToObject(e, "ca", plan->ca);
}
