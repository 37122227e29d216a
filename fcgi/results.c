/* Tool results: structuredContent, the text blocks, limit notes and the
 * files a call left in /work/output. */
#include "config.h"

#include "fcgi/tools.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "fcgi/files.h"
#include "fcgi/json_scan.h"

/* ---- results ---- */

static void add_text(cJSON *content, const char *text) {
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "type", "text");
  cJSON_AddStringToObject(t, "text", text);
  cJSON_AddItemToArray(content, t);
}

cJSON *tool_error_result(const char *sentence) {
  /* Sentences quote arguments cut at a byte count ("%.64s"), which may
   * split a UTF-8 sequence: the text must stay valid UTF-8. */
  cleanup_free char *text = utf8_sanitize(sentence, strlen(sentence));
  cJSON *r = cJSON_CreateObject();
  add_text(cJSON_AddArrayToObject(r, "content"), text ? text : "The call failed.");
  cJSON_AddBoolToObject(r, "isError", 1);
  return r;
}

/* One sentence per limit the call hit, for the reader of the text content. */
static void limit_notes(const struct mcp_config *cfg, const struct call_result *res, struct buf *b) {
  char line[256];
  if (res->timed_out) {
    snprintf(line, sizeof(line), "The call was stopped at its wall-clock limit of %d s.", res->timeout_s);
    buf_append(b, line, strlen(line));
  }
  if (res->memory_exceeded || res->memory_error) {
    snprintf(line, sizeof(line), "%sThe code ran out of memory (limit %llu MiB per call).", b->len ? " " : "",
             (unsigned long long)(cfg->memory_limit >> 20));
    buf_append(b, line, strlen(line));
  }
  if (res->cpu_exceeded) {
    snprintf(line, sizeof(line), "%sThe code used up its CPU time limit of %d s.", b->len ? " " : "", cfg->cpu_limit);
    buf_append(b, line, strlen(line));
  }
  if (res->processes_exceeded) {
    snprintf(line, sizeof(line),
             "%sThe call was stopped: its processes (a fork bomb?) made the sandbox hold too many host tasks. The "
             "sandbox restarts for the next call; files in /work are kept.",
             b->len ? " " : "");
    buf_append(b, line, strlen(line));
  }
  if (res->install_error) {
    snprintf(line, sizeof(line), "%sThe packages could not be installed (see stderr); the code did not run.",
             b->len ? " " : "");
    buf_append(b, line, strlen(line));
  }
  if (res->input_error) {
    snprintf(line, sizeof(line), "%sThe input files could not be written (see stderr); the code did not run.",
             b->len ? " " : "");
    buf_append(b, line, strlen(line));
  }
  if (res->workspace_full) {
    snprintf(line, sizeof(line),
             "%sThe workspace /work is full (quota %llu MiB per session); delete files to make room.",
             b->len ? " " : "", (unsigned long long)(cfg->workspace_quota >> 20));
    buf_append(b, line, strlen(line));
  }
  if (res->sandbox_lost) {
    snprintf(line, sizeof(line), "%sThe sandbox was stopped and restarts for the next call; files in /work are kept.",
             b->len ? " " : "");
    buf_append(b, line, strlen(line));
  }
  if (res->state_lost) {
    snprintf(line, sizeof(line),
             "%sThe sandbox had hibernated and could not be restored: it started anew with the files in /work, "
             "but what was in memory before (imported modules, processes) is gone.",
             b->len ? " " : "");
    buf_append(b, line, strlen(line));
  }
  if (res->egress_limited) {
    snprintf(line, sizeof(line), "%sThe call hit its egress limit (%s); further connections were refused.",
             b->len ? " " : "", res->egress_limit[0] ? res->egress_limit : "egress");
    buf_append(b, line, strlen(line));
  }
  if (res->truncated) {
    snprintf(line, sizeof(line), "%sOutput beyond %llu bytes per stream was dropped.", b->len ? " " : "",
             (unsigned long long)cfg->output_limit);
    buf_append(b, line, strlen(line));
  }
}

cJSON *call_tool_result(const struct mcp_config *cfg, const struct call_result *res) {
  cleanup_free char *out = utf8_sanitize(res->out.data ? res->out.data : "", res->out.len);
  cleanup_free char *err = utf8_sanitize(res->err.data ? res->err.data : "", res->err.len);
  if (out == NULL || err == NULL)
    return NULL;
  cJSON *sc = cJSON_CreateObject();
  cJSON_AddStringToObject(sc, "stdout", out);
  cJSON_AddStringToObject(sc, "stderr", err);
  cJSON_AddNumberToObject(sc, "exit_code", res->exit_code);
  cJSON_AddBoolToObject(sc, "timed_out", res->timed_out);
  cJSON_AddNumberToObject(sc, "duration_ms", (double)res->duration_ms);
  cJSON_AddBoolToObject(sc, "truncated", res->truncated);
  cJSON_AddBoolToObject(sc, "memory_exceeded", res->memory_exceeded || res->memory_error);
  cJSON_AddBoolToObject(sc, "cpu_exceeded", res->cpu_exceeded);
  cJSON_AddBoolToObject(sc, "processes_exceeded", res->processes_exceeded);
  cJSON_AddBoolToObject(sc, "workspace_full", res->workspace_full);
  cJSON_AddBoolToObject(sc, "sandbox_restarted", res->sandbox_lost);
  cJSON_AddBoolToObject(sc, "state_lost", res->state_lost);
  cJSON_AddBoolToObject(sc, "egress_limited", res->egress_limited);
  cJSON *r = cJSON_CreateObject();
  cJSON *content = cJSON_AddArrayToObject(r, "content");
  cleanup_free char *text = cJSON_PrintUnformatted(sc);
  add_text(content, text ? text : "{}");
  cleanup_buf struct buf notes = {0};
  limit_notes(cfg, res, &notes);
  if (notes.len > 0)
    add_text(content, notes.data);
  cJSON_AddItemToObject(r, "structuredContent", sc);
  cJSON_AddBoolToObject(r, "isError",
                        res->exit_code != 0 || res->timed_out || res->cancelled || res->sandbox_lost ||
                            res->processes_exceeded);
  return r;
}

/* What the call left in /work/output, read while the session is still
 * locked and the sandbox idle (every process of the call has ended). */
uint64_t results_add_outputs(struct rpc_call *c) {
  const struct mcp_config *cfg = c->ctx->cfg;
  struct out_limits lim = {cfg->output_file_max, cfg->output_total_max, cfg->output_files_max};
  struct out_list out;
  mcp_error_t err = NULL;
  cJSON *sc = cJSON_GetObjectItemCaseSensitive(c->result, "structuredContent");
  if (outputs_collect(c->session->dirfd, &lim, &out, &err) < 0) {
    mcp_error_log_release(&err, "outputs");
    cJSON_AddArrayToObject(sc, "files");
    cJSON_AddArrayToObject(sc, "skipped_files");
    return 0;
  }
  char base[SESSION_ID_MAX + 16];
  snprintf(base, sizeof(base), SANDBOX_URI_SCHEME "%s/", c->session->id);
  files_add_outputs(c->result, sc, &out, c->modern ? base : NULL);
  uint64_t bytes = 0;
  for (size_t i = 0; i < out.n; i++)
    bytes += out.files[i].len;
  outputs_free(&out);
  /* The text block mirrors structuredContent, files included. */
  cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c->result, "content"), 0);
  cleanup_free char *text = cJSON_PrintUnformatted(sc);
  if (first != NULL && text != NULL)
    cJSON_ReplaceItemInObject(first, "text", cJSON_CreateString(text));
  return bytes;
}
