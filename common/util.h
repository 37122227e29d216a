/* Small helpers shared by every binary: cleanup attributes (as in crun's
 * utils.h and bubblewrap's utils.h), EINTR-safe I/O, time, and file access
 * relative to a directory fd that never follows symlinks.
 *
 * Ownership: a variable declared with a cleanup_* attribute owns its
 * resource; give it away with steal_pointer()/steal_fd(). */
#ifndef MCP_UTIL_H
#define MCP_UTIL_H

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/error.h"

static inline void cleanup_freep(void *p) { free(*(void **)p); }
static inline void cleanup_closep(int *fd) {
  if (*fd >= 0)
    close(*fd);
}
static inline void cleanup_fclosep(FILE **f) {
  if (*f != NULL)
    fclose(*f);
}
static inline void cleanup_closedirp(DIR **d) {
  if (*d != NULL)
    closedir(*d);
}
static inline void cleanup_cjsonp(cJSON **j) { cJSON_Delete(*j); }

#define cleanup_free __attribute__((cleanup(cleanup_freep)))
#define cleanup_close __attribute__((cleanup(cleanup_closep)))
#define cleanup_fclose __attribute__((cleanup(cleanup_fclosep)))
#define cleanup_dir __attribute__((cleanup(cleanup_closedirp)))
#define cleanup_cjson __attribute__((cleanup(cleanup_cjsonp)))

static inline void *steal_ptr(void **pp) {
  void *p = *pp;
  *pp = NULL;
  return p;
}
#define steal_pointer(pp) steal_ptr((void **)(pp))
static inline int steal_fd(int *fd) {
  int r = *fd;
  *fd = -1;
  return r;
}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Monotonic milliseconds, wall-clock seconds. */
int64_t now_ms(void);
int64_t wall_ms(void);
struct stat;
/* A file's modification time in wall_ms() terms. */
int64_t stat_mtime_ms(const struct stat *st);
/* The wall clock as "2026-01-31T12:34:56.789Z" (UTC, milliseconds; buf of 40). */
void iso_time_now(char *buf, size_t size);

/* Write all of buf, retrying on EINTR and short writes.  0 or -errno. */
int write_all(int fd, const void *buf, size_t len);
/* Open a log that a setting names (audit_log, egress_log) to append one
 * line per write: the word "stderr" is a duplicate of this process's
 * standard error (in a container, its log), anything else a file, created
 * 0600, never through a symlink.  A descriptor (close-on-exec), or -1 and
 * errno. */
int log_open(const char *path);
/* A log entry (audit_log, egress_log): a JSON object whose first member is
 * "time" (iso_time_now), for the caller to fill. */
cJSON *log_entry_new(void);
/* The entry as one line (unformatted, a newline after it) in one write:
 * with O_APPEND, lines of concurrent writers never interleave (on a pipe,
 * lines of up to PIPE_BUF bytes).  0 or -errno. */
int log_entry_write(int fd, const cJSON *entry);
/* Read up to len bytes, retrying on EINTR; returns bytes read (0 at EOF) or -errno. */
ssize_t read_some(int fd, void *buf, size_t len);

/* A kernel interface file (/proc, cgroupfs: st_size says 0) into buf,
 * NUL-terminated: its length (what one read gave, at most size - 1), or
 * -errno. */
ssize_t read_kernel_file(const char *path, char *buf, size_t size);
/* Append `"name":value` to a comma-separated list of JSON members in buf
 * (what a result gains), if it fits. */
void json_members_add(char *buf, size_t size, const char *member);

/* Read a whole regular file below dirfd (no symlink follow) of at most max
 * bytes, NUL-terminated.  Fails with ENOENT, EFBIG, ... */
int read_file_at(int dirfd, const char *name, size_t max, char **out, size_t *out_len, mcp_error_t *err);
/* The same for a file already open (from its start); name is for errors. */
int read_fd(int fd, const char *name, size_t max, char **out, size_t *out_len, mcp_error_t *err);
/* Replace dirfd/name atomically: write a unique temporary file, then rename. */
int write_file_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode, mcp_error_t *err);
/* Remove a tree below dirfd without following any symlink. */
int remove_tree_at(int dirfd, const char *name, mcp_error_t *err);
/* chown -R of a tree below dirfd through descriptors: no symlink is
 * followed (a link itself changes owner), no other file system entered. */
int chown_tree_at(int dirfd, const char *name, uid_t uid, gid_t gid, mcp_error_t *err);
/* mkdir -p of an absolute or relative path; existing directories are fine. */
int mkdir_p(const char *path, mode_t mode, mcp_error_t *err);

/* SHA-256 of data in 64 lowercase hex characters ("" if libcrypto fails). */
void sha256_hex(const void *data, size_t len, char out[65]);
/* 32 lowercase hex characters of cryptographic randomness (128 bits). */
void random_hex32(char out[33]);
/* Session ids (and the sandbox handles of the 2026 protocol, which are
 * the same thing): an optional cell name and a dot, then 32 lowercase hex
 * characters of cryptographic randomness (128 bits).  A cell name is a DNS
 * label: 1-40 of [a-z0-9-], not starting or ending with '-'.  A proxy
 * routes on the part before the dot. */
#define SESSION_ID_MAX 80
#define CELL_NAME_MAX 40
/* A new id for this cell ("" = no cell: 32 hex only). */
void session_id_new(const char *cell, char out[SESSION_ID_MAX]);
bool session_id_valid(const char *s);
/* The cell named by a valid id ("" when it names none). */
void session_id_cell(const char *id, char cell[CELL_NAME_MAX + 1]);
bool cell_name_valid(const char *s);
/* True when s is exactly 32 lowercase hex characters. */
bool is_hex32(const char *s);

/* "/proc/self/fd/N/name": a path to name below dirfd for this process's own
 * use (it fits sockaddr_un).  0 or -ENAMETOOLONG. */
int fd_path(char *buf, size_t size, int dirfd, const char *name);
/* The host path of dirfd, read from /proc/self/fd/N, with "/name" appended
 * unless name is NULL: a path other processes can use.  0 or -errno. */
int fd_host_path(int dirfd, const char *name, char *buf, size_t size);

/* Duplicate at most n bytes of s into a NUL-terminated string. */
char *xstrndup(const char *s, size_t n);

/* Standard base64 (RFC 4648, with padding).  encode returns a new string;
 * decode returns the byte count or -1 for invalid input. */
char *base64_encode(const unsigned char *data, size_t len);
ssize_t base64_decode(const char *in, size_t len, unsigned char *out, size_t out_size);
size_t base64_decoded_max(size_t len);

/* Whole-file open-file-description locks (F_OFD_*): released when the fd
 * closes, and testable without taking them, unlike flock. */
int lock_try(int fd); /* 0, or -EWOULDBLOCK when held elsewhere */
bool lock_held_elsewhere(int fd);

/* Bounded byte buffer for data that arrives from a client or a sandbox. */
struct buf {
  char *data;
  size_t len;
  size_t cap;
};
int buf_append(struct buf *b, const void *data, size_t len);
void buf_free(struct buf *b);
static inline void cleanup_bufp(struct buf *b) { buf_free(b); }
#define cleanup_buf __attribute__((cleanup(cleanup_bufp)))

/* A directory stream over the folder dfd, from its start, that leaves dfd
 * open (it reads a close-on-exec copy; closedir() closes only that).  NULL
 * with errno set. */
DIR *dir_stream(int dfd);
/* A listing of the folder name under parent_fd through a description of
 * its own (a dup() of a shared fd would share its offset with other
 * threads' listings); NULL when it cannot be opened (errno). */
DIR *dir_open_at(int parent_fd, const char *name);

#endif
