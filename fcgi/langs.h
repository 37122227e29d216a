/* The languages the tools run, one entry each.  Every difference between
 * execute_python and execute_javascript on the host is a field here: the
 * names, the texts of the tool's schema, and how its packages are checked,
 * fetched and remembered.  Code elsewhere takes a `const struct lang *` and
 * never branches on which language it is. */
#ifndef MCP_LANGS_H
#define MCP_LANGS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "common/error.h"
#include "common/settings.h"

struct lang {
  const char *name;               /* the executor's language: "python", "javascript" */
  const char *tool;               /* the tool's name */
  const char *title;              /* the tool's title */
  const char *description;        /* 2025: the session is the sandbox */
  const char *modern_description; /* 2026-07-28: sandboxes as handles (the lifetime follows) */
  const char *code_doc;           /* the `code` argument */
  const char *packages_doc;       /* the `packages` argument */
  /* The session file that lists the package specs installed so far
   * (in the session folder, outside the workspace). */
  const char *installed_file;
  /* The `packages` argument: 0, or MCP_ERR_INVALID with a sentence. */
  int (*packages_validate)(const cJSON *packages, mcp_error_t *err);
  /* Make the packages available to the sandbox before the call, on the
   * host.  Python: wheels in the cache (the executor installs them, so the
   * request carries the specs).  JavaScript: an installed npm tree, named
   * in stage for the executor to copy.  A failure the client caused (the
   * registry has no such package) is MCP_ERR_INVALID with the tool's words. */
  int (*packages_fetch)(const struct mcp_config *cfg, const cJSON *packages, char stage[33], mcp_error_t *err);
  bool packages_in_request; /* the executor gets the specs themselves */
  /* Fetch again even when the session has installed these specs before
   * (npm: the tree is copied in again when the session changed it). */
  bool fetch_when_installed;
  /* The tool exists on this host (Node.js is installed). */
  bool (*available)(const struct mcp_config *cfg);
};

extern const struct lang *const langs[];
extern const size_t langs_count;

/* The language of a tool name, or NULL. */
const struct lang *lang_by_tool(const char *tool);

#endif
