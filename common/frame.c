#include "config.h"

#include "common/frame.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/uio.h>

bool frame_type_valid(int type) {
  switch (type) {
  case FRAME_REQUEST:
  case FRAME_CANCEL:
  case FRAME_QUIT:
  case FRAME_STATUS:
  case FRAME_READY:
  case FRAME_WAKE:
  case FRAME_HIBERNATE:
  case FRAME_ACCEPTED:
  case FRAME_STDOUT:
  case FRAME_STDERR:
  case FRAME_DONE:
  case FRAME_ERROR:
  case FRAME_BUSY:
  case FRAME_RUN_START:
  case FRAME_RUN_CANCEL:
  case FRAME_RUN_STDOUT:
  case FRAME_RUN_STDERR:
  case FRAME_RUN_DONE:
  case FRAME_PROCESSES:
    return true;
  default:
    return false;
  }
}

void frame_reader_init(struct frame_reader *r, size_t max_payload) {
  memset(r, 0, sizeof(*r));
  r->max_payload = max_payload;
}

void frame_reader_free(struct frame_reader *r) { buf_free(&r->in); }

/* Drop consumed bytes before growing the buffer again. */
static void compact(struct frame_reader *r) {
  if (r->consumed == 0)
    return;
  memmove(r->in.data, r->in.data + r->consumed, r->in.len - r->consumed);
  r->in.len -= r->consumed;
  r->consumed = 0;
}

ssize_t frame_reader_fill(struct frame_reader *r, int fd) {
  compact(r);
  char tmp[FRAME_CHUNK];
  ssize_t n = read_some(fd, tmp, sizeof(tmp));
  if (n > 0 && buf_append(&r->in, tmp, (size_t)n) < 0)
    return -ENOMEM;
  return n;
}

int frame_reader_feed(struct frame_reader *r, const void *data, size_t len) {
  compact(r);
  return buf_append(&r->in, data, len);
}

int frame_reader_next(struct frame_reader *r, struct frame *f) {
  size_t avail = r->in.len - r->consumed;
  if (avail < FRAME_HEADER)
    return 0;
  const unsigned char *h = (const unsigned char *)r->in.data + r->consumed;
  if (!frame_type_valid(h[0]))
    return -EPROTO;
  size_t len = ((size_t)h[1] << 24) | ((size_t)h[2] << 16) | ((size_t)h[3] << 8) | (size_t)h[4];
  if (len > r->max_payload)
    return -EMSGSIZE;
  if (avail - FRAME_HEADER < len)
    return 0;
  f->type = h[0];
  f->payload = (const char *)h + FRAME_HEADER;
  f->len = len;
  r->consumed += FRAME_HEADER + len;
  return 1;
}

int frame_write(int fd, int type, const void *payload, size_t len) {
  if (len > UINT32_MAX)
    return -EMSGSIZE;
  unsigned char h[FRAME_HEADER] = {(unsigned char)type, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
                                   (unsigned char)(len >> 8), (unsigned char)len};
  struct iovec iov[2] = {{h, sizeof(h)}, {(void *)payload, len}};
  size_t total = sizeof(h) + len, done = 0;
  while (done < total) {
    ssize_t w = writev(fd, iov, 2);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN) {
        struct pollfd p = {fd, POLLOUT, 0};
        poll(&p, 1, -1);
        continue;
      }
      return -errno;
    }
    done += (size_t)w;
    for (int i = 0; i < 2 && w > 0; i++) {
      size_t take = (size_t)w < iov[i].iov_len ? (size_t)w : iov[i].iov_len;
      iov[i].iov_base = (char *)iov[i].iov_base + take;
      iov[i].iov_len -= take;
      w -= (ssize_t)take;
    }
  }
  return 0;
}

int frame_read(struct frame_reader *r, int fd, int64_t deadline_ms, struct frame *f) {
  for (;;) {
    int ret = frame_reader_next(r, f);
    if (ret != 0)
      return ret;
    int timeout = -1;
    if (deadline_ms >= 0) {
      int64_t left = deadline_ms - now_ms();
      if (left <= 0)
        return -ETIMEDOUT;
      timeout = left > 1000000 ? 1000000 : (int)left;
    }
    struct pollfd p = {fd, POLLIN, 0};
    int pr = poll(&p, 1, timeout);
    if (pr < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (pr == 0)
      continue; /* re-check the deadline */
    ssize_t n = frame_reader_fill(r, fd);
    if (n == 0)
      return 0;
    if (n < 0 && n != -EAGAIN)
      return (int)n;
  }
}

int frame_append(struct buf *b, int type, const void *payload, size_t len) {
  if (len > UINT32_MAX)
    return -EMSGSIZE;
  unsigned char h[FRAME_HEADER] = {(unsigned char)type, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
                                   (unsigned char)(len >> 8), (unsigned char)len};
  if (buf_append(b, h, sizeof(h)) < 0 || buf_append(b, payload, len) < 0)
    return -ENOMEM;
  return 0;
}
