/* See tap.h. */
#include "config.h"

#include "tap.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count;
static int tap_failed;

static bool report(bool pass, const char *file, int line, const char *fmt, va_list ap) {
  tap_count++;
  printf("%sok %d - ", pass ? "" : "not ", tap_count);
  vprintf(fmt, ap);
  printf("\n");
  if (!pass) {
    tap_failed++;
    printf("#   Failed test at %s line %d.\n", file, line);
  }
  fflush(stdout);
  return pass;
}

bool tap_ok(bool pass, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report(pass, file, line, fmt, ap);
  va_end(ap);
  return pass;
}

bool tap_is_int(int64_t got, int64_t expected, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bool pass = got == expected;
  report(pass, file, line, fmt, ap);
  va_end(ap);
  if (!pass)
    printf("#          got: %" PRId64 "\n#     expected: %" PRId64 "\n", got, expected);
  return pass;
}

bool tap_is_str(const char *got, const char *expected, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bool pass = (got == NULL && expected == NULL) || (got != NULL && expected != NULL && strcmp(got, expected) == 0);
  report(pass, file, line, fmt, ap);
  va_end(ap);
  if (!pass)
    printf("#          got: '%s'\n#     expected: '%s'\n", got ? got : "(null)", expected ? expected : "(null)");
  return pass;
}

static void dump(const char *label, const void *data, size_t len) {
  const unsigned char *p = data;
  printf("#     %s (%zu bytes): ", label, len);
  for (size_t i = 0; i < len && i < 64; i++)
    printf(p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' ? "%c" : "\\x%02x", p[i]);
  printf("%s\n", len > 64 ? "..." : "");
}

bool tap_is_mem(const void *got, size_t got_len, const void *expected, size_t expected_len, const char *file, int line,
                const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bool pass = got != NULL && got_len == expected_len && memcmp(got, expected, got_len) == 0;
  report(pass, file, line, fmt, ap);
  va_end(ap);
  if (!pass) {
    dump("got", got ? got : "", got ? got_len : 0);
    dump("expected", expected, expected_len);
  }
  return pass;
}

bool tap_like(const char *got, const char *needle, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bool pass = got != NULL && strstr(got, needle) != NULL;
  report(pass, file, line, fmt, ap);
  va_end(ap);
  if (!pass)
    printf("#     '%.300s'\n#     does not contain '%s'\n", got ? got : "(null)", needle);
  return pass;
}

void diag(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("# ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

int done_testing(void) {
  printf("1..%d\n", tap_count);
  if (tap_failed > 0)
    printf("# Looks like you failed %d test%s of %d.\n", tap_failed, tap_failed == 1 ? "" : "s", tap_count);
  fflush(stdout);
  return tap_failed > 0 ? 1 : 0;
}

void skip_all(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("1..0 # SKIP ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  exit(0);
}

void bail_out(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("Bail out! ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  exit(1);
}

int visible_entries(const char *path) {
  DIR *d = opendir(path);
  if (d == NULL)
    return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}
