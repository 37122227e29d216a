/* Files a call leaves in /work/output come back to the client.
 *
 * Everything below the workspace is controlled by sandboxed code, so the
 * host reads it only through openat() beneath the workspace, never
 * following a symlink, and opens files with O_NONBLOCK so a FIFO cannot
 * block the call.  Symlinks, FIFOs, sockets and devices are reported as
 * skipped, not read.
 *
 * "New or changed" is decided against a manifest kept in the session folder
 * (outside the workspace): inode, size and modification time of every file
 * seen after the previous call. */
#ifndef MCP_OUTPUTS_H
#define MCP_OUTPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/settings.h"

#define OUTPUTS_DIR "output"
#define OUTPUTS_MANIFEST "outputs.manifest"
/* Longer paths below output/ are reported as skipped, never returned. */
#define OUT_PATH_MAX 1024
#define OUT_PATH_MAX_TEXT "1024"

struct out_file {
  char *path; /* relative to output/, '/'-separated */
  uint64_t size;
  char mime[80];
  bool inlined;       /* data holds the whole content */
  const char *reason; /* why it is not inlined (or skipped), else NULL */
  unsigned char *data;
  size_t len;
};

struct out_list {
  struct out_file *files; /* new or changed regular files */
  size_t n;
  struct out_file *skipped; /* links, FIFOs, ... (path and reason only) */
  size_t n_skipped;
  bool more; /* more changed (or skipped) than listed, or the scan stopped at a limit */
};

struct out_limits {
  uint64_t file_max;  /* largest file inlined */
  uint64_t total_max; /* bytes inlined per call */
  int count_max;      /* files returned per call */
};

/* Scan <session>/work/output, compare with and update the manifest. */
int outputs_collect(int session_dirfd, const struct out_limits *lim, struct out_list *out, mcp_error_t *err);
void outputs_free(struct out_list *out);
/* Every regular file under output/ (path and size; nothing is read),
 * sorted by path; at most a bounded number of entries is looked at. */
int outputs_index(int session_dirfd, struct out_list *out, mcp_error_t *err);
/* Read one regular file at rel (relative to the workspace), at most max
 * bytes, without following links; f->data holds it. */
int workspace_read(int session_dirfd, const char *rel, uint64_t max, struct out_file *f, mcp_error_t *err);
/* The same for its MIME type and size: the first bytes only (not inlined). */
int workspace_peek(int session_dirfd, const char *rel, struct out_file *f, mcp_error_t *err);
void out_file_free(struct out_file *f);

/* The MIME type of content (name only refines text and zip types). */
const char *mime_detect(const unsigned char *data, size_t len, const char *name);
bool mime_is_image(const char *mime);
bool mime_is_text(const char *mime);

#endif
