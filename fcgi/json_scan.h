/* A strict, allocation-free JSON validator run on every request body before
 * cJSON sees it (picohttpparser's shape: explicit lengths, no allocation,
 * documented return codes).  It rejects what cJSON would accept silently:
 * invalid UTF-8, \u0000 escapes (cJSON strings end at NUL, so the code that
 * runs would differ from the code sent), lone surrogates, and nesting deeper
 * than max_depth (cJSON recurses). */
#ifndef MCP_JSON_SCAN_H
#define MCP_JSON_SCAN_H

#include <stddef.h>

enum json_scan_result {
  JSON_OK = 0,
  JSON_ERR_SYNTAX = -1,
  JSON_ERR_UTF8 = -2,
  JSON_ERR_NUL = -3,
  JSON_ERR_DEPTH = -4,
};

/* Validate exactly one JSON value in s[0..len) (whitespace around it is
 * allowed).  On error, *offset (when not NULL) receives the byte offset. */
int json_scan(const char *s, size_t len, int max_depth, size_t *offset);
const char *json_scan_strerror(int code);

/* Length of the longest prefix of s[0..len) that is valid UTF-8 without
 * NUL; used to make sandbox output safe for JSON strings. */
size_t utf8_valid_prefix(const char *s, size_t len);
/* Bytes to a JSON-safe string (a new one): invalid UTF-8 and NUL become
 * U+FFFD. */
char *utf8_sanitize(const char *data, size_t len);

#endif
