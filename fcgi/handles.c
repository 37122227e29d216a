/* Sandboxes as explicit handles (see handles.h). */
#include "config.h"

#include "fcgi/handles.h"

#include <stdio.h>
#include <string.h>

#include "common/metrics.h"
#include "common/util.h"
#include "fcgi/tools.h"

#define HANDLE_SHOWN 80 /* bytes of a client's handle quoted back */

void handles_lifetime(const struct mcp_config *cfg, char *buf, size_t size) {
  snprintf(buf, size, "A sandbox ends after %d minutes without a call, or with close_sandbox.",
           (cfg->idle_timeout + 59) / 60);
}

static void unknown_result(struct rpc_call *c, const char *handle) {
  char lifetime[120], sentence[400];
  handles_lifetime(c->ctx->cfg, lifetime, sizeof(lifetime));
  snprintf(sentence, sizeof(sentence),
           "Unknown sandbox `%.*s`: it does not exist, has ended or expired, or belongs to another token (%s) Omit "
           "`sandbox` to start a new one.",
           HANDLE_SHOWN, handle, lifetime);
  c->result = tool_error_result(sentence);
}

static int open_handle(struct rpc_call *c, const char *handle, struct session *s) {
  mcp_error_t err = NULL;
  if (session_open(c->ctx->store, handle, c->http->token_id, s, &err) == 0) {
    if (session_touch(c->ctx->store, s, &err) < 0)
      mcp_error_log_release(&err, "session touch");
    return 0;
  }
  if (err->kind == MCP_ERR_NOT_FOUND) {
    mcp_error_release(&err);
    unknown_result(c, handle);
  } else {
    mcp_error_log_release(&err, "sandbox");
    c->result = tool_error_result("The sandbox could not be opened (internal error); try again.");
  }
  return -1;
}

static int new_handle(struct rpc_call *c, struct session *s) {
  mcp_error_t err = NULL;
  if (session_create(c->ctx->store, c->http->token_id, s, &err) == 0) {
    METRIC_INC(sessions_created);
    return 0;
  }
  if (err->kind == MCP_ERR_CAPACITY) {
    c->result = tool_error_result("No new sandbox can be made now: the server, or this token, is at its limit of "
                                  "live sandboxes. End one with close_sandbox, or try again later.");
    mcp_error_release(&err);
  } else {
    mcp_error_log_release(&err, "new sandbox");
    c->result = tool_error_result("A new sandbox could not be made (internal error); try again.");
  }
  return -1;
}

int handles_bind(struct rpc_call *c, const char *handle, struct session *s) {
  *s = (struct session){.dirfd = -1, .lock_fd = -1};
  if ((handle != NULL ? open_handle(c, handle, s) : new_handle(c, s)) < 0)
    return -1;
  c->session = s;
  return 0;
}

void handles_release(struct rpc_call *c) {
  if (c->session == NULL)
    return;
  mcp_error_t err = NULL;
  if (session_touch(c->ctx->store, c->session, &err) < 0)
    mcp_error_log_release(&err, "session touch");
  session_close(c->session);
  c->session = NULL;
}

int handles_check_own(struct rpc_call *c, const char *handle) {
  if (handle == NULL || strcmp(handle, c->session->id) == 0)
    return 0;
  char sentence[400];
  snprintf(sentence, sizeof(sentence),
           "Invalid arguments: sandbox `%.*s` is not this MCP session's sandbox; over a session, omit `sandbox` or "
           "pass %s.",
           HANDLE_SHOWN, handle, c->session->id);
  c->result = tool_error_result(sentence);
  return -1;
}

/* The first text block mirrors structuredContent. */
static void mirror_text(cJSON *result, const cJSON *sc) {
  cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(result, "content"), 0);
  cleanup_free char *text = cJSON_PrintUnformatted(sc);
  if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(first, "text")) && text != NULL)
    cJSON_ReplaceItemInObject(first, "text", cJSON_CreateString(text));
}

void handles_note(struct rpc_call *c) {
  if (!c->modern || c->session == NULL || !cJSON_IsObject(c->result))
    return;
  cJSON *sc = cJSON_GetObjectItemCaseSensitive(c->result, "structuredContent");
  if (cJSON_IsObject(sc) && !cJSON_HasObjectItem(sc, "sandbox")) {
    cJSON_AddStringToObject(sc, "sandbox", c->session->id);
    mirror_text(c->result, sc);
  }
  char lifetime[120], sentence[400];
  handles_lifetime(c->ctx->cfg, lifetime, sizeof(lifetime));
  snprintf(sentence, sizeof(sentence),
           "Sandbox: %s. Pass it as `sandbox` to run later calls in the same /work (files and installed packages "
           "stay). %s",
           c->session->id, lifetime);
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "type", "text");
  cJSON_AddStringToObject(t, "text", sentence);
  cJSON *content = cJSON_GetObjectItemCaseSensitive(c->result, "content");
  if (cJSON_IsArray(content))
    cJSON_AddItemToArray(content, t);
  else
    cJSON_Delete(t);
}

/* arguments: {sandbox: string}, nothing else. */
static const char *close_argument(const cJSON *args) {
  const cJSON *sb = cJSON_GetObjectItemCaseSensitive(args, "sandbox");
  if (!cJSON_IsObject(args) || !cJSON_IsString(sb) || cJSON_GetArraySize(args) != 1)
    return NULL;
  return sb->valuestring;
}

static cJSON *closed_result(const char *handle) {
  char text[200];
  snprintf(text, sizeof(text), "Sandbox %s is closed: its processes are stopped and its files are gone.", handle);
  cJSON *r = cJSON_CreateObject();
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "type", "text");
  cJSON_AddStringToObject(t, "text", text);
  cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "content"), t);
  cJSON_AddBoolToObject(r, "isError", 0);
  cJSON *sc = cJSON_AddObjectToObject(r, "structuredContent");
  cJSON_AddStringToObject(sc, "sandbox", handle);
  cJSON_AddBoolToObject(sc, "closed", 1);
  return r;
}

int handles_close(struct rpc_call *c, const cJSON *args) {
  const char *handle = close_argument(args);
  if (handle == NULL) {
    c->result = tool_error_result("Invalid arguments: close_sandbox takes one argument, `sandbox` (a string: the "
                                  "handle an execute call returned).");
    return 0;
  }
  struct session s;
  if (handles_bind(c, handle, &s) < 0)
    return 0;
  char id[SESSION_ID_MAX];
  snprintf(id, sizeof(id), "%s", s.id);
  session_close(&s);
  c->session = NULL;
  mcp_error_t err = NULL;
  METRIC_INC(sessions_ended);
  if (session_destroy(c->ctx->store, id, &err) < 0) {
    bool missing = err->kind == MCP_ERR_NOT_FOUND;
    if (!missing && err->kind != MCP_ERR_BUSY)
      mcp_error_log_release(&err, "close_sandbox");
    mcp_error_release(&err);
    if (missing) {
      unknown_result(c, handle);
      return 0;
    }
  }
  c->result = closed_result(id);
  return 0;
}
