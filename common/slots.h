/* Execution slots: at most max_concurrent calls run at once across the
 * service, and at most its policy's max_concurrent for one token
 * (common/policy.h).  A slot is an OFD lock on a file below <state>/slots/:
 * N for the service's, t-<token name>/N for a token's.  The supervisor that
 * runs a call holds its slots from the call's start to its end, whatever
 * its client does, and the kernel releases them when that process dies. */
#ifndef MCP_SLOTS_H
#define MCP_SLOTS_H

#include "common/error.h"
#include "common/settings.h"

struct slot_hold {
  int global_fd; /* -1: none held */
  int token_fd;
};

enum slot_full {
  SLOT_FULL_NONE,
  SLOT_FULL_TOKEN,  /* the token runs its max_concurrent calls */
  SLOT_FULL_GLOBAL, /* the service runs max_concurrent calls */
};

#define SLOT_HOLD_NONE ((struct slot_hold){-1, -1})

/* Take one slot of each kind without waiting: 0 when both are held;
 * -EAGAIN with *full set when one kind has none free (nothing is held
 * then); another negative value with err set on a failure. */
int slot_try(const struct mcp_config *cfg, const char *token, int token_max, struct slot_hold *h, enum slot_full *full,
             mcp_error_t *err);
void slot_release(struct slot_hold *h);

/* Boot slots: at most max_starting sandboxes boot at once across the
 * service (lock files below <state>/slots/boot/).  A boot takes CPU (the
 * sentry, the executor's imports) and waits on I/O: a burst of new sessions
 * that all boot at once thrash and finish together and late; too few at a
 * time leave the CPUs idle (hence 4 x cores by default).
 * A supervisor holds one from the start of its sandbox until the executor
 * says it is ready (or the sandbox stops).  The slot's fd, -EAGAIN when
 * none is free, or -1 with err set. */
int boot_slot_try(const struct mcp_config *cfg, mcp_error_t *err);

/* Run slots: at most runs_per_token background runs of one token are
 * active at once across the service (lock files below
 * <state>/slots/runs/t-<token name>/).  The supervisor that owns a run holds
 * its slot until the run ends (sandbox/background.h).  The slot's fd,
 * -EAGAIN when none is free, or -1 with err set. */
int run_slot_try(const struct mcp_config *cfg, const char *token, mcp_error_t *err);

#endif
