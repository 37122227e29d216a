/* The table of languages (see langs.h). */
#include "config.h"

#include "fcgi/langs.h"

#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "fcgi/npm.h"
#include "fcgi/packages.h"

static bool always(const struct mcp_config *cfg) { return cfg != NULL; }
static bool node_installed(const struct mcp_config *cfg) { return access(cfg->node, X_OK) == 0; }

static const struct lang python = {
    .name = "python",
    .tool = "execute_python",
    .title = "Run Python",
    .description = "Run Python 3 code in this session's isolated sandbox (gVisor, no network). The working "
                   "directory /work persists between calls of the session: files and installed packages stay. "
                   "By default each call is a fresh process, so variables do not stay. With persistent: true the "
                   "code runs like a notebook cell in the session's long-lived interpreter, where variables, "
                   "imports and loaded data stay for the next persistent call and a last expression's value comes "
                   "back. With background: true the call returns a run id at once and the code runs on, for work "
                   "longer than a client waits (read it with get_run). Returns stdout, stderr and the exit code; "
                   "isError is true when the code fails or times out. Files written to output/ come back.",
    .modern_description =
        "Run Python 3 code in an isolated sandbox (gVisor, no network). Without `sandbox`, a new sandbox is made "
        "and its handle returned as structuredContent.sandbox; pass it as `sandbox` to run later calls in the same "
        "/work, where files and installed packages stay. By default each call is a fresh process, so variables do "
        "not stay. With persistent: true the code runs like a notebook cell in the sandbox's long-lived interpreter, "
        "where variables, imports and loaded data stay for the next persistent call and a last expression's value "
        "comes back. With background: true the call returns a run id at once and the code runs on, for work longer "
        "than a client waits (read it with get_run). Returns stdout, stderr and the exit code; isError is true when "
        "the code fails or times out. Files written to output/ come back.",
    .code_doc = "Python 3 source code, run as __main__ in a fresh process (or as a cell of the persistent "
                "interpreter). Print what you want to see; write files to output/ to get them back.",
    .packages_doc = "Python packages (PEP 508 requirements such as requests or pandas>=2) to install into the "
                    "session before running; installed packages stay for the session's later calls.",
    .installed_file = "packages.installed",
    .packages_validate = packages_validate,
    .packages_fetch = packages_fetch,
    .packages_in_request = true,
    .available = always,
};

static const struct lang javascript = {
    .name = "javascript",
    .tool = "execute_javascript",
    .title = "Run JavaScript",
    .description = "Run JavaScript (Node.js) in this session's isolated sandbox, beside execute_python: the "
                   "same persistent /work, limits and results. The code is an ES module: import, require "
                   "and top-level await work; an unhandled rejection fails the call. By default each call is a "
                   "fresh process. With persistent: true it runs like a notebook cell in the session's long-lived "
                   "Node.js, where declarations and imports stay for the next persistent call and a last "
                   "expression's value comes back. With background: true the call returns a run id at once and the "
                   "code runs on (read it with get_run).",
    .modern_description =
        "Run JavaScript (Node.js) in an isolated sandbox (gVisor, no network), beside execute_python: the same "
        "handles, persistent /work, limits and results. Without `sandbox`, a new sandbox is made and its handle "
        "returned as structuredContent.sandbox; pass it as `sandbox` to use that sandbox again. The code is an ES "
        "module: import, require and top-level await work; an unhandled rejection fails the call. By default each "
        "call is a fresh process. With persistent: true it runs like a notebook cell in the sandbox's long-lived "
        "Node.js, where declarations and imports stay for the next persistent call and a last expression's value "
        "comes back. With background: true the call returns a run id at once and the code runs on (read it with "
        "get_run).",
    .code_doc = "JavaScript source, run by Node.js as an ES module in a fresh process or as a cell of the "
                "persistent interpreter (require is available too). console.log what you want to see; write files "
                "to output/ to get them back.",
    .packages_doc = "npm packages (name or name@version, e.g. lodash@4) to install into the session's "
                    "/work/node_modules before running; install scripts never run.",
    .installed_file = "npm.installed",
    /* node_modules holds the set copied in last: the same set again needs
     * nothing; another one is resolved and copied over it. */
    .installed_is_set = true,
    .packages_validate = npm_validate,
    .packages_fetch = npm_fetch,
    .packages_in_request = false,
    .packages_key = npm_set_key,
    .available = node_installed,
};

const struct lang *const langs[] = {&python, &javascript};
const size_t langs_count = ARRAY_SIZE(langs);

const struct lang *lang_by_tool(const char *tool) {
  for (size_t i = 0; i < langs_count; i++)
    if (strcmp(langs[i]->tool, tool) == 0)
      return langs[i];
  return NULL;
}
