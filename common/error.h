/* Error contract, after crun's src/libcrun/error.h.
 *
 * A fallible function returns a negative int and, when it fails, fills an
 * error out-parameter (struct mcp_error **) that the caller then owns.
 * Callers either add context with mcp_error_wrap() and return the negative
 * value, or consume the error (log it, turn it into a client message) and
 * release it with mcp_error_release().  A function never fills the error
 * when it succeeds.
 *
 * Every error carries two texts:
 *   - msg: for the operator's log, may name paths, pids and errno strings;
 *   - public_msg: one sentence a client may see, with no host paths or
 *     internals.  Errors made with mcp_fail() get a generic public text from
 *     their kind; mcp_fail_public() sets it explicitly.
 */
#ifndef MCP_ERROR_H
#define MCP_ERROR_H

#include <stdarg.h>

enum mcp_error_kind {
  MCP_ERR_INTERNAL = 0, /* a bug or host failure: the client sees a generic sentence */
  MCP_ERR_INVALID,      /* the client sent something invalid */
  MCP_ERR_NOT_FOUND,    /* the session (or other object) does not exist */
  MCP_ERR_BUSY,         /* a bounded wait ran out: try again later */
  MCP_ERR_CAPACITY,     /* the server is at its configured capacity */
  MCP_ERR_SANDBOX,      /* the sandbox failed in a way the client should know about */
};

struct mcp_error {
  enum mcp_error_kind kind;
  int errno_value; /* 0 when no errno applies */
  char *msg;
  char *public_msg;
};

typedef struct mcp_error *mcp_error_t;

/* Fill *err and return -1 (or -errno_value when it is non-zero). */
int mcp_fail(mcp_error_t *err, enum mcp_error_kind kind, int errno_value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Same, with a client-visible sentence equal to the formatted message. */
int mcp_fail_public(mcp_error_t *err, enum mcp_error_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix context to the operator text: "ctx: old".  Returns the same negative value. */
int mcp_error_wrap(mcp_error_t *err, int ret, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The sentence a client may see. */
const char *mcp_error_public(const struct mcp_error *err);
void mcp_error_release(mcp_error_t *err);
/* Log to stderr with a prefix and release. */
void mcp_error_log_release(mcp_error_t *err, const char *prefix);

static inline void cleanup_error(mcp_error_t *err) { mcp_error_release(err); }
#define cleanup_mcp_error __attribute__((cleanup(cleanup_error)))

#endif
