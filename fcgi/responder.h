/* A FastCGI responder process: accept requests on the shared socket and
 * answer each with mcp_serve().  Runs until SIGTERM; a request in progress
 * is finished first. */
#ifndef MCP_RESPONDER_H
#define MCP_RESPONDER_H

#include "common/settings.h"

int responder_main(const struct mcp_config *cfg, int listen_fd);

#endif
