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
#include "fcgi/session.h"
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
  int r = supervisor_wait_ready(fd, now_ms() + (int64_t)c->ctx->cfg->ready_wait * 1000, &err);
  if (r < 0)
    mcp_error_log_release(&err, "resources");
  if (r < 0 || !workspace_mounted(dirfd))
    return rpc_fail(c, RPC_INTERNAL_ERROR, "The session's workspace is not available right now; try again.");
  return 0;
}

/* Listings are paged: at most PAGE_MAX resources and about PAGE_BYTES of
 * JSON per answer, whatever the workspace holds. */
#define PAGE_MAX 100
#define PAGE_BYTES (256 << 10)

/* Reading the workspace is serialized with the session's calls, as calls
 * are with each other. */
static int lock_session(struct rpc_call *c) {
  mcp_error_t err = NULL;
  if (session_lock(c->session, (int64_t)c->ctx->cfg->busy_wait * 1000, &err) == 0)
    return 0;
  rpc_fail(c, RPC_INTERNAL_ERROR, "%s", mcp_error_public(err));
  if (err->kind != MCP_ERR_BUSY)
    mcp_error_log_release(&err, "resources");
  mcp_error_release(&err);
  return -1;
}

/* The cursor is the hex of the last path of the previous page: a page
 * starts after it, so files added or removed between pages do not shift
 * the others. */
static char *cursor_encode(const char *path) {
  static const char hexd[] = "0123456789abcdef";
  size_t n = strlen(path);
  char *out = malloc(2 * n + 1);
  if (out == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hexd[(unsigned char)path[i] >> 4];
    out[2 * i + 1] = hexd[(unsigned char)path[i] & 15];
  }
  out[2 * n] = '\0';
  return out;
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

/* 0 with *after set (NULL: from the start), -1 when the cursor is not one of ours. */
static int cursor_decode(const cJSON *params, char **after) {
  *after = NULL;
  const cJSON *cur = cJSON_GetObjectItemCaseSensitive(params, "cursor");
  if (cur == NULL || cJSON_IsNull(cur))
    return 0;
  if (!cJSON_IsString(cur))
    return -1;
  size_t n = strlen(cur->valuestring);
  if (n == 0 || n % 2 != 0 || n > 2 * OUT_PATH_MAX)
    return -1;
  char *out = malloc(n / 2 + 1);
  if (out == NULL)
    return -1;
  for (size_t i = 0; i < n / 2; i++) {
    int hi = hexval(cur->valuestring[2 * i]), lo = hexval(cur->valuestring[2 * i + 1]);
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
      free(out);
      return -1;
    }
    out[i] = (char)(hi * 16 + lo);
  }
  out[n / 2] = '\0';
  *after = out;
  return 0;
}

static cJSON *resource_entry(int dirfd, const struct out_file *e) {
  cleanup_free char *uri = files_uri(NULL, OUTPUTS_DIR, e->path);
  char rel[OUT_PATH_MAX + 16];
  snprintf(rel, sizeof(rel), "%s/%s", OUTPUTS_DIR, e->path);
  struct out_file peek;
  mcp_error_t err = NULL;
  const char *mime = "application/octet-stream";
  if (workspace_peek(dirfd, rel, &peek, &err) == 0)
    mime = peek.mime;
  mcp_error_release(&err);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "uri", uri ? uri : "");
  files_add_path(o, "name", e->path);
  cJSON_AddStringToObject(o, "mimeType", mime);
  cJSON_AddNumberToObject(o, "size", (double)e->size);
  out_file_free(&peek);
  return o;
}

int resources_list(struct rpc_call *c) {
  cleanup_free char *after = NULL;
  if (cursor_decode(c->params, &after) < 0)
    return rpc_fail(c, RPC_INVALID_PARAMS, "Invalid params: the cursor is not one this server gave");
  if (lock_session(c) < 0 || ensure_mounted(c) < 0)
    return -1;
  struct out_list out;
  mcp_error_t err = NULL;
  if (outputs_index(c->session->dirfd, &out, &err) < 0) {
    mcp_error_log_release(&err, "resources/list");
    return rpc_fail(c, RPC_INTERNAL_ERROR, "Internal error");
  }
  cJSON *r = cJSON_CreateObject();
  cJSON *list = cJSON_AddArrayToObject(r, "resources");
  size_t i = 0, bytes = 0;
  while (i < out.n && after != NULL && strcmp(out.files[i].path, after) <= 0)
    i++;
  int taken = 0;
  for (; i < out.n && taken < PAGE_MAX && bytes < PAGE_BYTES; i++, taken++) {
    cJSON *o = resource_entry(c->session->dirfd, &out.files[i]);
    /* uri and name: each at most three bytes per path byte */
    bytes += 6 * strlen(out.files[i].path) + 128;
    cJSON_AddItemToArray(list, o);
  }
  if (i < out.n) {
    cleanup_free char *next = cursor_encode(out.files[i - 1].path);
    cJSON_AddStringToObject(r, "nextCursor", next ? next : "");
  }
  outputs_free(&out);
  c->result = r;
  return 0;
}

/* Percent-decode a path; NULL when malformed (a %00, a query, a fragment). */
static char *decode_path(const char *p) {
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

/* The workspace path of a file:///work/... URI; NULL when not one. */
static char *uri_path(const char *uri) {
  size_t n = strlen(URI_PREFIX);
  return strncmp(uri, URI_PREFIX, n) == 0 ? decode_path(uri + n) : NULL;
}

/* Resource not found: -32002 in 2025, -32602 with data.uri in 2026-07-28. */
static int not_found(struct rpc_call *c, const char *uri, const char *why) {
  if (!c->modern)
    return rpc_fail(c, MCP_RESOURCE_NOT_FOUND, "Resource not found: %s", why);
  c->error_data = cJSON_CreateObject();
  cJSON_AddStringToObject(c->error_data, "uri", uri);
  return rpc_fail(c, RPC_INVALID_PARAMS, "Resource not found: %s", why);
}

static cJSON *contents_result(const char *uri, const struct out_file *f) {
  cJSON *r = cJSON_CreateObject();
  cJSON *contents = cJSON_AddArrayToObject(r, "contents");
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "uri", uri);
  cJSON_AddStringToObject(o, "mimeType", f->mime);
  if (mime_is_text(f->mime)) {
    cleanup_free char *text = utf8_sanitize((const char *)f->data, f->len);
    cJSON_AddStringToObject(o, "text", text ? text : "");
  } else {
    cleanup_free char *blob = base64_encode(f->data, f->len);
    cJSON_AddStringToObject(o, "blob", blob ? blob : "");
  }
  cJSON_AddItemToArray(contents, o);
  return r;
}

/* Read path (below /work) of c->session as the resource uri. */
static int read_path(struct rpc_call *c, const char *path, const char *uri) {
  if (lock_session(c) < 0 || ensure_mounted(c) < 0)
    return -1;
  struct out_file f;
  mcp_error_t err = NULL;
  if (workspace_read(c->session->dirfd, path, c->ctx->cfg->output_file_max, &f, &err) < 0) {
    if (err->kind == MCP_ERR_NOT_FOUND)
      not_found(c, uri, mcp_error_public(err));
    else
      rpc_fail(c, RPC_INVALID_PARAMS, "Resource not readable: %s", mcp_error_public(err));
    mcp_error_release(&err);
    out_file_free(&f);
    return -1;
  }
  c->result = contents_result(uri, &f);
  out_file_free(&f);
  return 0;
}

int resources_read(struct rpc_call *c) {
  const cJSON *uri = cJSON_GetObjectItemCaseSensitive(c->params, "uri");
  if (!cJSON_IsString(uri))
    return rpc_fail(c, RPC_INVALID_PARAMS, "resources/read: params.uri must be a string");
  cleanup_free char *path = uri_path(uri->valuestring);
  if (path == NULL || *path == '\0')
    return rpc_fail(c, MCP_RESOURCE_NOT_FOUND, "Resource not found: URIs look like file:///work/output/<name>");
  return read_path(c, path, uri->valuestring);
}

int resources_templates_list(struct rpc_call *c) {
  c->result = cJSON_CreateObject();
  cJSON_AddArrayToObject(c->result, "resourceTemplates");
  return 0;
}

/* ---- 2026-07-28: sandbox://<handle>/<path below /work> ---- */

int resources_list_modern(struct rpc_call *c) {
  const cJSON *cur = cJSON_GetObjectItemCaseSensitive(c->params, "cursor");
  if (cur != NULL && !cJSON_IsNull(cur))
    return rpc_fail(c, RPC_INVALID_PARAMS, "Invalid params: the cursor is not one this server gave");
  c->result = cJSON_CreateObject();
  cJSON_AddArrayToObject(c->result, "resources");
  return 0;
}

int resources_templates_modern(struct rpc_call *c) {
  c->result = cJSON_CreateObject();
  cJSON *list = cJSON_AddArrayToObject(c->result, "resourceTemplates");
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "uriTemplate", SANDBOX_URI_SCHEME "{sandbox}/{path}");
  cJSON_AddStringToObject(t, "name", "sandbox-file");
  cJSON_AddStringToObject(t, "title", "A file in a sandbox");
  cJSON_AddStringToObject(t, "description",
                          "A file below /work in a sandbox that execute_python or execute_javascript made: "
                          "sandbox://<handle>/<path below /work>, e.g. sandbox://<handle>/output/plot.png");
  cJSON_AddItemToArray(list, t);
  return 0;
}

/* Split sandbox://<handle>/<path>; -1 when the URI is not one. */
static int sandbox_uri(const char *uri, char handle[SESSION_ID_MAX], char **path) {
  size_t n = strlen(SANDBOX_URI_SCHEME);
  if (strncmp(uri, SANDBOX_URI_SCHEME, n) != 0)
    return -1;
  const char *h = uri + n, *slash = strchr(h, '/');
  if (slash == NULL || slash == h || (size_t)(slash - h) >= SESSION_ID_MAX)
    return -1;
  snprintf(handle, SESSION_ID_MAX, "%.*s", (int)(slash - h), h);
  *path = decode_path(slash + 1);
  return *path != NULL && **path != '\0' ? 0 : -1;
}

int resources_read_modern(struct rpc_call *c) {
  const cJSON *uri = cJSON_GetObjectItemCaseSensitive(c->params, "uri");
  if (!cJSON_IsString(uri))
    return rpc_fail(c, RPC_INVALID_PARAMS, "resources/read: params.uri must be a string");
  char handle[SESSION_ID_MAX];
  cleanup_free char *path = NULL;
  if (sandbox_uri(uri->valuestring, handle, &path) < 0)
    return not_found(c, uri->valuestring, "URIs look like sandbox://<handle>/<path below /work>");
  struct session s;
  mcp_error_t err = NULL;
  if (session_open(c->ctx->store, handle, c->http->token_id, &s, &err) < 0) {
    mcp_error_release(&err);
    return not_found(c, uri->valuestring, "no such sandbox for this token (ended, expired or unknown)");
  }
  if (session_touch(c->ctx->store, &s, &err) < 0)
    mcp_error_log_release(&err, "session touch");
  c->session = &s;
  int r = read_path(c, path, uri->valuestring);
  session_close(&s);
  c->session = NULL;
  return r;
}
