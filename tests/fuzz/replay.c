/* The main() of a harness in make check: every file of its seed corpus
 * through LLVMFuzzerTestOneInput() once, as libFuzzer would run it, one TAP
 * line per file.  No clang needed: any compiler builds it (with the
 * sanitizers of the build, if any).
 *
 *   tests/fuzz/fuzz-request                  the corpus named at build time
 *   tests/fuzz/fuzz-request FILE|DIR ...     these inputs (a crash to reproduce)
 *
 * Each input is copied so that it ends right before an inaccessible page
 * (tests/unit/guard.h): reading one byte past its length crashes even in a
 * build without AddressSanitizer.  A harness that finds a problem aborts,
 * which tap-driver.sh reports as an error.  With -DMCP_LIBFUZZER this file
 * is empty and libFuzzer's main() runs the harness instead. */
#include "config.h"

#ifndef MCP_LIBFUZZER

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "tests/unit/guard.h"

#ifndef FUZZ_CORPUS
#error "FUZZ_CORPUS must name the harness's seed corpus folder"
#endif

#define REPLAY_MAX_INPUT (16 << 20)

struct inputs {
  char **paths;
  size_t n, cap;
};

static void add(struct inputs *in, const char *path) {
  if (in->n == in->cap) {
    in->cap = in->cap ? in->cap * 2 : 64;
    in->paths = realloc(in->paths, in->cap * sizeof(*in->paths));
    if (in->paths == NULL)
      abort();
  }
  in->paths[in->n] = strdup(path);
  if (in->paths[in->n++] == NULL)
    abort();
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void collect(struct inputs *in, const char *path) {
  struct stat st;
  if (stat(path, &st) < 0) {
    printf("Bail out! %s: %s\n", path, strerror(errno));
    exit(1);
  }
  if (!S_ISDIR(st.st_mode)) {
    add(in, path);
    return;
  }
  DIR *d = opendir(path);
  if (d == NULL) {
    printf("Bail out! %s: %s\n", path, strerror(errno));
    exit(1);
  }
  struct dirent *de;
  size_t first = in->n;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.')
      continue;
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
    add(in, p);
  }
  closedir(d);
  if (in->n > first)
    qsort(in->paths + first, in->n - first, sizeof(*in->paths), by_name);
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  unsigned char *data = malloc(REPLAY_MAX_INPUT);
  size_t n = data ? fread(data, 1, REPLAY_MAX_INPUT, f) : 0;
  fclose(f);
  *len = n;
  return data;
}

int main(int argc, char **argv) {
  struct inputs in = {0};
  if (argc > 1)
    for (int i = 1; i < argc; i++)
      collect(&in, argv[i]);
  else
    collect(&in, FUZZ_CORPUS);
  if (in.n == 0) {
    printf("Bail out! no input in %s\n", argc > 1 ? argv[1] : FUZZ_CORPUS);
    return 1;
  }
  LLVMFuzzerInitialize(&argc, &argv);
  printf("1..%zu\n", in.n);
  fflush(stdout);
  for (size_t i = 0; i < in.n; i++) {
    size_t len = 0;
    unsigned char *data = slurp(in.paths[i], &len);
    if (data == NULL) {
      printf("Bail out! %s: %s\n", in.paths[i], strerror(errno));
      return 1;
    }
    struct guarded g = guarded_copy(data, len);
    free(data);
    if (g.data == NULL) {
      printf("Bail out! cannot map a guard page\n");
      return 1;
    }
    /* Flushed first: a crash leaves the name of its input in the log. */
    printf("# %s (%zu bytes)\n", in.paths[i], len);
    fflush(stdout);
    LLVMFuzzerTestOneInput((const uint8_t *)g.data, len);
    guarded_free(&g);
    const char *base = strrchr(in.paths[i], '/');
    printf("ok %zu - %s\n", i + 1, base ? base + 1 : in.paths[i]);
    fflush(stdout);
    free(in.paths[i]);
  }
  free(in.paths);
  return 0;
}

#endif
