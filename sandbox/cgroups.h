/* Host cgroups around the sandboxes (see cgroups.c).  With an empty
 * cgroup_parent every function is a no-op and runsc runs with
 * --ignore-cgroups. */
#ifndef MCP_CGROUPS_H
#define MCP_CGROUPS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/settings.h"

bool cgroups_unified(void);
/* The memory backstop of one sandbox. */
uint64_t cgroups_sandbox_memory(const struct mcp_config *cfg);
/* Create (or update) the parent cgroup and its limits on all sandboxes. */
int cgroups_prepare_parent(const struct mcp_config *cfg, mcp_error_t *err);
/* How many times the kernel OOM-killed in the sandbox's cgroup. */
int cgroups_oom_kills(const struct mcp_config *cfg, const char *container_id, uint64_t *count, mcp_error_t *err);
/* How many host tasks (threads) the sandbox's pids cgroup holds now. */
int cgroups_tasks(const struct mcp_config *cfg, const char *container_id, uint64_t *count, mcp_error_t *err);
/* A sandbox's share of the cores against the others' (cpu.shares /
 * cpu.weight).  While a session waits for its boot (or its wake from
 * hibernation) it weighs 4 times as much as one at work: on a busy machine
 * a session waiting for its first call goes before the next of many calls
 * of sessions already served.  A boot nobody waits for yet (the pool's,
 * ahead of demand) weighs a quarter: it takes what the sessions at work
 * leave.  Set back to BOOT_DONE once it is ready.  The boot's weight is
 * in its bundle (cgroups_boot_shares: runsc creates the cgroup with it, so
 * it holds from runsc's first step) and written again once runsc returns
 * (cgroups_boot_weight: cgroup v2's own scale). */
enum boot_weight { BOOT_AHEAD, BOOT_AWAITED, BOOT_DONE };
uint64_t cgroups_boot_shares(enum boot_weight w);
int cgroups_boot_weight(const struct mcp_config *cfg, const char *container_id, enum boot_weight w, mcp_error_t *err);
/* What the memory cgroup of this process (the service's, a container's)
 * leaves: its limit less its usage, in bytes; -1 without a limit or a
 * memory cgroup to read. */
int64_t cgroups_memory_left(void);
/* Remove a sandbox's cgroup in every controller (runsc leaves them behind
 * when a create fails). */
int cgroups_remove(const struct mcp_config *cfg, const char *container_id, mcp_error_t *err);
/* When the service stops, after its sandboxes: remove the sandboxes'
 * empty cgroups and the parent in every hierarchy.  A cgroup that still
 * has tasks stays, with the parent, and the error says so. */
int cgroups_remove_parent(const struct mcp_config *cfg, mcp_error_t *err);
/* Container ids that have a cgroup under the parent. */
int cgroups_list(const struct mcp_config *cfg, char (**ids)[40], size_t *n, mcp_error_t *err);

#endif
