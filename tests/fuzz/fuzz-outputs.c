/* Fuzz harness: files that sandboxed code leaves in /work/output, and the
 * manifest the host keeps of them (fcgi/outputs.c), up to the content
 * blocks and resources a client gets (fcgi/files.c, fcgi/resources.c).
 *
 * Input: a first line, then the rest.
 *   - The first line (up to 200 bytes) names a file in output/ ('/' becomes
 *     '_'; sandboxed code may use any byte but '/' and NUL) and is also the
 *     path of a resources/read (file:///work/<line>) and of workspace_read().
 *   - The rest is the content of that file (and of output/d/<name>), and is
 *     also written as the session's outputs.manifest before the scan, so
 *     the manifest parser reads arbitrary text.
 *
 * Checked: mime_detect() names a type; outputs_collect() respects its
 * limits, and a second scan right after finds nothing new (the manifest
 * round trip is exact for any file name); the result's content blocks,
 * resources/list and resources/read are valid JSON for a client. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fcgi/files.h"
#include "fcgi/mcp.h"
#include "fcgi/outputs.h"
#include "fcgi/resources.h"
#include "fuzz.h"

#define NAME_MAX_FUZZ 200

static int session_fd = -1, work_fd = -1;
static struct mcp_config cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *root = fuzz_tmpdir("outputs");
  int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rfd < 0 || mkdirat(rfd, "s", 0700) < 0)
    fuzz_fail("session folder: %s", strerror(errno));
  session_fd = openat(rfd, "s", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (session_fd < 0 || mkdirat(session_fd, "work", 0755) < 0)
    fuzz_fail("workspace: %s", strerror(errno));
  work_fd = openat(session_fd, "work", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (work_fd < 0)
    fuzz_fail("workspace: %s", strerror(errno));
  close(rfd);
  config_defaults(&cfg);
  cfg.output_file_max = 1024;
  return 0;
}

static void write_at(int dirfd, const char *name, const void *data, size_t len) {
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 || write_all(fd, data, len) < 0)
    fuzz_fail("write %s: %s", name, strerror(errno));
  close(fd);
}

static void check_mime(const char *mime) {
  if (mime == NULL || mime[0] == '\0' || strchr(mime, '/') == NULL || strlen(mime) >= 80)
    fuzz_fail("mime_detect: `%s`", mime ? mime : "(null)");
}

static void check_result(cJSON *r, const char *what) {
  cleanup_free char *text = cJSON_PrintUnformatted(r);
  if (text == NULL)
    fuzz_fail("%s: cannot print", what);
  cJSON_Delete(fuzz_check_json(text, strlen(text), what));
}

static void scan(const char *name) {
  struct out_limits lim = {.file_max = 1024, .total_max = 1536, .count_max = 3};
  struct out_list out;
  mcp_error_t err = NULL;
  if (outputs_collect(session_fd, &lim, &out, &err) < 0)
    fuzz_fail("outputs_collect: %s", err->msg);
  uint64_t inlined = 0;
  for (size_t i = 0; i < out.n; i++) {
    const struct out_file *f = &out.files[i];
    check_mime(f->mime);
    if (f->inlined && (f->len != f->size || f->len > lim.file_max))
      fuzz_fail("inlined %s: %zu bytes of %llu", f->path, f->len, (unsigned long long)f->size);
    if (!f->inlined && f->reason == NULL)
      fuzz_fail("%s: not inlined, no reason", f->path);
    inlined += f->inlined ? f->len : 0;
  }
  if (inlined > lim.total_max)
    fuzz_fail("inlined %llu bytes in all", (unsigned long long)inlined);
  cleanup_cjson cJSON *result = cJSON_CreateObject();
  cJSON *content = cJSON_AddArrayToObject(result, "content");
  cJSON_AddItemToArray(content, cJSON_CreateObject());
  cJSON *sc = cJSON_AddObjectToObject(result, "structuredContent");
  files_add_outputs(result, sc, &out, NULL);
  check_result(result, "files_add_outputs");
  outputs_free(&out);

  /* Nothing changed since: the manifest must say so for every name. */
  if (outputs_collect(session_fd, &lim, &out, &err) < 0)
    fuzz_fail("outputs_collect again: %s", err->msg);
  if (out.n != 0)
    fuzz_fail("a second scan reports %zu files again (first: %s)", out.n, out.files[0].path);
  outputs_free(&out);
  (void)name;
}

static void resources(const char *line) {
  struct mcp_ctx ctx = {.cfg = &cfg};
  struct session s = {.dirfd = session_fd, .lock_fd = -1};
  struct http_request http = {.method = "POST", .token_id = "fuzz"};
  struct rpc_call c = {.ctx = &ctx, .http = &http, .session = &s, .method = "resources/list"};
  if (resources_list(&c) == 0)
    check_result(c.result, "resources/list");
  cJSON_Delete(c.result);
  session_unlock(&s); /* as mcp.c does after every request */

  cleanup_cjson cJSON *params = cJSON_CreateObject();
  cleanup_buf struct buf uri = {0};
  buf_append(&uri, "file:///work/", 13);
  buf_append(&uri, line, strlen(line));
  cJSON_AddStringToObject(params, "uri", uri.data);
  struct rpc_call r = {.ctx = &ctx, .http = &http, .session = &s, .method = "resources/read", .params = params};
  if (resources_read(&r) == 0)
    check_result(r.result, "resources/read");
  else if (r.error_message[0] == '\0')
    fuzz_fail("resources/read failed without a message");
  cJSON_Delete(r.result);
  session_unlock(&s);

  struct out_file f;
  mcp_error_t err = NULL;
  if (workspace_read(session_fd, line, 4096, &f, &err) == 0) {
    if (f.len > 4096 || (f.len > 0 && f.data == NULL))
      fuzz_fail("workspace_read: %zu bytes", f.len);
    check_mime(f.mime);
  } else {
    mcp_error_release(&err);
  }
  out_file_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *nl = memchr(data, '\n', size);
  size_t line_len = nl ? (size_t)(nl - (const char *)data) : size;
  const uint8_t *rest = nl ? (const uint8_t *)nl + 1 : data + size;
  size_t rest_len = size - (size_t)(rest - data);
  cleanup_free char *line = xstrndup((const char *)data, line_len < NAME_MAX_FUZZ ? line_len : NAME_MAX_FUZZ);
  if (line == NULL)
    return 0;

  char name[NAME_MAX_FUZZ + 1];
  snprintf(name, sizeof(name), "%s", line);
  for (char *p = name; *p; p++)
    if (*p == '/')
      *p = '_';
  /* Not empty, "." or "..", nor the folder d/ of the second copy. */
  if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, "d") == 0)
    snprintf(name, sizeof(name), "f");

  check_mime(mime_detect(rest, rest_len < 4096 ? rest_len : 4096, line));

  mcp_error_t err = NULL;
  if (remove_tree_at(work_fd, "output", &err) < 0 && err->errno_value != ENOENT)
    fuzz_fail("clear output/: %s", err->msg);
  mcp_error_release(&err);
  if (mkdirat(work_fd, "output", 0755) < 0 || mkdirat(work_fd, "output/d", 0755) < 0)
    fuzz_fail("mkdir output: %s", strerror(errno));
  int out_fd = openat(work_fd, "output", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  write_at(out_fd, name, rest, rest_len);
  char sub[NAME_MAX_FUZZ + 8];
  snprintf(sub, sizeof(sub), "d/%s", name);
  write_at(out_fd, sub, rest, rest_len / 2);
  close(out_fd);
  if (write_file_atomic(session_fd, OUTPUTS_MANIFEST, rest, rest_len, 0600, &err) < 0)
    fuzz_fail("manifest: %s", err->msg);

  scan(name);
  resources(line);
  return 0;
}
