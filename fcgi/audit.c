#include "config.h"

#include "fcgi/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

static const char *const outcome_names[OUTCOME_N] = {"ok",        "error",   "timeout", "memory",
                                                     "cancelled", "refused", "busy",    "sandbox"};

/* One descriptor per responder process, shared by its threads. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int fd = -1;
static volatile sig_atomic_t reopen_requested;

void audit_reopen(void) { reopen_requested = 1; }

static cJSON *entry_json(const struct rpc_call *c, const struct audit_entry *e) {
  char sha[65];
  const char *code = e->code ? e->code : "";
  sha256_hex(code, strlen(code), sha);
  cJSON *o = log_entry_new();
  cJSON_AddStringToObject(o, "request_id", c->http->request_id ? c->http->request_id : "");
  cJSON_AddStringToObject(o, "session_id", c->session ? c->session->id : "");
  cJSON_AddStringToObject(o, "token", c->http->token_id ? c->http->token_id : "");
  cJSON_AddStringToObject(o, "tool", e->tool);
  cJSON_AddStringToObject(o, "code_sha256", sha);
  cJSON_AddNumberToObject(o, "code_bytes", (double)strlen(code));
  cJSON_AddItemToObject(o, "packages", e->packages ? cJSON_Duplicate(e->packages, 1) : cJSON_CreateArray());
  cJSON_AddStringToObject(o, "outcome", outcome_names[e->outcome]);
  cJSON_AddNumberToObject(o, "duration_ms", (double)e->duration_ms);
  if (e->res != NULL) {
    cJSON_AddNumberToObject(o, "exit_code", e->res->exit_code);
    cJSON_AddNumberToObject(o, "cpu_ms", (double)e->res->cpu_ms);
    cJSON_AddNumberToObject(o, "peak_memory_kb", (double)e->res->max_rss_kb);
    cJSON_AddBoolToObject(o, "restored", e->res->restored);
    cJSON_AddBoolToObject(o, "state_lost", e->res->state_lost);
  } else {
    cJSON_AddNullToObject(o, "exit_code");
    cJSON_AddNullToObject(o, "cpu_ms");
    cJSON_AddNullToObject(o, "peak_memory_kb");
  }
  cJSON_AddNumberToObject(o, "bytes_returned", (double)e->bytes_returned);
  return o;
}

void audit_call(const struct rpc_call *c, const struct audit_entry *e) {
  const char *path = c->ctx->cfg->audit_log;
  if (path[0] == '\0')
    return;
  cleanup_cjson cJSON *o = entry_json(c, e);
  pthread_mutex_lock(&lock);
  if (reopen_requested && fd >= 0) {
    close(fd);
    fd = -1;
  }
  reopen_requested = 0;
  if (fd < 0)
    fd = log_open(path);
  int r;
  if (fd >= 0 && (r = log_entry_write(fd, o)) < 0)
    fprintf(stderr, "audit: cannot write %s: %s\n", path, strerror(-r));
  pthread_mutex_unlock(&lock);
}
