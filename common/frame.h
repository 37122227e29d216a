/* Frames between the responders, the per-session supervisor (mcp-sandboxd)
 * and the executor inside the sandbox.
 *
 * A frame is one type byte, a 32-bit big-endian payload length, then the
 * payload.  Everything a frame reader receives may come from sandboxed code,
 * so every reader has a maximum payload size and rejects unknown types.
 *
 *   R  request     responder -> supervisor -> executor   JSON
 *   K  cancel      responder -> supervisor -> executor   empty
 *   Q  quit        responder/keeper -> supervisor        empty; answered by D
 *   S  status      keeper -> supervisor; supervisor -> keeper  JSON {"ready":bool}
 *   Y  ready       executor -> supervisor                JSON
 *   H  hibernate   supervisor -> executor -> supervisor  empty: a checkpoint follows (sandbox/
 *                                                        hibernate.h); drop the spares, answer H
 *   W  wake        supervisor -> executor                JSON {"seed": 64 hex}: the sandbox was
 *                                                        restored from its checkpoint; reseed,
 *                                                        replace what was forked before it, answer Y
 *   A  accepted    executor -> supervisor                empty; the call is its own now
 *   L  later       supervisor -> executor                ASCII milliseconds, right after a D:
 *                                                        other sessions' calls wait for busy
 *                                                        cores or run on them (slots.h:
 *                                                        slot_others_wait, slot_others_run,
 *                                                        slot_cpu_busy); fork and warm no
 *                                                        spare until N, or for that long
 *   N  now         supervisor -> executor                empty: none waits, and none runs
 *                                                        on busy cores, any more; or, once
 *                                                        a D's answer has gone on without
 *                                                        an L: no reason to wait at all
 *   O  stdout      executor -> supervisor -> responder   bytes
 *   E  stderr      executor -> supervisor -> responder   bytes
 *   D  done        executor -> supervisor -> responder   JSON result
 *   X  error       supervisor -> responder               one public sentence
 *   B  busy        supervisor -> responder               one public sentence: no execution
 *                                                        slot came free in capacity_wait; the
 *                                                        call did not run
 *
 * Background runs (sandbox/background.h).  A request whose JSON has
 * "background": true starts a run instead of a call: the supervisor answers
 * at once with D {"run": "<run id>"} (or B, X), and the run goes on with
 * the supervisor as its owner:
 *   G  run start   supervisor -> executor                JSON: the request with "run": N (1-255)
 *   C  run cancel  responder -> supervisor               the run id (`<session>.r<16 hex>`)
 *                  supervisor -> executor                the byte N
 *   o  run stdout  executor -> supervisor                the byte N, then bytes
 *   e  run stderr  executor -> supervisor                the byte N, then bytes
 *   d  run done    executor -> supervisor                the byte N, then the JSON result
 * Runs and the call of R frames run beside each other in one sandbox; the
 * executor tells their processes apart (executor/mcp_executor/cgroups.py).
 *   P  processes   supervisor -> executor                empty: the sandbox's host tasks near
 *                                                        its backstop; stop the call or run
 *                                                        whose processes are the most (its
 *                                                        D or d says processes_exceeded)
 */
#ifndef MCP_FRAME_H
#define MCP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

#define FRAME_HEADER 5
#define FRAME_CHUNK (64 * 1024)

enum frame_type {
  FRAME_REQUEST = 'R',
  FRAME_CANCEL = 'K',
  FRAME_QUIT = 'Q',
  FRAME_STATUS = 'S',
  FRAME_READY = 'Y',
  FRAME_WAKE = 'W',
  FRAME_HIBERNATE = 'H',
  FRAME_ACCEPTED = 'A',
  FRAME_SPARES_LATER = 'L',
  FRAME_SPARES_NOW = 'N',
  FRAME_STDOUT = 'O',
  FRAME_STDERR = 'E',
  FRAME_DONE = 'D',
  FRAME_ERROR = 'X',
  FRAME_BUSY = 'B',
  FRAME_RUN_START = 'G',
  FRAME_RUN_CANCEL = 'C',
  FRAME_RUN_STDOUT = 'o',
  FRAME_RUN_STDERR = 'e',
  FRAME_RUN_DONE = 'd',
  FRAME_PROCESSES = 'P',
};

struct frame_reader {
  struct buf in;
  size_t max_payload;
  size_t consumed; /* bytes of `in` already handed out */
};

struct frame {
  int type;
  const char *payload; /* points into the reader's buffer until the next call */
  size_t len;
};

bool frame_type_valid(int type);
void frame_reader_init(struct frame_reader *r, size_t max_payload);
void frame_reader_free(struct frame_reader *r);
/* Read what fd has (one read(2)); returns bytes read, 0 at EOF, -errno. */
ssize_t frame_reader_fill(struct frame_reader *r, int fd);
/* Feed bytes directly (tests, fuzzers). 0 or -ENOMEM. */
int frame_reader_feed(struct frame_reader *r, const void *data, size_t len);
/* 1: *f holds the next frame; 0: need more bytes; -EPROTO: bad type;
 * -EMSGSIZE: payload larger than max_payload. */
int frame_reader_next(struct frame_reader *r, struct frame *f);

/* Blocking write of one frame, retrying EINTR.  0 or -errno. */
int frame_write(int fd, int type, const void *payload, size_t len);
/* Append one frame to b (for a writer that must not block).  0 or -ENOMEM. */
int frame_append(struct buf *b, int type, const void *payload, size_t len);
/* Blocking read of one frame with a deadline (now_ms() based; <0 = none).
 * Returns 1 with *f set, 0 at EOF, -ETIMEDOUT, -EPROTO, -EMSGSIZE, -errno. */
int frame_read(struct frame_reader *r, int fd, int64_t deadline_ms, struct frame *f);

#endif
