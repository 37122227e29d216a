#include "config.h"

#include "fcgi/resources.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/frame.h"
#include "common/util.h"
#include "fcgi/files.h"
#include "fcgi/json_scan.h"
#include "fcgi/outputs.h"
#include "fcgi/tools.h"
#include "sandbox/workspace.h"

#define URI_PREFIX "file:///work/"
#define MCP_RESOURCE_NOT_FOUND (-32002)

/* A workspace image is mounted only while its supervisor runs: start it
 * (and wait for its sandbox) before reading. */
static int ensure_mounted(struct rpc_call *c) {
  int dirfd = c->session->dirfd;
  if (!workspace_has_image(dirfd) || workspace_mounted(dirfd))
    return 0;
  mcp_error_t err = NULL;
  cleanup_close int fd = supervisor_connect(c->ctx->cfg, dirfd, true, 10000, &err);
  if (fd < 0) {
    mcp_error_log_release(&err, "resources");
    return rpc_fail(c, RPC_INTERNAL_ERROR, "The session's workspace is not available right now; try again.");
  }
  int r = supervisor_wait_ready(fd, now_ms() + 30000, &err);
  if (r < 0)
    mcp_error_log_release(&err, "resources");
  if (r < 0 || !workspace_mounted(dirfd))
    return rpc_fail(c, RPC_INTERNAL_ERROR, "The session's workspace is not available right now; try again.");
  return 0;
}

int resources_list(struct rpc_call *c) {
  if (ensure_mounted(c) < 0)
    return -1;
  struct out_list out;
  struct out_limits lim = {0, 0, 0};
  mcp_error_t err = NULL;
  if (outputs_list(c->session->dirfd, &lim, &out, &err) < 0) {
    mcp_error_log_release(&err, "resources/list");
    return rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error");
  }
  cJSON *r = cJSON_CreateObject();
  cJSON *list = cJSON_AddArrayToObject(r, "resources");
  for (size_t i = 0; i < out.n; i++) {
    cleanup_free char *uri = files_uri(OUTPUTS_DIR, out.files[i].path);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "uri", uri ? uri : "");
    files_add_path(o, "name", out.files[i].path);
    cJSON_AddStringToObject(o, "mimeType", out.files[i].mime);
    cJSON_AddNumberToObject(o, "size", (double)out.files[i].size);
    cJSON_AddItemToArray(list, o);
  }
  outputs_free(&out);
  c->result = r;
  return 0;
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/* The workspace path of a file:///work/... URI; NULL when not one. */
static char *uri_path(const char *uri) {
  size_t n = strlen(URI_PREFIX);
  if (strncmp(uri, URI_PREFIX, n) != 0)
    return NULL;
  const char *p = uri + n;
  char *out = malloc(strlen(p) + 1), *o = out;
  if (out == NULL)
    return NULL;
  for (; *p; p++) {
    if (*p == '%') {
      int hi = hexval(p[1]), lo = hi >= 0 ? hexval(p[2]) : -1;
      if (lo < 0 || (hi == 0 && lo == 0)) {
        free(out);
        return NULL;
      }
      *o++ = (char)(hi * 16 + lo);
      p += 2;
    } else if (*p == '?' || *p == '#') {
      free(out);
      return NULL;
    } else {
      *o++ = *p;
    }
  }
  *o = '\0';
  return out;
}

int resources_read(struct rpc_call *c) {
  const cJSON *uri = cJSON_GetObjectItemCaseSensitive(c->params, "uri");
  if (!cJSON_IsString(uri))
    return rpc_fail(c, RPC_INVALID_PARAMS, "resources/read: params.uri must be a string");
  cleanup_free char *path = uri_path(uri->valuestring);
  if (path == NULL || *path == '\0')
    return rpc_fail(c, MCP_RESOURCE_NOT_FOUND, "Resource not found: URIs look like file:///work/output/<name>");
  if (ensure_mounted(c) < 0)
    return -1;
  struct out_file f;
  mcp_error_t err = NULL;
  if (workspace_read(c->session->dirfd, path, c->ctx->cfg->output_file_max, &f, &err) < 0) {
    rpc_fail(c, err->kind == MCP_ERR_NOT_FOUND ? MCP_RESOURCE_NOT_FOUND : RPC_INVALID_PARAMS, "Resource %s: %s",
             err->kind == MCP_ERR_NOT_FOUND ? "not found" : "not readable", mcp_error_public(err));
    mcp_error_release(&err);
    out_file_free(&f);
    return -1;
  }
  cJSON *r = cJSON_CreateObject();
  cJSON *contents = cJSON_AddArrayToObject(r, "contents");
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "uri", uri->valuestring);
  cJSON_AddStringToObject(o, "mimeType", f.mime);
  if (mime_is_text(f.mime)) {
    cleanup_free char *text = utf8_sanitize((const char *)f.data, f.len);
    cJSON_AddStringToObject(o, "text", text ? text : "");
  } else {
    cleanup_free char *blob = base64_encode(f.data, f.len);
    cJSON_AddStringToObject(o, "blob", blob ? blob : "");
  }
  cJSON_AddItemToArray(contents, o);
  out_file_free(&f);
  c->result = r;
  return 0;
}

int resources_templates_list(struct rpc_call *c) {
  c->result = cJSON_CreateObject();
  cJSON_AddArrayToObject(c->result, "resourceTemplates");
  return 0;
}
