/* A small TAP producer for the unit tests, read by automake's tap-driver.sh.
 *
 * Each test program prints one "ok N - ..." or "not ok N - ..." line per
 * assertion and the plan at the end (done_testing).  A program that cannot
 * run here (a probed feature is missing) calls skip_all(), which prints
 * "1..0 # SKIP why": tap-driver.sh counts that as a skip, whereas it reports
 * any non-zero exit status, 77 included, as an error.
 *
 * The counters live in tap.c so that helpers compiled separately (the MCP
 * harness) add to the same plan.  Below the TAP calls, a helper that several
 * test programs use to look at the state folder. */
#ifndef MCP_TEST_TAP_H
#define MCP_TEST_TAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

bool tap_ok(bool pass, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
bool tap_is_int(int64_t got, int64_t expected, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
bool tap_is_str(const char *got, const char *expected, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* got[0..got_len) equals expected[0..expected_len), bytes compared. */
bool tap_is_mem(const void *got, size_t got_len, const void *expected, size_t expected_len, const char *file, int line,
                const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* got contains needle (both NUL-terminated; a NULL got fails). */
bool tap_like(const char *got, const char *needle, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print the plan; returns the exit status (1 when an assertion failed). */
int done_testing(void);
/* Skip the whole program: prints "1..0 # SKIP why" and exits 0. */
void skip_all(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Stop at once: the remaining tests cannot run meaningfully. */
void bail_out(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* The entries of folder path whose names do not start with a dot (the
 * service's tickets, sessions, trash); 0 when it cannot be read. */
int visible_entries(const char *path);

#define ok(cond, ...) tap_ok((cond) ? true : false, __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, expected, ...) tap_is_int((int64_t)(got), (int64_t)(expected), __FILE__, __LINE__, __VA_ARGS__)
#define is_str(got, expected, ...) tap_is_str((got), (expected), __FILE__, __LINE__, __VA_ARGS__)
#define is_mem(got, glen, expected, elen, ...)                                                                         \
  tap_is_mem((got), (glen), (expected), (elen), __FILE__, __LINE__, __VA_ARGS__)
#define like(got, needle, ...) tap_like((got), (needle), __FILE__, __LINE__, __VA_ARGS__)

#endif
