/* Files in and out of a call (see files.c). */
#ifndef MCP_FILES_H
#define MCP_FILES_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "common/settings.h"
#include "fcgi/outputs.h"

/* Check the `files` argument: 0, or MCP_ERR_INVALID with a sentence. */
int files_validate(const struct mcp_config *cfg, const cJSON *files, mcp_error_t *err);
/* Content blocks and structuredContent.files / skipped_files. */
void files_add_outputs(cJSON *result, cJSON *structured, const struct out_list *out);
/* o[key] = path (or a text naming paths), bytes that are not UTF-8 as U+FFFD:
 * sandboxed code names its files with any bytes, a JSON string is UTF-8. */
void files_add_path(cJSON *o, const char *key, const char *path);
/* file:///work/<dir>/<path>, percent-encoded. */
char *files_uri(const char *dir, const char *path);

#endif
