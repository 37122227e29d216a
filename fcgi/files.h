/* Files in and out of a call (see files.c). */
#ifndef MCP_FILES_H
#define MCP_FILES_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "common/settings.h"
#include "fcgi/outputs.h"

/* Check the `files` argument: 0, or MCP_ERR_INVALID with a sentence. */
int files_validate(const struct mcp_config *cfg, const cJSON *files, mcp_error_t *err);
/* The URIs of workspace files: file:///work/<path> over a 2025 session,
 * sandbox://<handle>/<path> for a sandbox handle (2026-07-28). */
#define FILES_URI_BASE "file:///work/"
#define SANDBOX_URI_SCHEME "sandbox://"

/* Content blocks and structuredContent.files / skipped_files; the files'
 * URIs start with base (NULL: FILES_URI_BASE). */
void files_add_outputs(cJSON *result, cJSON *structured, const struct out_list *out, const char *base);
/* o[key] = path (or a text naming paths), bytes that are not UTF-8 as U+FFFD:
 * sandboxed code names its files with any bytes, a JSON string is UTF-8. */
void files_add_path(cJSON *o, const char *key, const char *path);
/* <base><dir>/<path>, percent-encoded (base NULL: FILES_URI_BASE). */
char *files_uri(const char *base, const char *dir, const char *path);

#endif
