/* common/frame.c: the framing between responders, supervisor and executor. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/frame.h"
#include "common/util.h"
#include "tap.h"

static void header(unsigned char h[FRAME_HEADER], int type, uint32_t len) {
  h[0] = (unsigned char)type;
  h[1] = (unsigned char)(len >> 24);
  h[2] = (unsigned char)(len >> 16);
  h[3] = (unsigned char)(len >> 8);
  h[4] = (unsigned char)len;
}

static void type_tests(void) {
  static const char valid[] = "RKQSYWHAOEDXBGCoedP";
  for (const char *p = valid; *p; p++)
    ok(frame_type_valid(*p), "type '%c' is valid", *p);
  static const int invalid[] = {0, 'r', 'b', 'Z', 0x7f, 0xff, 'x', ' '};
  for (size_t i = 0; i < ARRAY_SIZE(invalid); i++)
    ok(!frame_type_valid(invalid[i]), "type 0x%02x is not valid", invalid[i]);
}

static void feed_tests(void) {
  struct frame_reader r;
  struct frame f;
  frame_reader_init(&r, 1024);

  /* Byte by byte: nothing until the last byte of the payload. */
  unsigned char bytes[FRAME_HEADER + 5];
  header(bytes, FRAME_STDOUT, 5);
  memcpy(bytes + FRAME_HEADER, "hello", 5);
  int early = 0;
  for (size_t i = 0; i < sizeof(bytes); i++) {
    frame_reader_feed(&r, bytes + i, 1);
    int ret = frame_reader_next(&r, &f);
    if (i + 1 < sizeof(bytes) && ret != 0)
      early++;
    if (i + 1 == sizeof(bytes)) {
      is_int(ret, 1, "the frame is complete with its last byte");
      is_int(f.type, FRAME_STDOUT, "type");
      is_mem(f.payload, f.len, "hello", 5, "payload");
    }
  }
  is_int(early, 0, "no frame, and no error, before the last byte");
  is_int(frame_reader_next(&r, &f), 0, "the reader is empty afterwards");

  /* Several frames in one feed, including an empty payload. */
  unsigned char many[3 * FRAME_HEADER + 3 + 2];
  size_t k = 0;
  header(many + k, FRAME_STDERR, 3);
  memcpy(many + k + FRAME_HEADER, "err", 3);
  k += FRAME_HEADER + 3;
  header(many + k, FRAME_QUIT, 0);
  k += FRAME_HEADER;
  header(many + k, FRAME_DONE, 2);
  memcpy(many + k + FRAME_HEADER, "{}", 2);
  k += FRAME_HEADER + 2;
  frame_reader_feed(&r, many, k);
  is_int(frame_reader_next(&r, &f), 1, "first of three frames");
  ok(f.type == FRAME_STDERR && f.len == 3 && memcmp(f.payload, "err", 3) == 0, "first frame is E 'err'");
  is_int(frame_reader_next(&r, &f), 1, "second of three frames");
  ok(f.type == FRAME_QUIT && f.len == 0, "second frame is an empty Q");
  is_int(frame_reader_next(&r, &f), 1, "third of three frames");
  ok(f.type == FRAME_DONE && f.len == 2 && memcmp(f.payload, "{}", 2) == 0, "third frame is D '{}'");
  is_int(frame_reader_next(&r, &f), 0, "then nothing");

  /* A frame split across feeds after the buffer was compacted. */
  frame_reader_feed(&r, many, FRAME_HEADER + 1);
  is_int(frame_reader_next(&r, &f), 0, "half a frame");
  frame_reader_feed(&r, many + FRAME_HEADER + 1, 2);
  is_int(frame_reader_next(&r, &f), 1, "the rest of it");
  is_mem(f.payload, f.len, "err", 3, "payload joined across feeds");

  /* Exactly max_payload is accepted, one more is not, and the header
   * alone is enough to refuse: a hostile sender cannot make us buffer. */
  struct frame_reader small;
  frame_reader_init(&small, 4);
  unsigned char four[FRAME_HEADER + 4];
  header(four, FRAME_STDOUT, 4);
  memcpy(four + FRAME_HEADER, "abcd", 4);
  frame_reader_feed(&small, four, sizeof(four));
  is_int(frame_reader_next(&small, &f), 1, "payload of exactly max_payload");
  unsigned char five[FRAME_HEADER];
  header(five, FRAME_STDOUT, 5);
  frame_reader_feed(&small, five, sizeof(five));
  is_int(frame_reader_next(&small, &f), -EMSGSIZE, "payload of max_payload + 1 is refused from its header");
  frame_reader_free(&small);

  frame_reader_init(&small, 1 << 20);
  header(five, FRAME_STDOUT, 0xFFFFFFFFu);
  frame_reader_feed(&small, five, sizeof(five));
  is_int(frame_reader_next(&small, &f), -EMSGSIZE, "a 4 GiB length is refused");
  frame_reader_free(&small);

  frame_reader_init(&small, 1 << 20);
  header(five, 'Z', 1);
  frame_reader_feed(&small, five, sizeof(five));
  is_int(frame_reader_next(&small, &f), -EPROTO, "an unknown type is refused");
  frame_reader_free(&small);

  frame_reader_init(&small, 1 << 20);
  frame_reader_feed(&small, "Z", 1);
  is_int(frame_reader_next(&small, &f), 0, "an unknown type byte alone waits for the full header");
  frame_reader_free(&small);

  frame_reader_init(&small, 1 << 20);
  header(five, 0, 0);
  frame_reader_feed(&small, five, sizeof(five));
  is_int(frame_reader_next(&small, &f), -EPROTO, "type 0 is refused");
  frame_reader_free(&small);

  frame_reader_free(&r);
}

static void pipe_tests(void) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    bail_out("pipe2");
  struct frame_reader r;
  struct frame f;
  frame_reader_init(&r, 1 << 20);

  is_int(frame_write(p[1], FRAME_REQUEST, "{\"code\":\"1\"}", 12), 0, "frame_write");
  is_int(frame_read(&r, p[0], now_ms() + 1000, &f), 1, "frame_read");
  ok(f.type == FRAME_REQUEST && f.len == 12 && memcmp(f.payload, "{\"code\":\"1\"}", 12) == 0, "round trip");

  is_int(frame_write(p[1], FRAME_CANCEL, NULL, 0), 0, "an empty frame");
  is_int(frame_read(&r, p[0], -1, &f), 1, "read without a deadline");
  ok(f.type == FRAME_CANCEL && f.len == 0, "empty K frame");

  int64_t t0 = now_ms();
  is_int(frame_read(&r, p[0], now_ms() + 100, &f), -ETIMEDOUT, "nothing to read: the deadline passes");
  int64_t waited = now_ms() - t0;
  ok(waited >= 90 && waited < 2000, "it waited for the deadline (%lld ms)", (long long)waited);
  is_int(frame_read(&r, p[0], now_ms() - 1, &f), -ETIMEDOUT, "a deadline in the past");

  /* Half a frame, then the writer goes away. */
  unsigned char h[FRAME_HEADER];
  header(h, FRAME_STDOUT, 10);
  write_all(p[1], h, sizeof(h));
  write_all(p[1], "abc", 3);
  close(p[1]);
  is_int(frame_read(&r, p[0], now_ms() + 1000, &f), 0, "EOF in the middle of a frame is EOF");
  close(p[0]);
  frame_reader_free(&r);

  /* A bad frame read from an fd. */
  if (pipe2(p, O_CLOEXEC) < 0)
    bail_out("pipe2");
  frame_reader_init(&r, 16);
  header(h, FRAME_STDOUT, 17);
  write_all(p[1], h, sizeof(h));
  is_int(frame_read(&r, p[0], now_ms() + 1000, &f), -EMSGSIZE, "frame_read refuses an oversize frame");
  frame_reader_free(&r);
  frame_reader_init(&r, 16);
  write_all(p[1], "?xxxx", 5);
  is_int(frame_read(&r, p[0], now_ms() + 1000, &f), -EPROTO, "frame_read refuses an unknown type");
  frame_reader_free(&r);
  close(p[0]);
  close(p[1]);
}

/* 4 MiB through a socket whose buffer is much smaller: frame_write loops
 * over short writes while a child reads; the reader assembles the pieces. */
static void large_tests(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    bail_out("socketpair");
  size_t n = 4 << 20;
  char *data = malloc(n);
  for (size_t i = 0; i < n; i++)
    data[i] = (char)(i * 7 + (i >> 12));
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    int r1 = frame_write(sv[1], FRAME_STDOUT, data, n);
    int r2 = frame_write(sv[1], FRAME_DONE, "{}", 2);
    _exit(r1 == 0 && r2 == 0 ? 0 : 1);
  }
  close(sv[1]);
  struct frame_reader r;
  struct frame f;
  frame_reader_init(&r, n);
  is_int(frame_read(&r, sv[0], now_ms() + 20000, &f), 1, "a 4 MiB frame arrives");
  ok(f.type == FRAME_STDOUT && f.len == n && memcmp(f.payload, data, n) == 0, "with every byte in place");
  is_int(frame_read(&r, sv[0], now_ms() + 20000, &f), 1, "and the frame after it");
  ok(f.type == FRAME_DONE && f.len == 2, "is intact");
  is_int(frame_read(&r, sv[0], now_ms() + 20000, &f), 0, "then EOF");
  int status = -1;
  waitpid(pid, &status, 0);
  ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer saw no error");
  frame_reader_free(&r);
  close(sv[0]);
  free(data);

  /* Writing to a closed reader fails with EPIPE, it does not kill us. */
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    bail_out("socketpair");
  close(sv[0]);
  signal(SIGPIPE, SIG_IGN);
  is_int(frame_write(sv[1], FRAME_STDOUT, "x", 1), -EPIPE, "write to a closed peer is -EPIPE");
  close(sv[1]);
}

int main(void) {
  type_tests();
  feed_tests();
  pipe_tests();
  large_tests();
  return done_testing();
}
