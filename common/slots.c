/* Execution slots (see slots.h). */
#include "config.h"

#include "common/slots.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/policy.h"
#include "common/util.h"

/* A free slot among n lock files of dirfd, or -EAGAIN. */
static int take_one(int dirfd, int n, mcp_error_t *err) {
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof(name), "%d", i);
    int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open slot %d", i);
    if (lock_try(fd) == 0)
      return fd;
    close(fd);
  }
  return -EAGAIN;
}

/* <state>/slots, opened. */
static int slots_dir(const struct mcp_config *cfg, mcp_error_t *err) {
  char dir[PATH_MAX];
  if (config_path(cfg, dir, sizeof(dir), "slots") < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, ENAMETOOLONG, "slots path");
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd < 0 ? mcp_fail(err, MCP_ERR_INTERNAL, errno, "open %s", dir) : fd;
}

/* <state>/slots/<name>, made when missing. */
static int sub_dir(int slots_fd, const char *name, mcp_error_t *err) {
  if (mkdirat(slots_fd, name, 0700) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir slots/%s", name);
  int fd = openat(slots_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  return fd < 0 ? mcp_fail(err, MCP_ERR_INTERNAL, errno, "open slots/%s", name) : fd;
}

/* t-<name>: names come from nginx's map (letters, digits, _ . -);
 * anything else shares one folder. */
static void token_dir_name(const char *token, char name[80]) {
  snprintf(name, 80, "t-%s", policy_name_valid(token) ? token : "_");
}

int slot_try(const struct mcp_config *cfg, const char *token, int token_max, struct slot_hold *h, enum slot_full *full,
             mcp_error_t *err) {
  *h = SLOT_HOLD_NONE;
  *full = SLOT_FULL_NONE;
  cleanup_close int sfd = slots_dir(cfg, err);
  if (sfd < 0)
    return -1;
  char name[80];
  token_dir_name(token, name);
  cleanup_close int tfd = sub_dir(sfd, name, err);
  if (tfd < 0)
    return -1;
  /* Neither is held while waiting: both are tried, the service's first (a
   * client is told the server is full when both are). */
  int g = take_one(sfd, cfg->max_concurrent, err);
  if (g < 0) {
    if (g == -EAGAIN)
      *full = SLOT_FULL_GLOBAL;
    return g == -EAGAIN ? -EAGAIN : -1;
  }
  int t = take_one(tfd, token_max, err);
  if (t < 0) {
    close(g);
    if (t == -EAGAIN)
      *full = SLOT_FULL_TOKEN;
    return t == -EAGAIN ? -EAGAIN : -1;
  }
  h->token_fd = t;
  h->global_fd = g;
  return 0;
}

void slot_release(struct slot_hold *h) {
  if (h->global_fd >= 0)
    close(h->global_fd);
  if (h->token_fd >= 0)
    close(h->token_fd);
  *h = SLOT_HOLD_NONE;
}

int boot_slot_try(const struct mcp_config *cfg, mcp_error_t *err) {
  cleanup_close int sfd = slots_dir(cfg, err);
  if (sfd < 0)
    return -1;
  cleanup_close int bfd = sub_dir(sfd, "boot", err);
  if (bfd < 0)
    return -1;
  return take_one(bfd, cfg->max_starting, err);
}

int run_slot_try(const struct mcp_config *cfg, const char *token, mcp_error_t *err) {
  cleanup_close int sfd = slots_dir(cfg, err);
  if (sfd < 0)
    return -1;
  cleanup_close int rfd = sub_dir(sfd, "runs", err);
  if (rfd < 0)
    return -1;
  char name[80];
  token_dir_name(token, name);
  cleanup_close int tfd = sub_dir(rfd, name, err);
  if (tfd < 0)
    return -1;
  return take_one(tfd, cfg->runs_per_token, err);
}
