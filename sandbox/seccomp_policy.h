/* The in-sandbox seccomp policy: the bundle's linux.seccomp, loaded by
 * runsc --oci-seccomp inside the sandbox.  Built with libseccomp (every
 * syscall name is resolved for the native architecture; names the
 * architecture lacks are left out). */
#ifndef MCP_SECCOMP_POLICY_H
#define MCP_SECCOMP_POLICY_H

#include <cjson/cJSON.h>

#include "common/error.h"

cJSON *seccomp_policy(mcp_error_t *err);

#endif
