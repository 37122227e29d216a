// The warm Node.js spare (node_call.py passes this file's text to
// `node -e`).  Started after a JavaScript call, as the sandbox user with
// the call's limits, it waits for the next call's code and environment on
// fd 4, then runs the code as the cold path would (the same files in
// /work/.mcp, the same argv and execArgv, so child_process.fork() children
// start alike).  Node.js's start-up (about 150 ms in gVisor) is then out
// of the call's way.  Node.js copies its environment at start: process.env
// is the call's, /proc/self/environ the spare's plain one.
import fs from 'node:fs';
const { O_WRONLY, O_CREAT, O_TRUNC, O_NOFOLLOW } = fs.constants;
const write = (name, text) => {
  fs.mkdirSync('.mcp', { recursive: true });
  const fd = fs.openSync('.mcp/' + name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0o644);
  try { fs.writeFileSync(fd, text); } finally { fs.closeSync(fd); }
};
// The preamble, written by this process just before it became Node.js
// (nothing runs between this and the call): importing it now also warms
// the module loader for the code's own import.
try {
  await import('file:///work/.mcp/preamble.mjs');
} catch {}
const data = fs.readFileSync(4);
fs.closeSync(4);
if (data.length === 0) process.exit(0);
const req = JSON.parse(data);
for (const k of Object.keys(process.env)) delete process.env[k];
Object.assign(process.env, req.env);
// The call's proxy, if it has one (preamble.mjs), now that the environment is the call's.
globalThis[Symbol.for('mcp.egress.setup')]?.();
try {
  write('main.mjs', req.code);
} catch (e) {
  process.stderr.write('cannot write the code to /work/.mcp: ' + e.message + '\n');
  process.exit(126);
}
const heap = process.execArgv.filter((a) => a.startsWith('--max-old-space-size=') || a === '--disable-wasm-trap-handler');
process.execArgv.splice(0, process.execArgv.length, ...heap, '--import', 'file:///work/.mcp/preamble.mjs');
process.argv.splice(1, process.argv.length - 1, '/work/.mcp/main.mjs');
if (!globalThis.require) await import('file:///work/.mcp/preamble.mjs');
await import('file:///work/.mcp/main.mjs');
