/* A session's workspace: work/ in the session folder, backed by its own
 * size-limited file system image when loop devices are available (see
 * workspace.c).  All functions take the session folder's fd. */
#ifndef MCP_WORKSPACE_H
#define MCP_WORKSPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

/* Create work/ (owned by uid:gid) and, when size > 0, the image. */
int workspace_create(int dirfd, uint64_t size, int uid, int gid, mcp_error_t *err);
/* Mount the image on work/ unless it is mounted or there is no image. */
int workspace_mount(int dirfd, mcp_error_t *err);
void workspace_unmount(int dirfd);
/* Put what the workspace holds on disk: its image (unmount it first, so
 * that its file system is written out), or the plain folder's file system. */
int workspace_sync(int dirfd, mcp_error_t *err);
bool workspace_mounted(int dirfd);
/* The workspace has a quota image (it is a plain folder otherwise). */
bool workspace_has_image(int dirfd);
/* Bytes the image may still take on the host's disk as it fills up to its
 * size (it is sparse); 0 without an image. */
uint64_t workspace_unallocated(int dirfd);

#endif
