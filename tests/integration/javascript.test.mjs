// execute_javascript (issue "A second language"): Node.js in the session's
// sandbox with the same contract as execute_python, sharing the session's
// workspace with it; npm packages from a local registry
// (tests/packages/make_npm_registry.py, served by scripts/test), installed
// without install scripts. The package tests need the stack started with
// MCP_NPM_REGISTRY pointing at that registry; the runner says so with
// MCP_TEST_NPM_REGISTRY.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { TEST_TIMEOUT_MS, connectClient, closeClient, runPython, randomToken } from './lib/common.mjs';
import { STATE_DIR, findPaths } from './lib/host.mjs';

const opts = { timeout: TEST_TIMEOUT_MS };
const npmOpts = {
  timeout: TEST_TIMEOUT_MS,
  skip: process.env.MCP_TEST_NPM_REGISTRY ? false : 'MCP_TEST_NPM_REGISTRY not set: the stack has no test npm registry',
};
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const RESULT_FIELDS = ['stdout', 'stderr', 'exit_code', 'timed_out', 'duration_ms', 'truncated', 'memory_exceeded',
  'cpu_exceeded', 'workspace_full', 'sandbox_restarted', 'files', 'skipped_files'];

const show = (r) => JSON.stringify(r, (k, v) => (typeof v === 'string' && v.length > 1500 ? `${v.slice(0, 1500)}…(${v.length})` : v));

/** Call execute_javascript; checks the result shape, returns the raw result. */
async function runJs(client, args) {
  const r = await client.callTool({ name: 'execute_javascript', arguments: args }, undefined, { timeout: TEST_TIMEOUT_MS });
  const sc = r.structuredContent;
  if (sc !== undefined) {
    for (const k of RESULT_FIELDS) assert.ok(k in sc, `structuredContent.${k} present: ${show(r)}`);
    assert.ok(Number.isInteger(sc.exit_code) && Number.isInteger(sc.duration_ms), show(sc));
    const text = r.content.find((b) => b.type === 'text');
    assert.ok(text, `a text block: ${show(r)}`);
    assert.deepEqual(JSON.parse(text.text), sc, 'the text block is the JSON of structuredContent');
  }
  return r;
}

async function withClient(name, fn) {
  const c = await connectClient(name);
  try {
    return await fn(c.client);
  } finally {
    await closeClient(c);
  }
}

/** A PNG of w x h RGB pixels, built by hand (zlib + CRC-32). Its source is
 * also sent into the sandbox, so both sides build the same bytes. */
function makePng(w, h) {
  const table = [];
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table.push(c >>> 0);
  }
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = table[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const rows = [];
  for (let y = 0; y < h; y++) {
    rows.push(0); // filter: none
    for (let x = 0; x < w; x++) rows.push((x * 80) & 0xff, (y * 120) & 0xff, 200);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(Buffer.from(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

// ---- the tool ------------------------------------------------------------------

test('tools/list: execute_javascript beside execute_python, the same input and output schema', opts, async () => {
  await withClient('js-list', async (client) => {
    const { tools } = await client.listTools();
    const js = tools.find((t) => t.name === 'execute_javascript');
    const py = tools.find((t) => t.name === 'execute_python');
    assert.ok(js, `execute_javascript is listed: ${tools.map((t) => t.name).join(', ')}`);
    assert.ok(py, 'execute_python is still listed');
    assert.equal(typeof js.description, 'string');
    assert.ok(js.description.length > 20, `a description: ${js.description}`);
    const s = js.inputSchema;
    assert.equal(s.type, 'object');
    assert.deepEqual(s.required, ['code']);
    assert.equal(s.properties.code.type, 'string');
    assert.equal(s.properties.packages.type, 'array');
    assert.equal(s.properties.packages.items.type, 'string');
    assert.equal(s.properties.env_variables.type, 'object');
    assert.equal(s.properties.timeout_seconds.type, 'integer');
    assert.equal(s.properties.files.type, 'array');
    assert.deepEqual(Object.keys(s.properties).sort(), Object.keys(py.inputSchema.properties).sort(), 'the same arguments as execute_python');
    assert.equal(js.outputSchema?.type, 'object');
    for (const k of RESULT_FIELDS) assert.ok(k in js.outputSchema.properties, `outputSchema has ${k}`);
    assert.deepEqual(js.outputSchema, py.outputSchema, 'the same result shape as execute_python');
  });
});

test('console.log and console.error: stdout, stderr, exit_code 0', opts, async () => {
  await withClient('js-print', async (client) => {
    const r = await runJs(client, { code: 'console.log("hello", 6 * 7);\nconsole.error("to-stderr");\n' });
    const sc = r.structuredContent;
    assert.equal(r.isError ?? false, false, show(r));
    assert.equal(sc.stdout, 'hello 42\n');
    assert.equal(sc.stderr, 'to-stderr\n');
    assert.equal(sc.exit_code, 0);
    assert.equal(sc.timed_out, false);
    assert.equal(sc.truncated, false);
    assert.equal(sc.sandbox_restarted, false);
  });
});

test('modules: import and require of node: builtins, dynamic import, __filename; cwd /work, uid 1000', opts, async () => {
  await withClient('js-modules', async (client) => {
    const r = await runJs(client, {
      code: [
        "import fs from 'node:fs';",
        "import { createHash } from 'node:crypto';",
        "import * as pathNs from 'path';",
        "const path = require('node:path');",
        "const os = require('os');",
        "const util = await import('node:util');",
        'console.log(JSON.stringify({',
        '  fs: typeof fs.readFileSync, hash: createHash("sha256").update("x").digest("hex").slice(0, 12),',
        '  join: path.join("a", "b"), ns: pathNs.basename("/q/r.txt"), os: typeof os.cpus, util: util.format("%d!", 7),',
        '  req: typeof require, resolve: typeof require.resolve, filename: typeof __filename, dirname: typeof __dirname,',
        '  meta: typeof import.meta.url, cwd: process.cwd(), uid: process.getuid(), node: process.versions.node,',
        '}));',
      ].join('\n'),
    });
    assert.equal(r.isError ?? false, false, show(r));
    const rep = JSON.parse(r.structuredContent.stdout);
    assert.deepEqual(
      { ...rep, node: typeof rep.node },
      {
        fs: 'function', hash: '2d711642b726', join: 'a/b', ns: 'r.txt', os: 'function', util: '7!',
        req: 'function', resolve: 'function', filename: 'string', dirname: 'string', meta: 'string',
        cwd: '/work', uid: 1000, node: 'string',
      },
      show(r.structuredContent),
    );
  });
});

test('top-level await: timers, promises and for await work at the top of the module', opts, async () => {
  await withClient('js-await', async (client) => {
    const r = await runJs(client, {
      code: [
        "import { setTimeout as sleep } from 'node:timers/promises';",
        'const t0 = Date.now();',
        'const v = await new Promise((res) => setTimeout(() => res(41), 150));',
        'await sleep(100);',
        'async function* gen() { yield 1; await sleep(10); yield 2; }',
        'let sum = 0;',
        'for await (const x of gen()) sum += x;',
        'console.log(v + 1, sum, Date.now() - t0 >= 240);',
      ].join('\n'),
    });
    assert.equal(r.isError ?? false, false, show(r));
    assert.equal(r.structuredContent.stdout, '42 3 true\n');
  });
});

test('errors: a thrown error, an unhandled rejection and process.exit(n) are error results with the stack in stderr', opts, async () => {
  await withClient('js-errors', async (client) => {
    const tag = randomToken();
    const thrown = await runJs(client, { code: `console.log("before");\nthrow new TypeError("bad thing ${tag}");\n` });
    let sc = thrown.structuredContent;
    assert.equal(thrown.isError, true, show(thrown));
    assert.equal(sc.stdout, 'before\n');
    assert.match(sc.stderr, new RegExp(`TypeError: bad thing ${tag}`), show(sc));
    assert.match(sc.stderr, /\n\s+at .*:2:/, `a stack trace with the line: ${show(sc)}`);
    assert.equal(sc.exit_code, 1, show(sc));
    assert.equal(sc.timed_out, false);

    const rejected = await runJs(client, { code: `console.log("before");\nPromise.reject(new Error("boom ${tag}"));\n` });
    sc = rejected.structuredContent;
    assert.equal(rejected.isError, true, show(rejected));
    assert.equal(sc.stdout, 'before\n');
    assert.match(sc.stderr, new RegExp(`Error: boom ${tag}`), show(sc));
    assert.match(sc.stderr, /\n\s+at /, `a stack trace: ${show(sc)}`);
    assert.equal(sc.exit_code, 1, show(sc));

    // A rejection from an async function, later, from a timer.
    const late = await runJs(client, {
      code: `async function f() { throw new RangeError("late ${tag}"); }\nsetTimeout(() => { f(); }, 100);\nsetTimeout(() => console.log("never"), 2000);\n`,
    });
    sc = late.structuredContent;
    assert.equal(late.isError, true, show(late));
    assert.match(sc.stderr, new RegExp(`RangeError: late ${tag}`), show(sc));
    assert.match(sc.stderr, /\n\s+at f /, `the stack names the function: ${show(sc)}`);
    assert.equal(sc.exit_code, 1, show(sc));
    assert.equal(sc.stdout, '', 'the process ended at the rejection');

    const exited = await runJs(client, { code: 'console.log("x");\nprocess.exit(3);\n' });
    assert.equal(exited.isError, true, show(exited));
    assert.equal(exited.structuredContent.exit_code, 3);
    assert.equal(exited.structuredContent.stdout, 'x\n');

    const syntax = await runJs(client, { code: 'console.log("never");\nlet = = 1;\n' });
    assert.equal(syntax.isError, true, show(syntax));
    assert.match(syntax.structuredContent.stderr, /SyntaxError/, show(syntax));
    assert.equal(syntax.structuredContent.stdout, '');

    // The session is fine afterwards.
    const ok = await runJs(client, { code: 'console.log("fine")' });
    assert.equal(ok.structuredContent.stdout, 'fine\n', show(ok));
  });
});

test('one workspace: a file written by Python is read by JavaScript and back; another session sees neither', opts, async () => {
  const a = await connectClient('js-share-a');
  const b = await connectClient('js-share-b');
  try {
    const name = `shared-${randomToken()}`;
    const fromPy = `from python ${randomToken()}`;
    const w = await runPython(a.client, { code: `open("/work/${name}.txt", "w").write(${JSON.stringify(fromPy)})\nprint("ok")` });
    assert.equal(w.structuredContent.stdout, 'ok\n', show(w));
    const js = await runJs(a.client, {
      code: [
        "import fs from 'node:fs';",
        `const got = fs.readFileSync('/work/${name}.txt', 'utf8');`,
        `fs.writeFileSync('${name}.json', JSON.stringify({ got, from: 'javascript' }));`,
        'console.log(got);',
      ].join('\n'),
    });
    assert.equal(js.isError ?? false, false, show(js));
    assert.equal(js.structuredContent.stdout, `${fromPy}\n`, 'JavaScript read the file Python wrote');
    const back = await runPython(a.client, { code: `import json\nprint(json.load(open("/work/${name}.json"))["got"], json.load(open("${name}.json"))["from"])` });
    assert.equal(back.structuredContent.stdout, `${fromPy} javascript\n`, `Python read the file JavaScript wrote (relative to /work): ${show(back)}`);
    // Another session: neither file, from either language.
    const otherJs = await runJs(b.client, {
      code: `import fs from 'node:fs';\nconsole.log(fs.existsSync('/work/${name}.txt'), fs.existsSync('/work/${name}.json'), fs.readdirSync('/work').filter((n) => n.startsWith('shared-')).length);`,
    });
    assert.equal(otherJs.structuredContent.stdout, 'false false 0\n', show(otherJs));
    const otherPy = await runPython(b.client, { code: `import os\nprint(os.path.exists("/work/${name}.txt"), os.path.exists("/work/${name}.json"))` });
    assert.equal(otherPy.structuredContent.stdout, 'False False\n', show(otherPy));
  } finally {
    await closeClient(a);
    await closeClient(b);
  }
});

test('output/ files from JavaScript come back like Python\'s: a PNG as an image, text and binary as resources', opts, async () => {
  await withClient('js-output', async (client) => {
    const png = makePng(5, 3);
    const r = await runJs(client, {
      code: [
        "import fs from 'node:fs';",
        "import zlib from 'node:zlib';",
        makePng.toString(),
        "fs.mkdirSync('output/sub', { recursive: true });",
        "fs.writeFileSync('output/dot.png', makePng(5, 3));",
        "fs.writeFileSync('output/data.csv', 'a,b\\n1,2\\n');",
        "fs.writeFileSync('output/sub/raw.bin', Buffer.from([...Array(256).keys()]));",
        "console.log(fs.statSync('output/dot.png').size);",
      ].join('\n'),
    });
    assert.equal(r.isError ?? false, false, show(r));
    assert.equal(r.structuredContent.stdout, `${png.length}\n`);
    const img = r.content.find((x) => x.type === 'image');
    assert.ok(img, `an image block: ${show(r.content.map((x) => x.type))}`);
    assert.equal(img.mimeType, 'image/png');
    const bytes = Buffer.from(img.data, 'base64');
    assert.deepEqual(bytes.subarray(0, 8), PNG_MAGIC, 'PNG signature');
    assert.equal(bytes.readUInt32BE(16), 5, 'IHDR width');
    assert.equal(bytes.readUInt32BE(20), 3, 'IHDR height');
    assert.deepEqual(bytes, png, 'the very bytes the code wrote');
    const res = (uri) => r.content.find((x) => x.type === 'resource' && x.resource.uri === uri)?.resource;
    assert.deepEqual(res('file:///work/output/data.csv'), { uri: 'file:///work/output/data.csv', mimeType: 'text/csv', text: 'a,b\n1,2\n' });
    const blob = res('file:///work/output/sub/raw.bin');
    assert.ok(blob, show(r.content));
    assert.deepEqual(Buffer.from(blob.blob, 'base64'), Buffer.from([...Array(256).keys()]));
    assert.deepEqual(r.structuredContent.files.map((f) => f.name), ['data.csv', 'dot.png', 'sub/raw.bin']);
    assert.deepEqual(r.structuredContent.files.find((f) => f.name === 'dot.png'),
      { name: 'dot.png', size: png.length, mime_type: 'image/png', inlined: true });
    // Nothing changed: nothing comes back, from either language; a change
    // made by Python comes back from Python's call alone.
    const none = await runJs(client, { code: 'console.log("quiet")' });
    assert.deepEqual(none.structuredContent.files, [], show(none.structuredContent));
    const py = await runPython(client, { code: 'open("output/data.csv", "a").write("3,4\\n")' });
    assert.deepEqual(py.structuredContent.files.map((f) => f.name), ['data.csv'], show(py.structuredContent));
    const jsAgain = await runJs(client, { code: "require('fs').appendFileSync('output/data.csv', '5,6\\n')" });
    assert.deepEqual(jsAgain.structuredContent.files.map((f) => f.name), ['data.csv'], show(jsAgain.structuredContent));
    const csv = jsAgain.content.find((x) => x.type === 'resource')?.resource;
    assert.equal(csv?.text, 'a,b\n1,2\n3,4\n5,6\n', show(jsAgain.content));
  });
});

test('env_variables and input files reach the code; they do not persist to the next call', opts, async () => {
  await withClient('js-env', async (client) => {
    const secret = randomToken();
    const r = await runJs(client, {
      code: [
        "import fs from 'node:fs';",
        'console.log(process.env.MCP_TEST_GREETING);',
        'console.log(process.env.MCP_TEST_OTHER);',
        "console.log(fs.readFileSync('in/a.txt', 'utf8'), fs.readFileSync('in/b.bin').toString('hex'));",
      ].join('\n'),
      env_variables: { MCP_TEST_GREETING: 'hello env', MCP_TEST_OTHER: 'a=b c' },
      files: [
        { path: 'in/a.txt', text: secret },
        { path: 'in/b.bin', base64: Buffer.from([0, 1, 254, 255]).toString('base64') },
      ],
    });
    assert.equal(r.isError ?? false, false, show(r));
    assert.equal(r.structuredContent.stdout, `hello env\na=b c\n${secret} 0001feff\n`);
    const next = await runJs(client, { code: 'console.log(String(process.env.MCP_TEST_GREETING))' });
    assert.equal(next.structuredContent.stdout, 'undefined\n');
    for (const bad of [{ env_variables: { 'BAD-NAME': 'x' } }, { files: [{ path: '../x', text: 'x' }] }, { timeout_seconds: 0 }]) {
      const refused = await runJs(client, { code: 'console.log(1)', ...bad });
      assert.equal(refused.isError, true, show(bad));
      assert.match(refused.content[0].text, /^Invalid arguments: /, show(refused));
    }
  });
});

test('a warm Node.js: once a session ran JavaScript, its next JavaScript call runs in a Node.js started before it, with its own environment, the same argv, execArgv and fork()', opts, async () => {
  await withClient('js-warm', async (client) => {
    const probe = [
      "import { fork } from 'node:child_process';",
      "import fs from 'node:fs';",
      'const uptime_ms = Math.round(process.uptime() * 1000);',
      "fs.writeFileSync('/tmp/child.mjs', 'process.send({ req: typeof require, v: process.env.MCP_TEST_V, argv1: process.argv[1] });');",
      "const child = await new Promise((res, rej) => { const c = fork('/tmp/child.mjs', { stdio: 'ignore' }); c.on('message', res); c.on('error', rej); });",
      'console.log(JSON.stringify({ uptime_ms, v: process.env.MCP_TEST_V ?? null, only: process.env.MCP_TEST_ONLY ?? null,',
      '  argv: process.argv.slice(1), execArgv: process.execArgv, child, req: typeof require, cwd: process.cwd(),',
      '  stdin: fs.fstatSync(0).isCharacterDevice() }));',
    ].join('\n');
    const call = async (env) => {
      const r = await runJs(client, { code: probe, env_variables: env });
      assert.equal(r.isError ?? false, false, show(r));
      return { rep: JSON.parse(r.structuredContent.stdout), ms: r.structuredContent.duration_ms };
    };
    // `before()`, a pause, then a call that must run in a Node.js started
    // before it. The next Node.js starts once a call has ended; on a loaded
    // machine it may not be up after the first pause: then the whole
    // sequence is tried again with a longer one.
    const warmAfter = async (before, env, what) => {
      const tries = [];
      let r;
      for (const pause of [1500, 5000, 15000]) {
        await before();
        await new Promise((res) => setTimeout(res, pause));
        r = await call(env);
        tries.push({ pause, uptime_ms: r.rep.uptime_ms, ms: r.ms });
        if (r.rep.uptime_ms > r.ms + 500) return r;
      }
      assert.fail(`${what}: ${show({ tries, last: r })}`);
    };
    const cold = await call({ MCP_TEST_V: 'one', MCP_TEST_ONLY: 'first' });
    // The first call started its Node.js itself: it is younger than the call.
    assert.ok(cold.rep.uptime_ms <= cold.ms, `the first call's Node.js started within it: ${show(cold)}`);
    const warm = await warmAfter(async () => {}, { MCP_TEST_V: 'two' }, 'the second call ran in a Node.js started before it');
    assert.equal(warm.rep.v, 'two', 'this call\'s env_variables');
    assert.equal(warm.rep.only, null, 'none of the previous call\'s');
    for (const k of ['argv', 'execArgv', 'req', 'cwd', 'stdin']) assert.deepEqual(warm.rep[k], cold.rep[k], `${k} as on the cold path: ${show({ cold, warm })}`);
    assert.deepEqual(cold.rep.child, { req: 'function', v: 'one', argv1: '/tmp/child.mjs' }, `a fork()ed child gets the preamble: ${show(cold.rep)}`);
    assert.deepEqual(warm.rep.child, { ...cold.rep.child, v: 'two' }, `and from a warm Node.js alike: ${show(warm.rep)}`);
    // A Python call in between keeps it: the session has a spare of each kind.
    const afterPy = await warmAfter(async () => {
      const py = await client.callTool({ name: 'execute_python', arguments: { code: 'print("py")' } }, undefined, { timeout: TEST_TIMEOUT_MS });
      assert.equal(py.structuredContent.stdout, 'py\n', show(py));
    }, { MCP_TEST_V: 'three' }, 'warm after a Python call');
    assert.equal(afterPy.rep.v, 'three');
    // A call with input files starts its own Node.js; the next one is warm again.
    const again = await warmAfter(async () => {
      const files = await runJs(client, { code: "console.log(require('fs').readFileSync('in.txt', 'utf8'))", files: [{ path: 'in.txt', text: 'input' }] });
      assert.equal(files.structuredContent.stdout, 'input\n', show(files));
    }, {}, 'warm again after a JavaScript call with input files');
    assert.equal(again.rep.v, null);
  });
});

test('timeout_seconds: an endless loop is stopped (timed_out, isError) and the session goes on', opts, async () => {
  await withClient('js-timeout', async (client) => {
    const t0 = Date.now();
    const r = await runJs(client, { code: 'console.log("spinning");\nfor (;;) {}\n', timeout_seconds: 2 });
    const ms = Date.now() - t0;
    const sc = r.structuredContent;
    assert.equal(sc.timed_out, true, show(sc));
    assert.equal(r.isError, true);
    assert.equal(sc.stdout, 'spinning\n', 'output before the timeout is kept');
    assert.ok(sc.duration_ms >= 1900 && sc.duration_ms < 15000, `duration_ms ${sc.duration_ms}`);
    assert.ok(ms < 30000, `returned in ${ms} ms`);
    const ok = await runJs(client, { code: 'console.log("after")' });
    assert.equal(ok.structuredContent.stdout, 'after\n', show(ok));
  });
});

// ---- npm packages --------------------------------------------------------------

const USE_ALL = [
  "import esm, { value as esmValue } from 'mcp-test-esm';",
  "const left = require('mcp-test-left');",
  "const right = require('mcp-test-right');",
  "const leftNs = await import('mcp-test-left');",
  "console.log([left.value, right.value, esm, esmValue, leftNs.default.value].join(' | '));",
].join('\n');

test('packages: require and import of npm packages with a dependency; later calls use them without packages; another session does not see them', npmOpts, async () => {
  const a = await connectClient('js-npm-a');
  const b = await connectClient('js-npm-b');
  try {
    const r = await runJs(a.client, { code: USE_ALL, packages: ['mcp-test-left@1', 'mcp-test-right', 'mcp-test-esm'] });
    assert.equal(r.isError ?? false, false, show(r));
    // right needs left@^2 (its own nested copy); the session asked for left@1.
    assert.equal(r.structuredContent.stdout, 'left 1.0.0 | right on left 2.0.0 | esm 1.0.0 | esm 1.0.0 | left 1.0.0\n', show(r.structuredContent));
    const later = await runJs(a.client, { code: `${USE_ALL}\nconsole.log(require('fs').existsSync('/work/node_modules/mcp-test-right/package.json'));` });
    assert.equal(later.isError ?? false, false, show(later));
    assert.equal(later.structuredContent.stdout, 'left 1.0.0 | right on left 2.0.0 | esm 1.0.0 | esm 1.0.0 | left 1.0.0\ntrue\n');
    assert.ok(later.structuredContent.duration_ms < 2000, `no reinstall: ${later.structuredContent.duration_ms} ms`);
    // The same workspace: Python sees the installed tree.
    const py = await runPython(a.client, { code: 'import json\nprint(json.load(open("/work/node_modules/mcp-test-esm/package.json"))["version"])' });
    assert.equal(py.structuredContent.stdout, '1.0.0\n', show(py));
    // Another session: neither require nor import finds them.
    const req = await runJs(b.client, { code: "require('mcp-test-left')" });
    assert.equal(req.isError, true, show(req));
    assert.match(req.structuredContent.stderr, /Cannot find module 'mcp-test-left'/, show(req.structuredContent));
    const imp = await runJs(b.client, { code: "import 'mcp-test-esm';" });
    assert.equal(imp.isError, true, show(imp));
    assert.match(imp.structuredContent.stderr, /ERR_MODULE_NOT_FOUND|Cannot find package 'mcp-test-esm'/, show(imp.structuredContent));
  } finally {
    await closeClient(a);
    await closeClient(b);
  }
});

test('packages: version pins and changes within a session (left@1, @2, @1 again, ^2, 1.0.0)', npmOpts, async () => {
  await withClient('js-npm-pin', async (client) => {
    const code = "console.log(require('mcp-test-left').value)";
    for (const [spec, want] of [['mcp-test-left@1', 'left 1.0.0'], ['mcp-test-left@2', 'left 2.0.0'], ['mcp-test-left@1', 'left 1.0.0'], ['mcp-test-left@^2', 'left 2.0.0'], ['mcp-test-left@1.0.0', 'left 1.0.0']]) {
      const r = await runJs(client, { code, packages: [spec] });
      assert.equal(r.structuredContent?.stdout, `${want}\n`, `packages [${spec}] gives ${want}: ${show(r)}`);
    }
  });
});

test('packages: asking again after the code removed /work/node_modules installs them again', npmOpts, async () => {
  await withClient('js-npm-again', async (client) => {
    const code = "console.log(require('mcp-test-left').value)";
    const packages = ['mcp-test-left@2.0.0'];
    const first = await runJs(client, { code, packages });
    assert.equal(first.structuredContent?.stdout, 'left 2.0.0\n', show(first));
    const rm = await runJs(client, { code: "require('fs').rmSync('/work/node_modules', { recursive: true }); console.log('removed')" });
    assert.equal(rm.structuredContent?.stdout, 'removed\n', show(rm));
    // As execute_python does for /work/.local: the packages are there again.
    const again = await runJs(client, { code, packages });
    assert.equal(again.structuredContent?.stdout, 'left 2.0.0\n', `packages [${packages}] after rm -r /work/node_modules: ${show(again)}`);
  });
});

test('packages: each session gets a private, writable copy; what the host resolved is read-only inside, root\'s on the host, and gone after the call', npmOpts, async (t) => {
  const a = await connectClient('js-npm-cache-a');
  const b = await connectClient('js-npm-cache-b');
  try {
    const packages = ['mcp-test-left@2.0.0'];
    const code = "console.log(require('mcp-test-left').value)";
    const ra = await runJs(a.client, { code, packages });
    assert.equal(ra.structuredContent?.stdout, 'left 2.0.0\n', show(ra));
    // B installs the same set; its code looks at what the host put in its
    // call's folder while the call runs, and tries to change it.
    const change = await runJs(b.client, {
      packages,
      code: [
        "import fs from 'node:fs';",
        "fs.writeFileSync('/work/node_modules/mcp-test-left/index.js', \"module.exports = { value: 'changed by b' };\");",
        'const res = {};',
        "const calls = fs.readdirSync('/opt/mcp/packages');",
        'res.calls = calls.length;',
        "const p = '/opt/mcp/packages/' + calls[0] + '/node_modules/mcp-test-left/index.js';",
        "res.exists = fs.existsSync(p) ? 'EXISTS' : 'MISSING';",
        "try { fs.writeFileSync(p, 'x'); res.tree = 'WRITTEN'; } catch (e) { res.tree = e.code; }",
        "try { fs.writeFileSync('/opt/mcp/packages/new', 'x'); res.create = 'WRITTEN'; } catch (e) { res.create = e.code; }",
        "console.log(require('mcp-test-left').value);",
        'console.log(JSON.stringify(res));',
      ].join('\n'),
    });
    const lines = change.structuredContent.stdout.trim().split('\n');
    assert.equal(lines[0], 'changed by b', show(change));
    const res = JSON.parse(lines[1]);
    assert.equal(res.calls, 1, `only this call's folder is there: ${show(res)}`);
    assert.equal(res.exists, 'EXISTS', `the call's resolved tree is there: ${show(res)}`);
    const written = Object.entries(res).filter(([k, v]) => ['tree', 'create'].includes(k) &&
      !['EACCES', 'EROFS', 'EPERM'].includes(v));
    assert.deepEqual(written, [], `the resolved tree is read-only inside: ${show(res)}`);
    // A's copy is its own; between calls no resolved folder is left.
    const again = await runJs(a.client, { code: `${code}; console.log(require('fs').readdirSync('/opt/mcp/packages').length)` });
    assert.equal(again.structuredContent.stdout, 'left 2.0.0\n0\n', show(again));
    if (STATE_DIR) {
      const writable = [];
      const walk = (d) => {
        for (const e of fs.readdirSync(d, { withFileTypes: true })) {
          const p = path.join(d, e.name);
          const st = fs.lstatSync(p);
          if (st.uid !== 0 || (!e.isSymbolicLink() && (st.mode & 0o022) !== 0)) writable.push(`${p} uid ${st.uid} mode ${(st.mode & 0o7777).toString(8)}`);
          if (e.isDirectory()) walk(p);
        }
      };
      for (const d of findPaths(path.join(STATE_DIR, 'sessions'), (n) => n === 'packages', 2)) walk(d);
      assert.deepEqual(writable, [], 'every session\'s packages folder on the host is root\'s and writable by no one else');
      assert.equal(fs.existsSync(path.join(STATE_DIR, 'npm')), false, 'no tree shared by all sessions');
    } else {
      t.diagnostic('MCP_STATE_DIR is not set: the host side was not checked');
    }
  } finally {
    await closeClient(a);
    await closeClient(b);
  }
});

// The served test registry's folder (scripts/test: MCP_TEST_INDEX_DIR), where
// a test publishes versions of a package of its own while the stack runs.
const INDEX_DIR = process.env.MCP_TEST_INDEX_DIR || '';
function publish(name, version) {
  execFileSync('/usr/bin/python3', [path.join(process.env.MCP_INTEGRATION_DIR || '.', '../packages/make_npm_registry.py'),
    '--publish', INDEX_DIR, process.env.MCP_TEST_NPM_REGISTRY, name, version]);
}

test('packages: tenancy: what one session installed is neither listed nor reachable by a guessable name from another, and a later request resolves against the registry again', {
  ...npmOpts,
  skip: npmOpts.skip || (INDEX_DIR ? false : 'MCP_TEST_INDEX_DIR not set: the test cannot publish to the registry'),
}, async () => {
  const name = `mcp-test-fresh-${randomToken(4)}`;
  publish(name, '1.0.0');
  const a = await connectClient('js-npm-tenant-a');
  const b = await connectClient('js-npm-tenant-b');
  try {
    const code = `console.log(require('${name}').value)`;
    const ra = await runJs(a.client, { code, packages: [name] });
    assert.equal(ra.structuredContent?.stdout, `${name} 1.0.0\n`, show(ra));
    // B looks for A's tree: everything listable below /opt/mcp, and the
    // names the host could give A's set (the hash of its specs).
    const guess = createHash('sha256').update(`${name}\n`).digest('hex').slice(0, 32);
    const probe = await runJs(b.client, {
      code: [
        "import fs from 'node:fs';",
        'const found = [];',
        'const walk = (d) => { let es; try { es = fs.readdirSync(d, { withFileTypes: true }); } catch { return; }',
        "  for (const e of es) { const p = d + '/' + e.name; if (p === '/opt/mcp/executor') continue;",
        `    if (e.name.includes('${name}')) found.push(p); if (e.isDirectory()) walk(p); } };`,
        "walk('/opt/mcp');",
        `for (const p of ['/opt/mcp/npm/${guess}', '/opt/mcp/npm/${guess}/node_modules/${name}', '/opt/mcp/packages/${guess}']) if (fs.existsSync(p)) found.push(p);`,
        'console.log(JSON.stringify(found));',
      ].join('\n'),
    });
    assert.equal(probe.structuredContent?.stdout, '[]\n', `B finds nothing of A's packages: ${show(probe)}`);
    // A new version is published: B's request for the same spec gets it.
    publish(name, '1.1.0');
    const rb = await runJs(b.client, { code, packages: [name] });
    assert.equal(rb.structuredContent?.stdout, `${name} 1.1.0\n`, `resolved again, not A's frozen set: ${show(rb)}`);
    // A asking again gets the new version too (its own earlier set is no lock).
    const ra2 = await runJs(a.client, { code, packages: [`${name}@^1.1`] });
    assert.equal(ra2.structuredContent?.stdout, `${name} 1.1.0\n`, show(ra2));
  } finally {
    await closeClient(a);
    await closeClient(b);
  }
});

test('packages: install scripts never run (no marker on the host /tmp, in the state folder or in the sandbox)', npmOpts, async (t) => {
  const MARKER = 'mcp-npm-script-ran';
  const hostMarker = path.join('/tmp', MARKER);
  if (fs.existsSync(hostMarker)) {
    t.diagnostic(`${hostMarker} existed before the test (${fs.statSync(hostMarker).mtime.toISOString()}); removed`);
    fs.rmSync(hostMarker, { force: true });
  }
  await withClient('js-npm-script', async (client) => {
    // A spec of its own (each request is resolved and installed anew anyway).
    const spec = `mcp-test-script@1.0.0 || 0.0.0-r${randomToken()}`;
    const r = await runJs(client, {
      code: [
        "import fs from 'node:fs';",
        "import os from 'node:os';",
        "const m = require('mcp-test-script');",
        `console.log(JSON.stringify({ value: m.value, tmp: fs.existsSync(os.tmpdir() + '/${MARKER}') || fs.existsSync('/tmp/${MARKER}'),`,
        `  work: fs.readdirSync('/work', { recursive: true }).filter((n) => n.endsWith('${MARKER}')) }));`,
      ].join('\n'),
      packages: [spec],
    });
    assert.equal(r.isError ?? false, false, show(r));
    assert.deepEqual(JSON.parse(r.structuredContent.stdout), { value: 'script package', tmp: false, work: [] }, show(r.structuredContent));
  });
  assert.equal(fs.existsSync(hostMarker), false, `${hostMarker} appeared on the host: an install script ran`);
  if (STATE_DIR) {
    const found = findPaths(STATE_DIR, (n) => n === MARKER, Infinity);
    assert.deepEqual(found, [], `no ${MARKER} anywhere under the state folder ${STATE_DIR}`);
  } else {
    t.diagnostic('MCP_STATE_DIR is not set: the state folder was not searched for the marker');
  }
});

test('packages: hostile and malformed specs are refused with "Invalid arguments: packages[0]" before anything is fetched', opts, async () => {
  await withClient('js-npm-bad', async (client) => {
    for (const p of ['git+https://example.com/x.git', 'github:user/repo', 'file:../x', './x', '/abs', 'https://x/y.tgz',
      'npm:alias@1', 'mcp-test-left@npm:mcp-test-right@1', '-g', '--registry=http://evil', 'a b', 'UPPERCASE', '', '..',
      'mcp-test-left@../../x', '@scope', 'x@1 --registry=http://evil']) {
      const r = await runJs(client, { code: 'console.log(1)', packages: [p] });
      assert.equal(r.isError, true, `${JSON.stringify(p)} refused: ${show(r)}`);
      assert.match(r.content[0].text, /^Invalid arguments: packages\[0\]/, `${JSON.stringify(p)}: ${r.content[0].text}`);
    }
    const many = await runJs(client, { code: 'console.log(1)', packages: ['mcp-test-left', 'git+https://example.com/x.git'] });
    assert.match(many.content[0].text, /^Invalid arguments: packages\[1\]/, show(many));
    const ok = await runJs(client, { code: 'console.log("still fine")' });
    assert.equal(ok.structuredContent.stdout, 'still fine\n', show(ok));
  });
});

test('packages: a package or version the registry does not have fails cleanly; the code does not run', npmOpts, async () => {
  await withClient('js-npm-missing', async (client) => {
    for (const p of ['mcp-test-no-such-package', 'mcp-test-left@9']) {
      const r = await runJs(client, { code: 'console.log("ran")', packages: [p] });
      assert.equal(r.isError, true, `${p}: ${show(r)}`);
      assert.ok(!JSON.stringify(r).includes('ran\\n'), `${p}: the code did not run`);
      assert.match(r.content[0].text, /could not be installed/, `${p}: ${r.content[0].text}`);
    }
    const ok = await runJs(client, { code: 'console.log("still fine")' });
    assert.equal(ok.structuredContent.stdout, 'still fine\n', show(ok));
  });
});
