/* A session's workspace with a real size limit.
 *
 * gVisor sees the workspace through a plain bind mount of a host folder, so
 * the host file system would be the only limit on what code writes there.
 * Each workspace is therefore its own small ext4 file system: a sparse image
 * file (work.img, only root can read it) loop-mounted on work/ while the
 * sandbox runs.  Writes beyond the quota fail with ENOSPC inside the
 * sandbox; nothing else on the host fills up.  Where loop devices are not
 * available (some container platforms) the workspace stays a plain folder
 * and the operator is told once. */
#include "config.h"

#include "sandbox/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "common/proc.h"
#include "common/util.h"

#define IMAGE "work.img"
#define MOUNT_DIR "work"

/* A path other processes can use (not /proc/self/...). */
static int host_path(int dirfd, const char *name, char *buf, size_t size, mcp_error_t *err) {
  int r = fd_host_path(dirfd, name, buf, size);
  return r < 0 ? mcp_fail(err, MCP_ERR_INTERNAL, -r, "workspace path") : 0;
}

static int run_tool(const char *const *argv, mcp_error_t *err) {
  int st = 0;
  cleanup_close int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  struct proc_opts o = {.argv = argv, .stdin_fd = -1, .stdout_fd = devnull, .stderr_fd = -1, .timeout_ms = 60000};
  if (run_process(&o, &st, err) < 0)
    return -1;
  if (st != 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, 0, "%s exited with %d", argv[0], status_to_exit_code(st));
  return 0;
}

int workspace_create(int dirfd, uint64_t size, int uid, int gid, mcp_error_t *err) {
  if (mkdirat(dirfd, MOUNT_DIR, 0700) < 0 && errno != EEXIST)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "mkdir workspace");
  if (fchownat(dirfd, MOUNT_DIR, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "chown workspace");
  if (size == 0 || access("/dev/loop-control", W_OK) != 0)
    return 0;
  cleanup_close int fd = openat(dirfd, IMAGE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "create workspace image");
  if (ftruncate(fd, (off_t)size) < 0) {
    unlinkat(dirfd, IMAGE, 0);
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "size workspace image");
  }
  char path[PATH_MAX], owner[64];
  if (host_path(dirfd, IMAGE, path, sizeof(path), err) < 0)
    return -1;
  snprintf(owner, sizeof(owner), "root_owner=%d:%d", uid, gid);
  /* No journal: a scratch file system, 600 KiB on disk when empty instead
   * of 33 MiB; an unclean one is repaired before mounting (e2fsck -p). */
  const char *argv[] = {"/sbin/mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", owner, path, NULL};
  mcp_error_t mkfs_err = NULL;
  if (run_tool(argv, &mkfs_err) < 0) {
    /* Better a session without a quota than no session: say so loudly. */
    unlinkat(dirfd, IMAGE, 0);
    mcp_error_log_release(&mkfs_err, "workspace: no quota for this session: make the file system");
  }
  return 0;
}

/* A free loop device bound to the image; LO_FLAGS_AUTOCLEAR releases it
 * when the file system is unmounted. */
static int attach_loop(int image_fd, char *dev, size_t size, mcp_error_t *err) {
  cleanup_close int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open /dev/loop-control");
  for (int attempt = 0; attempt < 32; attempt++) {
    int n = ioctl(ctl, LOOP_CTL_GET_FREE);
    if (n < 0)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "LOOP_CTL_GET_FREE");
    snprintf(dev, size, "/dev/loop%d", n);
    int lfd = open(dev, O_RDWR | O_CLOEXEC);
    if (lfd < 0)
      return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open %s", dev);
    struct loop_config lc;
    memset(&lc, 0, sizeof(lc));
    lc.fd = (unsigned)image_fd;
    lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    int r = ioctl(lfd, LOOP_CONFIGURE, &lc);
    if (r < 0 && errno == EINVAL) {
      /* kernels before 5.8 */
      r = ioctl(lfd, LOOP_SET_FD, image_fd);
      if (r == 0) {
        struct loop_info64 info;
        memset(&info, 0, sizeof(info));
        info.lo_flags = LO_FLAGS_AUTOCLEAR;
        r = ioctl(lfd, LOOP_SET_STATUS64, &info);
      }
    }
    int e = errno;
    if (r == 0)
      return lfd; /* kept open until mounted */
    close(lfd);
    if (e != EBUSY)
      return mcp_fail(err, MCP_ERR_INTERNAL, e, "configure %s", dev);
    /* another process took it first: ask again */
  }
  return mcp_fail(err, MCP_ERR_INTERNAL, EBUSY, "no free loop device");
}

bool workspace_has_image(int dirfd) { return faccessat(dirfd, IMAGE, F_OK, AT_SYMLINK_NOFOLLOW) == 0; }

uint64_t workspace_unallocated(int dirfd) {
  struct stat st;
  if (fstatat(dirfd, IMAGE, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0)
    return 0;
  uint64_t size = (uint64_t)st.st_size, used = (uint64_t)st.st_blocks * 512;
  return used >= size ? 0 : size - used;
}

bool workspace_mounted(int dirfd) {
  struct stat dir, mnt;
  if (fstat(dirfd, &dir) < 0 || fstatat(dirfd, MOUNT_DIR, &mnt, AT_SYMLINK_NOFOLLOW) < 0)
    return false;
  return dir.st_dev != mnt.st_dev;
}

static int mount_image(int dirfd, mcp_error_t *err) {
  cleanup_close int img = openat(dirfd, IMAGE, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (img < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open workspace image");
  char dev[32], target[64];
  cleanup_close int lfd = attach_loop(img, dev, sizeof(dev), err);
  if (lfd < 0)
    return -1;
  fd_path(target, sizeof(target), dirfd, MOUNT_DIR);
  if (mount(dev, target, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "") < 0) {
    int e = errno;
    ioctl(lfd, LOOP_CLR_FD, 0);
    return mcp_fail(err, MCP_ERR_INTERNAL, e, "mount the workspace");
  }
  return 0;
}

int workspace_mount(int dirfd, mcp_error_t *err) {
  if (!workspace_has_image(dirfd) || workspace_mounted(dirfd))
    return 0; /* a plain folder, or already mounted */
  mcp_error_t first = NULL;
  if (mount_image(dirfd, &first) < 0) {
    /* An image left unclean by a crash: repair, then try once more. */
    char path[PATH_MAX];
    mcp_error_t fsck = NULL;
    if (host_path(dirfd, IMAGE, path, sizeof(path), &fsck) == 0) {
      const char *argv[] = {"/sbin/e2fsck", "-p", "-f", path, NULL};
      run_tool(argv, &fsck);
    }
    mcp_error_release(&fsck);
    if (mount_image(dirfd, err) < 0) {
      mcp_error_log_release(&first, "workspace");
      return -1;
    }
    mcp_error_release(&first);
  }
  /* mkfs's lost+found (root's) would only confuse the code's listings. */
  char lf[80];
  fd_path(lf, sizeof(lf), dirfd, MOUNT_DIR "/lost+found");
  struct stat st;
  if (lstat(lf, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0)
    rmdir(lf);
  return 0;
}

void workspace_unmount(int dirfd) {
  char target[64];
  fd_path(target, sizeof(target), dirfd, MOUNT_DIR);
  /* Detach: a process still holding a file there must not keep the folder
   * from being removed; the loop device goes with the last reference. */
  for (int i = 0; i < 8 && workspace_mounted(dirfd); i++)
    if (umount2(target, MNT_DETACH) < 0 && errno != EINTR)
      break;
}

int workspace_sync(int dirfd, mcp_error_t *err) {
  bool image = workspace_has_image(dirfd);
  cleanup_close int fd = openat(dirfd, image ? IMAGE : MOUNT_DIR, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "open the workspace");
  if ((image ? fsync(fd) : syncfs(fd)) < 0)
    return mcp_fail(err, MCP_ERR_INTERNAL, errno, "sync the workspace");
  return 0;
}
