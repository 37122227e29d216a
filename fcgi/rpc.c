/* JSON-RPC helpers shared by the method handlers (see rpc.h). */
#include "config.h"

#include "fcgi/rpc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fcgi/json_scan.h"

int rpc_fail(struct rpc_call *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error_message, sizeof(c->error_message), fmt, ap);
  va_end(ap);
  /* A quoted method name cut at the buffer's size may end inside a UTF-8
   * sequence; the response must stay valid UTF-8. */
  c->error_message[utf8_valid_prefix(c->error_message, strlen(c->error_message))] = '\0';
  c->error_code = code;
  return -1;
}

/* cJSON prints integers above 2^31 or so in exponent form: an id must come
 * back exactly as sent, so integers are printed here. */
cJSON *rpc_id_copy(const cJSON *id) {
  if (id == NULL)
    return cJSON_CreateNull();
  if (cJSON_IsNumber(id) && id->valuedouble <= 9007199254740991.0 && id->valuedouble >= -9007199254740991.0 &&
      id->valuedouble == (double)(int64_t)id->valuedouble) {
    char num[32];
    snprintf(num, sizeof(num), "%lld", (long long)id->valuedouble);
    return cJSON_CreateRaw(num);
  }
  return cJSON_Duplicate(id, 1);
}
