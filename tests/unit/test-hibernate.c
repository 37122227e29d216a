/* sandbox/hibernate.c without gVisor: its decisions (when a sandbox is due,
 * never in the pool, never while call.lock is held elsewhere) and its files
 * (the image published with its information, the state-lost note, the audit
 * lines), driven through a backend of this test's own behind the same ops
 * table.  Its checkpoint writes a file where runsc writes its image; what
 * runsc itself does is the integration suite's business (hibernate.test.mjs). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/client.h"
#include "sandbox/hibernate.h"
#include "tap.h"

#define SANDBOX_ID "0123456789abcdef0123456789abcdef"
#define SESSION "fedcba9876543210fedcba9876543210"

static char tmp[1024];
static struct mcp_config cfg;

/* The test backend: what it was asked, and whether it fails. */
static struct {
  int starts, destroys, checkpoints, restores;
  bool checkpoint_fails, restore_fails;
  char restored_from[PATH_MAX];
} be;

static int t_start(struct sandbox_ctx *ctx, int in, int out, mcp_error_t *err) {
  (void)ctx, (void)in, (void)out, (void)err;
  be.starts++;
  return 0;
}
static int t_destroy(struct sandbox_ctx *ctx, mcp_error_t *err) {
  (void)ctx, (void)err;
  be.destroys++;
  return 0;
}
static int t_checkpoint(struct sandbox_ctx *ctx, const char *image_dir, mcp_error_t *err) {
  (void)ctx;
  be.checkpoints++;
  if (be.checkpoint_fails)
    return mcp_fail(err, MCP_ERR_SANDBOX, 0, "checkpoint refused by the test");
  char path[PATH_MAX + 32];
  snprintf(path, sizeof(path), "%s/checkpoint.img", image_dir);
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "test image");
  fputs("the sandbox's memory", f);
  fclose(f);
  return 0;
}
static int t_restore(struct sandbox_ctx *ctx, const char *image_dir, int in, int out, mcp_error_t *err) {
  (void)ctx, (void)in, (void)out;
  be.restores++;
  snprintf(be.restored_from, sizeof(be.restored_from), "%s", image_dir);
  return be.restore_fails ? mcp_fail(err, MCP_ERR_SANDBOX, 0, "restore refused by the test") : 0;
}
static const struct sandbox_ops test_ops = {"test", t_start, t_destroy, t_checkpoint, t_restore};

static bool exists(int dirfd, const char *name) { return faccessat(dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0; }

static char *audit_text(void) {
  char *text = NULL;
  mcp_error_t err = NULL;
  if (read_file_at(AT_FDCWD, cfg.audit_log, 1 << 20, &text, NULL, &err) < 0)
    mcp_error_release(&err);
  return text;
}

/* call.lock is held (by h) until hibernate_release(), then free. */
static void held_until_release(struct hibernation *h, int dirfd, const char *why) {
  int probe = openat(dirfd, CALL_LOCK, O_RDWR | O_CLOEXEC);
  ok(lock_held_elsewhere(probe), "call.lock stays held: %s", why);
  hibernate_release(h);
  ok(!lock_held_elsewhere(probe), "hibernate_release lets the responders in");
  close(probe);
}

static int open_folder(const char *sub) {
  char p[1200];
  snprintf(p, sizeof(p), "%s/%s", tmp, sub);
  int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    bail_out("open %s: %s", p, strerror(errno));
  return fd;
}

static void when_due(int dirfd, struct sandbox_ctx *sb) {
  struct hibernation h;
  hibernate_init(&h, &cfg, &sandbox_direct_ops, dirfd);
  hibernate_idle(&h, "alice");
  h.idle_since -= 5000;
  ok(!hibernate_due(&h, now_ms()), "a backend without checkpoint never hibernates");
  is_int(hibernate_timeout_ms(&h, now_ms()), -1, "... and sets no timeout");

  hibernate_init(&h, &cfg, &test_ops, dirfd);
  ok(!hibernate_due(&h, now_ms()), "not due before the sandbox was ever ready");
  hibernate_idle(&h, "alice");
  int left = hibernate_timeout_ms(&h, now_ms());
  ok(left > 500 && left <= 1000, "due in hibernate_after (1 s): %d ms", left);
  ok(!hibernate_due(&h, now_ms()), "not due while idle for less");
  h.idle_since -= 1500;
  ok(hibernate_due(&h, now_ms()), "due once idle for hibernate_after in a session's folder");

  cleanup_close int pool = open_folder("pool/" SANDBOX_ID);
  hibernate_init(&h, &cfg, &test_ops, pool);
  hibernate_idle(&h, NULL);
  h.idle_since -= 5000;
  ok(!hibernate_due(&h, now_ms()), "a pre-started sandbox (pool/) is never due");
  ok(now_ms() - h.idle_since < 1000, "... and its idle time counts again from now (from its claim on)");
  (void)sb;
}

static void save_tests(int dirfd, struct sandbox_ctx *sb) {
  struct hibernation h;
  mcp_error_t err = NULL;
  hibernate_init(&h, &cfg, &test_ops, dirfd);
  hibernate_idle(&h, "alice");
  /* A responder in the middle of a call holds call.lock. */
  int held = openat(dirfd, CALL_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ok(held >= 0 && lock_try(held) == 0, "a responder holds call.lock");
  ok(!hibernate_begin(&h), "no hibernation while a responder holds call.lock");
  ok(!hibernate_due(&h, now_ms() + 500), "... the sandbox counts as idle from now");
  close(held);
  is_int(hibernate_save(&h, sb, &err), -1, "no checkpoint without hibernate_begin");
  mcp_error_release(&err);
  is_int(be.checkpoints, 0, "... none was made");

  ok(hibernate_begin(&h), "hibernate_begin takes call.lock once it is free");
  is_int(hibernate_save(&h, sb, &err), 0, "hibernate_save checkpoints");
  if (err != NULL)
    diag("%s", err->msg), mcp_error_release(&err);
  is_int(be.checkpoints, 1, "one checkpoint");
  ok(be.destroys >= 1, "the checkpointed sandbox is destroyed");
  ok(exists(dirfd, HIBERNATE_DIR "/checkpoint.img"), "the image is published as hibernated/");
  ok(!exists(dirfd, HIBERNATE_NEW_DIR), "hibernate.new/ is gone");
  cleanup_free char *info = NULL;
  ok(read_file_at(dirfd, HIBERNATE_DIR "/" HIBERNATE_INFO, 4096, &info, NULL, &err) == 0, "with info.json");
  like(info, "\"version\":\"" PACKAGE_VERSION "\"", "info.json names the version");
  like(info, "\"token\":\"alice\"", "info.json names the last call's token");
  like(info, "\"image_bytes\":20", "info.json has the image's size");
  held_until_release(&h, dirfd, "until the supervisor exits");
  cleanup_free char *log = audit_text();
  like(log, "\"event\":\"hibernated\",\"session_id\":\"" SESSION "\",\"token\":\"alice\"",
       "an audit line for the hibernation");
}

static void restore_tests(int dirfd, struct sandbox_ctx *sb) {
  struct hibernation h;
  mcp_error_t err = NULL;
  hibernate_init(&h, &cfg, &test_ops, dirfd);
  mkdirat(dirfd, HIBERNATE_NEW_DIR, 0700); /* an image a crash left half-written */
  is_int(hibernate_start(&h, sb, -1, -1, &err), 1, "a folder with an image is restored");
  like(be.restored_from, "/" HIBERNATE_DIR, "from hibernated/");
  ok(!exists(dirfd, HIBERNATE_NEW_DIR), "a half-written image is removed at start");
  ok(h.restoring && exists(dirfd, HIBERNATE_DIR), "the image stays until the executor answers its wake");
  is_int(be.starts, 0, "no new sandbox is booted");
  hibernate_woke(&h, sb);
  ok(!h.restoring && !exists(dirfd, HIBERNATE_DIR), "once it answered, the image is gone (never restored twice)");
  char extra[128] = "\"egress_limited\":true";
  hibernate_result_extra(&h, extra, sizeof(extra));
  is_str(extra, "\"egress_limited\":true,\"restored\":true", "the next result says restored");
  hibernate_result_sent(&h);
  extra[0] = '\0';
  hibernate_result_extra(&h, extra, sizeof(extra));
  is_str(extra, "", "... only once");
  is_int(hibernate_start(&h, sb, -1, -1, &err), 0, "without an image, a new sandbox boots");
  is_int(be.starts, 1, "booted");
  ok(!exists(dirfd, STATE_LOST_FILE), "with nothing to say");

  /* A checkpoint the service's end interrupted: no image, and the sandbox
   * it was of is gone. */
  mkdirat(dirfd, HIBERNATE_NEW_DIR, 0700);
  hibernate_init(&h, &cfg, &test_ops, dirfd);
  is_int(hibernate_start(&h, sb, -1, -1, &err), 0, "an interrupted checkpoint: a new sandbox boots");
  ok(!exists(dirfd, HIBERNATE_NEW_DIR), "the half-written image is removed");
  ok(h.state_lost && exists(dirfd, STATE_LOST_FILE), "and the next result says state_lost");
  hibernate_result_sent(&h);
}

/* A hibernated folder whose image cannot be used, in the way `how` says. */
static void lost_case(int dirfd, struct sandbox_ctx *sb, const char *how) {
  struct hibernation h;
  mcp_error_t err = NULL;
  hibernate_init(&h, &cfg, &test_ops, dirfd);
  hibernate_idle(&h, "alice");
  h.idle_since -= 5000;
  ok(hibernate_begin(&h) && hibernate_save(&h, sb, &err) == 0, "%s: hibernated", how);
  hibernate_release(&h);
  int restores = be.restores, starts = be.starts;
  if (strcmp(how, "another version") == 0) {
    const char *other = "{\"format\":1,\"version\":\"0.0-other\",\"token\":\"alice\"}";
    write_file_atomic(dirfd, HIBERNATE_DIR "/" HIBERNATE_INFO, other, strlen(other), 0600, &err);
  }
  be.restore_fails = strcmp(how, "a failed restore") == 0;
  hibernate_init(&h, &cfg, &test_ops, dirfd);
  is_int(hibernate_start(&h, sb, -1, -1, &err), 0, "%s: a new sandbox boots instead", how);
  is_int(be.restores - restores, strcmp(how, "another version") == 0 ? 0 : 1, "%s: restores tried", how);
  is_int(be.starts - starts, 1, "%s: one boot", how);
  ok(!exists(dirfd, HIBERNATE_DIR), "%s: the image is gone", how);
  ok(exists(dirfd, STATE_LOST_FILE), "%s: the state-lost note is on disk", how);
  struct hibernation again;
  hibernate_init(&again, &cfg, &test_ops, dirfd);
  ok(again.state_lost, "%s: a later supervisor still says it", how);
  char extra[64] = "";
  hibernate_result_extra(&again, extra, sizeof(extra));
  is_str(extra, "\"state_lost\":true", "%s: the next result says state_lost", how);
  hibernate_result_sent(&again);
  ok(!exists(dirfd, STATE_LOST_FILE), "%s: said once, the note goes", how);
  be.restore_fails = false;
}

static void failed_checkpoint(int dirfd, struct sandbox_ctx *sb) {
  struct hibernation h;
  mcp_error_t err = NULL;
  hibernate_init(&h, &cfg, &test_ops, dirfd);
  hibernate_idle(&h, "alice");
  h.idle_since -= 5000;
  be.checkpoint_fails = true;
  ok(hibernate_begin(&h), "begin");
  is_int(hibernate_save(&h, sb, &err), -1, "a failed checkpoint fails hibernate_save");
  ok(err != NULL, "with an error");
  mcp_error_release(&err);
  ok(!exists(dirfd, HIBERNATE_DIR) && !exists(dirfd, HIBERNATE_NEW_DIR), "and leaves no image");
  ok(!hibernate_due(&h, now_ms()), "the sandbox is not checkpointed again");
  held_until_release(&h, dirfd, "the supervisor decides (a sandbox that survived goes on)");
  cleanup_free char *log = audit_text();
  like(log, "\"event\":\"hibernate_failed\"", "an audit line for the failure");
  be.checkpoint_fails = false;
}

int main(void) {
  const char *t = getenv("TMPDIR");
  snprintf(tmp, sizeof(tmp), "%s/mcp-hibernate-XXXXXX", t && *t ? t : "/tmp");
  if (mkdtemp(tmp) == NULL)
    bail_out("mkdtemp");
  static const char *const dirs[] = {"sessions", "sessions/" SESSION, "sessions/" SESSION "/work", "pool",
                                     "pool/" SANDBOX_ID};
  for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
    char p[1200];
    snprintf(p, sizeof(p), "%s/%s", tmp, dirs[i]);
    if (mkdir(p, 0700) < 0)
      bail_out("mkdir %s", p);
  }
  config_defaults(&cfg);
  snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", tmp);
  snprintf(cfg.audit_log, sizeof(cfg.audit_log), "%s/audit.log", tmp);
  cfg.hibernate_after = 1;
  cfg.disk_floor = 0;
  cleanup_close int dirfd = open_folder("sessions/" SESSION);
  struct sandbox_ctx sb;
  char dir[1200];
  snprintf(dir, sizeof(dir), "%s/sessions/" SESSION, tmp);
  mcp_error_t err = NULL;
  if (sandbox_ctx_init(&sb, &cfg, SANDBOX_ID, dir, &err) < 0)
    bail_out("sandbox_ctx_init");

  when_due(dirfd, &sb);
  save_tests(dirfd, &sb);
  restore_tests(dirfd, &sb);
  lost_case(dirfd, &sb, "another version");
  lost_case(dirfd, &sb, "a failed restore");
  failed_checkpoint(dirfd, &sb);

  int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  remove_tree_at(root, tmp + 1, &err);
  close(root);
  return done_testing();
}
