"""Node.js calls, cold and warm.

Cold: the call's child (past its input files) copies the call's npm tree
in, writes the preamble and the code to /work/.mcp and becomes Node.js
running the code as an ES module (import and top-level await work; require
is provided too).  Warm: after a JavaScript call, a spare becomes Node.js
ahead of the next call, with that call's limits, and waits for the code on
fd 4 (spare.mjs); a call it can serve skips Node.js's start-up.

The JavaScript is in the files beside this module, read once when PID 1
imports it: preamble.mjs, the code's first import, and spare.mjs, the warm
spare's script.  Node.js gets the latter as `-e` text: the sandbox user
reads nothing of the executor's folder.
"""

import fcntl
import os

from . import status
from .limits import enter_call
from .packages import call_folder, copy_node_modules

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = "/usr/bin/node"
PREAMBLE_URL = "file:///work/.mcp/preamble.mjs"
MAIN = "/work/.mcp/main.mjs"

# Variables Node.js or the loader read once at start: a call that sets one
# takes the cold path, where they apply.
JS_START_VARS = ("NODE_", "UV_", "LD_", "V8_", "SSL_", "OPENSSL_")
# The flags a request may add to Node.js's command line.
NODE_FLAGS = ("--disable-wasm-trap-handler",)


def read_source(name):
    """The text of a JavaScript file shipped beside this module."""
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return f.read()


PREAMBLE = read_source("preamble.mjs")
SPARE = read_source("spare.mjs")
REPL = read_source("repl.mjs")


def write_mcp_file(name, text):
    """Write .mcp/<name> below the current folder (the workspace), never
    following a symlink."""
    os.makedirs(".mcp", exist_ok=True)
    fd = os.open(os.path.join(".mcp", name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def exec_node(req, tail):
    """Become Node.js with req's heap limit; tail: the rest of its argv."""
    heap_mb = max(32, int(req.get("memory_bytes") or (512 << 20)) >> 20)
    node = req.get("node") or NODE
    # node_flags: --disable-wasm-trap-handler where this Node.js has it
    # (fetch's WebAssembly needs it under the call's address-space limit).
    flags = [f for f in (req.get("node_flags") or []) if f in NODE_FLAGS]
    argv = [node, "--max-old-space-size=%d" % heap_mb] + flags + tail
    try:
        os.execve(node, argv, dict(os.environ))
    except OSError as e:
        os.write(2, ("cannot start Node.js: %s\n" % (e,)).encode())
        os._exit(127)


def run_javascript(args, req):
    """In the call's child, as the sandbox user: install the npm packages,
    then become Node.js running the code (does not return)."""
    if req.get("npm_stage"):
        try:
            copy_node_modules(args.workdir, req["npm_stage"], call_folder(req))
        except Exception as e:
            os.write(2, ("package installation failed: %s\n" % (e,)).encode())
            status.write(status.INSTALL_FAILED)
            os._exit(125)
    try:
        write_mcp_file("preamble.mjs", PREAMBLE)
        write_mcp_file("main.mjs", req.get("code") or "")
    except OSError as e:
        os.write(2, ("cannot write the code to /work/.mcp: %s\n" % (e,)).encode())
        os._exit(126)
    exec_node(req, ["--import", PREAMBLE_URL, MAIN])


def js_warm_key(req):
    """The limits a Node.js spare was started with (a call with others
    takes the cold path)."""
    return tuple(int(req.get(k) or 0) for k in ("memory_bytes", "cpu_seconds", "nproc", "nofile", "fsize_bytes")) + (
        req.get("node") or NODE, tuple(req.get("node_flags") or ()))


def js_warm_ok(args, req):
    """Whether a warm Node.js spare can run this call: JavaScript without
    packages or input files (written before Node.js starts, on the cold
    path), without variables that act at Node.js's start, and with the
    output folder in place."""
    env = req.get("env") or {}
    return (req.get("language") == "javascript" and not req.get("npm_stage") and not req.get("packages")
            and not req.get("files") and not any(str(k).startswith(JS_START_VARS) for k in env)
            # output/ is there (the cold path makes it, or says why not)
            and os.path.isdir(os.path.join(args.workdir, "output")))


def start_node_spare(args, template, req_r, out_w, err_w, status_w):
    """In a spare's child: become the call's process for the limits of
    `template` (a previous JavaScript call), write the preamble, then
    become Node.js waiting on fd 4 (does not return)."""
    req_fd = fcntl.fcntl(req_r, fcntl.F_DUPFD_CLOEXEC, 10)
    # The template's limits, not its variables: the call brings its own.
    enter_call(args, dict(template, env={}), out_w, err_w, status_w, request_fd=req_fd)
    try:
        write_mcp_file("preamble.mjs", PREAMBLE)
    except OSError:
        pass  # spare.mjs then fails to import it, and says so at the call
    exec_node(template, ["--input-type=module", "-e", SPARE])


def start_node_interpreter(args, limits, req_r, out_w, err_w, status_w):
    """In the persistent JavaScript interpreter's child: become the sandbox
    user with the interpreter's limits, write the preamble, then become
    Node.js running repl.mjs, which reads cells on fd 4 and writes status
    lines on fd 3 (both kept across the exec; does not return)."""
    req_fd = fcntl.fcntl(req_r, fcntl.F_DUPFD_CLOEXEC, 10)
    enter_call(args, limits, out_w, err_w, status_w, request_fd=req_fd)
    os.set_inheritable(status.FD, True)
    try:
        write_mcp_file("preamble.mjs", PREAMBLE)
    except OSError:
        pass
    exec_node(limits, ["--input-type=module", "-e", REPL])
