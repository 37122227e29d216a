/* The keeper process (see keeper.c). */
#ifndef MCP_KEEPER_H
#define MCP_KEEPER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/settings.h"
#include "fcgi/session.h"

/* One pass: trash, expiry, (reap), pool.  Exposed for tests. */
void keeper_tick(struct store *st, bool reap);
/* The demand the pool follows: the service's count of sessions created,
 * sampled at the keeper's ticks (kept in the keeper's memory only: a new
 * keeper starts from pool_size). */
#define POOL_DEMAND_SAMPLES 256
struct pool_demand {
  int64_t at[POOL_DEMAND_SAMPLES];
  uint64_t created[POOL_DEMAND_SAMPLES];
  int head, n;
};
void pool_demand_note(struct pool_demand *d, int64_t now_ms, uint64_t created, int64_t window_ms);
/* Sessions created in the last window (to within window/128). */
uint64_t pool_demand_count(const struct pool_demand *d, int64_t now_ms, uint64_t created, int64_t window_ms);
/* The size the pool is kept at: pool_size, or as many as `recent` up to
 * pool_max while mem_available (bytes; -1: unknown) leaves enough. */
int pool_target(const struct mcp_config *cfg, uint64_t recent, int64_t mem_available);
/* What the host, and this process's memory cgroup (a container's limit),
 * leave available: bytes, or -1 when nothing can be read. */
int64_t pool_memory_available(void);

/* What supervisors killed or crashed since the keeper's last reap left (a
 * sandbox ends with its supervisor's pipes, but runsc's state of it, its
 * cgroups and its mounted workspace stay): removed for every container no
 * live supervisor owns and every folder without one.  Only when no
 * supervisor can start (the master's stop, once its workers are gone);
 * else they would stay until the next start. */
void keeper_reap_orphans(const struct mcp_config *cfg);

/* Loop until SIGTERM. */
int keeper_main(const struct mcp_config *cfg);

#endif
