/* Files in and out of a call: validation of the `files` argument, and the
 * content blocks for what the code left in /work/output. */
#include "config.h"

#include "fcgi/files.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "fcgi/json_scan.h"

#define MAX_PATH_BYTES 1024
#define MAX_COMPONENT 255

#define STR_(x) #x
#define STR(x) STR_(x)

/* Relative, '/'-separated, no empty, "." or ".." component, no control
 * characters (the executor also refuses to write through symlinks): NULL,
 * or what is wrong. */
static const char *path_problem(const char *p) {
  size_t n = strlen(p);
  if (n == 0 || n > MAX_PATH_BYTES)
    return "must be 1 to " STR(MAX_PATH_BYTES) " bytes";
  if (p[0] == '/')
    return "must be relative to /work";
  for (const unsigned char *c = (const unsigned char *)p; *c; c++)
    if (*c < 0x20 || *c == 0x7f)
      return "must not contain control characters";
  const char *seg = p;
  for (;;) {
    const char *slash = strchr(seg, '/');
    size_t len = slash ? (size_t)(slash - seg) : strlen(seg);
    if (len == 0 || (len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
      return "must not contain empty, . or .. components";
    if (len > MAX_COMPONENT)
      return "has a component longer than " STR(MAX_COMPONENT) " bytes";
    if (slash == NULL)
      return NULL;
    seg = slash + 1;
  }
}

/* The decoded size of one entry: -1 when the entry is not valid. */
static int64_t entry_size(const cJSON *f, int i, mcp_error_t *err) {
  const cJSON *path = cJSON_GetObjectItemCaseSensitive(f, "path");
  const cJSON *text = cJSON_GetObjectItemCaseSensitive(f, "text");
  const cJSON *b64 = cJSON_GetObjectItemCaseSensitive(f, "base64");
  if (!cJSON_IsObject(f) || !cJSON_IsString(path) || cJSON_GetArraySize(f) != 2 ||
      (cJSON_IsString(text) == cJSON_IsString(b64)))
    return mcp_fail_public(err, MCP_ERR_INVALID,
                           "files[%d] must be {\"path\": string, \"text\": string} or {\"path\": string, "
                           "\"base64\": string}",
                           i);
  const char *why = path_problem(path->valuestring);
  if (why != NULL)
    return mcp_fail_public(err, MCP_ERR_INVALID, "files[%d].path `%.80s` %s", i, path->valuestring, why);
  if (!cJSON_IsString(b64))
    return (int64_t)strlen(text->valuestring);
  size_t len = strlen(b64->valuestring);
  cleanup_free unsigned char *tmp = malloc(base64_decoded_max(len) + 1);
  ssize_t n = tmp ? base64_decode(b64->valuestring, len, tmp, base64_decoded_max(len)) : -1;
  if (n < 0)
    return mcp_fail_public(err, MCP_ERR_INVALID, "files[%d].base64 is not valid base64", i);
  return n;
}

int files_validate(const struct mcp_config *cfg, const cJSON *files, mcp_error_t *err) {
  if (!cJSON_IsArray(files))
    return mcp_fail_public(err, MCP_ERR_INVALID, "files must be an array of {path, text} or {path, base64} objects");
  int count = 0;
  uint64_t total = 0;
  const cJSON *f;
  cJSON_ArrayForEach(f, files) {
    if (++count > cfg->input_files_max)
      return mcp_fail_public(err, MCP_ERR_INVALID, "files: at most %d files per call", cfg->input_files_max);
    int64_t n = entry_size(f, count - 1, err);
    if (n < 0)
      return -1;
    total += (uint64_t)n;
  }
  if (total > cfg->max_body)
    return mcp_fail_public(err, MCP_ERR_INVALID, "files: more than %llu bytes in all",
                           (unsigned long long)cfg->max_body);
  return 0;
}

/* "<base>output/<path>" with each byte outside the unreserved set and '/'
 * percent-encoded. */
char *files_uri(const char *base, const char *dir, const char *path) {
  struct buf b = {0};
  static const char hex[] = "0123456789ABCDEF";
  const char *prefix = base != NULL ? base : FILES_URI_BASE;
  buf_append(&b, prefix, strlen(prefix));
  if (dir != NULL) {
    buf_append(&b, dir, strlen(dir));
    buf_append(&b, "/", 1);
  }
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
      buf_append(&b, p, 1);
    } else {
      char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
      buf_append(&b, e, 3);
    }
  }
  return b.data;
}

void files_add_path(cJSON *o, const char *key, const char *path) {
  cleanup_free char *name = utf8_sanitize(path, strlen(path));
  cJSON_AddStringToObject(o, key, name ? name : "");
}

static void add_file_block(cJSON *content, const struct out_file *f, const char *base) {
  cleanup_free char *uri = files_uri(base, OUTPUTS_DIR, f->path);
  cJSON *blk = cJSON_CreateObject();
  if (!f->inlined) {
    cJSON_AddStringToObject(blk, "type", "resource_link");
    cJSON_AddStringToObject(blk, "uri", uri ? uri : "");
    files_add_path(blk, "name", f->path);
    cJSON_AddStringToObject(blk, "mimeType", f->mime);
    cJSON_AddNumberToObject(blk, "size", (double)f->size);
    if (f->reason != NULL)
      cJSON_AddStringToObject(blk, "description", f->reason);
  } else if (mime_is_image(f->mime)) {
    cleanup_free char *data = base64_encode(f->data, f->len);
    cJSON_AddStringToObject(blk, "type", "image");
    cJSON_AddStringToObject(blk, "data", data ? data : "");
    cJSON_AddStringToObject(blk, "mimeType", f->mime);
  } else {
    cJSON_AddStringToObject(blk, "type", "resource");
    cJSON *r = cJSON_AddObjectToObject(blk, "resource");
    cJSON_AddStringToObject(r, "uri", uri ? uri : "");
    cJSON_AddStringToObject(r, "mimeType", f->mime);
    if (mime_is_text(f->mime)) {
      /* Text by its first bytes; the rest may still hold invalid UTF-8. */
      cleanup_free char *text = utf8_sanitize((const char *)f->data, f->len);
      cJSON_AddStringToObject(r, "text", text ? text : "");
    } else {
      cleanup_free char *data = base64_encode(f->data, f->len);
      cJSON_AddStringToObject(r, "blob", data ? data : "");
    }
  }
  cJSON_AddItemToArray(content, blk);
}

void files_add_outputs(cJSON *result, cJSON *structured, const struct out_list *out, const char *base) {
  cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
  cJSON *list = cJSON_AddArrayToObject(structured, "files");
  cJSON *skipped = cJSON_AddArrayToObject(structured, "skipped_files");
  cleanup_buf struct buf summary = {0};
  for (size_t i = 0; i < out->n; i++) {
    const struct out_file *f = &out->files[i];
    cJSON *o = cJSON_CreateObject();
    files_add_path(o, "name", f->path);
    cJSON_AddNumberToObject(o, "size", (double)f->size);
    cJSON_AddStringToObject(o, "mime_type", f->mime);
    cJSON_AddBoolToObject(o, "inlined", f->inlined);
    if (f->reason != NULL)
      cJSON_AddStringToObject(o, "reason", f->reason);
    cJSON_AddItemToArray(list, o);
    char line[600];
    snprintf(line, sizeof(line), "%soutput/%.400s (%s, %llu bytes%s%s)", summary.len ? "; " : "", f->path, f->mime,
             (unsigned long long)f->size, f->inlined ? "" : ", not included: ", f->inlined ? "" : f->reason);
    buf_append(&summary, line, strlen(line));
  }
  for (size_t i = 0; i < out->n_skipped; i++) {
    cJSON *o = cJSON_CreateObject();
    files_add_path(o, "name", out->skipped[i].path);
    cJSON_AddStringToObject(o, "reason", out->skipped[i].reason);
    cJSON_AddItemToArray(skipped, o);
    char line[600];
    snprintf(line, sizeof(line), "%soutput/%.400s skipped: %s", summary.len ? "; " : "", out->skipped[i].path,
             out->skipped[i].reason);
    buf_append(&summary, line, strlen(line));
  }
  if (out->more) {
    const char *more = "more files changed in output/ than are listed here (resources/list lists them all)";
    buf_append(&summary, summary.len ? "; " : "", summary.len ? 2 : 0);
    buf_append(&summary, more, strlen(more));
  }
  if (summary.len == 0)
    return;
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "type", "text");
  char head[] = "Files: ";
  cleanup_buf struct buf text = {0};
  buf_append(&text, head, strlen(head));
  buf_append(&text, summary.data, summary.len);
  files_add_path(t, "text", text.data);
  cJSON_AddItemToArray(content, t);
  for (size_t i = 0; i < out->n; i++)
    add_file_block(content, &out->files[i], base);
}
