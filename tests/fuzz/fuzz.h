/* What every fuzz harness shares (tests/fuzz/README.md).
 *
 * A harness defines LLVMFuzzerTestOneInput() (and LLVMFuzzerInitialize()
 * for its one-time setup).  Built with clang -fsanitize=fuzzer and
 * -DMCP_LIBFUZZER it is a libFuzzer target; built by any compiler with
 * replay.c it runs every file of its seed corpus once (make check).
 *
 * A harness checks more than "no crash": what the service would send to a
 * client must be well-formed, so a violation calls fuzz_fail(), which
 * prints the reason and aborts (libFuzzer then saves the input). */
#ifndef MCP_FUZZ_H
#define MCP_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"
#include "fcgi/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Print "fuzz: <reason>" and abort(). */
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A response sink that keeps every byte. */
struct fuzz_sink {
  struct http_sink sink;
  struct buf out;
};
void fuzz_sink_init(struct fuzz_sink *s);
void fuzz_sink_free(struct fuzz_sink *s);

/* text[0..len) is one JSON value that json_scan() accepts (valid UTF-8, no
 * NUL, depth <= 64) and cJSON parses; returns the parsed value or fails. */
struct cJSON *fuzz_check_json(const char *text, size_t len, const char *what);
/* A JSON-RPC response: "jsonrpc":"2.0", an id, and exactly one of result
 * and error {code: integer, message: string}. */
void fuzz_check_rpc(const struct cJSON *msg, const char *what);
/* A whole FastCGI response as mcp_serve() writes it: "Status: N reason",
 * headers, a blank line, then a body that matches its Content-Type
 * (JSON-RPC, an event stream of JSON-RPC messages, or nothing).  Returns the
 * status. */
int fuzz_check_response(const char *raw, size_t len);
/* The value of header `name` in a raw response (case-insensitive), copied
 * into out; false when absent. */
bool fuzz_response_header(const char *raw, size_t len, const char *name, char *out, size_t size);

/* A private folder under $TMPDIR (or /tmp), removed at exit. */
const char *fuzz_tmpdir(const char *tag);

#endif
