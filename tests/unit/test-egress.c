/* Network by policy: the policy lists (common/egress.c), the call's plan
 * from the deployment, its token and its argument (fcgi/egress.c), and the
 * proxy's policy helper (egress/helper.c, run as Squid runs it). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/egress.h"
#include "common/policy.h"
#include "common/util.h"
#include "fcgi/egress.h"
#include "tap.h"

static char tmp[1024];

static void put(const char *name, const char *text) {
  char path[1200];
  snprintf(path, sizeof(path), "%s/%s", tmp, name);
  FILE *f = fopen(path, "we");
  if (f == NULL || fputs(text, f) < 0)
    bail_out("write %s: %s", path, strerror(errno));
  fclose(f);
}

static void entry_tests(void) {
  struct egress_entry e;
  static const char *const good[] = {"data.example.org",  "*.googleapis.com:443", "Example.ORG.", "192.0.2.10:8080",
                                     "[2001:db8::1]:443", "a-b_c.example",        " spaced.org "};
  for (size_t i = 0; i < ARRAY_SIZE(good); i++)
    ok(egress_entry_parse(good[i], strlen(good[i]), &e, NULL) == 0, "`%s` is an entry", good[i]);
  static const char *const bad[] = {
      "",        "*.",   "exa mple.org", "x.org:0",   "x.org:65536", "x.org:port", "2001:db8::1", "*.192.0.2.1",
      "[x.org]", "a..b", "http://x.org", "x.org/path"};
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    mcp_error_t err = NULL;
    ok(egress_entry_parse(bad[i], strlen(bad[i]), &e, &err) < 0 && err != NULL && err->kind == MCP_ERR_INVALID,
       "`%s` is refused with a sentence", bad[i]);
    mcp_error_release(&err);
  }
  is_int(egress_list_check("a.org, *.b.com:443,192.0.2.1", NULL), 3, "a list of three");
  is_int(egress_list_check("none", NULL), 0, "none allows nothing");
  is_int(egress_list_check("", NULL), 0, "nor does an empty list");
  ok(egress_list_check("a.org,,b.org", NULL) < 0, "an empty entry is refused");
}

static void match_tests(void) {
  const char *l = "data.example.org,*.googleapis.com:443,192.0.2.10,[2001:db8::1]:8443";
  ok(egress_list_allows(l, "data.example.org", 443) && egress_list_allows(l, "DATA.example.org.", 80),
     "a name without a port: 80 and 443, any case, a trailing dot");
  ok(!egress_list_allows(l, "data.example.org", 8080), "... not another port");
  ok(!egress_list_allows(l, "x.data.example.org", 443) && !egress_list_allows(l, "example.org", 443),
     "a name is not its subdomains or its parent");
  ok(egress_list_allows(l, "storage.googleapis.com", 443) && egress_list_allows(l, "a.b.googleapis.com", 443),
     "*.suffix: every name below");
  ok(!egress_list_allows(l, "googleapis.com", 443) && !egress_list_allows(l, "evilgoogleapis.com", 443),
     "... not the suffix itself, nor a name that merely ends like it");
  ok(!egress_list_allows(l, "storage.googleapis.com", 80), "... and its port only");
  ok(egress_list_allows(l, "192.0.2.10", 80) && egress_list_allows(l, "[2001:db8::1]", 8443),
     "listed IP literals are allowed");
  ok(!egress_list_allows(l, "192.0.2.11", 80) && !egress_list_allows(l, "127.0.0.1", 80),
     "IP literals are refused unless listed");
  ok(egress_list_allows(l, "3221225994", 80) && !egress_list_allows("*.0.2.10", "192.0.2.10", 80),
     "an IP literal in another form is the same address; a wildcard never matches one");
  ok(!egress_list_allows("none", "data.example.org", 443) && !egress_list_allows("x org", "x", 443),
     "none, or a list that does not parse, allows nothing");
  ok(egress_lists_overlap("*.googleapis.com:443", "storage.googleapis.com") &&
         egress_lists_overlap("a.b.example.org", "*.example.org") &&
         egress_lists_overlap("*.a.example.org", "*.example.org"),
     "lists overlap by names below wildcards");
  ok(!egress_lists_overlap("other.org", l) && !egress_lists_overlap("data.example.org:8080", l),
     "... and not by other names or ports");
  ok(egress_names_overlap("data.example.org:8443", "data.example.org"), "names overlap whatever the ports");
  ok(egress_host_is_ip("127.1") && egress_host_is_ip("[::1]") && !egress_host_is_ip("localhost"),
     "IP literals, every form");
}

static void plan_tests(void) {
  struct mcp_config cfg;
  config_defaults(&cfg);
  snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", tmp);
  snprintf(cfg.token_policy, sizeof(cfg.token_policy), "%s/token-policy", tmp);
  snprintf(cfg.egress_credentials, sizeof(cfg.egress_credentials), "%s/credentials", tmp);
  put("token-policy", "wide egress_allow=*.example.org,api.cred.test\nnone egress_allow=none max_sessions=3\n");
  put("credentials", "# host header value\napi.cred.test Authorization Bearer secret\n");
  snprintf(cfg.egress_allow, sizeof(cfg.egress_allow), "data.default.test");
  struct egress_plan p;
  mcp_error_t err = NULL;
  ok(egress_plan_for(&cfg, "wide", NULL, &p, &err) == 0 && !p.on, "no egress_proxy: no egress for anyone");
  snprintf(cfg.egress_proxy, sizeof(cfg.egress_proxy), "127.0.0.1:3128");
  ok(egress_plan_for(&cfg, "other", NULL, &p, &err) == 0 && p.on && strcmp(p.allow, "data.default.test") == 0 && !p.ca,
     "a token without the option gets the deployment's list");
  ok(egress_plan_for(&cfg, "wide", NULL, &p, &err) == 0 && p.on && strstr(p.allow, "*.example.org") && p.ca,
     "a token's option replaces it; a host with a credential makes the call trust the deployment's CA");
  ok(egress_plan_for(&cfg, "none", NULL, &p, &err) == 0 && !p.on, "egress_allow=none: no egress");
  ok(egress_plan_for(&cfg, "wide", "a.example.org:443", &p, &err) == 0 && p.on && p.narrowed && !p.ca,
     "a call narrows its token's list (and then needs no CA)");
  ok(egress_plan_for(&cfg, "wide", "", &p, &err) == 0 && !p.on, "egress_allow: [] is no network for the call");
  ok(egress_plan_for(&cfg, "wide", "evil.org", &p, &err) < 0 && err != NULL && err->kind == MCP_ERR_INVALID,
     "a call cannot widen it");
  like(err ? mcp_error_public(err) : "", "outside this token's egress policy", "and is told so");
  mcp_error_release(&err);
  ok(egress_plan_for(&cfg, "none", "a.example.org", &p, &err) < 0, "nor ask for a network its token does not have");
  mcp_error_release(&err);
  /* The tokens file's options side by side (systemd/mcp-sandbox-tokens
   * renders them in the order given): each reader finds its own. */
  put("token-policy", "mixed max_sessions=2 egress_allow=a.example.org:443,*.b.example.org max_concurrent=1\n"
                      "limits max_concurrent=5 max_sessions=7\n");
  struct token_policy tp;
  ok(policy_for(&cfg, "mixed", &tp, &err) == 0 && tp.max_sessions == 2 && tp.max_concurrent == 1,
     "max_sessions= and max_concurrent= around egress_allow= are read");
  ok(egress_plan_for(&cfg, "mixed", NULL, &p, &err) == 0 && p.on &&
         strcmp(p.allow, "a.example.org:443,*.b.example.org") == 0,
     "... and egress_allow= between them");
  ok(policy_for(&cfg, "limits", &tp, &err) == 0 && tp.max_sessions == 7 && tp.max_concurrent == 5 &&
         egress_plan_for(&cfg, "limits", NULL, &p, &err) == 0 && p.on && strcmp(p.allow, "data.default.test") == 0,
     "a line with limits only keeps the deployment's egress_allow");
  mcp_error_release(&err);
  /* Without options and without token_max_sessions / token_max_concurrent
   * (every test stack sets those): each token's fair share of the global
   * limits, the larger of a quarter and an equal share, at least one. */
  cfg.max_sessions = 256;
  cfg.max_concurrent = 8;
  cfg.token_max_sessions = cfg.token_max_concurrent = 0;
  put("token-policy", "solo\n");
  cfg.token_max_requests = 0;
  int r = policy_for(&cfg, "solo", &tp, &err);
  ok(r == 0 && tp.max_sessions == 256 && tp.max_concurrent == 8 && tp.max_requests == 0,
     "fair share: one token may use all (%d sessions, %d calls; requests: %d, no bound)", tp.max_sessions,
     tp.max_concurrent, tp.max_requests);
  put("token-policy", "# names\nalpha\nbeta max_requests=5\n");
  r = policy_for(&cfg, "alpha", &tp, &err);
  ok(r == 0 && tp.max_sessions == 128 && tp.max_concurrent == 4 && tp.max_requests == 0,
     "fair share: two tokens, half each (%d sessions, %d calls); requests have no share (%d)", tp.max_sessions,
     tp.max_concurrent, tp.max_requests);
  ok(policy_for(&cfg, "beta", &tp, &err) == 0 && tp.max_requests == 5, "max_requests= in the tokens file");
  cfg.token_max_requests = 9;
  ok(policy_for(&cfg, "alpha", &tp, &err) == 0 && tp.max_requests == 9, "token_max_requests replaces the share");
  cfg.token_max_requests = 0;
  put("token-policy", "t0\nt1\nt2\nt3\nt4\nt5\nt6\nt7\nt8\nt9 max_concurrent=3\n");
  r = policy_for(&cfg, "t4", &tp, &err);
  ok(r == 0 && tp.max_sessions == 64 && tp.max_concurrent == 2,
     "fair share: ten tokens, a quarter each (%d sessions, %d calls)", tp.max_sessions, tp.max_concurrent);
  ok(policy_for(&cfg, "t9", &tp, &err) == 0 && tp.max_sessions == 64 && tp.max_concurrent == 3,
     "fair share: a token's own option wins over its share");
  ok(policy_for(&cfg, "unknown", &tp, &err) == 0 && tp.max_sessions == 64, "fair share: a name the file lacks too");
  cfg.token_max_sessions = 5;
  ok(policy_for(&cfg, "t4", &tp, &err) == 0 && tp.max_sessions == 5 && tp.max_concurrent == 2,
     "token_max_sessions replaces the share");
  is_int(policy_fair_share(3, 10), 1, "fair share: at least one");
  mcp_error_release(&err);
  cJSON *arg = cJSON_Parse("[\"a.example.org:443\", \"*.b.example.org\"]");
  char list[EGRESS_LIST_MAX + 1];
  ok(egress_arg_parse(arg, list, sizeof(list), NULL) == 0 && strcmp(list, "a.example.org:443,*.b.example.org") == 0,
     "the argument becomes a list");
  cJSON_Delete(arg);
  arg = cJSON_Parse("[\"a.org,b.org\"]");
  ok(egress_arg_parse(arg, list, sizeof(list), NULL) < 0, "one entry per string");
  cJSON_Delete(arg);
}

/* The helper as Squid runs it: one line in, one answer out. */
static void ask(const char *query, const char *expect, const char *what) {
  char cmd[2400], out[1024] = "";
  snprintf(cmd, sizeof(cmd), "printf '%%s\\n' '%s' | %s/mcp-egress-helper %s/conns", query, TEST_BUILDDIR, tmp);
  FILE *f = popen(cmd, "r");
  if (f == NULL || fgets(out, sizeof(out), f) == NULL)
    out[0] = '\0';
  if (f != NULL)
    pclose(f);
  like(out, expect, "%s", what);
}

static void helper_tests(void) {
  char conns[1100];
  snprintf(conns, sizeof(conns), "%s/conns", tmp);
  mkdir(conns, 0700);
  put("conns/40000", "allow *.example.org:443,data.test\nnarrow a.example.org\n");
  put("conns/40001", "allow data.test:8080\n");
  ask("0 127.0.0.1 40000 a.example.org 443 CONNECT -", "0 OK", "the call's host on its port");
  ask("1 127.0.0.1 40000 b.example.org 443 CONNECT -", "1 ERR message=\"b.example.org port 443 is not allowed",
      "a host the call narrowed away");
  ask("2 127.0.0.1 40000 a.example.org 443 CONNECT evil.org", "the TLS server name evil.org is not allowed",
      "a TLS server name the policy does not allow");
  ok(access(strcat(conns, "/40000.sni"), F_OK) == 0, "is noted for the relay's audit line");
  ask("3 127.0.0.1 40001 data.test 8080 GET -", "3 OK", "another connection, another policy");
  ask("4 127.0.0.1 40001 127.0.0.1 8080 GET -", "IP literals must be listed", "an IP literal");
  ask("5 127.0.0.1 40002 data.test 8080 GET -", "does not belong to a running call",
      "a connection the relay did not register");
  ask("6 10.0.0.1 40001 data.test 8080 GET -", "does not belong to a running call", "nor from anywhere but loopback");
  ask("7 127.0.0.1 40001 data%2Etest 8080 GET -", "7 OK", "values arrive URL-escaped");
}

int main(void) {
  const char *t = getenv("TMPDIR");
  snprintf(tmp, sizeof(tmp), "%s/mcp-egress-XXXXXX", t && *t ? t : "/tmp");
  if (mkdtemp(tmp) == NULL)
    bail_out("mkdtemp");
  entry_tests();
  match_tests();
  plan_tests();
  helper_tests();
  char cmd[1100];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
  if (system(cmd) != 0)
    diag("could not remove %s", tmp);
  return done_testing();
}
