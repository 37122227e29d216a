#include "config.h"

#include "fcgi/json_scan.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* One level of the path to the current value: a key, or an index. */
struct segment {
  const unsigned char *key; /* NULL: an array element */
  size_t len;               /* the key's length, or the index */
};
#define PATH_SEGMENTS 64

struct scanner {
  const unsigned char *p, *end;
  int depth, max_depth;
  size_t values, max_values;
  /* json_locate_nul() only (site != NULL): where the first \u0000 is, and
   * the top-level id. */
  struct json_nul_site *site;
  bool in_key, found, id_seen;
  struct segment path[PATH_SEGMENTS];
};

static void skip_ws(struct scanner *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
}

/* One UTF-8 sequence at s->p (first byte >= 0x80); advances on success. */
static int scan_utf8(struct scanner *s) {
  const unsigned char *p = s->p;
  size_t avail = (size_t)(s->end - p);
  unsigned c = p[0];
  uint32_t cp;
  size_t n;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return JSON_ERR_UTF8;
  }
  if (avail < n)
    return JSON_ERR_UTF8;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80)
      return JSON_ERR_UTF8;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  /* overlong forms, surrogates, beyond U+10FFFF */
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
    return JSON_ERR_UTF8;
  s->p += n;
  return JSON_OK;
}

static int hex4(const unsigned char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned c = p[i], d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return -1;
    v = (v << 4) | d;
  }
  *out = v;
  return 0;
}

/* Append text to the path being built; false once it is full (an ellipsis
 * then ends it). */
static bool path_put(char *out, size_t *n, const char *text, size_t len) {
  static const char ellipsis[] = "\xE2\x80\xA6";
  if (*n + len + sizeof(ellipsis) > JSON_PATH_MAX) {
    memcpy(out + *n, ellipsis, sizeof(ellipsis)); /* with its NUL */
    *n += sizeof(ellipsis) - 1;
    return false;
  }
  memcpy(out + *n, text, len);
  *n += len;
  out[*n] = '\0';
  return true;
}

/* A key as it appears in a path: plain printable ASCII, at most 64 bytes;
 * anything else ends it with an ellipsis. */
static bool path_key(char *out, size_t *n, const unsigned char *key, size_t len) {
  size_t plain = 0;
  while (plain < len && plain < 64 && key[plain] >= 0x20 && key[plain] < 0x7F && key[plain] != '\\' &&
         key[plain] != '"')
    plain++;
  if (!path_put(out, n, (const char *)key, plain))
    return false;
  return plain == len || path_put(out, n, "\xE2\x80\xA6", 3);
}

/* The first \u0000: its path is that of the current value, or, in a key,
 * that of the object holding it. */
static void note_nul(struct scanner *s) {
  if (s->found)
    return;
  s->found = true;
  s->site->in_key = s->in_key;
  char *out = s->site->path;
  size_t n = 0;
  out[0] = '\0';
  int levels = s->in_key ? s->depth - 1 : s->depth;
  for (int i = 0; i < levels; i++) {
    if (i >= PATH_SEGMENTS) {
      path_put(out, &n, "\xE2\x80\xA6", 3);
      return;
    }
    const struct segment *seg = &s->path[i];
    bool more;
    if (seg->key != NULL) {
      more = (i == 0 || path_put(out, &n, ".", 1)) && path_key(out, &n, seg->key, seg->len);
    } else {
      char index[32];
      int k = snprintf(index, sizeof(index), "[%zu]", seg->len);
      more = path_put(out, &n, index, (size_t)k);
    }
    if (!more)
      return;
  }
}

static int scan_string(struct scanner *s) {
  s->p++; /* opening quote */
  while (s->p < s->end) {
    unsigned c = *s->p;
    if (c == '"') {
      s->p++;
      return JSON_OK;
    }
    if (c < 0x20)
      return c == 0 ? JSON_ERR_NUL : JSON_ERR_SYNTAX;
    if (c >= 0x80) {
      int r = scan_utf8(s);
      if (r < 0)
        return r;
      continue;
    }
    if (c != '\\') {
      s->p++;
      continue;
    }
    if (s->end - s->p < 2)
      return JSON_ERR_SYNTAX;
    unsigned e = s->p[1];
    if (strchr("\"\\/bfnrt", (int)e) != NULL && e != 0) {
      s->p += 2;
      continue;
    }
    if (e != 'u' || s->end - s->p < 6)
      return JSON_ERR_SYNTAX;
    unsigned u;
    if (hex4(s->p + 2, &u) < 0)
      return JSON_ERR_SYNTAX;
    s->p += 6;
    if (u == 0) {
      if (s->site == NULL)
        return JSON_ERR_NUL;
      note_nul(s);
      continue;
    }
    if (u >= 0xDC00 && u <= 0xDFFF)
      return JSON_ERR_UTF8; /* lone low surrogate */
    if (u >= 0xD800 && u <= 0xDBFF) {
      unsigned lo;
      if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u' || hex4(s->p + 2, &lo) < 0 || lo < 0xDC00 ||
          lo > 0xDFFF)
        return JSON_ERR_UTF8;
      s->p += 6;
    }
  }
  return JSON_ERR_SYNTAX;
}

static int scan_number(struct scanner *s) {
  const unsigned char *p = s->p;
  if (p < s->end && *p == '-')
    p++;
  if (p >= s->end)
    return JSON_ERR_SYNTAX;
  if (*p == '0') {
    p++;
  } else if (*p >= '1' && *p <= '9') {
    while (p < s->end && *p >= '0' && *p <= '9')
      p++;
  } else {
    return JSON_ERR_SYNTAX;
  }
  if (p < s->end && *p == '.') {
    p++;
    if (p >= s->end || *p < '0' || *p > '9')
      return JSON_ERR_SYNTAX;
    while (p < s->end && *p >= '0' && *p <= '9')
      p++;
  }
  if (p < s->end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < s->end && (*p == '+' || *p == '-'))
      p++;
    if (p >= s->end || *p < '0' || *p > '9')
      return JSON_ERR_SYNTAX;
    while (p < s->end && *p >= '0' && *p <= '9')
      p++;
  }
  s->p = p;
  return JSON_OK;
}

static int scan_literal(struct scanner *s, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
    return JSON_ERR_SYNTAX;
  s->p += n;
  return JSON_OK;
}

/* Iterative over containers would avoid recursion entirely; depth is capped
 * at max_depth (small), so recursion is bounded. */
static int scan_value(struct scanner *s);

static int scan_container(struct scanner *s, unsigned char close) {
  if (++s->depth > s->max_depth)
    return JSON_ERR_DEPTH;
  s->p++;
  skip_ws(s);
  if (s->p < s->end && *s->p == close) {
    s->p++;
    s->depth--;
    return JSON_OK;
  }
  struct segment *seg = s->site != NULL && s->depth <= PATH_SEGMENTS ? &s->path[s->depth - 1] : NULL;
  for (size_t index = 0;; index++) {
    skip_ws(s);
    bool is_id = false;
    if (close == '}') {
      if (s->p >= s->end || *s->p != '"')
        return JSON_ERR_SYNTAX;
      const unsigned char *key = s->p + 1;
      s->in_key = true;
      int r = scan_string(s);
      s->in_key = false;
      if (r < 0)
        return r;
      if (seg != NULL) {
        seg->key = key;
        seg->len = (size_t)(s->p - 1 - key);
        is_id = s->depth == 1 && seg->len == 2 && memcmp(key, "id", 2) == 0;
      }
      skip_ws(s);
      if (s->p >= s->end || *s->p != ':')
        return JSON_ERR_SYNTAX;
      s->p++;
    } else if (seg != NULL) {
      seg->key = NULL;
      seg->len = index;
    }
    skip_ws(s);
    const unsigned char *start = s->p;
    int r = scan_value(s);
    if (r < 0)
      return r;
    if (is_id) {
      /* A second id makes the message ambiguous: then there is none. */
      s->site->id = s->id_seen ? NULL : (const char *)start;
      s->site->id_len = s->id_seen ? 0 : (size_t)(s->p - start);
      s->id_seen = true;
    }
    skip_ws(s);
    if (s->p >= s->end)
      return JSON_ERR_SYNTAX;
    if (*s->p == ',') {
      s->p++;
      continue;
    }
    if (*s->p == close) {
      s->p++;
      s->depth--;
      return JSON_OK;
    }
    return JSON_ERR_SYNTAX;
  }
}

static int scan_value(struct scanner *s) {
  skip_ws(s);
  if (s->p >= s->end)
    return JSON_ERR_SYNTAX;
  if (++s->values > s->max_values)
    return JSON_ERR_VALUES;
  switch (*s->p) {
  case '{':
    return scan_container(s, '}');
  case '[':
    return scan_container(s, ']');
  case '"':
    return scan_string(s);
  case 't':
    return scan_literal(s, "true");
  case 'f':
    return scan_literal(s, "false");
  case 'n':
    return scan_literal(s, "null");
  default:
    return scan_number(s);
  }
}

static int scan_document(struct scanner *s) {
  int r = scan_value(s);
  if (r == JSON_OK) {
    skip_ws(s);
    if (s->p != s->end)
      r = s->p < s->end && *s->p == 0 ? JSON_ERR_NUL : JSON_ERR_SYNTAX;
  }
  return r;
}

int json_scan(const char *str, size_t len, int max_depth, size_t max_values, size_t *offset) {
  struct scanner s = {.p = (const unsigned char *)str,
                      .end = (const unsigned char *)str + len,
                      .max_depth = max_depth,
                      .max_values = max_values};
  int r = scan_document(&s);
  if (offset != NULL)
    *offset = (size_t)(s.p - (const unsigned char *)str);
  return r;
}

int json_locate_nul(const char *str, size_t len, int max_depth, size_t max_values, struct json_nul_site *site) {
  site->path[0] = '\0';
  site->in_key = false;
  site->id = NULL;
  site->id_len = 0;
  struct scanner s = {.p = (const unsigned char *)str,
                      .end = (const unsigned char *)str + len,
                      .max_depth = max_depth,
                      .max_values = max_values,
                      .site = site};
  int r = scan_document(&s);
  if (r == JSON_OK && !s.found)
    return JSON_ERR_NUL;
  return r;
}

const char *json_scan_strerror(int code) {
  switch (code) {
  case JSON_OK:
    return "valid";
  case JSON_ERR_UTF8:
    return "the body is not valid UTF-8";
  case JSON_ERR_NUL:
    return "NUL characters are not accepted";
  case JSON_ERR_DEPTH:
    return "the JSON is nested too deeply";
  case JSON_ERR_VALUES:
    return "the JSON has too many values";
  default:
    return "the body is not valid JSON";
  }
}

size_t utf8_valid_prefix(const char *str, size_t len) {
  struct scanner s = {.p = (const unsigned char *)str, .end = (const unsigned char *)str + len};
  while (s.p < s.end) {
    if (*s.p == 0)
      break;
    if (*s.p < 0x80) {
      s.p++;
      continue;
    }
    if (scan_utf8(&s) < 0)
      break;
  }
  return (size_t)(s.p - (const unsigned char *)str);
}

char *utf8_sanitize(const char *data, size_t len) {
  struct buf b = {0};
  static const char repl[] = "\xEF\xBF\xBD";
  while (len > 0) {
    size_t ok = utf8_valid_prefix(data, len);
    if (buf_append(&b, data, ok) < 0)
      goto oom;
    data += ok;
    len -= ok;
    if (len == 0)
      break;
    /* one bad byte (or a NUL) becomes U+FFFD */
    if (buf_append(&b, repl, 3) < 0)
      goto oom;
    data++;
    len--;
  }
  if (b.data == NULL)
    return strdup("");
  return b.data;
oom:
  buf_free(&b);
  return NULL;
}
