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
  /* The session file that says what the session installed (in the
   * session folder, outside the workspace): every spec asked for so far
   * (Python), or the set of specs copied in last (JavaScript). */
  const char *installed_file;
  bool installed_is_set; /* the file holds one set, replaced at each install */
  /* The `packages` argument: 0, or MCP_ERR_INVALID with a sentence. */
  int (*packages_validate)(const cJSON *packages, mcp_error_t *err);
  /* Resolve the packages against the index or registry now, on the host,
   * and put exactly what was resolved into the folder dst_fd (the call's
   * folder, which only this session's sandbox sees).  Python: the wheels
   * (the executor installs them, so the request carries the specs).
   * JavaScript: node_modules, which the executor copies in.  A failure the
   * client caused (the registry has no such package) is MCP_ERR_INVALID
   * with the tool's words. */
  int (*packages_fetch)(const struct mcp_config *cfg, const cJSON *packages, int dst_fd, mcp_error_t *err);
  bool packages_in_request; /* the executor gets the specs themselves */
  /* The name of a set of specs, which the executor compares with what the
   * workspace holds (NULL: none). */
  int (*packages_key)(const cJSON *packages, char key[33]);
  /* The tool exists on this host (Node.js is installed). */
  bool (*available)(const struct mcp_config *cfg);
};

extern const struct lang *const langs[];
extern const size_t langs_count;

/* The language of a tool name, or NULL. */
const struct lang *lang_by_tool(const char *tool);

#endif
