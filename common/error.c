#include "config.h"

#include "common/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *vformat(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static char *vformat(const char *fmt, va_list ap) {
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0)
    return NULL;
  return s;
}

static const char *kind_sentence(enum mcp_error_kind kind) {
  switch (kind) {
  case MCP_ERR_INVALID:
    return "The request is invalid.";
  case MCP_ERR_NOT_FOUND:
    return "The session does not exist or has ended.";
  case MCP_ERR_BUSY:
    return "The session is busy with another call; try again later.";
  case MCP_ERR_CAPACITY:
    return "The server is at capacity; try again later.";
  case MCP_ERR_SANDBOX:
    return "The sandbox failed; the session's files are kept and the next call starts a new sandbox.";
  case MCP_ERR_INTERNAL:
  default:
    return "Internal server error.";
  }
}

static int fill(mcp_error_t *err, enum mcp_error_kind kind, int errno_value, char *msg, char *public_msg) {
  int ret = errno_value > 0 ? -errno_value : -1;
  if (err == NULL) {
    free(msg);
    free(public_msg);
    return ret;
  }
  /* An error already pending is kept: the first cause is the useful one. */
  if (*err != NULL) {
    free(msg);
    free(public_msg);
    return ret;
  }
  struct mcp_error *e = calloc(1, sizeof(*e));
  if (e == NULL) {
    free(msg);
    free(public_msg);
    return ret;
  }
  e->kind = kind;
  e->errno_value = errno_value;
  if (msg != NULL && errno_value > 0) {
    char *with = NULL, ebuf[128];
    /* strerror_r: responders are multi-threaded */
    if (asprintf(&with, "%s: %s", msg, strerror_r(errno_value, ebuf, sizeof(ebuf))) >= 0) {
      free(msg);
      msg = with;
    }
  }
  e->msg = msg;
  e->public_msg = public_msg;
  *err = e;
  return ret;
}

int mcp_fail(mcp_error_t *err, enum mcp_error_kind kind, int errno_value, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(fmt, ap);
  va_end(ap);
  return fill(err, kind, errno_value, msg, NULL);
}

int mcp_fail_public(mcp_error_t *err, enum mcp_error_kind kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(fmt, ap);
  va_end(ap);
  return fill(err, kind, 0, msg, msg != NULL ? strdup(msg) : NULL);
}

int mcp_error_wrap(mcp_error_t *err, int ret, const char *fmt, ...) {
  if (err == NULL || *err == NULL)
    return ret;
  va_list ap;
  va_start(ap, fmt);
  char *ctx = vformat(fmt, ap);
  va_end(ap);
  if (ctx == NULL)
    return ret;
  char *joined = NULL;
  if (asprintf(&joined, "%s: %s", ctx, (*err)->msg ? (*err)->msg : "") >= 0) {
    free((*err)->msg);
    (*err)->msg = joined;
  }
  free(ctx);
  return ret;
}

const char *mcp_error_public(const struct mcp_error *err) {
  if (err == NULL)
    return kind_sentence(MCP_ERR_INTERNAL);
  if (err->public_msg != NULL)
    return err->public_msg;
  return kind_sentence(err->kind);
}

void mcp_error_release(mcp_error_t *err) {
  if (err == NULL || *err == NULL)
    return;
  free((*err)->msg);
  free((*err)->public_msg);
  free(*err);
  *err = NULL;
}

void mcp_error_log_release(mcp_error_t *err, const char *prefix) {
  if (err == NULL || *err == NULL)
    return;
  fprintf(stderr, "%s: %s\n", prefix, (*err)->msg ? (*err)->msg : "(no message)");
  mcp_error_release(err);
}
