"""Entering a call: its limits, its user, its descriptors, its environment.

In the call's process (a spare's child, once it has its request, or the
warm Node.js spare's before Node.js starts): a session of its own, fds 0-3
/dev/null, the output pipes and the status pipe, the request's rlimits,
the sandbox user without capabilities, the workspace, and an environment
built from scratch.
"""

import os
import resource
import signal

from . import status
from .egress import proxy_env

STATX_FIX = "/opt/mcp/libmcpstatx.so"


def base_env(args, req):
    """The call's environment: a fixed base, and the call's own variables."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": args.workdir,
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "MPLBACKEND": "Agg",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if args.statx_fix:
        # coreutils' statx(AT_NO_AUTOMOUNT) fails in this gVisor; the
        # preload library strips the flag (see statx_fix.c).
        env["LD_PRELOAD"] = STATX_FIX
    # Network by policy: the proxy of the call (the call's own variables
    # below may override them, to its own loss).
    env.update(proxy_env(req))
    for k, v in (req.get("env") or {}).items():
        if isinstance(k, str) and isinstance(v, str) and "\0" not in k + v and "=" not in k:
            env[k] = v
    return env


def set_limits(req):
    """The request's rlimits (no core dumps in any case)."""

    def lim(res, value):
        if value and value > 0:
            try:
                resource.setrlimit(res, (value, value))
            except (ValueError, OSError):
                pass

    cpu = int(req.get("cpu_seconds") or 0)
    if cpu > 0:
        # SIGXCPU at the soft limit, SIGKILL one second later.
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        except (ValueError, OSError):
            pass
    memory = int(req.get("memory_bytes") or 0)
    if memory > 0 and req.get("language") == "javascript":
        # V8 reserves address space it never uses (its code range alone
        # needs more than 512 MiB): the heap limit is --max-old-space-size,
        # the address space gets 1 GiB on top for those reservations.
        memory += 1 << 30
    lim(resource.RLIMIT_AS, memory)
    lim(resource.RLIMIT_NPROC, int(req.get("nproc") or 0))
    lim(resource.RLIMIT_NOFILE, int(req.get("nofile") or 0))
    lim(resource.RLIMIT_FSIZE, int(req.get("fsize_bytes") or 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def close_other_fds(lowest=4, keep=()):
    """Close every fd from `lowest` on, but those in keep.  This gVisor
    lacks close_range, and os.closerange would make one system call per
    possible fd (65,532 of them, ~15 ms here): close only those that are
    open."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd >= lowest and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


_prctl = None  # libc's prctl, looked up once: by PID 1, so every child has it


def set_dumpable(on):
    """PR_SET_DUMPABLE: while 0, /proc/<pid> of this process belongs to root
    and is closed to the calls' user (its environ, maps, fds)."""
    global _prctl
    try:
        if _prctl is None:
            # dlopen and the symbol's lookup cost a call's process 1.3-3.5
            # ms in gVisor when each call made them anew.
            import ctypes

            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        _prctl(4, 1 if on else 0, 0, 0, 0)
    except Exception:
        pass


def enter_call(args, req, out_w, err_w, status_w, request_fd=None):
    """In a call's process: a session of its own; fds 0-3 /dev/null, the
    output pipes and the status pipe (and request_fd as fd 4); the call's
    limits; the sandbox user; the workspace; the call's environment."""
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if args.direct:
            os.setpgid(0, 0)
        else:
            os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(status_w, status.FD)
        os.set_inheritable(status.FD, False)
        if request_fd is not None:
            os.dup2(request_fd, 4)  # inheritable: Node.js reads it
        close_other_fds(5 if request_fd is not None else 4)
        set_limits(req)
        if os.getuid() == 0 and not args.direct:
            os.setgroups([])
            os.setgid(args.gid)
            os.setuid(args.uid)
            # The call's own /proc/self must stay readable to it.
            set_dumpable(True)
        os.chdir(args.workdir)
        os.umask(0o022)
        os.environ.clear()
        os.environ.update(base_env(args, req))
    except BaseException as e:  # the call cannot run; say why on its stderr
        os.write(err_w if err_w > 2 else 2, ("sandbox: cannot start the call: %r\n" % (e,)).encode())
        os._exit(126)
