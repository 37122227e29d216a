"""The executor: PID 1 of a session's sandbox.

It runs as root inside gVisor with only CAP_SETUID, CAP_SETGID and CAP_KILL,
reads request frames on fd 0 and answers with frames on fd 1 (the pipes the
supervisor, mcp-sandboxd, gave to `runsc create`).  Each call runs in a fresh
child forked from this process, which has already imported the interpreter's
start-up modules (and the configured preload modules), so a call costs a fork
instead of an interpreter start.  The child drops to the sandbox user with
empty capability sets, lowers its rlimits, and runs the code as `__main__`.
Once the session has run JavaScript, a Node.js is also started ahead of the
next call (as the sandbox user, with the call's limits), waiting for its code.

When the call ends, every other process in the sandbox is killed: background
processes, setsid daemons and double forks do not outlive their call.

Nothing here is trusted by the host: the supervisor and the responders
validate and bound everything this process sends.

The folder above this package is what the sandbox runs (`python3 -I -B
/opt/mcp/executor`, see sandbox/bundle.c); its __main__.py calls main.main().
One module per concern:

  state        the command line and the one mutable state object
  protocol     frames to and from the supervisor (common/frame.h)
  status       the status lines a call's child writes on fd 3
  main         the request loop: ready, accept, run, learn, fork spares
  call         one call in flight: output, timeout, cancel, its D frame
  spare        the children forked ahead of the next call
  processes    killing and reaping what a call leaves behind
  child        a call's child: from its request to the code
  limits       entering a call: rlimits, user, descriptors, environment
  python_call  Python code run as __main__, and the warm Python spare
  node_call    Node.js calls, cold and warm (preamble.mjs, spare.mjs)
  packages     pip from the wheel cache, npm trees copied in

Every module holds constants only; what changes lives in the State object
main() makes and hands down.  Every module is imported once, in PID 1,
before anything forks: a call imports nothing of its own.
"""
