/* Inputs that end right before an inaccessible page (picohttpparser's test
 * trick): a parser that reads one byte past the length it was given crashes
 * instead of silently reading what happens to follow. */
#ifndef MCP_TEST_GUARD_H
#define MCP_TEST_GUARD_H

#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct guarded {
  void *map;
  size_t map_len;
  char *data; /* data[len] is the first byte of the guard page */
};

/* Copy len bytes so they end at a PROT_NONE page.  NULL data on failure. */
static inline struct guarded guarded_copy(const void *src, size_t len) {
  struct guarded g = {NULL, 0, NULL};
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t pages = (len + page - 1) / page + 1;
  void *m = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return g;
  char *guard = (char *)m + (pages - 1) * page;
  if (mprotect(guard, page, PROT_NONE) < 0) {
    munmap(m, pages * page);
    return g;
  }
  g.map = m;
  g.map_len = pages * page;
  g.data = guard - len;
  if (len > 0)
    memcpy(g.data, src, len);
  return g;
}

static inline void guarded_free(struct guarded *g) {
  if (g->map != NULL)
    munmap(g->map, g->map_len);
  g->map = NULL;
  g->data = NULL;
}

#endif
