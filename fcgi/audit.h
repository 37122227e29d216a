/* The audit log: one JSON line per tools/call, appended to audit_log.
 * It names who ran what and how it went; it never holds the code, the
 * token or the values of env_variables (the code only as its SHA-256 and
 * size).  Reopened after SIGHUP (audit_reopen) for log rotation. */
#ifndef MCP_AUDIT_H
#define MCP_AUDIT_H

#include <stdint.h>

#include "common/metrics.h"
#include "fcgi/call.h"
#include "fcgi/rpc.h"

struct audit_entry {
  const char *tool;
  const char *code; /* hashed, never written */
  const cJSON *packages;
  const struct call_result *res; /* NULL when the call did not run */
  enum exec_outcome outcome;
  int64_t duration_ms;
  uint64_t bytes_returned;
};

void audit_call(const struct rpc_call *c, const struct audit_entry *e);
/* From a signal handler: the next write reopens the file. */
void audit_reopen(void);

#endif
