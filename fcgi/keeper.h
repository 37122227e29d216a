/* The keeper process (see keeper.c). */
#ifndef MCP_KEEPER_H
#define MCP_KEEPER_H

#include <stdbool.h>

#include "common/settings.h"
#include "fcgi/session.h"

/* One pass: trash, expiry, (reap), pool.  Exposed for tests. */
void keeper_tick(struct store *st, bool reap);
/* Loop until SIGTERM. */
int keeper_main(const struct mcp_config *cfg);

#endif
