/* MCP resources: the files in a session's workspace.  resources/list names
 * what is in /work/output; resources/read reads any regular file under
 * /work (file:///work/<path>), within the per-file output limit. */
#ifndef MCP_RESOURCES_H
#define MCP_RESOURCES_H

#include "fcgi/rpc.h"

int resources_list(struct rpc_call *c);
int resources_read(struct rpc_call *c);
int resources_templates_list(struct rpc_call *c);
/* 2026-07-28: resources/list does not vary per sandbox (an empty list);
 * the template sandbox://{sandbox}/{path} names a sandbox's files, and
 * resources/read checks the handle and its token like a call does. */
int resources_list_modern(struct rpc_call *c);
int resources_templates_modern(struct rpc_call *c);
int resources_read_modern(struct rpc_call *c);

#endif
