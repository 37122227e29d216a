// Hostile Python against the real stack (issue "Containment"): fork and
// memory bombs, CPU loops, endless sleeps, floods of output, a full
// workspace, daemons that try to outlive their call, writes to the read-only
// root, network access, host secrets, another session's files, the host's
// environment, signals to everything and to PID 1, forbidden system calls,
// and the call's identity.
//
// The cases are one table for both languages (lib/hostile-cases.mjs; this
// file runs it for execute_python, hostile-js.test.mjs for
// execute_javascript). Every test opens a fresh session A that runs the
// hostile code and a second session B that is already initialized (and has
// answered one call) before the hostile code runs. Each test asserts the
// hostile call's outcome AND that afterwards a print() call answers with the
// right stdout in under two seconds (wall time, measured here) in A and in
// B. Where the hostile code kills A's sandbox, A's first call after it pays
// for the restart and is measured the same way.
//
// The last test ends every session this file opened and, when MCP_STATE_DIR
// is set (scripts/test sets it; tests/integration/run passes it through),
// checks on the host that none of their sandboxes, runsc containers,
// cgroups or processes is left.
import { hostileSuite } from './lib/hostile-cases.mjs';

hostileSuite('python');
