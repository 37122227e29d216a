/* json_scan(), json_locate_nul() and utf8_valid_prefix(): every input sits right before a
 * PROT_NONE page, so reading one byte past the given length crashes. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "fcgi/json_scan.h"
#include "guard.h"
#include "tap.h"

#define DEPTH 64
#define VALUES 100000
#define NO_OFFSET ((size_t)-1)

struct scan_case {
  const char *name;
  const char *in;
  size_t len;
  int code;
  size_t offset; /* NO_OFFSET: not checked */
};

/* S("...") gives the bytes and their length, embedded NULs included. */
#define S(lit) lit, sizeof(lit) - 1

static const struct scan_case cases[] = {
    /* valid documents */
    {"object", S("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"), JSON_OK, 40},
    {"nested with spaces", S(" { \"a\" : [ 1 , { \"b\" : null } , true , false ] } \r\n\t"), JSON_OK, 52},
    {"empty object", S("{}"), JSON_OK, 2},
    {"empty array", S("[ ]"), JSON_OK, 3},
    {"bare string", S("\"x\""), JSON_OK, 3},
    {"numbers", S("[0,-0,1.5e10,1E+2,-1.0e-3,123456789012345678901234567890]"), JSON_OK, NO_OFFSET},
    {"literals", S("[true,false,null]"), JSON_OK, NO_OFFSET},
    {"all simple escapes", S("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\""), JSON_OK, NO_OFFSET},
    {"\\u escapes, upper and lower hex", S("\"\\u00e9\\u20AC\\u0001\""), JSON_OK, NO_OFFSET},
    {"surrogate pair escape", S("\"\\uD83D\\uDE00\""), JSON_OK, 14},
    {"2-byte UTF-8", S("\"\xC3\xA9\""), JSON_OK, 4},
    {"3-byte UTF-8", S("\"\xE2\x82\xAC\""), JSON_OK, 5},
    {"4-byte UTF-8", S("\"\xF0\x9F\x98\x80\""), JSON_OK, 6},
    {"U+D7FF, last before surrogates", S("\"\xED\x9F\xBF\""), JSON_OK, 5},
    {"U+E000, first after surrogates", S("\"\xEE\x80\x80\""), JSON_OK, 5},
    {"U+FFFF", S("\"\xEF\xBF\xBF\""), JSON_OK, 5},
    {"U+10FFFF, the last code point", S("\"\xF4\x8F\xBF\xBF\""), JSON_OK, 6},
    {"U+0080, smallest 2-byte", S("\"\xC2\x80\""), JSON_OK, 4},
    {"U+0800, smallest 3-byte", S("\"\xE0\xA0\x80\""), JSON_OK, 5},
    {"U+10000, smallest 4-byte", S("\"\xF0\x90\x80\x80\""), JSON_OK, 6},
    {"DEL is a plain character", S("\"\x7f\""), JSON_OK, 3},

    /* syntax */
    {"empty input", S(""), JSON_ERR_SYNTAX, 0},
    {"whitespace only", S("  \n"), JSON_ERR_SYNTAX, 3},
    {"unclosed object", S("{"), JSON_ERR_SYNTAX, 1},
    {"unclosed array", S("[1"), JSON_ERR_SYNTAX, 2},
    {"trailing comma in array", S("[1,]"), JSON_ERR_SYNTAX, 3},
    {"trailing comma in object", S("{\"a\":1,}"), JSON_ERR_SYNTAX, 7},
    {"leading comma", S("[,1]"), JSON_ERR_SYNTAX, 1},
    {"missing comma", S("[1 2]"), JSON_ERR_SYNTAX, 3},
    {"missing colon", S("{\"a\" 1}"), JSON_ERR_SYNTAX, 5},
    {"key without value", S("{\"a\"}"), JSON_ERR_SYNTAX, 4},
    {"number as key", S("{1:2}"), JSON_ERR_SYNTAX, 1},
    {"two values", S("{} {}"), JSON_ERR_SYNTAX, 3},
    {"leading zero", S("01"), JSON_ERR_SYNTAX, 1},
    {"hex number", S("0x10"), JSON_ERR_SYNTAX, 1},
    {"minus alone", S("-"), JSON_ERR_SYNTAX, NO_OFFSET},
    {"dot without digits", S("1."), JSON_ERR_SYNTAX, NO_OFFSET},
    {"leading dot", S(".5"), JSON_ERR_SYNTAX, 0},
    {"plus sign", S("+1"), JSON_ERR_SYNTAX, 0},
    {"exponent without digits", S("1e"), JSON_ERR_SYNTAX, NO_OFFSET},
    {"NaN", S("NaN"), JSON_ERR_SYNTAX, 0},
    {"Infinity", S("[Infinity]"), JSON_ERR_SYNTAX, 1},
    {"truncated literal", S("tru"), JSON_ERR_SYNTAX, 0},
    {"capitalised literal", S("True"), JSON_ERR_SYNTAX, 0},
    {"literal with tail", S("nullx"), JSON_ERR_SYNTAX, 4},
    {"unterminated string", S("\"abc"), JSON_ERR_SYNTAX, 4},
    {"backslash at the end", S("\"\\"), JSON_ERR_SYNTAX, 1},
    {"unknown escape", S("\"\\x41\""), JSON_ERR_SYNTAX, 1},
    {"short \\u escape", S("\"\\u12\""), JSON_ERR_SYNTAX, 1},
    {"bad hex in \\u", S("\"\\u12G4\""), JSON_ERR_SYNTAX, 1},
    {"raw control character", S("\"a\x01\""), JSON_ERR_SYNTAX, 2},
    {"raw tab in a string", S("\"a\tb\""), JSON_ERR_SYNTAX, 2},
    {"raw newline in a string", S("\"a\nb\""), JSON_ERR_SYNTAX, 2},
    {"single quotes", S("{'a':1}"), JSON_ERR_SYNTAX, 1},
    {"byte order mark", S("\xEF\xBB\xBF{}"), JSON_ERR_SYNTAX, 0},
    {"raw NUL between tokens", S("[1,\0 2]"), JSON_ERR_SYNTAX, 3},

    /* invalid UTF-8 */
    {"lone continuation byte", S("\"\x80\""), JSON_ERR_UTF8, 1},
    {"0xFF", S("\"\xFF\""), JSON_ERR_UTF8, 1},
    {"0xFE", S("\"a\xFE\""), JSON_ERR_UTF8, 2},
    {"overlong NUL C0 80", S("\"\xC0\x80\""), JSON_ERR_UTF8, 1},
    {"overlong '/' C1 AF", S("\"\xC1\xAF\""), JSON_ERR_UTF8, 1},
    {"overlong 3-byte E0 80 80", S("\"\xE0\x80\x80\""), JSON_ERR_UTF8, 1},
    {"overlong 3-byte E0 9F BF", S("\"\xE0\x9F\xBF\""), JSON_ERR_UTF8, 1},
    {"overlong 4-byte F0 80 80 80", S("\"\xF0\x80\x80\x80\""), JSON_ERR_UTF8, 1},
    {"overlong 4-byte F0 8F BF BF", S("\"\xF0\x8F\xBF\xBF\""), JSON_ERR_UTF8, 1},
    {"encoded high surrogate ED A0 80", S("\"\xED\xA0\x80\""), JSON_ERR_UTF8, 1},
    {"encoded low surrogate ED BF BF", S("\"\xED\xBF\xBF\""), JSON_ERR_UTF8, 1},
    {"encoded surrogate pair (CESU-8)", S("\"\xED\xA0\xBD\xED\xB8\x80\""), JSON_ERR_UTF8, 1},
    {"beyond U+10FFFF F4 90 80 80", S("\"\xF4\x90\x80\x80\""), JSON_ERR_UTF8, 1},
    {"lead byte F5", S("\"\xF5\x80\x80\x80\""), JSON_ERR_UTF8, 1},
    {"5-byte lead F8", S("\"\xF8\x88\x80\x80\x80\""), JSON_ERR_UTF8, 1},
    {"truncated 2-byte before quote", S("\"\xC3\""), JSON_ERR_UTF8, 1},
    {"truncated 3-byte before quote", S("\"\xE2\x82\""), JSON_ERR_UTF8, 1},
    {"truncated 4-byte before quote", S("\"\xF0\x9F\x98\""), JSON_ERR_UTF8, 1},
    {"truncated 3-byte at end of input", S("\"\xE2\x82"), JSON_ERR_UTF8, 1},
    {"truncated 4-byte at end of input", S("\"\xF0\x9F\x98"), JSON_ERR_UTF8, 1},
    {"lead byte at end of input", S("\"\xF0"), JSON_ERR_UTF8, 1},
    {"ASCII where a continuation belongs", S("\"\xC3\x41\""), JSON_ERR_UTF8, 1},
    {"invalid UTF-8 in a key", S("{\"\xFF\":1}"), JSON_ERR_UTF8, 2},
    {"lone high surrogate escape", S("\"\\uD800\""), JSON_ERR_UTF8, 7},
    {"lone low surrogate escape", S("\"\\uDC00\""), JSON_ERR_UTF8, 7},
    {"high surrogate then a letter", S("\"\\uD800\\u0041\""), JSON_ERR_UTF8, 7},
    {"two high surrogates", S("\"\\uD800\\uD800\""), JSON_ERR_UTF8, 7},
    {"high surrogate then a plain char", S("\"\\uDBFFx\""), JSON_ERR_UTF8, 7},
    {"high surrogate at end of input", S("\"\\uD800"), JSON_ERR_UTF8, 7},
    {"low then high surrogate", S("\"\\uDC00\\uD800\""), JSON_ERR_UTF8, 7},

    /* NUL */
    {"\\u0000 escape", S("\"a\\u0000b\""), JSON_ERR_NUL, 8},
    {"\\u0000 in a key", S("{\"\\u0000\":1}"), JSON_ERR_NUL, 8},
    {"raw NUL in a string", S("\"a\0b\""), JSON_ERR_NUL, 2},
    {"raw NUL after the value", S("{}\0"), JSON_ERR_NUL, 2},
    {"raw NUL after whitespace", S("1 \0"), JSON_ERR_NUL, 2},
};

static void check_case(const struct scan_case *c) {
  struct guarded g = guarded_copy(c->in, c->len);
  if (g.data == NULL)
    bail_out("cannot map a guard page");
  size_t off = 12345;
  int r = json_scan(g.data, c->len, DEPTH, VALUES, &off);
  is_int(r, c->code, "%s: %s", c->name, json_scan_strerror(c->code));
  if (c->offset != NO_OFFSET)
    is_int(off, c->offset, "%s: offset", c->name);
  guarded_free(&g);
}

/* n nested arrays or objects. */
static char *nested(int n, bool objects, size_t *len) {
  size_t per = objects ? 5 : 1; /* {"a": */
  char *s = malloc((size_t)n * (per + 1) + 2);
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    if (objects) {
      memcpy(s + k, "{\"a\":", 5);
      k += 5;
    } else {
      s[k++] = '[';
    }
  }
  if (objects)
    s[k++] = '1';
  for (int i = 0; i < n; i++)
    s[k++] = objects ? '}' : ']';
  *len = k;
  return s;
}

static void depth_tests(void) {
  for (int objects = 0; objects <= 1; objects++) {
    const char *kind = objects ? "objects" : "arrays";
    size_t len, off;
    char *s = nested(DEPTH, objects, &len);
    struct guarded g = guarded_copy(s, len);
    is_int(json_scan(g.data, len, DEPTH, VALUES, &off), JSON_OK, "%d nested %s pass at max_depth %d", DEPTH, kind,
           DEPTH);
    guarded_free(&g);
    free(s);

    s = nested(DEPTH + 1, objects, &len);
    g = guarded_copy(s, len);
    is_int(json_scan(g.data, len, DEPTH, VALUES, &off), JSON_ERR_DEPTH, "%d nested %s fail", DEPTH + 1, kind);
    is_int(off, (size_t)DEPTH * (objects ? 5 : 1), "depth error offset is the opening bracket too many");
    guarded_free(&g);
    free(s);

    /* Far deeper than any stack would survive if the limit were not checked first. */
    s = nested(1000000, objects, &len);
    g = guarded_copy(s, len);
    is_int(json_scan(g.data, len, DEPTH, VALUES, NULL), JSON_ERR_DEPTH, "a million nested %s stop at the limit", kind);
    guarded_free(&g);
    free(s);
  }
  struct guarded g = guarded_copy("1", 1);
  is_int(json_scan(g.data, 1, 0, VALUES, NULL), JSON_OK, "max_depth 0 admits a scalar");
  guarded_free(&g);
  g = guarded_copy("[]", 2);
  is_int(json_scan(g.data, 2, 0, VALUES, NULL), JSON_ERR_DEPTH, "max_depth 0 refuses an empty array");
  guarded_free(&g);
  /* siblings do not add up: depth goes back down after each container */
  const char sib[] = "[[[]],[[]],[[]],{\"a\":[]},[[1]]]";
  g = guarded_copy(sib, sizeof(sib) - 1);
  is_int(json_scan(g.data, sizeof(sib) - 1, 3, VALUES, NULL), JSON_OK, "sibling containers do not accumulate depth");
  guarded_free(&g);
}

static void length_tests(void) {
  /* Only len bytes count, whatever follows them in memory. */
  const char text[] = "[1]xyz";
  is_int(json_scan(text, 3, DEPTH, VALUES, NULL), JSON_OK, "bytes after len are not read");
  is_int(json_scan("\"abc\"", 3, DEPTH, VALUES, NULL), JSON_ERR_SYNTAX, "a value cut by len is incomplete");
  is_int(json_scan("{\"a\":1}", 0, DEPTH, VALUES, NULL), JSON_ERR_SYNTAX, "len 0 is empty input");

  /* A large valid document crosses many pages. */
  size_t n = 1 << 20;
  char *big = malloc(n + 2);
  big[0] = '"';
  static const char unit[] = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"; /* 10 bytes */
  for (size_t i = 1; i + 10 <= n; i += 10)
    memcpy(big + i, unit, 10);
  size_t len = 1 + ((n - 1) / 10) * 10;
  big[len++] = '"';
  struct guarded g = guarded_copy(big, len);
  size_t off = 0;
  is_int(json_scan(g.data, len, DEPTH, VALUES, &off), JSON_OK, "1 MiB string of mixed UTF-8");
  is_int(off, len, "offset is the length after a valid document");
  guarded_free(&g);
  free(big);
}

/* n values: an array of n - 1 elements (objects: keys do not count). */
static char *many(size_t n, const char *elem, bool object, size_t *len) {
  size_t e = strlen(elem);
  char *s = malloc(n * (e + 16) + 16);
  size_t k = 0;
  s[k++] = object ? '{' : '[';
  for (size_t i = 0; i + 1 < n; i++) {
    if (i > 0)
      s[k++] = ',';
    if (object)
      k += (size_t)sprintf(s + k, "\"%zx\":", i);
    memcpy(s + k, elem, e);
    k += e;
  }
  s[k++] = object ? '}' : ']';
  *len = k;
  return s;
}

/* Every value becomes a cJSON node (about 64 bytes and a malloc each): 10
 * MiB of "[]," would be a tree of 200 MB.  json_scan() counts them. */
static void value_tests(void) {
  static const char *const elems[] = {"[]", "0", "{}", "\"\"", "null"};
  for (size_t i = 0; i < ARRAY_SIZE(elems); i++) {
    for (int object = 0; object <= 1; object++) {
      size_t len, off = 0;
      char *s = many(VALUES, elems[i], object, &len);
      struct guarded g = guarded_copy(s, len);
      is_int(json_scan(g.data, len, DEPTH, VALUES, &off), JSON_OK, "%d values of %s in an %s pass", VALUES, elems[i],
             object ? "object" : "array");
      guarded_free(&g);
      free(s);
      s = many(VALUES + 1, elems[i], object, &len);
      g = guarded_copy(s, len);
      is_int(json_scan(g.data, len, DEPTH, VALUES, &off), JSON_ERR_VALUES, "%d values of %s in an %s fail", VALUES + 1,
             elems[i], object ? "object" : "array");
      ok(off < len && off > len - 16, "the offset is the value one too many (%zu of %zu)", off, len);
      guarded_free(&g);
      free(s);
    }
  }
  /* 10 MiB of empty arrays stop at the limit, whatever follows. */
  size_t len;
  char *s = many(((size_t)10 << 20) / 3, "[]", false, &len);
  struct guarded g = guarded_copy(s, len);
  size_t off = 0;
  is_int(json_scan(g.data, len, DEPTH, VALUES, &off), JSON_ERR_VALUES, "3.5 million empty arrays stop at the limit");
  is_int(off, 1 + 3 * (size_t)(VALUES - 1), "at the 100,001st value");
  guarded_free(&g);
  free(s);
  is_int(json_scan("[1,2]", 5, DEPTH, 3, NULL), JSON_OK, "max_values 3 admits [1,2]");
  is_int(json_scan("[1,2,3]", 7, DEPTH, 3, NULL), JSON_ERR_VALUES, "and refuses [1,2,3]");
  is_int(json_scan("{\"a\":1,\"b\":2}", 13, DEPTH, 3, NULL), JSON_OK, "keys are not values");
  is_int(json_scan("1", 1, DEPTH, 0, NULL), JSON_ERR_VALUES, "max_values 0 refuses everything");
  /* The limit counts before anything else fails. */
  is_int(json_scan("[1,2,3,x", 8, DEPTH, 3, NULL), JSON_ERR_VALUES, "the limit is reported at the value too many");
}

struct nul_case {
  const char *name;
  const char *in;
  size_t len;
  int code;
  const char *path; /* NULL: not checked */
  bool in_key;
  const char *id; /* NULL: no id found */
};

static const struct nul_case nul_cases[] = {
    {"code of a tools/call",
     S("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\","
       "\"arguments\":{\"code\":\"print(1)\\u0000\"}}}"),
     JSON_OK, "params.arguments.code", false, "7"},
    {"a file's text",
     S("{\"jsonrpc\":\"2.0\",\"id\":\"req-1\",\"method\":\"tools/call\",\"params\":{\"arguments\":{\"files\":[{"
       "\"path\":\"a\",\"text\":\"x\"},{\"path\":\"b\",\"text\":\"\\u0000\"}]}}}"),
     JSON_OK, "params.arguments.files[1].text", false, "\"req-1\""},
    {"an env value", S("{\"params\":{\"arguments\":{\"env_variables\":{\"A_B\":\"x\\u0000\"}}},\"id\":-3}"), JSON_OK,
     "params.arguments.env_variables.A_B", false, "-3"},
    {"a key", S("{\"id\":1,\"params\":{\"a\\u0000b\":1}}"), JSON_OK, "params", true, "1"},
    {"a key deeper", S("{\"id\":1,\"params\":{\"x\":[{\"\\u0000\":1}]}}"), JSON_OK, "params.x[0]", true, "1"},
    {"the first of two", S("{\"id\":2,\"a\":\"\\u0000\",\"b\":\"\\u0000\"}"), JSON_OK, "a", false, "2"},
    {"nested arrays", S("{\"a\":[[1,\"\\u0000\"]],\"id\":9}"), JSON_OK, "a[0][1]", false, "9"},
    {"in the id", S("{\"id\":\"\\u0000\",\"method\":\"ping\"}"), JSON_OK, "id", false, "\"\\u0000\""},
    {"in the method", S("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\\u0000\"}"), JSON_OK, "method", false, "1"},
    {"no id", S("{\"method\":\"x\",\"params\":{\"a\":\"\\u0000\"}}"), JSON_OK, "params.a", false, NULL},
    {"an id given twice", S("{\"id\":1,\"id\":2,\"a\":\"\\u0000\"}"), JSON_OK, "a", false, NULL},
    {"an id below the top", S("{\"params\":{\"id\":5,\"a\":\"\\u0000\"}}"), JSON_OK, "params.a", false, NULL},
    {"not an object", S("[\"\\u0000\"]"), JSON_OK, "[0]", false, NULL},
    {"the top-level string", S("\"\\u0000\""), JSON_OK, "", false, NULL},
    {"an id with spaces around", S("{ \"id\" :  12 , \"a\":\"\\u0000\"}"), JSON_OK, "a", false, "12"},
    {"a long key is cut",
     S("{\"id\":1,\"params\":{\"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\":"
       "\"\\u0000\"}}"),
     JSON_OK, "params.kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\xE2\x80\xA6", false, "1"},
    {"a key with escapes and non-ASCII", S("{\"id\":1,\"params\":{\"a\\\"\xC3\xA9\":\"\\u0000\"}}"), JSON_OK,
     "params.a\xE2\x80\xA6", false, "1"},
    {"a raw NUL byte is not an escape", S("{\"id\":1,\"a\":\"\0\"}"), JSON_ERR_NUL, NULL, false, NULL},
    {"invalid UTF-8 after the escape", S("{\"id\":1,\"a\":\"\\u0000\",\"b\":\"\xFF\"}"), JSON_ERR_UTF8, NULL, false,
     NULL},
    {"a syntax error after the escape", S("{\"id\":1,\"a\":\"\\u0000\",}"), JSON_ERR_SYNTAX, NULL, false, NULL},
    {"no \\u0000 at all", S("{\"id\":1}"), JSON_ERR_NUL, NULL, false, NULL},
};

static void nul_tests(void) {
  for (size_t i = 0; i < ARRAY_SIZE(nul_cases); i++) {
    const struct nul_case *c = &nul_cases[i];
    struct guarded g = guarded_copy(c->in, c->len);
    struct json_nul_site site;
    memset(&site, 'x', sizeof(site));
    int r = json_locate_nul(g.data, c->len, DEPTH, VALUES, &site);
    is_int(r, c->code, "json_locate_nul: %s", c->name);
    if (r == JSON_OK) {
      is_str(site.path, c->path, "%s: path", c->name);
      ok(site.in_key == c->in_key, "%s: %s", c->name, c->in_key ? "in a key" : "in a value");
      if (c->id == NULL)
        ok(site.id == NULL, "%s: no id", c->name);
      else
        is_mem(site.id, site.id ? site.id_len : 0, c->id, strlen(c->id), "%s: the id as written", c->name);
    }
    guarded_free(&g);
  }
  /* Deeper than the path records: the path is cut, never overflows. */
  struct buf b = {0};
  buf_append(&b, "{\"id\":1,\"p\":", 12);
  for (int i = 0; i < DEPTH - 2; i++)
    buf_append(&b, "{\"abcdefgh\":", 12);
  buf_append(&b, "\"\\u0000\"", 8);
  for (int i = 0; i < DEPTH - 2; i++)
    buf_append(&b, "}", 1);
  buf_append(&b, "}", 1);
  struct json_nul_site site;
  is_int(json_locate_nul(b.data, b.len, DEPTH, VALUES, &site), JSON_OK, "a \\u0000 %d levels down", DEPTH);
  ok(strlen(site.path) < sizeof(site.path), "its path fits (%zu bytes)", strlen(site.path));
  like(site.path, "p.abcdefgh.abcdefgh", "and starts at the top");
  is_str(site.path + strlen(site.path) - 3, "\xE2\x80\xA6", "and ends with an ellipsis");
  buf_free(&b);
}

static void strerror_tests(void) {
  is_str(json_scan_strerror(JSON_OK), "valid", "strerror OK");
  is_str(json_scan_strerror(JSON_ERR_SYNTAX), "the body is not valid JSON", "strerror SYNTAX");
  is_str(json_scan_strerror(JSON_ERR_UTF8), "the body is not valid UTF-8", "strerror UTF8");
  is_str(json_scan_strerror(JSON_ERR_NUL), "NUL characters are not accepted", "strerror NUL");
  is_str(json_scan_strerror(JSON_ERR_DEPTH), "the JSON is nested too deeply", "strerror DEPTH");
  is_str(json_scan_strerror(JSON_ERR_VALUES), "the JSON has too many values", "strerror VALUES");
  is_str(json_scan_strerror(-99), "the body is not valid JSON", "strerror of an unknown code");
}

struct prefix_case {
  const char *name;
  const char *in;
  size_t len;
  size_t expected;
};

static const struct prefix_case prefixes[] = {
    {"empty", S(""), 0},
    {"ASCII", S("abc"), 3},
    {"stops at NUL", S("a\0b"), 1},
    {"NUL first", S("\0abc"), 0},
    {"complete multibyte", S("\xC3\xA9x\xE2\x82\xAC\xF0\x9F\x98\x80!"), 11},
    {"2-byte cut at the end", S("ab\xC3"), 2},
    {"3-byte cut at the end", S("ab\xE2\x82"), 2},
    {"4-byte cut at the end", S("ab\xF0\x9F\x98"), 2},
    {"invalid byte",
     S("abc\xFF"
       "def"),
     3},
    {"lone continuation", S("\x80"), 0},
    {"overlong", S("x\xC0\x80"), 1},
    {"overlong 3-byte", S("x\xE0\x80\xAF"), 1},
    {"surrogate", S("ok\xED\xA0\x80"), 2},
    {"beyond U+10FFFF", S("\xF4\x90\x80\x80"), 0},
    {"continuation replaced by ASCII",
     S("\xE2\x82"
       "A"),
     0},
    {"control characters are valid", S("\x01\t\n\x1f"), 4},
};

static void prefix_tests(void) {
  for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
    const struct prefix_case *c = &prefixes[i];
    struct guarded g = guarded_copy(c->in, c->len);
    is_int(utf8_valid_prefix(g.data, c->len), c->expected, "utf8_valid_prefix: %s", c->name);
    guarded_free(&g);
  }
}

int main(void) {
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    check_case(&cases[i]);
  depth_tests();
  length_tests();
  value_tests();
  nul_tests();
  strerror_tests();
  prefix_tests();
  return done_testing();
}
