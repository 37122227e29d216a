/* Per-token policy (see policy.h). */
#include "config.h"

#include "common/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"

#define POLICY_FILE_MAX (1 << 20)

struct policy_cache {
  pthread_mutex_t lock;
  bool loaded;
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  char *text; /* the file, NUL-terminated; NULL when there is none */
  int tokens;
};

static struct policy_cache cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

bool policy_name_valid(const char *name) {
  static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
  size_t n = name != NULL ? strlen(name) : 0;
  return n >= 1 && n <= POLICY_NAME_MAX && strspn(name, ok) == n;
}

int policy_fair_share(int global, int tokens) {
  if (tokens < 1)
    tokens = 1;
  int quarter = global / 4, equal = global / tokens;
  int share = quarter > equal ? quarter : equal;
  return share < 1 ? 1 : share;
}

static int count_lines(const char *text) {
  int n = 0;
  for (const char *line = text; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
    if (*line != '#' && *line != '\n' && *line != '\0')
      n++;
  }
  return n;
}

/* Read the file again when it changed; called with the lock held. */
static int refresh(const char *path, mcp_error_t *err) {
  struct stat st;
  if (stat(path, &st) < 0) {
    if (errno != ENOENT)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "stat %s", path);
    free(cache.text);
    cache.text = NULL;
    cache.tokens = 1;
    cache.loaded = true;
    cache.ino = 0;
    return 0;
  }
  if (cache.loaded && cache.text != NULL && st.st_dev == cache.dev && st.st_ino == cache.ino &&
      st.st_size == cache.size && st.st_mtim.tv_sec == cache.mtime.tv_sec && st.st_mtim.tv_nsec == cache.mtime.tv_nsec)
    return 0;
  char *text = NULL;
  if (read_file_at(AT_FDCWD, path, POLICY_FILE_MAX, &text, NULL, err) < 0)
    return mcp_error_wrap(err, -1, "the token policy");
  free(cache.text);
  cache.text = text;
  cache.tokens = count_lines(text);
  if (cache.tokens < 1)
    cache.tokens = 1;
  cache.dev = st.st_dev;
  cache.ino = st.st_ino;
  cache.size = st.st_size;
  cache.mtime = st.st_mtim;
  cache.loaded = true;
  return 0;
}

/* A positive integer option of `line` (up to its end), or 0. */
static int option(const char *line, const char *key) {
  size_t klen = strlen(key);
  const char *end = strchr(line, '\n');
  for (const char *p = line; p != NULL && *p && (end == NULL || p < end);) {
    if (strncmp(p, key, klen) == 0 && p[klen] == '=' && (p == line || p[-1] == ' ')) {
      char *stop;
      long v = strtol(p + klen + 1, &stop, 10);
      return v > 0 && v <= 1000000 && (*stop == ' ' || *stop == '\n' || *stop == '\0') ? (int)v : 0;
    }
    p = strchr(p, ' ');
    if (p != NULL)
      p++;
  }
  return 0;
}

/* The text of a string option of `line` and its length, or NULL. */
static const char *option_text(const char *line, const char *key, size_t *len) {
  size_t klen = strlen(key);
  const char *end = strchr(line, '\n');
  for (const char *p = line; p != NULL && *p && (end == NULL || p < end);) {
    if (strncmp(p, key, klen) == 0 && p[klen] == '=' && (p == line || p[-1] == ' ')) {
      *len = strcspn(p + klen + 1, " \n");
      return p + klen + 1;
    }
    p = strchr(p, ' ');
    if (p != NULL)
      p++;
  }
  return NULL;
}

/* The line of `name`, or NULL. */
static const char *find_line(const char *text, const char *name) {
  size_t n = strlen(name);
  for (const char *line = text; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
    if (strncmp(line, name, n) == 0 && (line[n] == ' ' || line[n] == '\n' || line[n] == '\0'))
      return line;
  }
  return NULL;
}

int policy_for(const struct mcp_config *cfg, const char *name, struct token_policy *out, mcp_error_t *err) {
  pthread_mutex_lock(&cache.lock);
  int r = refresh(cfg->token_policy, err);
  int sessions = 0, concurrent = 0, requests = 0;
  if (r == 0) {
    const char *line = cache.text != NULL && name != NULL && *name ? find_line(cache.text, name) : NULL;
    if (line != NULL) {
      sessions = option(line, "max_sessions");
      concurrent = option(line, "max_concurrent");
      requests = option(line, "max_requests");
    }
    out->tokens = cache.tokens;
  }
  pthread_mutex_unlock(&cache.lock);
  if (r < 0)
    return -1;
  if (sessions == 0)
    sessions =
        cfg->token_max_sessions > 0 ? cfg->token_max_sessions : policy_fair_share(cfg->max_sessions, out->tokens);
  if (concurrent == 0)
    concurrent =
        cfg->token_max_concurrent > 0 ? cfg->token_max_concurrent : policy_fair_share(cfg->max_concurrent, out->tokens);
  if (requests == 0)
    requests = cfg->token_max_requests;
  out->max_sessions = sessions;
  out->max_concurrent = concurrent;
  out->max_requests = requests;
  return 0;
}

int policy_string(const struct mcp_config *cfg, const char *name, const char *key, char *buf, size_t size,
                  mcp_error_t *err) {
  pthread_mutex_lock(&cache.lock);
  int r = refresh(cfg->token_policy, err);
  const char *line = r == 0 && cache.text != NULL && name != NULL && *name ? find_line(cache.text, name) : NULL;
  size_t len = 0;
  const char *v = line != NULL ? option_text(line, key, &len) : NULL;
  if (v != NULL && len < size) {
    memcpy(buf, v, len);
    buf[len] = '\0';
    r = 1;
  } else if (v != NULL) {
    r = mcp_fail(err, MCP_ERR_INTERNAL, E2BIG, "the token policy's %s of %s is too long", key, name);
  }
  pthread_mutex_unlock(&cache.lock);
  return r;
}
