/* Tool results: structuredContent, the text blocks, limit notes and the
 * files a call left in /work/output. */
#include "config.h"

#include "fcgi/tools.h"

#include <stdarg.h>
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

/* A sentence after those already in b. */
__attribute__((format(printf, 2, 3))) static void note(struct buf *b, const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (b->len > 0)
    buf_append(b, " ", 1);
  buf_append(b, line, strlen(line));
}

/* One sentence per limit the call hit, for the reader of the text content. */
static void limit_notes(const struct mcp_config *cfg, const struct call_result *res, struct buf *b) {
  if (res->timed_out)
    note(b, "The call was stopped at its wall-clock limit of %d s.", res->timeout_s);
  if (res->memory_exceeded || res->memory_error)
    note(b, "The code ran out of memory (limit %llu MiB per call).", (unsigned long long)(cfg->memory_limit >> 20));
  if (res->cpu_exceeded)
    note(b, "The code used up its CPU time limit of %d s.", cfg->cpu_limit);
  if (res->processes_exceeded)
    note(b, "The call was stopped: its processes (a fork bomb?) made the sandbox hold too many host tasks. The "
            "sandbox restarts for the next call; files in /work are kept.");
  if (res->install_error)
    note(b, "The packages could not be installed (see stderr); the code did not run.");
  if (res->input_error)
    note(b, "The input files could not be written (see stderr); the code did not run.");
  if (res->workspace_full)
    note(b, "The workspace /work is full (quota %llu MiB per session); delete files to make room.",
         (unsigned long long)(cfg->workspace_quota >> 20));
  if (res->sandbox_lost && !res->processes_exceeded) /* that note says it */
    note(b, "The sandbox was stopped and restarts for the next call; files in /work are kept.");
  if (res->egress_limited)
    note(b, "The call hit its egress limit (%s); further connections were refused.",
         res->egress_limit[0] ? res->egress_limit : "egress");
  if (res->truncated)
    note(b, "Output beyond %llu bytes per stream was dropped.", (unsigned long long)cfg->output_limit);
  if (res->state_lost && res->persistent)
    note(b, "The persistent interpreter was ended and its state (variables, imports) is lost; the next persistent "
            "call starts a new one.");
  else if (res->state_lost)
    note(b, "The sandbox had hibernated and could not be restored: it started anew with the files in /work, but what "
            "was in memory before (imported modules, processes) is gone.");
}

const char *refused_sentence(const char *why) {
  if (strcmp(why, "interpreter-busy") == 0)
    return "The persistent interpreter of this sandbox is busy with a background run; wait for it to end (get_run), "
           "cancel it (cancel_run), or run this call without `persistent`.";
  return "The sandbox could not start the call; try again.";
}

cJSON *run_started_result(const struct mcp_config *cfg, const struct call_result *res) {
  cJSON *sc = cJSON_CreateObject();
  cJSON_AddStringToObject(sc, "stdout", "");
  cJSON_AddStringToObject(sc, "stderr", "");
  cJSON_AddNumberToObject(sc, "exit_code", 0);
  cJSON_AddBoolToObject(sc, "timed_out", 0);
  cJSON_AddNumberToObject(sc, "duration_ms", (double)res->duration_ms);
  static const char *const flags[] = {"truncated",      "memory_exceeded",   "cpu_exceeded",  "processes_exceeded",
                                      "workspace_full", "sandbox_restarted", "egress_limited"};
  for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
    cJSON_AddBoolToObject(sc, flags[i], 0);
  cJSON_AddStringToObject(sc, "run", res->run);
  cJSON_AddStringToObject(sc, "status", "running");
  cJSON *r = cJSON_CreateObject();
  cJSON *content = cJSON_AddArrayToObject(r, "content");
  cleanup_free char *text = cJSON_PrintUnformatted(sc);
  add_text(content, text ? text : "{}");
  char line[400];
  snprintf(line, sizeof(line),
           "Started background run %s (wall-clock limit %d s). Poll it with get_run (its output from the offsets you "
           "pass, its result once it ended); stop it with cancel_run.",
           res->run, res->timeout_s);
  add_text(content, line);
  cJSON_AddItemToObject(r, "structuredContent", sc);
  cJSON_AddBoolToObject(r, "isError", 0);
  (void)cfg;
  return r;
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
  cleanup_free char *value = res->value != NULL ? utf8_sanitize(res->value, strlen(res->value)) : NULL;
  if (res->persistent && value != NULL)
    cJSON_AddStringToObject(sc, "value", value);
  cJSON *r = cJSON_CreateObject();
  cJSON *content = cJSON_AddArrayToObject(r, "content");
  cleanup_free char *text = cJSON_PrintUnformatted(sc);
  add_text(content, text ? text : "{}");
  cleanup_buf struct buf notes = {0};
  limit_notes(cfg, res, &notes);
  if (notes.len > 0)
    add_text(content, notes.data);
  if (res->persistent && value != NULL) {
    /* The cell's value, as a notebook shows it. */
    cleanup_buf struct buf shown = {0};
    buf_append(&shown, "Out: ", 5);
    buf_append(&shown, value, strlen(value));
    buf_append(&shown, "", 1);
    add_text(content, shown.data);
  }
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
