/* common/util.c: file access below a directory fd, which the service uses
 * on folders whose content sandboxed code controls (openat with
 * O_NOFOLLOW; Judge0 was escaped through a followed symlink), and the small
 * helpers the session store relies on. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tap.h"

static char tmp[1024];
static int tmp_fd;

static void put(int dirfd, const char *name, const char *text) {
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write_all(fd, text, strlen(text)) < 0)
    bail_out("write %s: %s", name, strerror(errno));
  close(fd);
}

static void id_tests(void) {
  char u[SESSION_ID_MAX], x[33], c[SESSION_ID_MAX], cell[CELL_NAME_MAX + 1];
  session_id_new("", u);
  random_hex32(x);
  ok(session_id_valid(u) && strlen(u) == 32, "session_id_new without a cell makes 32 hex (%s)", u);
  ok(is_hex32(x), "random_hex32 makes 32 hex (%s)", x);
  char u2[SESSION_ID_MAX];
  session_id_new("", u2);
  ok(strcmp(u, u2) != 0, "two are different");
  session_id_new("cell-7", c);
  ok(session_id_valid(c) && strncmp(c, "cell-7.", 7) == 0, "with a cell: cell.hex (%s)", c);
  session_id_cell(c, cell);
  is_str(cell, "cell-7", "the cell of an id");
  session_id_cell(u, cell);
  is_str(cell, "", "an id without a cell names none");
  static const char *const not_ids[] = {NULL,
                                        "",
                                        "00000000-0000-4000-8000-000000000000",
                                        "0123456789abcdef0123456789abcde",
                                        "0123456789abcdef0123456789abcdef0",
                                        "0123456789abcdef0123456789abcdeF",
                                        ".0123456789abcdef0123456789abcdef",
                                        "-cell.0123456789abcdef0123456789abcdef",
                                        "cell-.0123456789abcdef0123456789abcdef",
                                        "Cell.0123456789abcdef0123456789abcdef",
                                        "a.b.0123456789abcdef0123456789abcdef",
                                        "../../etc/passwd/../../../../../../..",
                                        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.0123456789abcdef0123456789abcdef"};
  for (size_t i = 0; i < ARRAY_SIZE(not_ids); i++)
    ok(!session_id_valid(not_ids[i]), "'%s' is not a session id", not_ids[i] ? not_ids[i] : "(null)");
  ok(!is_hex32(NULL) && !is_hex32("") && !is_hex32("0123456789abcdef0123456789abcdeF") &&
         !is_hex32("0123456789abcdef0123456789abcdef0") && !is_hex32("0123456789abcdef0123456789abcde"),
     "is_hex32 refuses upper case and wrong lengths");
}

static void read_tests(void) {
  mcp_error_t err = NULL;
  char *text = NULL;
  size_t len = 0;
  put(tmp_fd, "plain", "hello");
  is_int(read_file_at(tmp_fd, "plain", 100, &text, &len, &err), 0, "read_file_at a regular file");
  is_str(text, "hello", "its content");
  is_int(len, 5, "its length");
  free(text);
  text = NULL;

  is_int(read_file_at(tmp_fd, "plain", 4, &text, &len, &err), -EFBIG, "a file larger than max is refused");
  mcp_error_release(&err);
  if (symlinkat("plain", tmp_fd, "link") < 0)
    bail_out("symlink");
  is_int(read_file_at(tmp_fd, "link", 100, &text, &len, &err), -ELOOP, "a symlink is not followed");
  mcp_error_release(&err);
  ok(text == NULL, "and nothing is returned");
  if (mkfifoat(tmp_fd, "fifo", 0600) < 0)
    bail_out("mkfifo");
  ok(read_file_at(tmp_fd, "fifo", 100, &text, &len, &err) < 0, "a FIFO is refused, without blocking");
  mcp_error_release(&err);
  is_int(read_file_at(tmp_fd, "missing", 100, &text, &len, &err), -ENOENT, "a missing file");
  ok(err != NULL && err->kind == MCP_ERR_NOT_FOUND, "is a not-found error");
  mcp_error_release(&err);
  mkdirat(tmp_fd, "adir", 0700);
  ok(read_file_at(tmp_fd, "adir", 100, &text, &len, &err) < 0, "a directory is refused");
  mcp_error_release(&err);
}

static void write_tests(void) {
  mcp_error_t err = NULL;
  mode_t old = umask(077);
  is_int(write_file_atomic(tmp_fd, "shared", "x", 1, 0644, &err), 0, "write_file_atomic under umask 077");
  umask(old);
  struct stat st;
  fstatat(tmp_fd, "shared", &st, 0);
  is_int(st.st_mode & 0777, 0644, "the mode asked for, whatever the umask");

  /* A symlink planted at the target is replaced, not written through. */
  put(tmp_fd, "outside", "original");
  if (symlinkat("outside", tmp_fd, "meta.json") < 0)
    bail_out("symlink");
  is_int(write_file_atomic(tmp_fd, "meta.json", "new", 3, 0600, &err), 0, "write over a symlink");
  char *text = NULL;
  read_file_at(tmp_fd, "outside", 100, &text, NULL, &err);
  is_str(text, "original", "the link's target is untouched");
  free(text);
  ok(fstatat(tmp_fd, "meta.json", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode), "the link became a file");

  char deep[1200];
  snprintf(deep, sizeof(deep), "%s/p/q/r", tmp);
  is_int(mkdir_p(deep, 0700, &err), 0, "mkdir_p of a new path");
  is_int(mkdir_p(deep, 0700, &err), 0, "and again");

  struct buf b = {0};
  for (int i = 0; i < 1000; i++)
    buf_append(&b, "0123456789", 10);
  ok(b.len == 10000 && b.data[b.len] == '\0' && memcmp(b.data + 9990, "0123456789", 10) == 0,
     "buf_append grows and keeps a NUL after the data");
  is_int(buf_append(&b, NULL, 0), 0, "appending nothing is fine");
  buf_free(&b);
  ok(b.data == NULL && b.len == 0, "buf_free empties");
}

/* log_open: the audit and egress logs, as a file or standard error. */
static void log_tests(void) {
  char path[1200], line[64];
  snprintf(path, sizeof(path), "%s/audit.log", tmp);
  mode_t old = umask(0);
  for (int i = 0; i < 2; i++) {
    int fd = log_open(path);
    snprintf(line, sizeof(line), "{\"n\":%d}\n", i);
    ok(fd >= 0 && write_all(fd, line, strlen(line)) == 0, "a file log takes line %d", i);
    if (fd >= 0)
      close(fd);
  }
  umask(old);
  char *text = NULL;
  mcp_error_t err = NULL;
  read_file_at(tmp_fd, "audit.log", 100, &text, NULL, &err);
  is_str(text, "{\"n\":0}\n{\"n\":1}\n", "lines are appended, not overwritten");
  free(text);
  struct stat st;
  ok(fstatat(tmp_fd, "audit.log", &st, 0) == 0 && (st.st_mode & 0777) == 0600, "created 0600 whatever the umask");
  if (symlinkat("audit.log", tmp_fd, "link.log") < 0)
    bail_out("symlink");
  snprintf(path, sizeof(path), "%s/link.log", tmp);
  errno = 0;
  int fd = log_open(path);
  ok(fd < 0 && errno == ELOOP, "never through a symlink");
  if (fd >= 0)
    close(fd);

  /* "stderr": this process's standard error, here a pipe. */
  int p[2];
  if (pipe(p) < 0)
    bail_out("pipe");
  int saved = dup(STDERR_FILENO);
  if (saved < 0 || dup2(p[1], STDERR_FILENO) < 0)
    bail_out("dup2");
  close(p[1]);
  fd = log_open("stderr");
  bool wrote = fd > STDERR_FILENO && write_all(fd, "{\"to\":\"stderr\"}\n", 17) == 0;
  int flags = fd >= 0 ? fcntl(fd, F_GETFD) : 0;
  if (fd >= 0)
    close(fd);
  if (dup2(saved, STDERR_FILENO) < 0)
    bail_out("dup2 back");
  close(saved);
  ok(wrote, "stderr opens a descriptor of its own, which takes a line");
  ok(flags & FD_CLOEXEC, "close-on-exec, as a file's");
  char got[64] = "";
  ssize_t n = read(p[0], got, sizeof(got) - 1);
  got[n > 0 ? n : 0] = '\0';
  close(p[0]);
  is_str(got, "{\"to\":\"stderr\"}\n", "the line reached standard error");
  ok(fstat(STDERR_FILENO, &st) == 0, "standard error is still open after the log's descriptor closed");
  ok(faccessat(AT_FDCWD, "stderr", F_OK, AT_SYMLINK_NOFOLLOW) < 0, "and no file named stderr was made here");
}

/* Build a tree as sandboxed code could leave it: links out of it, folders
 * without any permission, deep nesting.  Returns 0 when all is built. */
static int hostile_tree(int parent, const char *name, int depth, bool locked) {
  if (mkdirat(parent, name, 0700) < 0)
    return -1;
  int top = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (top < 0)
    return -1;
  char target[1200];
  snprintf(target, sizeof(target), "%s/keep", tmp);
  if (symlinkat(target, top, "dir_link") < 0)
    return -1;
  snprintf(target, sizeof(target), "%s/keep/file", tmp);
  if (symlinkat(target, top, "file_link") < 0)
    return -1;
  if (!locked)
    goto nest;
  mkdirat(top, "locked", 0700);
  int l = openat(top, "locked", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  mkdirat(l, "inner", 0700);
  put(l, "x", "x");
  if (fchmodat(l, "inner", 0, 0) < 0 || fchmod(l, 0) < 0)
    return -1;
  close(l);
nest:;
  int fd = dup(top);
  for (int i = 0; i < depth; i++) {
    if (mkdirat(fd, "d", 0700) < 0)
      return -1;
    int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(fd);
    if (next < 0)
      return -1;
    fd = next;
  }
  put(fd, "bottom", "b");
  close(fd);
  close(top);
  return 0;
}

/* In a child, as the tree's owner without privileges when we are root
 * (root's DAC override would hide permission problems).  Exit status: 0
 * removed, 1 not built, 2 remove_tree_at failed, 3 something is left. */
static int remove_as_owner(const char *name, int depth, bool locked, bool drop, rlim_t nofile) {
  pid_t pid = fork();
  if (pid == 0) {
    if (drop && (setgid(65534) < 0 || setuid(65534) < 0))
      _exit(1);
    struct rlimit rl = {nofile, nofile};
    setrlimit(RLIMIT_NOFILE, &rl);
    if (hostile_tree(tmp_fd, name, depth, locked) < 0)
      _exit(1);
    mcp_error_t err = NULL;
    if (remove_tree_at(tmp_fd, name, &err) < 0) {
      fprintf(stderr, "remove_tree_at: %s\n", err->msg);
      _exit(2);
    }
    _exit(faccessat(tmp_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ? 3 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void remove_tests(void) {
  mkdirat(tmp_fd, "keep", 0755);
  put(tmp_fd, "keep/file", "keep");
  bool root = geteuid() == 0;
  if (root) {
    /* The unprivileged child must be able to work in tmp. */
    if (fchown(tmp_fd, 65534, 65534) < 0)
      bail_out("chown: %s", strerror(errno));
  }
  is_int(remove_as_owner("t1", 10, true, false, 1024), 0,
         "remove_tree_at: links, a folder without permissions, 10 levels");
  /* remove_tree_at says the owner restores permissions;
   * root would not need to, so the owner is tried without privileges. */
  if (root)
    is_int(remove_as_owner("t2", 10, true, true, 1024), 0, "the same as an unprivileged owner");
  else
    ok(1, "the same as an unprivileged owner (we are one)");
  /* Sandboxed code can nest folders as deep as it likes (mkdir + chdir). */
  is_int(remove_as_owner("t3", 3000, false, false, 1024), 0, "3000 nested folders under RLIMIT_NOFILE 1024");
  is_int(remove_as_owner("t4", 5000, false, false, 1024), 0, "5000 nested folders");
  /* The walk holds two descriptors at a time, whatever the depth. */
  is_int(remove_as_owner("t5", 300, true, false, 12), 0,
         "300 nested folders under RLIMIT_NOFILE 12 (no rm, no fd per level)");
  struct stat st;
  ok(fstatat(tmp_fd, "keep/file", &st, 0) == 0, "what the links pointed to is intact");
  char *text = NULL;
  mcp_error_t err = NULL;
  read_file_at(tmp_fd, "keep/file", 100, &text, NULL, &err);
  is_str(text, "keep", "unchanged");
  free(text);
  mcp_error_release(&err);
  is_int(remove_tree_at(tmp_fd, "never-existed", &err), 0, "removing nothing succeeds");
}

/* log_entry_new, log_entry_write: the audit and egress logs' lines. */
static void log_entry_tests(void) {
  cleanup_cjson cJSON *o = log_entry_new();
  cJSON_AddStringToObject(o, "event", "hibernated");
  cJSON_AddNumberToObject(o, "duration_ms", 12);
  const cJSON *first = o != NULL ? o->child : NULL;
  ok(first != NULL && strcmp(first->string, "time") == 0, "an entry's first member is its time");
  const char *when = cJSON_GetStringValue(first);
  ok(when != NULL && strlen(when) == 24 && when[10] == 'T' && when[19] == '.' && when[23] == 'Z',
     "as 2026-01-31T12:34:56.789Z: %s", when ? when : "(none)");
  int p[2];
  if (pipe(p) < 0)
    bail_out("pipe");
  is_int(log_entry_write(p[1], o), 0, "an entry is written");
  is_int(log_entry_write(p[1], NULL), -ENOMEM, "no entry (an allocation failed): -ENOMEM, nothing written");
  close(p[1]);
  char got[256] = "";
  ssize_t n = read(p[0], got, sizeof(got) - 1);
  got[n > 0 ? n : 0] = '\0';
  close(p[0]);
  char want[256];
  snprintf(want, sizeof(want), "{\"time\":\"%s\",\"event\":\"hibernated\",\"duration_ms\":12}\n", when ? when : "");
  is_str(got, want, "one line: the object unformatted, then a newline");
}

int main(void) {
  const char *t = getenv("TMPDIR");
  snprintf(tmp, sizeof(tmp), "%s/mcp-util-XXXXXX", t && *t ? t : "/tmp");
  if (mkdtemp(tmp) == NULL)
    bail_out("mkdtemp");
  tmp_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  id_tests();
  read_tests();
  write_tests();
  log_tests();
  log_entry_tests();
  remove_tests();
  close(tmp_fd);
  /* Whatever a failed removal left: the shell's rm as root, or ours. */
  mcp_error_t err = NULL;
  int r = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (remove_tree_at(r, tmp + 1, &err) < 0) {
    diag("cleanup: %s", err->msg);
    mcp_error_release(&err);
    char cmd[2200];
    snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", tmp, tmp);
    if (system(cmd) != 0)
      diag("cleanup with rm failed");
  }
  close(r);
  return done_testing();
}
