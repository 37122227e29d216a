/* The tools' names, descriptions and JSON schemas (tools/list). */
#include "config.h"

#include "fcgi/tools.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "fcgi/handles.h"

/* ---- schemas ---- */

static cJSON *prop(cJSON *props, const char *name, const char *type, const char *description) {
  cJSON *p = cJSON_AddObjectToObject(props, name);
  cJSON_AddStringToObject(p, "type", type);
  if (description != NULL)
    cJSON_AddStringToObject(p, "description", description);
  return p;
}

#define SANDBOX_DOC                                                                                                    \
  "The sandbox to run in: the handle an earlier call returned (structuredContent.sandbox). Omit it to start a new "    \
  "sandbox (over an MCP 2025 session: the session's own sandbox)."

/* The `sandbox` argument, mirrored in the Mcp-Param-Sandbox header by
 * 2026-07-28 clients so that a proxy can route on it. */
static void sandbox_prop(cJSON *props, const char *doc) {
  cJSON *p = prop(props, "sandbox", "string", doc);
  cJSON_AddStringToObject(p, "x-mcp-header", "Sandbox");
}

static cJSON *input_schema(const struct mcp_config *cfg, const struct lang *lang) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "type", "object");
  cJSON *props = cJSON_AddObjectToObject(s, "properties");
  prop(props, "code", "string", lang->code_doc);
  cJSON *pk = prop(props, "packages", "array", lang->packages_doc);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(pk, "items"), "type", "string");
  cJSON *env = prop(props, "env_variables", "object", "Environment variables for this call only.");
  cJSON_AddStringToObject(cJSON_AddObjectToObject(env, "additionalProperties"), "type", "string");
  cJSON *files =
      prop(props, "files", "array", "Files to write into the workspace before the code runs, paths relative to /work.");
  cJSON *fi = cJSON_AddObjectToObject(files, "items");
  cJSON_AddStringToObject(fi, "type", "object");
  cJSON *fp = cJSON_AddObjectToObject(fi, "properties");
  prop(fp, "path", "string", "Relative path, e.g. data/input.csv");
  prop(fp, "text", "string", "UTF-8 content");
  prop(fp, "base64", "string", "Binary content, base64-encoded");
  cJSON *freq = cJSON_AddArrayToObject(fi, "required");
  cJSON_AddItemToArray(freq, cJSON_CreateString("path"));
  cJSON *eg = prop(props, "egress_allow", "array",
                   "Narrows this call's network access to these hosts (host, *.suffix or IP, with an optional :port); "
                   "only hosts the server's policy for this token allows are reachable, [] means none.");
  cJSON_AddStringToObject(cJSON_AddObjectToObject(eg, "items"), "type", "string");
  cJSON *to = prop(props, "timeout_seconds", "integer", "Wall-clock limit of the call in seconds.");
  cJSON_AddNumberToObject(to, "minimum", 1);
  cJSON_AddNumberToObject(to, "maximum", cfg->timeout_max);
  cJSON_AddNumberToObject(to, "default", cfg->timeout_default);
  sandbox_prop(props, SANDBOX_DOC);
  prop(props, "persistent", "boolean",
       "Run the code in the sandbox's long-lived interpreter of this language, like a notebook cell: variables, "
       "imports and objects stay for the next persistent call, a last expression's value comes back as "
       "structuredContent.value, open matplotlib figures come back as images. It starts no new process, so many "
       "small steps in a row run much faster and with far less CPU than as fresh calls. Default false: a fresh "
       "process.");
  prop(props, "reset", "boolean", "End the sandbox's persistent interpreter of this language (and its state) first.");
  prop(props, "background", "boolean",
       "Return at once with a run id (structuredContent.run) while the code runs on, up to the background time "
       "limit; read its output and result with get_run, stop it with cancel_run.");
  cJSON *req = cJSON_AddArrayToObject(s, "required");
  cJSON_AddItemToArray(req, cJSON_CreateString("code"));
  cJSON_AddBoolToObject(s, "additionalProperties", 0);
  return s;
}

/* The fields of a finished call's result (execute_*, get_run). */
static void result_props(cJSON *props) {
  prop(props, "exit_code", "integer", "Exit status; 128+N when killed by signal N.");
  prop(props, "timed_out", "boolean", "The wall-clock limit ended the call.");
  prop(props, "duration_ms", "integer", "Wall-clock duration of the call.");
  prop(props, "truncated", "boolean", "Output beyond the limit was dropped.");
  prop(props, "memory_exceeded", "boolean", "The code ran out of its memory limit.");
  prop(props, "cpu_exceeded", "boolean", "The code used up its CPU time limit.");
  prop(props, "processes_exceeded", "boolean",
       "The call was stopped because its processes (a fork bomb) held too much of the sandbox's host resources.");
  prop(props, "workspace_full", "boolean", "The session's workspace quota is used up.");
  cJSON *fl = prop(props, "files", "array", "Files new or changed in /work/output by this call.");
  cJSON *fli = cJSON_AddObjectToObject(fl, "items");
  cJSON_AddStringToObject(fli, "type", "object");
  cJSON *flp = cJSON_AddObjectToObject(fli, "properties");
  prop(flp, "name", "string", "Path relative to output/");
  prop(flp, "size", "integer", NULL);
  prop(flp, "mime_type", "string", NULL);
  prop(flp, "inlined", "boolean", "The content is in this result");
  prop(flp, "reason", "string", "Why it is not inlined");
  cJSON *sk = prop(props, "skipped_files", "array", "Entries of output/ that are not regular files.");
  cJSON *ski = cJSON_AddObjectToObject(sk, "items");
  cJSON_AddStringToObject(ski, "type", "object");
  cJSON *skp = cJSON_AddObjectToObject(ski, "properties");
  prop(skp, "name", "string", NULL);
  prop(skp, "reason", "string", NULL);
  prop(props, "sandbox_restarted", "boolean",
       "The sandbox was stopped during the call and restarts for the next call; files in /work are kept.");
  prop(props, "egress_limited", "boolean",
       "A limit of the call's network access (bytes, connections at once, connection time) was hit.");
  prop(props, "sandbox", "string", "The handle of the sandbox the call ran in: pass it as `sandbox` to use it again.");
  prop(props, "value", "string", "persistent: the representation of the value of the code's last expression.");
  prop(props, "state_lost", "boolean",
       "What lived in memory is gone: the persistent interpreter was ended (killed after an interrupt, out of memory "
       "or CPU, the sandbox restarted; the next persistent call starts a new one), or the sandbox had hibernated and "
       "could not be restored (this call ran in a new sandbox with the same files in /work).");
}

static cJSON *output_schema(void) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "type", "object");
  cJSON *props = cJSON_AddObjectToObject(s, "properties");
  prop(props, "stdout", "string", "Standard output (at most the configured limit).");
  prop(props, "stderr", "string", "Standard error (at most the configured limit).");
  result_props(props);
  prop(props, "run", "string", "background: the run's id, for get_run and cancel_run.");
  prop(props, "status", "string", "background: `running`.");
  cJSON *req = cJSON_AddArrayToObject(s, "required");
  static const char *const required[] = {"stdout",         "stderr",           "exit_code",       "timed_out",
                                         "duration_ms",    "truncated",        "memory_exceeded", "cpu_exceeded",
                                         "workspace_full", "sandbox_restarted"};
  for (size_t i = 0; i < ARRAY_SIZE(required); i++)
    cJSON_AddItemToArray(req, cJSON_CreateString(required[i]));
  return s;
}

static cJSON *annotations(cJSON *t, const char *title, bool destructive) {
  cJSON *ann = cJSON_AddObjectToObject(t, "annotations");
  cJSON_AddStringToObject(ann, "title", title);
  cJSON_AddBoolToObject(ann, "readOnlyHint", 0);
  cJSON_AddBoolToObject(ann, "destructiveHint", destructive);
  cJSON_AddBoolToObject(ann, "idempotentHint", destructive);
  cJSON_AddBoolToObject(ann, "openWorldHint", 0);
  return ann;
}

static void add_description(const struct mcp_config *cfg, cJSON *t, const struct lang *lang, bool modern) {
  if (!modern) {
    cJSON_AddStringToObject(t, "description", lang->description);
    return;
  }
  char lifetime[120], text[1200];
  handles_lifetime(cfg, lifetime, sizeof(lifetime));
  snprintf(text, sizeof(text), "%s %s", lang->modern_description, lifetime);
  cJSON_AddStringToObject(t, "description", text);
}

static cJSON *tool(const struct mcp_config *cfg, const struct lang *lang, bool modern) {
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "name", lang->tool);
  cJSON_AddStringToObject(t, "title", lang->title);
  add_description(cfg, t, lang, modern);
  cJSON_AddItemToObject(t, "inputSchema", input_schema(cfg, lang));
  cJSON_AddItemToObject(t, "outputSchema", output_schema());
  annotations(t, lang->title, false);
  return t;
}

/* close_sandbox (2026-07-28: the replacement for DELETE). */
static cJSON *close_tool(const struct mcp_config *cfg) {
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "name", CLOSE_SANDBOX);
  cJSON_AddStringToObject(t, "title", "Close a sandbox");
  char lifetime[120], text[600];
  handles_lifetime(cfg, lifetime, sizeof(lifetime));
  snprintf(text, sizeof(text),
           "End a sandbox that execute_python or execute_javascript made: its processes stop and its files and "
           "installed packages are deleted; its handle is unknown from then on. %s",
           lifetime);
  cJSON_AddStringToObject(t, "description", text);
  cJSON *in = cJSON_AddObjectToObject(t, "inputSchema");
  cJSON_AddStringToObject(in, "type", "object");
  sandbox_prop(cJSON_AddObjectToObject(in, "properties"), "The handle of the sandbox to end.");
  cJSON_AddItemToArray(cJSON_AddArrayToObject(in, "required"), cJSON_CreateString("sandbox"));
  cJSON_AddBoolToObject(in, "additionalProperties", 0);
  cJSON *out = cJSON_AddObjectToObject(t, "outputSchema");
  cJSON_AddStringToObject(out, "type", "object");
  cJSON *props = cJSON_AddObjectToObject(out, "properties");
  prop(props, "sandbox", "string", "The handle of the sandbox that ended.");
  prop(props, "closed", "boolean", NULL);
  cJSON *req = cJSON_AddArrayToObject(out, "required");
  cJSON_AddItemToArray(req, cJSON_CreateString("sandbox"));
  cJSON_AddItemToArray(req, cJSON_CreateString("closed"));
  annotations(t, "Close a sandbox", true);
  return t;
}

/* get_run's and cancel_run's result: the run's status and output since
 * the offsets, and once it ended the fields of a finished call. */
static cJSON *run_output_schema(void) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "type", "object");
  cJSON *props = cJSON_AddObjectToObject(s, "properties");
  prop(props, "run", "string", "The run's id.");
  cJSON *st = prop(props, "status", "string", "running, finished, timed_out, cancelled or lost.");
  cJSON *states = cJSON_AddArrayToObject(st, "enum");
  static const char *const names[] = {"running", "finished", "timed_out", "cancelled", "lost"};
  for (size_t i = 0; i < ARRAY_SIZE(names); i++)
    cJSON_AddItemToArray(states, cJSON_CreateString(names[i]));
  prop(props, "stdout", "string", "stdout from stdout_offset on (at most the configured limit per call).");
  prop(props, "stderr", "string", "stderr from stderr_offset on.");
  prop(props, "stdout_offset", "integer", "Pass it as stdout_offset next time: where this output ends.");
  prop(props, "stderr_offset", "integer", "Pass it as stderr_offset next time.");
  prop(props, "output_truncated", "boolean", "The run wrote more than it may keep; the rest was dropped.");
  result_props(props);
  cJSON *req = cJSON_AddArrayToObject(s, "required");
  static const char *const required[] = {"run", "status", "stdout", "stderr", "stdout_offset", "stderr_offset"};
  for (size_t i = 0; i < ARRAY_SIZE(required); i++)
    cJSON_AddItemToArray(req, cJSON_CreateString(required[i]));
  return s;
}

static cJSON *int_prop(cJSON *props, const char *name, const char *doc, int max) {
  cJSON *p = prop(props, name, "integer", doc);
  cJSON_AddNumberToObject(p, "minimum", 0);
  if (max > 0)
    cJSON_AddNumberToObject(p, "maximum", max);
  return p;
}

static cJSON *run_tool(const struct mcp_config *cfg, bool get) {
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "name", get ? GET_RUN : CANCEL_RUN);
  cJSON_AddStringToObject(t, "title", get ? "Read a background run" : "Cancel a background run");
  cJSON_AddStringToObject(
      t, "description",
      get ? "Read a background run that execute_python or execute_javascript started with `background`: its status "
            "(running, finished, timed_out, cancelled, lost), its stdout and stderr from the offsets you pass (pass "
            "back the offsets it returns to read on), and once it ended its full result as a normal call returns "
            "it (exit code, limits hit, files in output/). wait_seconds waits for it to end first."
          : "Stop a background run: every process it started ends within a second; returns its status.");
  cJSON *in = cJSON_AddObjectToObject(t, "inputSchema");
  cJSON_AddStringToObject(in, "type", "object");
  cJSON *props = cJSON_AddObjectToObject(in, "properties");
  prop(props, "run", "string", "The run's id (structuredContent.run of the call that started it).");
  if (get) {
    int_prop(props, "wait_seconds", "Wait up to this long for the run to end before answering (default 0).",
             cfg->run_wait_max);
    int_prop(props, "stdout_offset", "Return stdout from this byte on (default 0).", 0);
    int_prop(props, "stderr_offset", "Return stderr from this byte on (default 0).", 0);
  }
  cJSON_AddItemToArray(cJSON_AddArrayToObject(in, "required"), cJSON_CreateString("run"));
  cJSON_AddBoolToObject(in, "additionalProperties", 0);
  cJSON_AddItemToObject(t, "outputSchema", run_output_schema());
  annotations(t, get ? "Read a background run" : "Cancel a background run", !get);
  if (get)
    cJSON_ReplaceItemInObject(cJSON_GetObjectItemCaseSensitive(t, "annotations"), "readOnlyHint", cJSON_CreateTrue());
  return t;
}

static cJSON *tools_array(const struct mcp_config *cfg, bool modern, unsigned avail) {
  cJSON *tools = cJSON_CreateArray();
  for (size_t i = 0; i < langs_count; i++)
    if (avail & (1u << i))
      cJSON_AddItemToArray(tools, tool(cfg, langs[i], modern));
  cJSON_AddItemToArray(tools, run_tool(cfg, true));
  cJSON_AddItemToArray(tools, run_tool(cfg, false));
  if (modern)
    cJSON_AddItemToArray(tools, close_tool(cfg));
  return tools;
}

/* The tools array is about 19 KB of JSON: building and freeing its tree
 * was most of a tools/list request's CPU.  It depends only on the era,
 * which languages this host can run and the settings the schemas above
 * read, so each responder prints it once and answers with the text (a raw
 * item): one text per era and set of languages (the slot), printed again
 * when the configuration or a setting it shows is not the one it was
 * printed for.  A schema that reads another setting must add it to
 * struct tools_key. */
struct tools_key {
  const struct mcp_config *cfg;
  int timeout_max, timeout_default, run_wait_max, idle_timeout;
};
struct tools_text {
  struct tools_key key;
  char *text;
};
static struct tools_text tools_texts[8]; /* by languages << 1 | modern */
static pthread_mutex_t tools_texts_lock = PTHREAD_MUTEX_INITIALIZER;

static bool same_key(const struct tools_key *a, const struct tools_key *b) {
  return a->cfg == b->cfg && a->timeout_max == b->timeout_max && a->timeout_default == b->timeout_default &&
         a->run_wait_max == b->run_wait_max && a->idle_timeout == b->idle_timeout;
}

cJSON *tools_list(const struct mcp_config *cfg, bool modern) {
  struct tools_key key = {.cfg = cfg,
                          .timeout_max = cfg->timeout_max,
                          .timeout_default = cfg->timeout_default,
                          .run_wait_max = cfg->run_wait_max,
                          .idle_timeout = cfg->idle_timeout};
  /* execute_javascript only where Node.js is installed (the sandbox sees
   * the host's /usr): looked at on every request, it may come and go. */
  unsigned avail = 0; /* bit i: langs[i] is available */
  for (size_t i = 0; i < langs_count; i++)
    if (langs[i]->available(cfg))
      avail |= 1u << i;
  size_t slot = (size_t)avail << 1 | (modern ? 1u : 0u);
  cJSON *r = cJSON_CreateObject();
  if (r == NULL)
    return NULL;
  cJSON *tools;
  if (slot >= ARRAY_SIZE(tools_texts)) { /* more languages than the table has room for: no text kept */
    tools = tools_array(cfg, modern, avail);
  } else {
    struct tools_text *t = &tools_texts[slot];
    pthread_mutex_lock(&tools_texts_lock);
    if (t->text == NULL || !same_key(&t->key, &key)) {
      cleanup_cjson cJSON *built = tools_array(cfg, modern, avail);
      free(t->text);
      t->text = built != NULL ? cJSON_PrintUnformatted(built) : NULL;
      t->key = key;
    }
    tools = t->text != NULL ? cJSON_CreateRaw(t->text) : NULL;
    pthread_mutex_unlock(&tools_texts_lock);
  }
  if (tools == NULL) {
    cJSON_Delete(r);
    return NULL;
  }
  cJSON_AddItemToObject(r, "tools", tools);
  return r;
}
