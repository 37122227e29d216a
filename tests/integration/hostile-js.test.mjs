// Hostile JavaScript against the real stack: every case of the hostile-code
// table (lib/hostile-cases.mjs, issue "Containment") for execute_javascript
// (issue "A second language": every hostile-code test has its JavaScript
// counterpart), plus the cases only JavaScript has (a V8 heap bomb, an
// endless Atomics.wait). Node.js runs as the same sandbox user, in the same
// sandbox, with the same limits, so the same verdicts apply, in the terms
// Node.js gives them (error codes instead of Python exception names).
//
// The test shape is hostile.test.mjs's (lib/hostile.mjs): a fresh session A
// runs the hostile code, a second session B is already initialized and has
// answered one call; afterwards a console.log call answers with the right
// stdout in under two seconds in A and in B. The last test ends every
// session of this file and, with MCP_STATE_DIR, checks on the host that
// nothing of them is left.
import { hostileSuite } from './lib/hostile-cases.mjs';

hostileSuite('javascript');
