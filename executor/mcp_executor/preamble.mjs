// Imported before a JavaScript call's code (node --import), in the cold
// path and in the warm Node.js spare alike; the executor writes it to
// /work/.mcp/preamble.mjs (node_call.py).  CommonJS names for the code,
// and blocking stdout/stderr: on pipes Node.js writes asynchronously and
// would buffer everything a chatty program prints in memory, until V8
// aborts; blocking writes let the executor's output cap drain it instead.
import { createRequire } from 'node:module';
globalThis.require = createRequire('/work/.mcp/main.mjs');
globalThis.__filename = '/work/.mcp/main.mjs';
globalThis.__dirname = '/work';
for (const s of [process.stdout, process.stderr]) s._handle?.setBlocking?.(true);
