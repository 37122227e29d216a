/* How the other processes (responders, the keeper) reach the supervisor of
 * a sandbox folder: start it, connect to it, wait for its sandbox, ask it
 * to quit.  The supervisor itself is sandbox/supervisor.c.
 *
 * A sandbox folder (a pool entry or a session folder) holds:
 *   sandbox     the 32-hex sandbox id (container "mcp<id>")
 *   sup.lock    an OFD lock the supervisor holds for its whole life
 *   call.lock   an OFD lock a responder holds while it talks to the
 *               supervisor (fcgi/session.h); a hibernating supervisor holds it
 *   ctl.sock    the supervisor's socket (frames, common/frame.h)
 *   bundle/     the OCI bundle (sandbox/bundle.h)
 *   work/       the workspace, /work inside (sandbox/workspace.h)
 *   hibernated/ a hibernated sandbox's image, hibernate.new/ one being
 *               written, state-lost a failed restore's note (sandbox/hibernate.h) */
#ifndef MCP_SANDBOX_CLIENT_H
#define MCP_SANDBOX_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/settings.h"

#define SANDBOX_ID_FILE "sandbox"
#define SUPERVISOR_LOCK "sup.lock"
#define CALL_LOCK "call.lock"
#define SUPERVISOR_SOCKET "ctl.sock"
#define WORKSPACE_DIR "work"
#define HIBERNATE_DIR "hibernated"
#define HIBERNATE_NEW_DIR "hibernate.new"
#define HIBERNATE_INFO "info.json"
#define STATE_LOST_FILE "state-lost"

/* Start the supervisor of the folder `name` below dir_fd (a double fork:
 * it is adopted by the nearest subreaper, the master, and outlives the
 * process that asked for it). */
int supervisor_spawn(const struct mcp_config *cfg, int dir_fd, const char *name, mcp_error_t *err);
/* Connect to the supervisor of folder dirfd; spawn it first when none
 * listens and spawn is true.  Returns the connected fd. */
int supervisor_connect(const struct mcp_config *cfg, int dirfd, bool spawn, int64_t wait_ms, mcp_error_t *err);
/* Ask a connected supervisor whether its sandbox is ready and wait for it
 * until deadline_ms (now_ms() based).  0 when ready; MCP_ERR_SANDBOX with
 * the supervisor's sentence when it could not start one; MCP_ERR_CAPACITY
 * when it was still starting at the deadline (a busy machine). */
int supervisor_wait_ready(int fd, int64_t deadline_ms, mcp_error_t *err);
/* True when a supervisor holds the folder's sup.lock. */
bool supervisor_alive(int dirfd);
/* Ask the supervisor of dirfd to stop its sandbox and exit; waits for it. */
int supervisor_quit(int dirfd, int64_t wait_ms, mcp_error_t *err);

#endif
