/* A strict, allocation-free JSON validator run on every request body before
 * cJSON sees it (picohttpparser's shape: explicit lengths, no allocation,
 * documented return codes).  It rejects what cJSON would accept silently:
 * invalid UTF-8, \u0000 escapes (cJSON strings end at NUL, so the code that
 * runs would differ from the code sent), lone surrogates, nesting deeper
 * than max_depth (cJSON recurses), and more than max_values values (cJSON
 * allocates a node of about 64 bytes for each: 10 MiB of "[]," would be a
 * tree of 200 MB). */
#ifndef MCP_JSON_SCAN_H
#define MCP_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>

enum json_scan_result {
  JSON_OK = 0,
  JSON_ERR_SYNTAX = -1,
  JSON_ERR_UTF8 = -2,
  JSON_ERR_NUL = -3,
  JSON_ERR_DEPTH = -4,
  JSON_ERR_VALUES = -5,
};

/* Validate exactly one JSON value in s[0..len) (whitespace around it is
 * allowed), of at most max_values values: every string, number, literal,
 * array and object counts one, object keys do not.  On error, *offset (when
 * not NULL) receives the byte offset. */
int json_scan(const char *s, size_t len, int max_depth, size_t max_values, size_t *offset);
const char *json_scan_strerror(int code);

/* Where a \u0000 escape is, so that the answer can name it and carry the
 * request's id (JSON_ERR_NUL alone is a parse error whose id is null). */
#define JSON_PATH_MAX 256
struct json_nul_site {
  /* The path of the first string that holds one: top-level keys bare,
   * "params.arguments.code", "a[0][1]"; "" for a top-level string.  A key
   * that is long or not plain printable ASCII is cut, and so is a long
   * path, each with an ellipsis (U+2026): always valid UTF-8. */
  char path[JSON_PATH_MAX];
  bool in_key; /* the escape is in a key of the object at path */
  /* The value of the top-level object's "id" member as written (a slice of
   * the input); NULL when there is none, or more than one. */
  const char *id;
  size_t id_len;
};
/* Scan s[0..len) as json_scan() does, but take \u0000 escapes in strings,
 * noting where the first one is.  JSON_OK: the input is valid apart from
 * them and *site says where; JSON_ERR_NUL: there is none (a raw NUL byte is
 * not an escape); any other code: what json_scan() would say without
 * them. */
int json_locate_nul(const char *s, size_t len, int max_depth, size_t max_values, struct json_nul_site *site);

/* Length of the longest prefix of s[0..len) that is valid UTF-8 without
 * NUL; used to make sandbox output safe for JSON strings. */
size_t utf8_valid_prefix(const char *s, size_t len);
/* Bytes to a JSON-safe string (a new one): invalid UTF-8 and NUL become
 * U+FFFD. */
char *utf8_sanitize(const char *data, size_t len);

#endif
