/* The tools' names, descriptions and JSON schemas (tools/list). */
#include "config.h"

#include "fcgi/tools.h"

#include <string.h>
#include <unistd.h>

#include "common/util.h"

/* ---- schemas ---- */

static cJSON *prop(cJSON *props, const char *name, const char *type, const char *description) {
  cJSON *p = cJSON_AddObjectToObject(props, name);
  cJSON_AddStringToObject(p, "type", type);
  if (description != NULL)
    cJSON_AddStringToObject(p, "description", description);
  return p;
}

struct tool_text {
  const char *name, *title, *description, *code, *packages;
};

static const struct tool_text texts[] = {
    [LANG_PYTHON] = {"execute_python", "Run Python",
                     "Run Python 3 code in this session's isolated sandbox (gVisor, no network). The working "
                     "directory /work persists between calls of the session: files and installed packages stay, "
                     "variables do not (each call is a fresh process). Returns stdout, stderr and the exit code; "
                     "isError is true when the code fails or times out. Files written to output/ come back.",
                     "Python 3 source code, run as __main__ in a fresh process. Print what you want to see; "
                     "write files to output/ to get them back.",
                     "Python packages (PEP 508 requirements such as requests or pandas>=2) to install into the "
                     "session before running; installed packages stay for the session's later calls."},
    [LANG_JAVASCRIPT] = {"execute_javascript", "Run JavaScript",
                         "Run JavaScript (Node.js) in this session's isolated sandbox, beside execute_python: the "
                         "same persistent /work, limits and results. The code is an ES module: import, require "
                         "and top-level await work; an unhandled rejection fails the call.",
                         "JavaScript source, run by Node.js as an ES module in a fresh process (require is "
                         "available too). console.log what you want to see; write files to output/ to get them "
                         "back.",
                         "npm packages (name or name@version, e.g. lodash@4) to install into the session's "
                         "/work/node_modules before running; install scripts never run."},
};

bool tools_javascript_available(const struct mcp_config *cfg) { return access(cfg->node, X_OK) == 0; }

static cJSON *input_schema(const struct mcp_config *cfg, enum tool_lang lang) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "type", "object");
  cJSON *props = cJSON_AddObjectToObject(s, "properties");
  prop(props, "code", "string", texts[lang].code);
  cJSON *pk = prop(props, "packages", "array", texts[lang].packages);
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
  cJSON *to = prop(props, "timeout_seconds", "integer", "Wall-clock limit of the call in seconds.");
  cJSON_AddNumberToObject(to, "minimum", 1);
  cJSON_AddNumberToObject(to, "maximum", cfg->timeout_max);
  cJSON_AddNumberToObject(to, "default", cfg->timeout_default);
  cJSON *req = cJSON_AddArrayToObject(s, "required");
  cJSON_AddItemToArray(req, cJSON_CreateString("code"));
  cJSON_AddBoolToObject(s, "additionalProperties", 0);
  return s;
}

static cJSON *output_schema(void) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "type", "object");
  cJSON *props = cJSON_AddObjectToObject(s, "properties");
  prop(props, "stdout", "string", "Standard output (at most the configured limit).");
  prop(props, "stderr", "string", "Standard error (at most the configured limit).");
  prop(props, "exit_code", "integer", "Exit status; 128+N when killed by signal N.");
  prop(props, "timed_out", "boolean", "The wall-clock limit ended the call.");
  prop(props, "duration_ms", "integer", "Wall-clock duration of the call.");
  prop(props, "truncated", "boolean", "Output beyond the limit was dropped.");
  prop(props, "memory_exceeded", "boolean", "The code ran out of its memory limit.");
  prop(props, "cpu_exceeded", "boolean", "The code used up its CPU time limit.");
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
  cJSON *req = cJSON_AddArrayToObject(s, "required");
  static const char *const required[] = {"stdout",         "stderr",           "exit_code",       "timed_out",
                                         "duration_ms",    "truncated",        "memory_exceeded", "cpu_exceeded",
                                         "workspace_full", "sandbox_restarted"};
  for (size_t i = 0; i < ARRAY_SIZE(required); i++)
    cJSON_AddItemToArray(req, cJSON_CreateString(required[i]));
  return s;
}

static cJSON *tool(const struct mcp_config *cfg, enum tool_lang lang) {
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "name", texts[lang].name);
  cJSON_AddStringToObject(t, "title", texts[lang].title);
  cJSON_AddStringToObject(t, "description", texts[lang].description);
  cJSON_AddItemToObject(t, "inputSchema", input_schema(cfg, lang));
  cJSON_AddItemToObject(t, "outputSchema", output_schema());
  cJSON *ann = cJSON_AddObjectToObject(t, "annotations");
  cJSON_AddStringToObject(ann, "title", texts[lang].title);
  cJSON_AddBoolToObject(ann, "readOnlyHint", 0);
  cJSON_AddBoolToObject(ann, "destructiveHint", 0);
  cJSON_AddBoolToObject(ann, "idempotentHint", 0);
  cJSON_AddBoolToObject(ann, "openWorldHint", 0);
  return t;
}

cJSON *tools_list(const struct mcp_config *cfg) {
  cJSON *r = cJSON_CreateObject();
  cJSON *tools = cJSON_AddArrayToObject(r, "tools");
  cJSON_AddItemToArray(tools, tool(cfg, LANG_PYTHON));
  /* Offered only where Node.js is installed (the sandbox sees the host's /usr). */
  if (tools_javascript_available(cfg))
    cJSON_AddItemToArray(tools, tool(cfg, LANG_JAVASCRIPT));
  return r;
}
