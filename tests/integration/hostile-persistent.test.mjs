// Every hostile case of both languages (lib/hostile-cases.mjs, the table
// hostile.test.mjs and hostile-js.test.mjs run) once more with every call
// in the sandbox's persistent interpreter (issue 19: "all the hostile cases
// run in persistent mode as well"): fork and memory bombs, CPU loops,
// endless sleeps, floods of output, daemons and double forks started by a
// cell, the read-only root, the network, host secrets, another session's
// files, the environment, signals, seccomp and identity. The same verdicts
// hold: a cell's processes end with it, the interpreter is interrupted or
// killed at the wall clock, and both sessions answer within 2 s afterwards.
import { hostileSuite } from './lib/hostile-cases.mjs';

hostileSuite('python', { persistent: true });
hostileSuite('javascript', { persistent: true });
