/* Execution slots (see slots.h). */
#include "config.h"

#include "common/slots.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cpus.h"
#include "common/policy.h"
#include "common/util.h"

/* A free slot among lock files from..to-1 of dirfd, or -EAGAIN. */
static int take_range(int dirfd, int from, int to, mcp_error_t *err) {
  for (int i = from; i < to; i++) {
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

/* A free slot among n lock files of dirfd, or -EAGAIN. */
static int take_one(int dirfd, int n, mcp_error_t *err) { return take_range(dirfd, 0, n, err); }

int (*slot_cpu_read)(struct cpu_sample *s) = cpus_sample;

/* Whether at least half a core was idle from a to b (no tick between
 * them counts as idle). */
static bool half_core_idle(const struct cpu_sample *a, const struct cpu_sample *b) {
  int idle = cpu_idle_percent(a, b);
  return idle < 0 || idle * cpus_usable() >= 50;
}

/* Whether the CPU has room for a call beyond its token's busy share: at
 * least half a core idle since w's last look, SLOT_CPU_LOOK_MS to a second
 * ago (unknown counts as room).  A look without such a window before it
 * starts one. */
static bool cpu_has_room(struct slot_wait *w) {
  int64_t t = now_ms();
  if (w->cpu_at > 0 && t - w->cpu_at < SLOT_CPU_LOOK_MS)
    return false; /* too short a window to tell */
  struct cpu_sample now;
  if (slot_cpu_read(&now) < 0)
    return true;
  bool window = w->cpu_at > 0 && t - w->cpu_at <= 1000;
  bool room = window && half_core_idle(&w->cpu, &now);
  w->cpu = now;
  w->cpu_at = t;
  return room;
}

bool slot_cpu_busy(const struct cpu_sample *since) {
  struct cpu_sample now;
  return slot_cpu_read(&now) < 0 || !half_core_idle(since, &now);
}

/* A free slot among n of dir for a call of a token whose busy share is
 * busy: one of the first busy at once, a further one while the CPU has
 * room (*cpu_wait set when it had none), or -EAGAIN. */
static int take_free(int dir, int n, int busy, struct slot_wait *w, bool *cpu_wait, mcp_error_t *err) {
  int r = take_range(dir, 0, busy < n ? busy : n, err);
  if (r != -EAGAIN || busy >= n)
    return r;
  if (!cpu_has_room(w)) {
    *cpu_wait = true;
    return -EAGAIN;
  }
  w->cpu_at = 0;
  return take_range(dir, busy, n, err);
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

/* ---- queues (see slots.h) ---- */

/* Up to max ticket names in queue folder q below `below` (all when NULL),
 * dot names (a ticket being made) left out: a new array of count strings. */
static char **ticket_names(int q, const char *below, size_t max, size_t *count) {
  *count = 0;
  if (lseek(q, 0, SEEK_SET) < 0)
    return NULL;
  char **names = NULL;
  size_t cap = 0;
  char buf[4096];
  while (*count < max) {
    ssize_t n = getdents64(q, buf, sizeof(buf));
    if (n <= 0)
      break;
    for (ssize_t off = 0; off < n && *count < max;) {
      struct dirent64 *d = (struct dirent64 *)(buf + off);
      off += d->d_reclen;
      if (d->d_name[0] == '.' || (below != NULL && strcmp(d->d_name, below) >= 0))
        continue;
      if (*count == cap) {
        size_t ncap = cap ? cap * 2 : 16;
        char **grown = realloc(names, ncap * sizeof(*names));
        if (grown == NULL)
          return names; /* what fits: a waiter looks again */
        names = grown;
        cap = ncap;
      }
      if ((names[*count] = strdup(d->d_name)) != NULL)
        (*count)++;
    }
  }
  return names;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Whether a live ticket stands in queue q before `mine` (any, when NULL).
 * Tickets whose supervisor died (unlocked) are removed on the way.  With
 * mine, the tickets are looked at from the nearest one ahead of it, and
 * the live one found (the next to go before mine) is named in *nearest
 * (when not NULL); without, from the oldest. */
static bool ticket_ahead(int q, const char *mine, char nearest[SLOT_TICKET_MAX]) {
  size_t n;
  char **names = ticket_names(q, mine, SIZE_MAX, &n);
  if (names == NULL)
    return false;
  qsort(names, n, sizeof(*names), by_name);
  bool ahead = false;
  for (size_t k = 0; k < n && !ahead; k++) {
    size_t i = mine != NULL ? n - 1 - k : k;
    int fd = openat(q, names[i], O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
      continue; /* it left */
    ahead = lock_held_elsewhere(fd);
    close(fd);
    if (!ahead)
      unlinkat(q, names[i], 0);
    else if (nearest != NULL)
      snprintf(nearest, SLOT_TICKET_MAX, "%s", names[i]);
  }
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
  return ahead;
}

/* Watch what moves w in its queue: the live ticket named `ahead` (its
 * unlink changes its link count: IN_ATTRIB), or with none ahead the
 * queue's folder, whose times change when a slot is released (wake_queue).
 * A waiter behind another is woken only when that one leaves, not at
 * every move of the line: under load (16 sessions on 2 cores) each end of
 * a call woke every waiter twice.  0; -ENOENT when `ahead` has left
 * already (look again).  Without a watch of its own (inotify's limits)
 * it watches the whole folder, as every waiter did before. */
static int watch_queue(struct slot_wait *w, const char *ahead) {
  const char *target = ahead != NULL ? ahead : "";
  if (w->watch >= 0 && strcmp(w->watched, target) == 0)
    return 0;
  if (w->watch >= 0)
    inotify_rm_watch(w->notify_fd, w->watch);
  w->watch = -1;
  w->watched[0] = '\0';
  char path[64 + SLOT_TICKET_MAX];
  snprintf(path, sizeof(path), "/proc/self/fd/%d%s%s", w->queue_dir, ahead != NULL ? "/" : "", target);
  uint32_t mask = ahead != NULL ? IN_ATTRIB | IN_DELETE_SELF : IN_ATTRIB | IN_ONLYDIR;
  int wd = inotify_add_watch(w->notify_fd, path, mask);
  if (wd < 0 && ahead != NULL && errno == ENOENT)
    return -ENOENT;
  if (wd < 0) {
    snprintf(path, sizeof(path), "/proc/self/fd/%d", w->queue_dir);
    if ((wd = inotify_add_watch(w->notify_fd, path, IN_ATTRIB | IN_DELETE | IN_ONLYDIR)) < 0)
      return 0; /* it looks again at its poll */
    target = "*";
  }
  w->watch = wd;
  snprintf(w->watched, sizeof(w->watched), "%s", target);
  return 0;
}

/* Whether a live ticket stands before w's in its queue, watching the
 * nearest such ticket, or the folder when none does (watch_queue). */
static bool behind_another(struct slot_wait *w) {
  char ahead[SLOT_TICKET_MAX];
  for (;;) {
    if (!ticket_ahead(w->queue_dir, w->ticket, ahead)) {
      watch_queue(w, NULL);
      /* A ticket that came ahead meanwhile (named earlier, moved in
       * later) is seen at the next look. */
      return false;
    }
    if (watch_queue(w, ahead) == 0)
      return true;
  }
}

static void leave_queue(struct slot_wait *w) {
  if (w->queue_dir >= 0) {
    unlinkat(w->queue_dir, w->ticket, 0); /* before the lock goes: never seen unlocked */
    close(w->ticket_fd);
    close(w->queue_dir);
  }
  if (w->notify_fd >= 0)
    close(w->notify_fd);
  *w = SLOT_WAIT_NONE;
}

/* Stand in the queue beside the slots of dir: a locked ticket named by
 * the monotonic clock (made under a dot name, so that it is never seen
 * unlocked), and an inotify instance (watch_queue says what it watches). */
static int join_queue(int dir, const char *token, struct slot_wait *w, mcp_error_t *err) {
  if (mkdirat(dir, "queue", 0700) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir slots queue");
  struct slot_wait n = SLOT_WAIT_NONE;
  snprintf(n.token, sizeof(n.token), "%s", token);
  n.cpu = w->cpu; /* a look at the CPU before it joined goes on */
  n.cpu_at = w->cpu_at;
  n.queue_dir = openat(dir, "queue", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (n.queue_dir < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open slots queue");
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  snprintf(n.ticket, sizeof(n.ticket), "%020llu-%d",
           (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec, (int)getpid());
  char tmp[sizeof(n.ticket) + 1];
  snprintf(tmp, sizeof(tmp), ".%s", n.ticket);
  int e = 0;
  n.ticket_fd = openat(n.queue_dir, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (n.ticket_fd < 0 || lock_try(n.ticket_fd) < 0 || renameat(n.queue_dir, tmp, n.queue_dir, n.ticket) < 0)
    e = errno ? errno : EIO;
  else if ((n.notify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0)
    e = errno;
  if (e != 0) {
    if (n.ticket_fd >= 0)
      unlinkat(n.queue_dir, tmp, 0);
    leave_queue(&n);
    return mcp_fail(err, MCP_ERR_INTERNAL, e, "join the slots queue");
  }
  *w = n;
  return 0;
}

/* One slot among n of dir (busy of them without a look at the CPU),
 * taken in turn: a call that is not queued takes one at once when nobody
 * waits, else joins the queue; a queued one takes one when no live ticket
 * is older.  0 with *fd set, -EAGAIN, or -1. */
static int take_in_turn(int dir, int n, int busy, const char *token, struct slot_wait *w, int *fd, bool *cpu_wait,
                        mcp_error_t *err) {
  if (w->queue_dir < 0) {
    cleanup_close int q = openat(dir, "queue", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (q < 0 || !ticket_ahead(q, NULL, NULL)) {
      int r = take_free(dir, n, busy, w, cpu_wait, err);
      if (r != -EAGAIN) {
        if (r >= 0)
          *fd = r;
        return r >= 0 ? 0 : -1;
      }
    }
    if (join_queue(dir, token, w, err) < 0)
      return -1;
    /* A slot freed before the watch was there woke nobody: look once more. */
  }
  if (behind_another(w))
    return -EAGAIN;
  int r = take_free(dir, n, busy, w, cpu_wait, err);
  if (r >= 0) {
    *fd = r;
    leave_queue(w);
    return 0;
  }
  return r == -EAGAIN ? -EAGAIN : -1;
}

static void drain(int fd) {
  char buf[4096];
  while (read(fd, buf, sizeof(buf)) > 0) {
  }
}

int slot_take(const struct mcp_config *cfg, const char *token, int token_max, int token_busy, struct slot_hold *h,
              struct slot_wait *w, enum slot_full *full, mcp_error_t *err) {
  *full = SLOT_FULL_NONE;
  int r = 0;
  bool cpu_wait = false;
  char name[80];
  token_dir_name(token, name);
  if (w->queue_dir >= 0 && strcmp(w->token, name) != 0)
    slot_wait_end(w, h); /* the supervisor's next call is another token's */
  if (w->notify_fd >= 0)
    drain(w->notify_fd);
  if (h->slots_dir < 0 && (h->slots_dir = slots_dir(cfg, err)) < 0)
    return -1;
  if (h->token_dir < 0 && (h->token_dir = sub_dir(h->slots_dir, name, err)) < 0)
    goto fail;
  if (h->token_fd < 0 &&
      (r = take_in_turn(h->token_dir, token_max, token_busy, name, w, &h->token_fd, &cpu_wait, err)) < 0) {
    if (r != -EAGAIN)
      goto fail;
    *full = cpu_wait ? SLOT_FULL_CPU : SLOT_FULL_TOKEN;
    return -EAGAIN;
  }
  r = take_in_turn(h->slots_dir, cfg->max_concurrent, cfg->max_concurrent, name, w, &h->global_fd, &cpu_wait, err);
  if (r == -EAGAIN) {
    *full = SLOT_FULL_GLOBAL;
    return -EAGAIN;
  }
  if (r < 0)
    goto fail;
  return 0;
fail:
  slot_wait_end(w, h);
  return -1;
}

int slot_wait_fd(const struct slot_wait *w) { return w->notify_fd; }

int slot_wait_ms(const struct slot_wait *w) { return w->cpu_at > 0 ? SLOT_CPU_LOOK_MS : SLOT_WAIT_POLL_MS; }

void slot_wait_end(struct slot_wait *w, struct slot_hold *h) {
  leave_queue(w);
  slot_release(h);
}

bool slot_global_full(const struct mcp_config *cfg, struct slot_hold *h) {
  if (h->slots_dir < 0)
    return true;
  mcp_error_t err = NULL;
  int fd = take_one(h->slots_dir, cfg->max_concurrent, &err);
  mcp_error_release(&err);
  if (fd < 0)
    return true;
  close(fd);
  return false;
}

/* Wake the first waiter of the queue beside dir's slots, if one waits:
 * the folder's times change (IN_ATTRIB), a write only while calls queue.
 * Dead tickets before the first live one are removed first (each removal
 * wakes the waiter that watches it): only the first waiter watches the
 * folder (watch_queue). */
static void wake_queue(int dir) {
  cleanup_close int q = openat(dir, "queue", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (q >= 0 && ticket_ahead(q, NULL, NULL))
    futimens(q, NULL);
}

void slot_release(struct slot_hold *h) {
  if (h->global_fd >= 0) {
    close(h->global_fd);
    wake_queue(h->slots_dir);
  }
  if (h->token_fd >= 0) {
    close(h->token_fd);
    wake_queue(h->token_dir);
  }
  if (h->slots_dir >= 0)
    close(h->slots_dir);
  if (h->token_dir >= 0)
    close(h->token_dir);
  *h = SLOT_HOLD_NONE;
}

/* A free one of n lock files below <state>/slots/<sub>, or -EAGAIN. */
static int take_below(const struct mcp_config *cfg, const char *sub, int n, mcp_error_t *err) {
  cleanup_close int sfd = slots_dir(cfg, err);
  if (sfd < 0)
    return -1;
  cleanup_close int dfd = sub_dir(sfd, sub, err);
  if (dfd < 0)
    return -1;
  return take_one(dfd, n, err);
}

int boot_slot_try(const struct mcp_config *cfg, mcp_error_t *err) {
  return take_below(cfg, "boot", cfg->max_starting, err);
}

/* How many awaited marks there are (slots.h). */
static int awaited_marks(const struct mcp_config *cfg) { return cfg->max_starting > 0 ? cfg->max_starting : 64; }

int awaited_boot_mark(const struct mcp_config *cfg, mcp_error_t *err) {
  return take_below(cfg, "awaited", awaited_marks(cfg), err);
}

/* How many of the lock files 0..n-1 of dirfd are held (by any open file
 * description, ours too), counted up to `enough`. */
static int held_below(int dirfd, int n, int enough) {
  int held = 0;
  for (int i = 0; i < n && held < enough; i++) {
    char name[16];
    snprintf(name, sizeof(name), "%d", i);
    cleanup_close int fd = openat(dirfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0 && lock_held_elsewhere(fd))
      held++;
  }
  return held;
}

bool awaited_boot_any(const struct mcp_config *cfg) {
  char dir[PATH_MAX];
  if (config_path(cfg, dir, sizeof(dir), "slots/awaited") < 0)
    return false;
  cleanup_close int afd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (afd < 0)
    return false; /* none was ever taken */
  return held_below(afd, awaited_marks(cfg), 1) > 0;
}

/* Whether the queue folder at path (below dirfd) holds a live ticket. */
static bool queue_waits(int dirfd, const char *path) {
  cleanup_close int q = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  return q >= 0 && ticket_ahead(q, NULL, NULL);
}

bool slot_others_wait(const struct mcp_config *cfg) {
  if (awaited_boot_any(cfg))
    return true;
  mcp_error_t err = NULL;
  cleanup_close int sfd = slots_dir(cfg, &err);
  if (sfd < 0) {
    mcp_error_release(&err);
    return false; /* no slot was ever taken */
  }
  if (queue_waits(sfd, "queue"))
    return true;
  int dfd = dup(sfd);
  DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
  if (d == NULL) {
    if (dfd >= 0)
      close(dfd);
    return false;
  }
  bool waits = false;
  struct dirent *e;
  while (!waits && (e = readdir(d)) != NULL) {
    char path[NAME_MAX + 8];
    if (strncmp(e->d_name, "t-", 2) == 0 && snprintf(path, sizeof(path), "%s/queue", e->d_name) < (int)sizeof(path))
      waits = queue_waits(sfd, path);
  }
  closedir(d);
  return waits;
}

bool slot_others_run(const struct mcp_config *cfg, const struct slot_hold *h) {
  mcp_error_t err = NULL;
  cleanup_close int sfd = slots_dir(cfg, &err);
  if (sfd < 0) {
    mcp_error_release(&err);
    return false; /* no slot was ever taken */
  }
  /* Our own slot is held by another open file description than the one
   * opened here, so it is seen too: counted, not told apart. */
  int own = h != NULL && h->global_fd >= 0 ? 1 : 0;
  return held_below(sfd, cfg->max_concurrent, own + 1) > own;
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
