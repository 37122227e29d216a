/* libmcpstatx.so: preloaded into the code's processes inside the sandbox.
 *
 * This gVisor build rejects statx(2) calls that carry AT_NO_AUTOMOUNT with
 * EINVAL, and coreutils 9.1 (ls, stat, cp -a, ...) always pass it, so every
 * such tool fails with "Invalid argument".  There are no automount points in
 * the sandbox, so dropping the flag changes nothing else. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef AT_NO_AUTOMOUNT
#define AT_NO_AUTOMOUNT 0x800
#endif

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
  return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}
