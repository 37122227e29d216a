// The persistent JavaScript interpreter (node_call.py passes this file's
// text to `node -e`; persistent.py starts it as the sandbox user with the
// call limits).  It reads cells on fd 4 (a big-endian u32 length, then
// JSON: code, env, cell number, value limit), runs each in this one
// context, and writes status lines on fd 3 (mcp_executor/status.py):
// `value <base64>` when the cell ends with an expression, then `done code
// cpu_ms max_rss_kb`.  stdout and stderr are this process's for its whole
// life (blocking, preamble.mjs): all a cell wrote is in the pipes before
// its done line.
//
// A cell is an ES module as the fresh path runs it: static imports and
// top-level await work, and what it declares (import bindings, var, let,
// const, function, class) lives on in the next cells.  Debian's acorn
// parses it; each top-level declaration becomes a `var` of the script
// (a global, so it can be declared again in a later cell, as in a
// notebook) assigned where the declaration was, static imports become
// `await import()`, import.meta an object of its own, and the cell runs
// as the body of an async function whose last expression is returned.
//
// The wall clock interrupts a cell with SIGINT: a cell still in its
// synchronous part stops there (vm breakOnSigint) and the state is kept;
// a cell that is awaiting cannot be stopped (its pending callbacks would
// go on after it, spawning or writing), so the interpreter ends and the
// result says the state was lost.
import fs from 'node:fs';
import net from 'node:net';
import util from 'node:util';
import vm from 'node:vm';
import * as acorn from '/usr/share/nodejs/acorn/dist/acorn.mjs';
import * as walk from '/usr/share/nodejs/acorn-walk/dist/walk.mjs';

const BASE = '/work/.mcp/';
try {
  await import('file:///work/.mcp/preamble.mjs');
} catch {}

let current = null; // the cell that runs: {cell, failed}

const status = (line) => {
  try {
    fs.writeSync(3, line + '\n');
  } catch {}
};

// Names a pattern binds.
function bound(node, out) {
  if (!node) return out;
  switch (node.type) {
    case 'Identifier': out.push(node.name); break;
    case 'ObjectPattern': for (const p of node.properties) bound(p.type === 'RestElement' ? p.argument : p.value, out); break;
    case 'ArrayPattern': for (const e of node.elements) bound(e, out); break;
    case 'RestElement': bound(node.argument, out); break;
    case 'AssignmentPattern': bound(node.left, out); break;
    default: break;
  }
  return out;
}

// `import d, {a as b}, * as ns from 'x'` as assignments of the bindings.
function importText(node, src, names) {
  const spec = src.slice(node.source.start, node.source.end);
  const parts = [];
  const named = [];
  for (const s of node.specifiers) {
    names.push(s.local.name);
    if (s.type === 'ImportNamespaceSpecifier') parts.push(`${s.local.name} = __mcpModule__;`);
    else if (s.type === 'ImportDefaultSpecifier') named.push(`default: ${s.local.name}`);
    else named.push(`${src.slice(s.imported.start, s.imported.end)}: ${s.local.name}`);
  }
  if (named.length) parts.push(`({ ${named.join(', ')} } = __mcpModule__);`);
  return `{ const __mcpModule__ = await import(${spec}); ${parts.join(' ')} }`;
}

function declarationText(node, src, names) {
  if (node.type === 'VariableDeclaration') {
    const parts = [];
    for (const d of node.declarations) {
      bound(d.id, names);
      const target = src.slice(d.id.start, d.id.end);
      if (d.init) parts.push(`(${target} = ${src.slice(d.init.start, d.init.end)});`);
      else if (node.kind !== 'var') parts.push(`(${target} = undefined);`);
    }
    return parts.join(' ');
  }
  names.push(node.id.name);
  return `${node.id.name} = ${src.slice(node.start, node.end)};`;
}

// The cell as a script: hoisted vars, an async body, its last value.
export function transform(code) {
  // import.meta is module syntax: the same number of characters, an
  // object of this interpreter instead (positions do not move).
  let src = code;
  const first = acorn.parse(src, { ecmaVersion: 'latest', sourceType: 'module', allowAwaitOutsideFunction: true, allowHashBang: true });
  const metas = [];
  walk.full(first, (n) => { if (n.type === 'MetaProperty' && n.meta.name === 'import') metas.push(n); });
  for (const m of metas.sort((a, b) => b.start - a.start)) src = src.slice(0, m.start) + '__mcpMeta__' + src.slice(m.end);
  const tree = metas.length ? acorn.parse(src, { ecmaVersion: 'latest', sourceType: 'module', allowAwaitOutsideFunction: true, allowHashBang: true }) : first;
  const names = [];
  const hoisted = [];
  const edits = [];
  const body = tree.body;
  body.forEach((node, i) => {
    let n = node;
    if (n.type === 'ExportNamedDeclaration' && n.declaration) n = n.declaration;
    else if (n.type === 'ExportDefaultDeclaration') n = n.declaration;
    if (n.type === 'ImportDeclaration') edits.push([node.start, node.end, importText(n, src, names)]);
    else if (n.type === 'VariableDeclaration' || (n.type === 'ClassDeclaration' && n.id)) edits.push([node.start, node.end, declarationText(n, src, names)]);
    else if (n.type === 'FunctionDeclaration' && n.id) {
      // Function declarations are hoisted: assigned before the cell's code.
      hoisted.push(declarationText(n, src, names));
      edits.push([node.start, node.end, '']);
    } else if (node !== n || node.type.startsWith('Export')) edits.push([node.start, node.end, src.slice(n.start, n.end) + ';']);
    else if (i === body.length - 1 && node.type === 'ExpressionStatement') {
      edits.push([node.start, node.end, `return (${src.slice(node.expression.start, node.expression.end)});`]);
    }
  });
  let out = src;
  for (const [s, e, text] of edits.sort((a, b) => b[0] - a[0])) out = out.slice(0, s) + text + out.slice(e);
  const vars = [...new Set(names)];
  return `${vars.length ? `var ${vars.join(', ')};` : ''} (async () => { ${hoisted.join(' ')}\n${out}\n})()`;
}

function cpuMs() {
  const u = process.resourceUsage();
  return Math.round((u.userCPUTime + u.systemCPUTime) / 1000);
}

function inspect(value, limit) {
  let text;
  try {
    text = typeof value === 'string' ? util.inspect(value) : util.inspect(value, { depth: 4, maxArrayLength: 200 });
  } catch (e) {
    text = `<inspect failed: ${e?.name}>`;
  }
  let data = Buffer.from(text, 'utf8');
  if (data.length > limit) data = Buffer.concat([data.subarray(0, limit), Buffer.from('…')]);
  return data.toString('base64');
}

function report(error) {
  if (error !== undefined) {
    try {
      process.stderr.write((error?.stack ?? String(error)) + '\n');
    } catch {}
  }
}

async function runCell(req) {
  const cell = Number(req.cell) || 0;
  const filename = `${BASE}cell-${cell}.mjs`;
  for (const k of Object.keys(process.env)) delete process.env[k];
  Object.assign(process.env, req.env || {});
  globalThis[Symbol.for('mcp.egress.setup')]?.();
  globalThis.__mcpMeta__ = { url: `file://${filename}`, filename, dirname: '/work', resolve: (s) => import.meta.resolve(s) };
  current = { cell, failed: false };
  const start = cpuMs();
  let code = 0;
  try {
    const script = new vm.Script(transform(req.code || ''), {
      filename,
      importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
    });
    const value = await script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (value !== undefined) status(`value ${inspect(value, Number(req.value_max) || 65536)}`);
  } catch (e) {
    code = 1;
    report(e);
  }
  if (current.failed) code = 1;
  current = null;
  status(`done ${code} ${Math.max(0, cpuMs() - start)} ${process.resourceUsage().maxRSS}`);
}

// An interrupt while the cell awaits: nothing can stop what it scheduled.
process.on('SIGINT', () => {
  if (current === null) return;
  try {
    process.stderr.write('KeyboardInterrupt: the cell was interrupted while it was awaiting; the interpreter ends\n');
  } catch {}
  process.exit(130);
});
// Errors of callbacks a cell left behind fail the cell that runs (or are
// only printed between cells), as an unhandled error would end a script.
for (const ev of ['uncaughtException', 'unhandledRejection']) {
  process.on(ev, (e) => {
    report(e);
    if (current !== null) current.failed = true;
  });
}
// vm.USE_MAIN_CONTEXT_DEFAULT_LOADER is experimental in this Node.js: not a
// warning of the code's.
const emit = process.emitWarning;
process.emitWarning = (w, ...rest) => {
  if (String(w?.message ?? w).includes('USE_MAIN_CONTEXT_DEFAULT_LOADER')) return;
  emit.call(process, w, ...rest);
};

let pending = Buffer.alloc(0);
let queue = Promise.resolve();
// A pipe handle in the event loop (a file stream would block a thread of
// the pool in read(2), and process.exit would wait for it).
const input = new net.Socket({ fd: 4, readable: true, writable: false });
input.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  while (pending.length >= 4) {
    const n = pending.readUInt32BE(0);
    if (pending.length < 4 + n) break;
    const req = JSON.parse(pending.subarray(4, 4 + n).toString('utf8'));
    pending = pending.subarray(4 + n);
    queue = queue.then(() => runCell(req));
  }
});
input.on('end', () => process.exit(0));
