#include "config.h"

#include "fcgi/outputs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/util.h"
#include "sandbox/workspace.h"

#define MAX_DEPTH 16
#define MAX_ENTRIES 10000 /* entries looked at per scan */
/* A result lists at most count_max files with their content, MAX_LINKED
 * more as links, and MAX_SKIPPED entries that are not regular files: a
 * workspace of thousands of files gets a bounded answer (out->more says
 * that there is more; resources/list pages through all of it). */
#define MAX_LINKED 20
#define MAX_SKIPPED 20
#define SNIFF 4096

/* ---- MIME types from content ---- */

static bool has_prefix(const unsigned char *d, size_t len, const void *p, size_t n) {
  return len >= n && memcmp(d, p, n) == 0;
}

static const char *ext(const char *name) {
  const char *slash = strrchr(name, '/');
  const char *dot = strrchr(slash ? slash : name, '.');
  return dot ? dot + 1 : "";
}

static bool utf8_text(const unsigned char *d, size_t len) {
  /* A cut multi-byte sequence at the sniff boundary is still text. */
  size_t i = 0;
  while (i < len) {
    unsigned c = d[i];
    if (c == 0)
      return false;
    if (c < 0x80) {
      if (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != 0x1b)
        return false;
      i++;
      continue;
    }
    size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
    if (n == 0 || (c >= 0xE0 && c < 0xF0 && n != 3))
      return false;
    for (size_t k = 1; k < n; k++) {
      if (i + k >= len)
        return len >= SNIFF; /* truncated by the sniff window */
      if ((d[i + k] & 0xC0) != 0x80)
        return false;
    }
    i += n;
  }
  return true;
}

static bool looks_svg(const unsigned char *d, size_t len) {
  size_t n = len < 1024 ? len : 1024;
  for (size_t i = 0; i + 4 <= n; i++)
    if (d[i] == '<' && strncasecmp((const char *)d + i + 1, "svg", 3) == 0)
      return true;
  return false;
}

const char *mime_detect(const unsigned char *d, size_t len, const char *name) {
  const char *e = ext(name);
  if (has_prefix(d, len, "\x89PNG\r\n\x1a\n", 8))
    return "image/png";
  if (has_prefix(d, len, "\xff\xd8\xff", 3))
    return "image/jpeg";
  if (has_prefix(d, len, "GIF87a", 6) || has_prefix(d, len, "GIF89a", 6))
    return "image/gif";
  if (len >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
    return "image/webp";
  if (has_prefix(d, len, "%PDF-", 5))
    return "application/pdf";
  if (has_prefix(d, len, "\x1f\x8b", 2))
    return "application/gzip";
  if (has_prefix(d, len, "PK\x03\x04", 4)) {
    if (strcasecmp(e, "xlsx") == 0)
      return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";
    if (strcasecmp(e, "docx") == 0)
      return "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
    return "application/zip";
  }
  if (!utf8_text(d, len))
    return "application/octet-stream";
  if (looks_svg(d, len))
    return "image/svg+xml";
  static const char *const by_ext[][2] = {
      {"csv", "text/csv"},          {"tsv", "text/tab-separated-values"},
      {"json", "application/json"}, {"html", "text/html"},
      {"htm", "text/html"},         {"md", "text/markdown"},
      {"xml", "application/xml"},   {"py", "text/x-python"},
      {"js", "text/javascript"},    {"css", "text/css"},
      {"yaml", "application/yaml"}, {"yml", "application/yaml"},
  };
  for (size_t i = 0; i < ARRAY_SIZE(by_ext); i++)
    if (strcasecmp(e, by_ext[i][0]) == 0)
      return by_ext[i][1];
  return "text/plain";
}

bool mime_is_image(const char *m) {
  return strcmp(m, "image/png") == 0 || strcmp(m, "image/jpeg") == 0 || strcmp(m, "image/gif") == 0 ||
         strcmp(m, "image/webp") == 0;
}

bool mime_is_text(const char *m) {
  return strncmp(m, "text/", 5) == 0 || strcmp(m, "image/svg+xml") == 0 || strcmp(m, "application/json") == 0 ||
         strcmp(m, "application/xml") == 0 || strcmp(m, "application/yaml") == 0;
}

/* ---- manifest ---- */

/* What the previous call's scan saw, by the SHA-256 of each path (32 hex
 * characters): a line is the same size whatever the path's length. */
struct seen {
  char key[33];
  uint64_t ino, size;
  int64_t mtime_ns;
};

struct seen_list {
  struct seen *v;
  size_t n, cap;
};

static void seen_free(struct seen_list *l) {
  free(l->v);
  memset(l, 0, sizeof(*l));
}

static void path_key(const char *path, char key[33]) {
  char hex[65];
  sha256_hex(path, strlen(path), hex);
  memcpy(key, hex, 32);
  key[32] = '\0';
}

static int seen_add(struct seen_list *l, const char *key, uint64_t ino, uint64_t size, int64_t mtime) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    struct seen *v = realloc(l->v, cap * sizeof(*v));
    if (v == NULL)
      return -ENOMEM;
    l->v = v;
    l->cap = cap;
  }
  struct seen *e = &l->v[l->n++];
  memcpy(e->key, key, 33);
  e->ino = ino;
  e->size = size;
  e->mtime_ns = mtime;
  return 0;
}

static int cmp_seen(const void *a, const void *b) {
  return strcmp(((const struct seen *)a)->key, ((const struct seen *)b)->key);
}

/* prev is sorted by key (manifest_load). */
static const struct seen *seen_find(const struct seen_list *l, const char *key) {
  struct seen probe = {0};
  memcpy(probe.key, key, 33);
  return l->n ? bsearch(&probe, l->v, l->n, sizeof(*l->v), cmp_seen) : NULL;
}

/* Lines "ino size mtime_ns key"; at most MAX_ENTRIES of them. */
static void manifest_load(int dirfd, struct seen_list *l) {
  cleanup_free char *text = NULL;
  mcp_error_t err = NULL;
  if (read_file_at(dirfd, OUTPUTS_MANIFEST, (size_t)MAX_ENTRIES * 100, &text, NULL, &err) < 0) {
    mcp_error_release(&err);
    return;
  }
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    unsigned long long ino, size;
    long long mtime;
    char key[40];
    if (sscanf(line, "%llu %llu %lld %36s", &ino, &size, &mtime, key) != 4 || strlen(key) != 32)
      continue;
    seen_add(l, key, ino, size, mtime);
  }
  if (l->n > 1)
    qsort(l->v, l->n, sizeof(*l->v), cmp_seen);
}

static int manifest_save(int dirfd, const struct seen_list *l, mcp_error_t *err) {
  cleanup_buf struct buf b = {0};
  for (size_t i = 0; i < l->n; i++) {
    char line[128];
    int n = snprintf(line, sizeof(line), "%llu %llu %lld %s\n", (unsigned long long)l->v[i].ino,
                     (unsigned long long)l->v[i].size, (long long)l->v[i].mtime_ns, l->v[i].key);
    if (buf_append(&b, line, (size_t)n) < 0)
      return mcp_fail(err, MCP_ERR_INTERNAL, ENOMEM, "manifest");
  }
  return write_file_atomic(dirfd, OUTPUTS_MANIFEST, b.data ? b.data : "", b.len, 0600, err);
}

/* ---- scan ---- */

struct scan {
  const struct out_limits *lim;
  struct seen_list prev, now;
  struct out_list *out;
  size_t entries;
  uint64_t inlined_bytes;
  bool index_only; /* paths and sizes only: nothing is read, no manifest */
};

static int push(struct out_file **v, size_t *n, struct out_file f) {
  struct out_file *nv = realloc(*v, (*n + 1) * sizeof(**v));
  if (nv == NULL) {
    free(f.path);
    free(f.data);
    return -ENOMEM;
  }
  *v = nv;
  (*v)[(*n)++] = f;
  return 0;
}

static int skip(struct scan *s, const char *path, const char *reason) {
  if (s->out->n_skipped >= MAX_SKIPPED) {
    s->out->more = true;
    return 0;
  }
  struct out_file f = {.path = strdup(path), .reason = reason};
  if (f.path == NULL)
    return -ENOMEM;
  return push(&s->out->skipped, &s->out->n_skipped, f);
}

static const char *kind_reason(mode_t m) {
  if (S_ISLNK(m))
    return "symbolic links are not followed";
  if (S_ISFIFO(m))
    return "FIFOs are not read";
  if (S_ISSOCK(m))
    return "sockets are not read";
  return "devices and other special files are not read";
}

/* Read a regular file that may change kind under us: O_NONBLOCK, then
 * check the opened inode is the one stat() saw. */
static int read_file(int dirfd, const char *name, const struct stat *st, size_t want, struct out_file *f) {
  cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return -errno;
  struct stat again;
  if (fstat(fd, &again) < 0 || !S_ISREG(again.st_mode) || again.st_ino != st->st_ino)
    return -ESTALE;
  f->data = malloc(want ? want : 1);
  if (f->data == NULL)
    return -ENOMEM;
  size_t got = 0;
  while (got < want) {
    ssize_t r = read_some(fd, f->data + got, want - got);
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  f->len = got;
  return 0;
}

static int consider(struct scan *s, int dirfd, const char *name, const char *path, const struct stat *st) {
  if (s->index_only) {
    struct out_file f = {.path = strdup(path), .size = (uint64_t)st->st_size};
    return f.path != NULL ? push(&s->out->files, &s->out->n, f) : -ENOMEM;
  }
  int64_t mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
  char key[33];
  path_key(path, key);
  if (seen_add(&s->now, key, st->st_ino, (uint64_t)st->st_size, mtime) < 0)
    return -ENOMEM;
  const struct seen *p = seen_find(&s->prev, key);
  if (p != NULL && p->ino == st->st_ino && p->size == (uint64_t)st->st_size && p->mtime_ns == mtime)
    return 0; /* unchanged since the previous call */
  if ((int)s->out->n >= s->lim->count_max + MAX_LINKED) {
    s->out->more = true;
    return 0;
  }
  struct out_file f = {.path = strdup(path), .size = (uint64_t)st->st_size};
  if (f.path == NULL)
    return -ENOMEM;
  bool fits = (uint64_t)st->st_size <= s->lim->file_max &&
              s->inlined_bytes + (uint64_t)st->st_size <= s->lim->total_max && (int)s->out->n < s->lim->count_max;
  size_t want = fits ? (size_t)st->st_size : (st->st_size < SNIFF ? (size_t)st->st_size : SNIFF);
  int r = read_file(dirfd, name, st, want, &f);
  if (r < 0) {
    free(f.data);
    f.data = NULL;
    f.len = 0;
    f.reason = r == -ESTALE ? "the file changed while it was read" : "the file could not be read";
    snprintf(f.mime, sizeof(f.mime), "application/octet-stream");
    return push(&s->out->files, &s->out->n, f);
  }
  snprintf(f.mime, sizeof(f.mime), "%s", mime_detect(f.data, f.len < SNIFF ? f.len : SNIFF, path));
  if (fits && f.len == (size_t)st->st_size) {
    f.inlined = true;
    s->inlined_bytes += f.len;
  } else {
    free(f.data);
    f.data = NULL;
    f.len = 0;
    if ((uint64_t)st->st_size > s->lim->file_max)
      f.reason = "larger than the per-file limit";
    else if ((int)s->out->n >= s->lim->count_max)
      f.reason = "more files than the per-call limit";
    else
      f.reason = "the per-call byte limit is used up";
  }
  return push(&s->out->files, &s->out->n, f);
}

static int walk(struct scan *s, int dirfd, const char *prefix, int depth) {
  if (depth > MAX_DEPTH)
    return skip(s, prefix, "folders nested too deeply are not scanned");
  cleanup_dir DIR *d = dir_stream(dirfd);
  if (d == NULL)
    return -errno;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (++s->entries > MAX_ENTRIES) {
      s->out->more = true;
      return 0;
    }
    char path[OUT_PATH_MAX + 300];
    if (snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "/" : "", de->d_name) > OUT_PATH_MAX) {
      int r = skip(s, prefix, "paths longer than " OUT_PATH_MAX_TEXT " bytes are not returned");
      if (r < 0)
        return r;
      continue;
    }
    struct stat st;
    if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    int r = 0;
    if (S_ISDIR(st.st_mode)) {
      cleanup_close int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      r = sub >= 0 ? walk(s, sub, path, depth + 1) : 0;
    } else if (S_ISREG(st.st_mode)) {
      r = consider(s, dirfd, de->d_name, path, &st);
    } else {
      r = skip(s, path, kind_reason(st.st_mode));
    }
    if (r < 0)
      return r;
  }
  return 0;
}

static int cmp_files(const void *a, const void *b) {
  return strcmp(((const struct out_file *)a)->path, ((const struct out_file *)b)->path);
}

int outputs_collect(int session_dirfd, const struct out_limits *lim, struct out_list *out, mcp_error_t *err) {
  memset(out, 0, sizeof(*out));
  /* An image that is not mounted (its sandbox is gone) would look empty:
   * leave the manifest alone rather than forget every file. */
  if (workspace_has_image(session_dirfd) && !workspace_mounted(session_dirfd))
    return 0;
  cleanup_close int work = openat(session_dirfd, "work", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (work < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open the workspace");
  cleanup_close int dir = openat(work, OUTPUTS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct scan s = {.lim = lim, .out = out};
  manifest_load(session_dirfd, &s.prev);
  int r = 0;
  if (dir >= 0) {
    r = walk(&s, dir, "", 0);
  } else if (errno == ELOOP || errno == ENOTDIR) {
    r = skip(&s, "", "output is not a folder (a symbolic link or a file)");
  }
  /* Nothing new, nothing gone: the manifest stays as it is. */
  bool same = out->n == 0 && s.now.n == s.prev.n;
  if (r == 0 && !same && manifest_save(session_dirfd, &s.now, err) < 0)
    r = -1;
  seen_free(&s.prev);
  seen_free(&s.now);
  if (r < 0) {
    outputs_free(out);
    if (err != NULL && *err == NULL)
      mcp_fail(err, MCP_ERR_INTERNAL, -r, "scan the output folder");
    return -1;
  }
  if (out->n > 1)
    qsort(out->files, out->n, sizeof(*out->files), cmp_files);
  return 0;
}

void outputs_free(struct out_list *out) {
  for (size_t i = 0; i < out->n; i++) {
    free(out->files[i].path);
    free(out->files[i].data);
  }
  for (size_t i = 0; i < out->n_skipped; i++)
    free(out->skipped[i].path);
  free(out->files);
  free(out->skipped);
  memset(out, 0, sizeof(*out));
}

int outputs_index(int session_dirfd, struct out_list *out, mcp_error_t *err) {
  memset(out, 0, sizeof(*out));
  cleanup_close int work = openat(session_dirfd, "work", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (work < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open the workspace");
  cleanup_close int dir = openat(work, OUTPUTS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0)
    return 0;
  struct out_limits none = {0, 0, 0};
  struct scan s = {.lim = &none, .out = out, .index_only = true};
  int r = walk(&s, dir, "", 0);
  if (r < 0) {
    outputs_free(out);
    return mcp_fail(err, MCP_ERR_INTERNAL, -r, "list the output folder");
  }
  if (out->n > 1)
    qsort(out->files, out->n, sizeof(*out->files), cmp_files);
  return 0;
}

/* Read the regular file at rel below the workspace: all of it (up to max:
 * larger is an error) or, with peek, its first SNIFF bytes. */
static int read_beneath(int session_dirfd, const char *rel, uint64_t max, bool peek, struct out_file *f,
                        mcp_error_t *err) {
  memset(f, 0, sizeof(*f));
  cleanup_close int cur = openat(session_dirfd, "work", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (cur < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open the workspace");
  char buf[4100];
  if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
    return mcp_fail_public(err, MCP_ERR_INVALID, "The path is too long.");
  /* Walk one component at a time: no "..", no symlink anywhere. */
  char *save = NULL, *part = strtok_r(buf, "/", &save);
  while (part != NULL) {
    char *next = strtok_r(NULL, "/", &save);
    if (strcmp(part, "..") == 0 || strcmp(part, ".") == 0)
      return mcp_fail_public(err, MCP_ERR_INVALID, "The path must not contain . or .. components.");
    if (next == NULL) {
      struct stat st;
      if (fstatat(cur, part, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return mcp_fail_public(err, MCP_ERR_NOT_FOUND, "No such file in the workspace.");
      if (!S_ISREG(st.st_mode))
        return mcp_fail_public(err, MCP_ERR_INVALID, "Only regular files can be read (%s).", kind_reason(st.st_mode));
      if (!peek && (uint64_t)st.st_size > max)
        return mcp_fail_public(err, MCP_ERR_INVALID, "The file is larger than the limit of %llu bytes.",
                               (unsigned long long)max);
      f->path = strdup(rel);
      f->size = (uint64_t)st.st_size;
      size_t want = peek && st.st_size > SNIFF ? SNIFF : (size_t)st.st_size;
      int r = read_file(cur, part, &st, want, f);
      if (r < 0 || f->path == NULL)
        return mcp_fail_public(err, MCP_ERR_INVALID, "The file could not be read.");
      snprintf(f->mime, sizeof(f->mime), "%s", mime_detect(f->data, f->len < SNIFF ? f->len : SNIFF, rel));
      f->inlined = !peek;
      return 0;
    }
    int fd = openat(cur, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      return mcp_fail_public(err, MCP_ERR_NOT_FOUND, "No such file in the workspace.");
    close(cur);
    cur = fd;
    part = next;
  }
  return mcp_fail_public(err, MCP_ERR_INVALID, "The path names no file.");
}

int workspace_read(int session_dirfd, const char *rel, uint64_t max, struct out_file *f, mcp_error_t *err) {
  return read_beneath(session_dirfd, rel, max, false, f, err);
}

int workspace_peek(int session_dirfd, const char *rel, struct out_file *f, mcp_error_t *err) {
  return read_beneath(session_dirfd, rel, 0, true, f, err);
}

void out_file_free(struct out_file *f) {
  free(f->path);
  free(f->data);
  memset(f, 0, sizeof(*f));
}
