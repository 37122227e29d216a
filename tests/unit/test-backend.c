/* The sandbox backend interface (backend.h) through its direct
 * implementation: the executor as a host process, driven over the same two
 * pipes and frames that the supervisor uses with runsc. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/frame.h"
#include "common/util.h"
#include "sandbox/backend.h"
#include "tap.h"

#define SANDBOX_ID "0123456789abcdef0123456789abcdef"

static char tmp[1024];
static struct mcp_config cfg;

static void ops_tests(void) {
  ok(sandbox_ops_for("direct") == &sandbox_direct_ops, "\"direct\" selects the direct backend");
  ok(sandbox_ops_for("runsc") == &sandbox_runsc_ops, "\"runsc\" selects runsc");
  is_str(sandbox_direct_ops.name, "direct", "direct ops are named");
  is_str(sandbox_runsc_ops.name, "runsc", "runsc ops are named");
  ok(sandbox_direct_ops.start && sandbox_direct_ops.destroy && sandbox_runsc_ops.start && sandbox_runsc_ops.destroy,
     "both implement start and destroy");
  ok(sandbox_runsc_ops.checkpoint && sandbox_runsc_ops.restore, "runsc implements checkpoint and restore");
  ok(!sandbox_direct_ops.checkpoint && !sandbox_direct_ops.restore, "direct does not: its sandboxes never hibernate");

  struct sandbox_ctx ctx;
  mcp_error_t err = NULL;
  is_int(sandbox_ctx_init(&ctx, &cfg, SANDBOX_ID, "/state/sessions/x", &err), 0, "sandbox_ctx_init");
  is_str(ctx.container_id, "mcp" SANDBOX_ID, "the container id is mcp + the sandbox id");
  is_str(ctx.dir, "/state/sessions/x", "the folder");
  is_int(ctx.pid, -1, "no process yet");
  static const char *const bad[] = {"",
                                    "0123",
                                    "0123456789ABCDEF0123456789ABCDEF",
                                    "0123456789abcdef0123456789abcdeg",
                                    "../0123456789abcdef0123456789abcd",
                                    SANDBOX_ID "0"};
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    ok(sandbox_ctx_init(&ctx, &cfg, bad[i], "/x", &err) < 0 && err != NULL, "sandbox id '%s' is refused", bad[i]);
    mcp_error_release(&err);
  }
  char *long_dir = malloc(PATH_MAX + 10);
  memset(long_dir, 'd', PATH_MAX + 9);
  long_dir[PATH_MAX + 9] = '\0';
  ok(sandbox_ctx_init(&ctx, &cfg, SANDBOX_ID, long_dir, &err) < 0, "a folder path longer than PATH_MAX is refused");
  mcp_error_release(&err);
  free(long_dir);
}

struct sandbox {
  struct sandbox_ctx ctx;
  int to_exec;   /* we write requests */
  int from_exec; /* we read frames */
  struct frame_reader r;
};

static bool start(struct sandbox *sb) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
    bail_out("pipe2");
  char dir[1100];
  snprintf(dir, sizeof(dir), "%s/session", tmp);
  mcp_error_t err = NULL;
  sandbox_ctx_init(&sb->ctx, &cfg, SANDBOX_ID, dir, &err);
  int r = sandbox_direct_ops.start(&sb->ctx, in[0], out[1], &err);
  close(in[0]);
  close(out[1]);
  sb->to_exec = in[1];
  sb->from_exec = out[0];
  frame_reader_init(&sb->r, 1 << 20);
  if (r < 0) {
    diag("start: %s", err->msg);
    mcp_error_release(&err);
  }
  return r == 0;
}

static void stop(struct sandbox *sb) {
  close(sb->to_exec);
  close(sb->from_exec);
  frame_reader_free(&sb->r);
}

static bool alive(pid_t pid) {
  char p[64], st[256] = "";
  snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(p, "r");
  if (f == NULL)
    return false;
  bool zombie = fgets(st, sizeof(st), f) != NULL && strstr(st, ") Z ") != NULL;
  fclose(f);
  return !zombie;
}

static bool wait_gone(pid_t pid, int ms) {
  for (int i = 0; i < ms / 10 && alive(pid); i++)
    usleep(10000);
  return !alive(pid);
}

static void request(struct sandbox *sb, const char *code, int timeout_ms) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "code", code);
  cJSON_AddNumberToObject(o, "timeout_ms", timeout_ms);
  cJSON_AddNumberToObject(o, "output_limit", 1000);
  char *text = cJSON_PrintUnformatted(o);
  frame_write(sb->to_exec, FRAME_REQUEST, text, strlen(text));
  free(text);
  cJSON_Delete(o);
}

/* The executor's children (its spares, between calls). */
static int children_of(pid_t pid, pid_t *out, int max) {
  char p[64];
  snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)pid, (int)pid);
  FILE *f = fopen(p, "r");
  int n = 0, v;
  while (f != NULL && n < max && fscanf(f, "%d", &v) == 1)
    if (alive(v))
      out[n++] = v;
  if (f != NULL)
    fclose(f);
  return n;
}

/* Wait until the executor has exactly one child other than `not`: its spare. */
static pid_t the_spare(pid_t executor, pid_t not, int ms) {
  for (int i = 0; i < ms / 20; i++) {
    pid_t kids[8];
    if (children_of(executor, kids, 8) == 1 && kids[0] != not )
      return kids[0];
    usleep(20000);
  }
  return -1;
}

/* The wake after a restore (frame W, sandbox/hibernate.h): the executor
 * answers Y again and replaces the spare it forked before the checkpoint,
 * which would start the next call from the image's random state; the next
 * call runs in the new spare (a call's process is its spare). */
static void wake_tests(struct sandbox *sb) {
  pid_t before = the_spare(sb->ctx.pid, -1, 10000);
  if (!ok(before > 0, "the executor forked its next spare (pid %d)", (int)before))
    return;
  const char *seed = "{\"seed\":\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\"}";
  frame_write(sb->to_exec, FRAME_WAKE, seed, strlen(seed));
  struct frame f;
  is_int(frame_read(&sb->r, sb->from_exec, now_ms() + 20000, &f), 1, "a frame answers the wake");
  ok(f.type == FRAME_READY && memmem(f.payload, f.len, "\"restored\": true", 16) != NULL, "Y, saying it was restored");
  ok(wait_gone(before, 5000), "the spare forked before the wake is gone");
  pid_t after = the_spare(sb->ctx.pid, before, 10000);
  ok(after > 0, "a new spare replaces it (pid %d)", (int)after);
  request(sb, "import os; print(os.getpid())", 10000);
  struct buf out = {0};
  while (frame_read(&sb->r, sb->from_exec, now_ms() + 20000, &f) == 1 && f.type != FRAME_DONE)
    if (f.type == FRAME_STDOUT)
      buf_append(&out, f.payload, f.len);
  char want[32];
  snprintf(want, sizeof(want), "%d\n", (int)after);
  is_mem(out.data, out.len, want, strlen(want), "the next call runs in the new spare");
  buf_free(&out);

  /* H before a checkpoint: the spares go at once (the image is smaller);
   * the wake forks new ones. */
  pid_t spare = the_spare(sb->ctx.pid, after, 10000);
  frame_write(sb->to_exec, FRAME_HIBERNATE, NULL, 0);
  is_int(frame_read(&sb->r, sb->from_exec, now_ms() + 20000, &f), 1, "a frame answers H");
  is_int(f.type, FRAME_HIBERNATE, "H, once the spares are gone");
  ok(spare > 0 && !alive(spare), "the spare is gone before the checkpoint");
  frame_write(sb->to_exec, FRAME_WAKE, seed, strlen(seed));
  ok(frame_read(&sb->r, sb->from_exec, now_ms() + 20000, &f) == 1 && f.type == FRAME_READY, "Y after the wake");
  ok(the_spare(sb->ctx.pid, spare, 10000) > 0, "with a new spare");
}

static void direct_tests(void) {
  struct sandbox sb;
  if (!ok(start(&sb), "start the direct backend"))
    return;
  ok(sb.ctx.pid > 0 && alive(sb.ctx.pid), "the executor runs (pid %d)", (int)sb.ctx.pid);
  /* The child makes itself a session leader right after fork: give it a moment. */
  for (int i = 0; i < 100 && getsid(sb.ctx.pid) != sb.ctx.pid; i++)
    usleep(10000);
  ok(getpgid(sb.ctx.pid) == sb.ctx.pid, "in its own process group");
  ok(getsid(sb.ctx.pid) == sb.ctx.pid, "in its own session (destroy() kills the whole session)");
  struct frame f;
  is_int(frame_read(&sb.r, sb.from_exec, now_ms() + 20000, &f), 1, "a frame arrives");
  is_int(f.type, FRAME_READY, "the executor reports readiness first");
  cJSON *ready = cJSON_ParseWithLength(f.payload, f.len);
  ok(cJSON_IsString(cJSON_GetObjectItem(ready, "python")), "with the Python version");
  cJSON_Delete(ready);

  request(&sb, "import os; print(6 * 7); print(os.getcwd())", 10000);
  struct buf out = {0};
  int done = 0, accepted = 0;
  while (frame_read(&sb.r, sb.from_exec, now_ms() + 20000, &f) == 1) {
    if (f.type == FRAME_ACCEPTED)
      accepted += out.len == 0 && f.len == 0 ? 1 : 100;
    if (f.type == FRAME_STDOUT)
      buf_append(&out, f.payload, f.len);
    if (f.type == FRAME_DONE) {
      cJSON *d = cJSON_ParseWithLength(f.payload, f.len);
      done = 1;
      is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(d, "exit_code")), 0, "the call exits 0");
      cJSON_Delete(d);
      break;
    }
  }
  ok(done, "a D frame ends the call");
  is_int(accepted, 1, "one empty A frame, before the output, says the executor took the call");
  char want[1200];
  snprintf(want, sizeof(want), "42\n%s/session/work\n", tmp);
  is_str(out.data, want, "stdout, with the workspace as working directory");
  buf_free(&out);
  wake_tests(&sb);

  /* Destroy while a call runs: every process of the sandbox goes. */
  request(&sb, "import os, time; open('call.pid', 'w').write(str(os.getpid())); time.sleep(60)", 100000);
  is_int(frame_read(&sb.r, sb.from_exec, now_ms() + 20000, &f), 1, "a frame arrives");
  is_int(f.type, FRAME_ACCEPTED, "the executor takes the call");
  char pidfile[1200];
  snprintf(pidfile, sizeof(pidfile), "%s/session/work/call.pid", tmp);
  pid_t call = 0;
  for (int i = 0; i < 500 && call <= 0; i++) {
    FILE *p = fopen(pidfile, "r");
    if (p != NULL) {
      int v = 0;
      if (fscanf(p, "%d", &v) == 1)
        call = v;
      fclose(p);
    }
    if (call <= 0)
      usleep(10000);
  }
  ok(call > 0 && alive(call), "a call is running (pid %d)", (int)call);
  pid_t executor = sb.ctx.pid;
  mcp_error_t err = NULL;
  is_int(sandbox_direct_ops.destroy(&sb.ctx, &err), 0, "destroy");
  ok(!alive(executor), "the executor is gone at once");
  ok(call > 0 && wait_gone(call, 2000), "the running call's process is gone too");
  if (call > 0 && alive(call))
    kill(call, SIGKILL);
  is_int(sb.ctx.pid, -1, "the context forgets the pid");
  is_int(sandbox_direct_ops.destroy(&sb.ctx, &err), 0, "a second destroy is harmless");
  is_int(frame_read(&sb.r, sb.from_exec, now_ms() + 5000, &f), 0, "the executor's pipe is at EOF");
  stop(&sb);
}

static bool exists_in(const char *dir, const char *name) {
  char path[1400];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  return access(path, F_OK) == 0;
}

/* runsc_forget_stale: the runsc state of an earlier boot or PID namespace
 * goes without a signal; the state of this one stays. */
static void stale_state_tests(void) {
  struct mcp_config c;
  config_defaults(&c);
  char state[1200], root[1300], mark[1300];
  snprintf(state, sizeof(state), "%s/state", tmp);
  snprintf(root, sizeof(root), "%s/runsc", state);
  snprintf(mark, sizeof(mark), "%s/" RUNSC_INCARNATION, state);
  snprintf(c.state_dir, sizeof(c.state_dir), "%s", state);
  mkdir(state, 0700);
  mkdir(root, 0700);
  const char *st = "mcp" SANDBOX_ID "_sandbox:mcp" SANDBOX_ID ".state";
  char path[1400];
  snprintf(path, sizeof(path), "%s/%s", root, st);
  /* The state names a PID: ours.  Had it been signalled, this test would die. */
  char text[64];
  snprintf(text, sizeof(text), "{\"sandbox\":{\"pid\":%d}}", (int)getpid());
  mcp_error_t err = NULL;
  int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ok(write_file_atomic(rfd, st, text, strlen(text), 0600, &err) == 0, "a container's state file");
  ok(runsc_forget_stale(&c, &err) == 0, "no incarnation file yet: ok");
  ok(exists_in(root, st), "without one, the state stays (reaped as before)");
  ok(access(mark, F_OK) == 0, "and the incarnation is written");
  ok(runsc_forget_stale(&c, &err) == 0 && exists_in(root, st), "the same boot and namespace: the state stays");
  int sfd = open(state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ok(write_file_atomic(sfd, RUNSC_INCARNATION, "another-boot 4026531836", 23, 0600, &err) == 0,
     "an earlier boot or container wrote the state");
  ok(mkdirat(rfd, "mcp" SANDBOX_ID, 0700) == 0, "and a folder of runsc's");
  ok(runsc_forget_stale(&c, &err) == 0, "forgotten: ok");
  ok(!exists_in(root, st) && !exists_in(root, "mcp" SANDBOX_ID), "its state is gone, and nothing was signalled");
  cleanup_free char *now = NULL;
  int r = read_file_at(sfd, RUNSC_INCARNATION, 128, &now, NULL, &err);
  ok(r == 0 && strcmp(now, "another-boot 4026531836") != 0, "the incarnation is this one's now: %s",
     r == 0 ? now : "?");
  close(rfd);
  close(sfd);
  mcp_error_release(&err);
}

int main(void) {
  if (access("/usr/bin/python3", X_OK) < 0)
    skip_all("/usr/bin/python3, which the direct backend runs, is not installed");
  signal(SIGPIPE, SIG_IGN);
  const char *t = getenv("TMPDIR");
  snprintf(tmp, sizeof(tmp), "%s/mcp-backend-XXXXXX", t && *t ? t : "/tmp");
  if (mkdtemp(tmp) == NULL)
    bail_out("mkdtemp");
  char p[1200];
  snprintf(p, sizeof(p), "%s/session", tmp);
  mkdir(p, 0700);
  snprintf(p, sizeof(p), "%s/session/work", tmp);
  mkdir(p, 0700);
  snprintf(p, sizeof(p), "%s/executor", tmp);
  if (symlink(TEST_SRCDIR "/executor", p) < 0)
    bail_out("symlink: %s", strerror(errno));
  config_defaults(&cfg);
  snprintf(cfg.libexec_dir, sizeof(cfg.libexec_dir), "%s", tmp);
  snprintf(cfg.backend, sizeof(cfg.backend), "direct");

  ops_tests();
  direct_tests();
  stale_state_tests();

  mcp_error_t err = NULL;
  int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  remove_tree_at(root, tmp + 1, &err);
  close(root);
  return done_testing();
}
