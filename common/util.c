#include "config.h"

#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t stat_mtime_ms(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}

void iso_time_now(char *buf, size_t size) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, size - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

int log_open(const char *path) {
  if (strcmp(path, "stderr") == 0)
    return fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

cJSON *log_entry_new(void) {
  char when[40];
  iso_time_now(when, sizeof(when));
  cJSON *o = cJSON_CreateObject();
  if (o != NULL)
    cJSON_AddStringToObject(o, "time", when);
  return o;
}

int log_entry_write(int fd, const cJSON *entry) {
  cleanup_free char *line = entry != NULL ? cJSON_PrintUnformatted(entry) : NULL;
  if (line == NULL)
    return -ENOMEM;
  size_t len = strlen(line);
  line[len] = '\n'; /* the NUL goes: exactly len + 1 bytes */
  return write_all(fd, line, len + 1);
}

ssize_t read_some(int fd, void *buf, size_t len) {
  for (;;) {
    ssize_t r = read(fd, buf, len);
    if (r < 0 && errno == EINTR)
      continue;
    return r < 0 ? -errno : r;
  }
}

ssize_t read_kernel_file(const char *path, char *buf, size_t size) {
  cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  ssize_t n = read_some(fd, buf, size - 1);
  buf[n > 0 ? n : 0] = '\0';
  return n;
}

void json_members_add(char *buf, size_t size, const char *member) {
  size_t n = strlen(buf);
  if (n + strlen(member) + 2 <= size)
    snprintf(buf + n, size - n, "%s%s", n > 0 ? "," : "", member);
}

int read_file_at(int dirfd, const char *name, size_t max, char **out, size_t *out_len, mcp_error_t *err) {
  cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return mcp_fail(err, errno == ENOENT ? MCP_ERR_NOT_FOUND : MCP_ERR_INTERNAL, errno, "open `%s`", name);
  return read_fd(fd, name, max, out, out_len, err);
}

int read_fd(int fd, const char *name, size_t max, char **out, size_t *out_len, mcp_error_t *err) {
  struct stat st;
  if (fstat(fd, &st) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "stat `%s`", name);
  if (!S_ISREG(st.st_mode))
    return mcp_fail(err, MCP_ERR_INTERNAL, EINVAL, "`%s` is not a regular file", name);
  if ((size_t)st.st_size > max)
    return mcp_fail(err, MCP_ERR_INTERNAL, EFBIG, "`%s` is larger than %zu bytes", name, max);
  if (lseek(fd, 0, SEEK_SET) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "seek `%s`", name);
  cleanup_free char *data = malloc((size_t)st.st_size + 1);
  if (data == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "read `%s`", name);
  size_t got = 0;
  while (got <= (size_t)st.st_size) {
    ssize_t r = read_some(fd, data + got, (size_t)st.st_size + 1 - got);
    if (r < 0)
      return mcp_fail(err, MCP_ERR_INTERNAL, (int)-r, "read `%s`", name);
    if (r == 0)
      break;
    got += (size_t)r;
  }
  if (got > (size_t)st.st_size)
    return mcp_fail(err, MCP_ERR_INTERNAL, EFBIG, "`%s` grew while being read", name);
  data[got] = '\0';
  *out = steal_pointer(&data);
  if (out_len)
    *out_len = got;
  return 0;
}

int write_file_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode, mcp_error_t *err) {
  char tmp[PATH_MAX];
  char rnd[33];
  random_hex32(rnd);
  /* The temporary file sits beside the target, in the same directory. */
  const char *slash = strrchr(name, '/');
  int dirlen = slash ? (int)(slash - name) + 1 : 0;
  const char *base = slash ? slash + 1 : name;
  int n = snprintf(tmp, sizeof(tmp), "%.*s.%s.%.12s.tmp", dirlen, name, base, rnd);
  if (n < 0 || (size_t)n >= sizeof(tmp))
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "temporary name for `%s`", name);
  cleanup_close int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "create `%s`", tmp);
  /* The mode is exact, whatever the umask. */
  int r = fchmod(fd, mode) < 0 ? -errno : write_all(fd, data, len);
  if (r < 0) {
    unlinkat(dirfd, tmp, 0);
    return mcp_fail(err, MCP_ERR_INTERNAL, -r, "write `%s`", tmp);
  }
  if (renameat(dirfd, tmp, dirfd, name) < 0) {
    int saved = errno;
    unlinkat(dirfd, tmp, 0);
    return mcp_fail(err, MCP_ERR_INTERNAL, saved, "rename `%s` to `%s`", tmp, name);
  }
  return 0;
}

/* Removing a tree that sandboxed code wrote: it may be deeper than we have
 * descriptors, hold folders without permissions, and hold symlinks.  The
 * walk keeps two descriptors at a time: it goes down into a folder by name
 * (O_NOFOLLOW, never into another file system), and back up through "..",
 * checking that ".." is the folder it came from (device and inode).  Names
 * and identities of the folders on the way down are kept on the heap. */
struct tree_level {
  dev_t dev;
  ino_t ino;
  char name[NAME_MAX + 1]; /* of this folder in its parent */
};

/* Unlink every entry of dfd that is not a folder; the first folder found
 * is named in *sub (empty when none is left).  0 or -errno. */
static int empty_files(int dfd, char sub[NAME_MAX + 1]) {
  sub[0] = '\0';
  cleanup_dir DIR *d = dir_stream(dfd);
  if (d == NULL)
    return -errno;
  struct dirent *de;
  while ((errno = 0, de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (unlinkat(dfd, de->d_name, 0) == 0 || errno == ENOENT)
      continue;
    if (errno != EISDIR && errno != EPERM)
      return -errno;
    snprintf(sub, NAME_MAX + 1, "%s", de->d_name);
    return 0;
  }
  return errno != 0 ? -errno : 0;
}

/* Open the folder `name` below dfd to descend into it, restoring its
 * permissions (as the owner of the tree we may).  -EXDEV for a mount
 * point.  The mode is changed through the opened descriptor: a folder
 * swapped for a link after the check is never followed (root removes trees
 * that unprivileged users can write).  Only a caller that cannot open the
 * folder at all (not root, mode 0) changes it by name first, without
 * following a link, which can only touch the caller's own files. */
static int open_sub(int dfd, const char *name, const struct stat *top, struct stat *st) {
  if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
    return -errno;
  if (!S_ISDIR(st->st_mode))
    return -ENOTDIR;
  if (st->st_dev != top->st_dev)
    return -EXDEV;
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == EACCES) {
    if (fchmodat(dfd, name, 0700, AT_SYMLINK_NOFOLLOW) < 0)
      return -errno;
    fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0)
    return -errno;
  struct stat now;
  if (fstat(fd, &now) < 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
    close(fd);
    return -ESTALE; /* swapped after the check */
  }
  if (fchmod(fd, 0700) < 0 && errno != EPERM) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

/* Back to the parent of cur, which must be levels[depth - 1]'s parent. */
static int climb(int cur, const struct tree_level *parent) {
  int fd = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  struct stat st;
  if (fstat(fd, &st) < 0 || st.st_dev != parent->dev || st.st_ino != parent->ino) {
    close(fd);
    return -ESTALE; /* the tree moved under us */
  }
  return fd;
}

static int remove_walk(int top_fd, const struct stat *top, mcp_error_t *err) {
  int cur = dup(top_fd);
  if (cur < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "dup");
  size_t cap = 16, depth = 0;
  cleanup_free struct tree_level *levels = calloc(cap, sizeof(*levels));
  if (levels == NULL) {
    close(cur);
    return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "remove a tree");
  }
  levels[0].dev = top->st_dev;
  levels[0].ino = top->st_ino;
  int r = 0;
  for (;;) {
    char sub[NAME_MAX + 1];
    if ((r = empty_files(cur, sub)) < 0)
      break;
    if (sub[0] != '\0') { /* down */
      struct stat st;
      if (depth + 2 > cap) {
        struct tree_level *n = realloc(levels, 2 * cap * sizeof(*levels));
        if (n == NULL) {
          r = -ENOMEM;
          break;
        }
        levels = n;
        cap *= 2;
      }
      int child = open_sub(cur, sub, top, &st);
      if (child == -ENOENT)
        continue;
      if ((r = child) < 0)
        break;
      close(cur);
      cur = child;
      depth++;
      levels[depth].dev = st.st_dev;
      levels[depth].ino = st.st_ino;
      snprintf(levels[depth].name, sizeof(levels[depth].name), "%s", sub);
      continue;
    }
    if (depth == 0)
      break;                                     /* the top folder is empty */
    int parent = climb(cur, &levels[depth - 1]); /* up: this folder is empty */
    if ((r = parent) < 0)
      break;
    close(cur);
    cur = parent;
    if (unlinkat(cur, levels[depth].name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
      r = -errno;
      break;
    }
    depth--;
  }
  close(cur);
  if (r < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, -r, "remove a tree (at depth %zu)", depth);
  return 0;
}

int remove_tree_at(int dirfd, const char *name, mcp_error_t *err) {
  if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
    return 0;
  cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return 0;
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open `%s`", name);
  }
  struct stat top;
  if (fstat(fd, &top) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "stat `%s`", name);
  fchmod(fd, 0700);
  if (remove_walk(fd, &top, err) < 0)
    return mcp_error_wrap(err, -1, "remove `%s`", name);
  if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "rmdir `%s`", name);
  return 0;
}

#define CHOWN_DEPTH_MAX 256

static int chown_children(int dfd, uid_t uid, gid_t gid, dev_t dev, int depth) {
  if (depth > CHOWN_DEPTH_MAX)
    return -ELOOP;
  cleanup_dir DIR *d = dir_stream(dfd);
  if (d == NULL)
    return -errno;
  struct dirent *de;
  while ((errno = 0, de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    /* Never follows a link: a link itself changes owner. */
    if (fchownat(dfd, de->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 && errno != ENOENT)
      return -errno;
    struct stat st;
    if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) || st.st_dev != dev)
      continue;
    cleanup_close int child = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0)
      return -errno;
    int r = chown_children(child, uid, gid, dev, depth + 1);
    if (r < 0)
      return r;
  }
  return errno != 0 ? -errno : 0;
}

int chown_tree_at(int dirfd, const char *name, uid_t uid, gid_t gid, mcp_error_t *err) {
  cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || fchown(fd, uid, gid) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "chown `%s`", name);
  int r = chown_children(fd, uid, gid, st.st_dev, 0);
  if (r < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, -r, "chown the tree `%s`", name);
  return 0;
}

int mkdir_p(const char *path, mode_t mode, mcp_error_t *err) {
  char tmp[PATH_MAX];
  int n = snprintf(tmp, sizeof(tmp), "%s", path);
  if (n < 0 || (size_t)n >= sizeof(tmp))
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "mkdir `%s`", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(tmp, mode) < 0 && errno != EEXIST)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir `%s`", tmp);
    *p = '/';
  }
  if (mkdir(tmp, mode) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir `%s`", tmp);
  return 0;
}

void random_hex32(char out[33]) {
  /* 128 random bits (a v4 UUID would carry only 122). */
  unsigned char u[16];
  if (RAND_bytes(u, sizeof(u)) != 1 && getrandom(u, sizeof(u), 0) != (ssize_t)sizeof(u))
    abort(); /* no randomness: ids would be guessable */
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = hex[u[i] >> 4];
    out[2 * i + 1] = hex[u[i] & 15];
  }
  out[32] = '\0';
}

bool cell_name_valid(const char *s) {
  size_t n = s != NULL ? strlen(s) : 0;
  return n >= 1 && n <= CELL_NAME_MAX && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n && s[0] != '-' &&
         s[n - 1] != '-';
}

void session_id_new(const char *cell, char out[SESSION_ID_MAX]) {
  char hex[33];
  random_hex32(hex);
  if (cell != NULL && *cell)
    snprintf(out, SESSION_ID_MAX, "%.40s.%s", cell, hex);
  else
    memcpy(out, hex, 33);
}

bool session_id_valid(const char *s) {
  if (s == NULL)
    return false;
  const char *dot = strchr(s, '.');
  if (dot == NULL)
    return is_hex32(s);
  char cell[CELL_NAME_MAX + 2];
  size_t n = (size_t)(dot - s);
  if (n == 0 || n > CELL_NAME_MAX)
    return false;
  memcpy(cell, s, n);
  cell[n] = '\0';
  return cell_name_valid(cell) && is_hex32(dot + 1);
}

void session_id_cell(const char *id, char cell[CELL_NAME_MAX + 1]) {
  const char *dot = strchr(id, '.');
  size_t n = dot != NULL && dot - id <= CELL_NAME_MAX ? (size_t)(dot - id) : 0;
  memcpy(cell, id, n);
  cell[n] = '\0';
}

bool is_hex32(const char *s) {
  if (s == NULL)
    return false;
  for (int i = 0; i < 32; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return s[32] == '\0';
}

int fd_path(char *buf, size_t size, int dirfd, const char *name) {
  int n = snprintf(buf, size, "/proc/self/fd/%d/%s", dirfd, name);
  if (n < 0 || (size_t)n >= size)
    return -ENAMETOOLONG;
  return 0;
}

int fd_host_path(int dirfd, const char *name, char *buf, size_t size) {
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
  ssize_t n = readlink(link, buf, size - 1);
  if (n < 0)
    return -errno;
  buf[n] = '\0';
  size_t used = (size_t)n;
  if (name != NULL && snprintf(buf + used, size - used, "/%s", name) >= (int)(size - used))
    return -ENAMETOOLONG;
  return 0;
}

char *xstrndup(const char *s, size_t n) {
  char *r = malloc(n + 1);
  if (r == NULL)
    return NULL;
  memcpy(r, s, n);
  r[n] = '\0';
  return r;
}

int buf_append(struct buf *b, const void *data, size_t len) {
  if (len == 0)
    return 0;
  if (b->len + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + len + 1)
      cap *= 2;
    char *n = realloc(b->data, cap);
    if (n == NULL)
      return -ENOMEM;
    b->data = n;
    b->cap = cap;
  }
  memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = '\0';
  return 0;
}

void buf_free(struct buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

int lock_try(int fd) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
  for (;;) {
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
      return 0;
    if (errno == EINTR)
      continue;
    return (errno == EACCES || errno == EAGAIN) ? -EWOULDBLOCK : -errno;
  }
}

bool lock_held_elsewhere(int fd) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
  if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
    return false;
  return fl.l_type != F_UNLCK;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const unsigned char *d, size_t len) {
  if (len > (SIZE_MAX / 4) * 3 - 3)
    return NULL;
  size_t out_len = (len + 2) / 3 * 4;
  char *out = malloc(out_len + 1);
  if (out == NULL)
    return NULL;
  char *o = out;
  size_t i = 0;
  for (; i + 3 <= len; i += 3) {
    uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
    *o++ = b64[v >> 18];
    *o++ = b64[(v >> 12) & 63];
    *o++ = b64[(v >> 6) & 63];
    *o++ = b64[v & 63];
  }
  if (i < len) {
    uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < len ? (uint32_t)d[i + 1] << 8 : 0);
    *o++ = b64[v >> 18];
    *o++ = b64[(v >> 12) & 63];
    *o++ = i + 1 < len ? b64[(v >> 6) & 63] : '=';
    *o++ = '=';
  }
  *o = '\0';
  return out;
}

size_t base64_decoded_max(size_t len) { return len / 4 * 3 + 3; }

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

ssize_t base64_decode(const char *in, size_t len, unsigned char *out, size_t out_size) {
  if (len % 4 != 0)
    return -1;
  size_t o = 0;
  for (size_t i = 0; i < len; i += 4) {
    int v[4], pad = 0;
    for (int k = 0; k < 4; k++) {
      unsigned char c = (unsigned char)in[i + k];
      if (c == '=' && i + 4 == len && k >= 2) {
        v[k] = 0;
        pad++;
        continue;
      }
      if (pad > 0 || (v[k] = b64_value(c)) < 0)
        return -1;
    }
    uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    size_t n = 3 - (size_t)pad;
    if (o + n > out_size)
      return -1;
    out[o++] = (unsigned char)(w >> 16);
    if (n > 1)
      out[o++] = (unsigned char)(w >> 8);
    if (n > 2)
      out[o++] = (unsigned char)w;
  }
  return (ssize_t)o;
}

void sha256_hex(const void *data, size_t len, char out[65]) {
  static const char hex[] = "0123456789abcdef";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  out[0] = '\0';
  if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32)
    return;
  for (unsigned i = 0; i < n; i++) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  out[64] = '\0';
}

/* A directory stream that owns fd; fd is closed when there is none. */
static DIR *dir_of(int fd) {
  if (fd < 0)
    return NULL;
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    int e = errno;
    close(fd);
    errno = e;
  }
  return d;
}

DIR *dir_stream(int dfd) {
  DIR *d = dir_of(fcntl(dfd, F_DUPFD_CLOEXEC, 0));
  if (d != NULL)
    rewinddir(d); /* the copy shares the offset of dfd, wherever it is */
  return d;
}

DIR *dir_open_at(int parent_fd, const char *name) {
  return dir_of(openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
}
