/* common/settings.c: defaults, `key = value` parsing, sizes, bounds, the
 * configuration file named by MCP_CONFIG and MCP_<KEY> overrides. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/settings.h"
#include "common/util.h"
#include "tap.h"

extern char **environ;

/* Nothing from the caller's environment may leak into these tests. */
static void clear_mcp_env(void) {
  for (;;) {
    char name[256] = "";
    for (char **e = environ; *e; e++) {
      if (strncmp(*e, "MCP_", 4) == 0) {
        size_t n = strcspn(*e, "=");
        snprintf(name, sizeof(name), "%.*s", (int)n, *e);
        break;
      }
    }
    if (name[0] == '\0')
      return;
    unsetenv(name);
  }
}

/* config_set must fail, and say so naming the key. */
static void set_fails(struct mcp_config *cfg, const char *key, const char *value, const char *sentence) {
  mcp_error_t err = NULL;
  int r = config_set(cfg, key, value, &err);
  ok(r < 0 && err != NULL, "%s = '%s' is refused", key, value);
  is_str(err ? mcp_error_public(err) : NULL, sentence, "with a sentence naming the key");
  if (err != NULL)
    is_int(err->kind, MCP_ERR_INVALID, "an invalid-configuration error");
  mcp_error_release(&err);
}

static uint64_t set_size(struct mcp_config *cfg, const char *key, const char *value) {
  mcp_error_t err = NULL;
  if (config_set(cfg, key, value, &err) < 0) {
    diag("%s = %s: %s", key, value, mcp_error_public(err));
    mcp_error_release(&err);
    return 0;
  }
  return cfg->max_body;
}

static void defaults_tests(void) {
  struct mcp_config c;
  config_defaults(&c);
  is_str(c.state_dir, "/var/lib/mcp-sandbox", "default state_dir");
  is_str(c.backend, "runsc", "default backend");
  is_int(c.max_body, 10 << 20, "default max_body");
  is_int(c.output_limit, 1 << 20, "default output_limit");
  is_int(c.timeout_default, 60, "default timeout_default");
  is_int(c.timeout_max, 300, "default timeout_max");
  is_int(c.idle_timeout, 600, "default idle_timeout");
  is_int(c.sandbox_uid, 1000, "default sandbox_uid");
  is_str(c.allowed_origins, "", "no extra origins by default");
}

static void set_tests(void) {
  struct mcp_config c;
  config_defaults(&c);
  is_int(set_size(&c, "max_body", "4096"), 4096, "plain bytes");
  is_int(set_size(&c, "max_body", "10K"), 10240, "K is 1024");
  is_int(set_size(&c, "max_body", "10k"), 10240, "k is 1024 too");
  is_int(set_size(&c, "max_body", "2M"), 2 << 20, "M");
  is_int(set_size(&c, "max_body", "1G"), 1 << 30, "G");
  is_int(set_size(&c, "max_body", "1KB"), 1024, "KB");
  is_int(set_size(&c, "max_body", "1KiB"), 1024, "KiB");
  is_int(set_size(&c, "max_body", "1mib"), 1 << 20, "mib");
  is_int(set_size(&c, "max_body", "4G"), (int64_t)1 << 32, "the upper bound itself");
  is_int(set_size(&c, "max_body", "1024"), 1024, "the lower bound itself");
  is_int(set_size(&c, "MAX_BODY", "2048"), 2048, "keys are case-insensitive");

  static const char range[] = "configuration key max_body: `%s` is not a number between 1024 and 4294967296";
  static const char *const bad_sizes[] = {"1023",
                                          "4294967297",
                                          "5G",
                                          "1T",
                                          "1.5M",
                                          "-1",
                                          "",
                                          "K",
                                          "1 K",
                                          "1KBx",
                                          "0x400",
                                          "10M ",
                                          "99999999999999999999",
                                          "9223372036854775807G"};
  for (size_t i = 0; i < ARRAY_SIZE(bad_sizes); i++) {
    char want[256];
    snprintf(want, sizeof(want), range, bad_sizes[i]);
    set_fails(&c, "max_body", bad_sizes[i], want);
  }
  is_int(c.max_body, 2048, "a refused value leaves the old one");

  mcp_error_t err = NULL;
  is_int(config_set(&c, "timeout_max", "120", &err), 0, "an integer key");
  is_int(c.timeout_max, 120, "is set");
  set_fails(&c, "timeout_max", "10K", "configuration key timeout_max: `10K` is not a number between 1 and 86400");
  set_fails(&c, "timeout_max", "0", "configuration key timeout_max: `0` is not a number between 1 and 86400");
  set_fails(&c, "idle_timeout", "4", "configuration key idle_timeout: `4` is not a number between 5 and 604800");
  set_fails(&c, "sandbox_uid", "0", "configuration key sandbox_uid: `0` is not a number between 1 and 65534");
  set_fails(&c, "sandbox_uid", "65535", "configuration key sandbox_uid: `65535` is not a number between 1 and 65534");
  is_int(config_set(&c, "memory_limit", "32M", &err), 0, "memory_limit at its lower bound");
  set_fails(&c, "memory_limit", "31M",
            "configuration key memory_limit: `31M` is not a number between 33554432 and 1099511627776");

  is_int(config_set(&c, "sandbox_memory", "0", &err), 0, "sandbox_memory may be 0");
  is_int(config_set(&c, "sandbox_memory", "2G", &err), 0, "or a size");
  is_int(c.sandbox_memory, (int64_t)2 << 30, "which is set");
  set_fails(&c, "nproc_limit", "7", "configuration key nproc_limit: `7` is not a number between 8 and 100000");
  is_int(config_set(&c, "cgroup_parent", "", &err), 0, "an empty cgroup_parent turns cgroups off");
  is_int(config_set(&c, "backend", "direct", &err), 0, "a string key");
  is_str(c.backend, "direct", "is set");
  set_fails(&c, "backend", "a-backend-name-longer-than-its-field", "configuration key backend: value is too long");
  is_str(c.backend, "direct", "a refused string leaves the old one");
  is_int(config_set(&c, "allowed_origins", "", &err), 0, "an empty string is a value");

  set_fails(&c, "no_such_key", "1", "unknown configuration key no_such_key");
  set_fails(&c, "", "1", "unknown configuration key ");
  set_fails(&c, "max_bod", "2048", "unknown configuration key max_bod");
}

static char tmp[4096];

static void write_text(const char *name, const char *text) {
  char p[4200];
  snprintf(p, sizeof(p), "%s/%s", tmp, name);
  FILE *f = fopen(p, "w");
  fputs(text, f);
  fclose(f);
}

static void load_tests(void) {
  char path[4200], state[4200];
  snprintf(path, sizeof(path), "%s/test.conf", tmp);
  snprintf(state, sizeof(state), "%s/state", tmp);
  char text[8000];
  snprintf(text, sizeof(text),
           "# a comment\n"
           "\n"
           "   state_dir   =   %s   \n"
           "max_body = 64K\n"
           "\t# indented comment\n"
           "backend=direct\n"
           "allowed_origins = https://a.example, https://b.example\n"
           "timeout_max = 100\n"
           "timeout_default = 200\n"
           "responders = 0\n",
           state);
  write_text("test.conf", text);
  setenv("MCP_CONFIG", path, 1);
  struct mcp_config c;
  mcp_error_t err = NULL;
  is_int(config_load(&c, &err), 0, "config_load reads MCP_CONFIG");
  if (err)
    diag("%s", mcp_error_public(err));
  mcp_error_release(&err);
  is_str(c.state_dir, state, "state_dir from the file, trimmed");
  is_int(c.max_body, 64 << 10, "max_body from the file");
  is_str(c.backend, "direct", "backend from the file");
  is_str(c.allowed_origins, "https://a.example, https://b.example", "a value with spaces inside");
  is_int(c.timeout_default, 100, "timeout_default is capped by timeout_max");
  ok(c.responders >= 2, "responders = 0 means twice the cores (%d)", c.responders);
  ok(c.responder_threads >= 8 && c.responders * c.responder_threads >= 96,
     "responder_threads unset: at least 8 each and 96 in all (%d x %d)", c.responders, c.responder_threads);
  char sock[4300];
  snprintf(sock, sizeof(sock), "%s/sock/fcgi.sock", state);
  is_str(c.fcgi_socket, sock, "the FastCGI socket defaults to the state folder");
  is_int(c.idle_timeout, 600, "keys not in the file keep their default");

  setenv("MCP_MAX_BODY", "128K", 1);
  setenv("MCP_TIMEOUT_MAX", "50", 1);
  is_int(config_load(&c, &err), 0, "config_load with environment overrides");
  mcp_error_release(&err);
  is_int(c.max_body, 128 << 10, "MCP_MAX_BODY wins over the file");
  is_int(c.timeout_max, 50, "MCP_TIMEOUT_MAX wins over the file");
  is_str(c.backend, "direct", "the file still applies to other keys");

  setenv("MCP_MAX_BODY", "12", 1);
  ok(config_load(&c, &err) < 0, "a bad environment value fails the load");
  like(err ? mcp_error_public(err) : NULL, "max_body", "naming the key");
  like(err ? err->msg : NULL, "MCP_MAX_BODY", "the log says which variable");
  mcp_error_release(&err);
  unsetenv("MCP_MAX_BODY");
  unsetenv("MCP_TIMEOUT_MAX");

  write_text("bad.conf", "max_body = 64K\nthis line has no equals sign\n");
  snprintf(path, sizeof(path), "%s/bad.conf", tmp);
  setenv("MCP_CONFIG", path, 1);
  ok(config_load(&c, &err) < 0, "a line without '=' fails");
  like(err ? mcp_error_public(err) : NULL, "bad.conf:2: expected `key = value`", "naming the file and line");
  mcp_error_release(&err);

  write_text("bad.conf", "max_body = 64K\n\nmax_sessions = many\n");
  ok(config_load(&c, &err) < 0, "a bad value in the file fails");
  like(err ? mcp_error_public(err) : NULL, "max_sessions", "naming the key");
  like(err ? err->msg : NULL, "bad.conf:3", "the log names the file and line");
  mcp_error_release(&err);

  write_text("bad.conf", "nonsense_key = 1\n");
  ok(config_load(&c, &err) < 0, "an unknown key in the file fails");
  like(err ? mcp_error_public(err) : NULL, "unknown configuration key nonsense_key", "naming it");
  mcp_error_release(&err);

  write_text("bad.conf", "backend = docker\n");
  ok(config_load(&c, &err) < 0, "an unknown backend fails");
  is_str(err ? mcp_error_public(err) : NULL, "configuration key backend must be runsc or direct", "with a sentence");
  mcp_error_release(&err);

  write_text("bad.conf", "state_dir = relative/path\n");
  ok(config_load(&c, &err) < 0, "a relative state_dir fails");
  is_str(err ? mcp_error_public(err) : NULL, "configuration key state_dir must be an absolute path", "with a sentence");
  mcp_error_release(&err);

  /* The logs: a file by its absolute path, stderr (a container's log) or
   * none; a relative path would name a different file for each process. */
  write_text("bad.conf", "audit_log = logs/audit.log\n");
  ok(config_load(&c, &err) < 0, "a relative audit_log fails");
  is_str(err ? mcp_error_public(err) : NULL,
         "configuration key audit_log must be an absolute path, stderr or empty (none)", "with a sentence");
  mcp_error_release(&err);
  write_text("bad.conf", "egress_log = egress.log\n");
  ok(config_load(&c, &err) < 0, "a relative egress_log fails");
  is_str(err ? mcp_error_public(err) : NULL,
         "configuration key egress_log must be an absolute path, stderr or empty (none)", "with a sentence");
  mcp_error_release(&err);
  write_text("bad.conf", "audit_log = stderr\negress_log =\n");
  ok(config_load(&c, &err) == 0, "audit_log stderr and an empty egress_log load");
  is_str(c.audit_log, "stderr", "audit_log stays the word stderr");
  is_str(c.egress_log, "", "egress_log stays empty");
  mcp_error_release(&err);
  write_text("bad.conf", "audit_log = /var/log/mcp/audit.log\n");
  ok(config_load(&c, &err) == 0, "an absolute audit_log loads");
  mcp_error_release(&err);

  snprintf(path, sizeof(path), "%s/missing.conf", tmp);
  setenv("MCP_CONFIG", path, 1);
  ok(config_load(&c, &err) < 0, "a missing MCP_CONFIG file fails");
  mcp_error_release(&err);

  /* Without MCP_CONFIG: <state_dir>/mcp.conf when it exists. */
  unsetenv("MCP_CONFIG");
  setenv("MCP_STATE_DIR", state, 1);
  is_int(config_load(&c, &err), 0, "no mcp.conf in the state folder is fine");
  mcp_error_release(&err);
  is_int(c.max_body, 10 << 20, "defaults then");
  mkdir_p(state, 0700, &err);
  write_text("state/mcp.conf", "max_body = 32K\n");
  is_int(config_load(&c, &err), 0, "mcp.conf in the state folder");
  mcp_error_release(&err);
  is_int(c.max_body, 32 << 10, "is read");
  unsetenv("MCP_STATE_DIR");
}

static void path_tests(void) {
  struct mcp_config c;
  config_defaults(&c);
  char buf[64];
  is_int(config_path(&c, buf, sizeof(buf), "sessions"), 0, "config_path");
  is_str(buf, "/var/lib/mcp-sandbox/sessions", "joins state_dir and the name");
  is_int(config_path(&c, buf, 10, "sessions"), -ENAMETOOLONG, "refuses to truncate");
  snprintf(c.fcgi_socket, sizeof(c.fcgi_socket), "/run/mcp-sandbox/fcgi.sock");
  ok(config_ops_socket(&c, buf, sizeof(buf)) == 0 && strcmp(buf, "/run/mcp-sandbox/fcgi-ops.sock") == 0,
     "the endpoints' socket: -ops before .sock (%s)", buf);
  snprintf(c.fcgi_socket, sizeof(c.fcgi_socket), "/run/x/responders");
  ok(config_ops_socket(&c, buf, sizeof(buf)) == 0 && strcmp(buf, "/run/x/responders-ops") == 0,
     "or after a name without .sock (%s)", buf);
  ok(config_ops_socket(&c, buf, 12) < 0, "and never cut short");

  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  config_print(&c, f);
  fclose(f);
  like(out, "\nmax_body = 10485760\n", "config_print prints sizes in bytes");
  like(out, "backend = runsc\n", "and strings");
  free(out);
}

/* responder_threads "auto": one token's requests in nginx (64) hold at
 * most two thirds of the threads, whatever the number of responders. */
static void threads_tests(void) {
  static const struct {
    int responders, threads;
  } cases[] = {{1, 96}, {2, 48}, {4, 24}, {5, 20}, {7, 14}, {12, 8}, {16, 8}, {256, 8}, {0, 96}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    is_int(config_auto_responder_threads(cases[i].responders), cases[i].threads,
           "responder_threads auto with %d responders", cases[i].responders);
  struct mcp_config c;
  mcp_error_t err = NULL;
  unsetenv("MCP_CONFIG");
  setenv("MCP_STATE_DIR", tmp, 1);
  setenv("MCP_RESPONDERS", "3", 1);
  is_int(config_load(&c, &err), 0, "config_load with 3 responders");
  mcp_error_release(&err);
  is_int(c.responder_threads, 32, "3 responders get 32 threads each");
  setenv("MCP_RESPONDER_THREADS", "5", 1);
  is_int(config_load(&c, &err), 0, "config_load with responder_threads 5");
  mcp_error_release(&err);
  is_int(c.responder_threads, 5, "a responder_threads given is kept");
  unsetenv("MCP_RESPONDERS");
  unsetenv("MCP_RESPONDER_THREADS");
  unsetenv("MCP_STATE_DIR");

  /* The figure auto counts on is nginx's: every template that forwards
   * tokens' requests says the same. */
  static const char *const templates[] = {"nginx.conf.in", "site.conf.in", "router.conf.in"};
  char want[64];
  snprintf(want, sizeof(want), "limit_conn mcp_token_conn %d;", MCP_NGINX_TOKEN_REQUESTS);
  for (size_t i = 0; i < sizeof(templates) / sizeof(templates[0]); i++) {
    char path[512], line[1024];
    snprintf(path, sizeof(path), "%s/nginx/%s", TEST_SRCDIR, templates[i]);
    FILE *f = fopen(path, "re");
    if (f == NULL)
      bail_out("%s: %s", path, strerror(errno));
    int found = 0, same = 0;
    while (fgets(line, sizeof(line), f) != NULL)
      if (strstr(line, "limit_conn mcp_token_conn ") != NULL) {
        found++;
        same += strstr(line, want) != NULL;
      }
    fclose(f);
    ok(found > 0 && same == found, "nginx/%s: %s (MCP_NGINX_TOKEN_REQUESTS; %d of %d lines)", templates[i], want, same,
       found);
  }
}

/* The README's table of settings is the declaration's (settings.def):
 * every key, its default and its meaning, in order. */
static void readme_tests(void) {
  char *table = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&table, &len);
  config_markdown(f);
  fclose(f);
  FILE *r = fopen(TEST_SRCDIR "/README.md", "re");
  if (r == NULL)
    bail_out("README.md: %s", strerror(errno));
  struct buf readme = {0};
  char line[4096];
  bool in_table = false;
  while (fgets(line, sizeof(line), r) != NULL) {
    if (strcmp(line, "| key | default | meaning |\n") == 0)
      in_table = true;
    if (in_table && line[0] != '|')
      break;
    if (in_table)
      buf_append(&readme, line, strlen(line));
  }
  fclose(r);
  is_str(readme.data ? readme.data : "", table,
         "README.md's configuration table is `mcp-server --settings-table` (regenerate it from settings.def)");
  like(table, "| `max_body` | 10M | ", "sizes are shown with their unit");
  like(table, "| `responders` | 2 x cores | ", "computed defaults are described");
  buf_free(&readme);
  free(table);
}

int main(void) {
  clear_mcp_env();
  defaults_tests();
  set_tests();
  const char *t = getenv("TMPDIR");
  snprintf(tmp, sizeof(tmp), "%s/mcp-settings-XXXXXX", t && *t ? t : "/tmp");
  if (mkdtemp(tmp) == NULL)
    bail_out("mkdtemp");
  load_tests();
  path_tests();
  threads_tests();
  readme_tests();
  mcp_error_t err = NULL;
  int dfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  remove_tree_at(dfd, tmp + 1, &err);
  close(dfd);
  return done_testing();
}
