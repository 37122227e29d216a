// Hostile JavaScript against the real stack: the counterpart, test by test,
// of hostile.test.mjs (issue "Containment") for execute_javascript (issue
// "A second language": every hostile-code test has its JavaScript
// counterpart). Node.js runs as the same sandbox user, in the same sandbox,
// with the same limits, so the same outcomes are asserted, in the terms
// Node.js gives them (error codes instead of Python exception names).
//
// The test shape is the same (lib/hostile.mjs): a fresh session A runs the
// hostile code, a second session B is already initialized and has answered
// one call; afterwards a console.log call answers with the right stdout in
// under two seconds (wall time, measured here) in A and in B; some tests run
// follow-up checks in A. The last test ends every session of this file and,
// with MCP_STATE_DIR, checks on the host that nothing of them is left.
//
// Where Node.js cannot make a system call itself (ptrace, mount, unshare...),
// the code runs python3 with ctypes as a child process: the seccomp policy
// belongs to the sandbox and applies to every process in it, whatever
// started it; the test also checks that node itself runs under the filter.
import assert from 'node:assert/strict';
import { MCP_TOKEN, randomToken } from './lib/common.mjs';
import {
  STATE_DIR,
  NGINX_PORT,
  SECCOMP_PY,
  show,
  report,
  sandboxCgroup,
  hostileKit,
  assertNoWrites,
  withHostTargets,
  assertNoNetwork,
  hostSecretPaths,
  assertNoHostSecrets,
  crossSessionGuesses,
  assertCrossSessionSealed,
  assertCleanEnvironment,
  assertBackstopKill,
  assertWallClockStop,
  assertOutputCapped,
  assertNoCapabilities,
} from './lib/hostile.mjs';

const { call, hostileTest, leftoverTest } = hostileKit({
  tool: 'execute_javascript',
  aliveCode: (mark) => `console.log(${JSON.stringify(mark)});\n`,
});

/** JavaScript that lists the process ids in /proc and its own pid as one JSON line. */
const LIST_PIDS = String.raw`import fs from 'node:fs';
const pids = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number).sort((x, y) => x - y);
console.log(JSON.stringify({ pids, me: process.pid }));
`;

/** Follow-up: only PID 1 (the executor) and this call's process are left. */
async function onlyExecutorLeft({ a }) {
  const { sc } = await call(a, LIST_PIDS);
  const rep = report(sc);
  assert.deepEqual(rep.pids, [1, rep.me].sort((x, y) => x - y), `no process left in the sandbox but PID 1 and this call: ${show(rep)}`);
}

// ---- the hostile code ------------------------------------------------------

hostileTest('fork bomb: child_process.spawn in a loop hits RLIMIT_NPROC (EAGAIN), the wall clock ends it, the sandbox survives', {
  hostile: async ({ a, diag, soft }) => {
    // Node.js forks a large process for every spawn (30-80 ms under gVisor,
    // one after the other): about 120 children take 3-9 s on a loaded
    // machine, so the limit is longer than Python's 8 s (where every
    // process forks) for the spawner to reach RLIMIT_NPROC well before the
    // wall clock.
    const limit = 20;
    const cg = sandboxCgroup(a, 'pids');
    if (cg) {
      diag(`sandbox pids cgroup ${cg.path}: ${cg.exists ? `pids.max ${cg.limit}` : 'MISSING'}`);
      if (!cg.exists) soft(`the sandbox's pids cgroup ${cg.path} is missing before the bomb: its backstop is gone (removed by something else)`);
    }
    // Children in their own sessions (detached), spawned as fast as possible,
    // forever; the first spawn error is printed once.
    const { r, sc, ms } = await call(
      a,
      String.raw`import { spawn } from 'node:child_process';
const t0 = Date.now();
let told = false, started = 0;
for (;;) {
  const ch = spawn('/bin/sleep', ['100000'], { stdio: 'ignore', detached: true });
  ch.on('spawn', () => { started++; });
  ch.on('error', (e) => {
    if (told) return;
    told = true;
    process.stdout.write('spawn failed ' + e.code + ' errno ' + (-e.errno) + ' after ' + started + ' children, ' + ((Date.now() - t0) / 1000).toFixed(2) + ' s\n');
  });
  await new Promise((res) => setImmediate(res));
}
`,
      { timeout_seconds: limit },
    );
    diag(`fork bomb: ${ms} ms wall, ${show(sc)}`);
    assert.equal(sc.sandbox_restarted, false, `the bomb did not cost the sandbox (RLIMIT_NPROC must stop it before any backstop): ${show(sc)}`);
    assert.match(sc.stdout, /^spawn failed EAGAIN errno 11 after /m, `a spawn failed with EAGAIN (RLIMIT_NPROC): ${show(sc)}`);
    assert.equal(sc.timed_out, true, `the wall clock ended the bomb: ${show(sc)}`);
    assert.equal(r.isError, true, 'isError');
    assert.ok(ms < limit * 1000 + 1500, `the call returned ${ms} ms after it started (limit ${limit} s)`);
  },
  after: onlyExecutorLeft,
});

hostileTest('memory bomb (V8 heap): the heap limit stops it, memory_exceeded', {
  hostile: async ({ a, diag }) => {
    // Arrays of 2^20 small integers: 8 MiB of heap each.
    const { r, sc, ms } = await call(
      a,
      String.raw`const hoard = [];
for (let n = 1; ; n++) {
  hoard.push(new Array(1 << 20).fill(n));
  if (n % 8 === 0) process.stdout.write('heap ' + (n * 8) + ' MiB\n');
}
`,
      { timeout_seconds: 60 },
    );
    diag(`heap bomb: ${ms} ms wall, exit ${sc.exit_code}, memory_exceeded ${sc.memory_exceeded}, last line ${JSON.stringify(sc.stdout.trim().split('\n').pop())}, stderr ${JSON.stringify(sc.stderr.slice(-300))}`);
    const reached = [...sc.stdout.matchAll(/^heap (\d+) MiB$/gm)].map((m) => Number(m[1]));
    assert.ok(reached.length > 0, `the bomb ran: ${show(sc)}`);
    assert.ok(Math.max(...reached) <= 576, `at most ~512 MiB of heap before it stopped: ${Math.max(...reached)} MiB`);
    assert.match(sc.stderr, /heap out of memory/, `V8 says the heap is exhausted: ${show(sc)}`);
    assert.equal(sc.memory_exceeded, true, `memory_exceeded: ${show(sc)}`);
    assert.notEqual(sc.exit_code, 0, 'a failed exit status');
    assert.equal(r.isError, true, 'isError');
    assert.equal(sc.timed_out, false, 'not timed out');
    assert.equal(sc.sandbox_restarted, false, 'one process within its limit does not cost the sandbox');
  },
});

hostileTest('memory bomb (Buffers, outside the heap): allocation fails at the memory limit, memory_exceeded', {
  hostile: async ({ a, diag }) => {
    // The JavaScript counterpart of Python's MemoryError: Buffers live
    // outside V8's heap, so --max-old-space-size does not bound them; the
    // address-space limit does. Node.js then either throws a RangeError
    // (which the code prints and lets go uncaught) or V8 aborts with
    // "out of memory": either way the call ran out of memory.
    const { r, sc, ms } = await call(
      a,
      String.raw`const hoard = [];
try {
  for (;;) {
    hoard.push(Buffer.alloc(16 << 20, 1));
    if (hoard.length % 4 === 0) process.stdout.write('buffers ' + (hoard.length * 16) + ' MiB\n');
  }
} catch (e) {
  const n = hoard.length;
  hoard.length = 0;
  console.log('allocation failed after ' + (n * 16) + ' MiB: ' + e.name);
  throw e;
}
`,
      { timeout_seconds: 60 },
    );
    const reached = Math.max(0, ...[...sc.stdout.matchAll(/^buffers (\d+) MiB$/gm)].map((m) => Number(m[1])));
    const thrown = /^allocation failed after (\d+) MiB: (\w+)$/m.exec(sc.stdout);
    diag(`buffer bomb: ${ms} ms wall, reached ${reached} MiB, ${thrown ? `thrown: ${thrown[0]}` : 'no RangeError (V8 aborted?)'}, exit ${sc.exit_code}, memory_exceeded ${sc.memory_exceeded}, stderr ${JSON.stringify(sc.stderr.slice(0, 300))}`);
    assert.ok(reached > 0, `the bomb ran: ${show(sc)}`);
    assert.ok(reached <= 640, `at most ~512 MiB of Buffers before the allocation failed: ${reached} MiB`);
    if (thrown) {
      assert.equal(thrown[2], 'RangeError', show(sc));
      assert.match(sc.stderr, /RangeError/, 'the uncaught error is in stderr');
      assert.equal(sc.exit_code, 1, 'exit_code 1 (uncaught error)');
    } else {
      assert.match(sc.stderr, /out of memory/, `V8 aborted for want of memory: ${show(sc)}`);
      assert.notEqual(sc.exit_code, 0, show(sc));
    }
    assert.equal(r.isError, true, 'isError');
    assert.equal(sc.timed_out, false, 'not timed out');
    assert.equal(sc.sandbox_restarted, false, 'one process within its limit does not cost the sandbox');
    assert.equal(sc.memory_exceeded, true, `memory_exceeded (the code ran out of memory, like Python's MemoryError): ${show(sc)}`);
  },
});

hostileTest('memory bomb (many processes): the cgroup backstop kills the sandbox (137, memory_exceeded, sandbox_restarted), /work survives', {
  hostile: async ({ a, diag, soft }) => {
    const keep = `keep-${randomToken()}`;
    const w = await call(a, `require('fs').writeFileSync('/work/keep.txt', ${JSON.stringify(keep)});\nconsole.log('written');\n`);
    assert.equal(w.sc.stdout, 'written\n', show(w.sc));
    a.keep = keep;
    const cg = sandboxCgroup(a, 'memory');
    if (cg) {
      diag(`sandbox memory cgroup ${cg.path}: ${cg.exists ? `limit ${cg.limit}` : 'MISSING'}`);
      if (!cg.exists) soft(`the sandbox's memory cgroup ${cg.path} is missing before the bomb: its backstop is gone (removed by something else)`);
    }
    // Eight node processes, each within its own limits (400 MiB of Buffer,
    // touched), together far beyond the whole-sandbox backstop.
    const { r, sc, ms } = await call(
      a,
      String.raw`import { spawn } from 'node:child_process';
const kids = [];
for (let i = 0; i < 8; i++) {
  kids.push(spawn(process.execPath, ['-e', 'const block = Buffer.alloc(400 << 20, 1); setTimeout(() => {}, 120000);'], { stdio: 'ignore' }));
}
console.log('spawned', kids.length);
await Promise.all(kids.map((k) => new Promise((res) => k.on('exit', res))));
console.log('survived');
`,
      { timeout_seconds: 90 },
    );
    diag(`multi-process memory bomb: ${ms} ms wall, ${show(sc)}`);
    assertBackstopKill(r, sc, ms);
  },
  after: async ({ a }) => {
    if (!a.keep) return;
    const { sc } = await call(a, "console.log(require('fs').readFileSync('/work/keep.txt', 'utf8'));\n");
    assert.equal(sc.stdout, `${a.keep}\n`, `the workspace survived the sandbox restart: ${show(sc)}`);
    assert.equal(sc.sandbox_restarted, false, 'no further restart');
  },
});

hostileTest('CPU loop: timeout_seconds 3 stops `for (;;) {}` (timed_out, about 3 s)', {
  hostile: async ({ a, diag }) => {
    const { r, sc, ms } = await call(a, 'for (;;) {}\n', { timeout_seconds: 3 });
    diag(`cpu loop: ${ms} ms wall, ${show(sc)}`);
    assertWallClockStop(r, sc, ms);
  },
});

hostileTest('CPU loop in many processes: timeout_seconds 3 ends the call and kills every detached spinner', {
  hostile: async ({ a, diag }) => {
    const { r, sc, ms } = await call(
      a,
      String.raw`import { spawn } from 'node:child_process';
for (let i = 0; i < 6; i++) {
  spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore', detached: true }).unref();
}
console.log('spinning');
for (;;) {}
`,
      { timeout_seconds: 3 },
    );
    diag(`cpu loop x7: ${ms} ms wall, ${show(sc)}`);
    assert.equal(sc.stdout, 'spinning\n', show(sc));
    assert.equal(sc.timed_out, true, `timed_out: ${show(sc)}`);
    assert.equal(r.isError, true, 'isError');
    assert.ok(ms < 4500, `the call returned ${ms} ms after it started (limit 3 s)`);
  },
  after: onlyExecutorLeft,
});

for (const [how, code] of [
  ['setTimeout', "console.log('sleeping');\nawait new Promise((res) => setTimeout(res, 2 ** 31 - 1));\nconsole.log('woke');\n"],
  ['Atomics.wait', "console.log('sleeping');\nAtomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);\nconsole.log('woke');\n"],
]) {
  hostileTest(`an endless ${how} with timeout_seconds 2 returns within ~3 s with timed_out`, {
    hostile: async ({ a, diag }) => {
      const { r, sc, ms } = await call(a, code, { timeout_seconds: 2 });
      diag(`${how}: ${ms} ms wall, ${show(sc)}`);
      assert.equal(sc.timed_out, true, `timed_out: ${show(sc)}`);
      assert.equal(r.isError, true, 'isError');
      assert.equal(sc.stdout, 'sleeping\n', 'output before the timeout is kept');
      assert.ok(sc.duration_ms >= 1900, `duration_ms ${sc.duration_ms} >= ~2000`);
      assert.ok(ms <= 3000, `the call returned ${ms} ms after it started (limit 2 s, must be within ~3 s)`);
    },
  });
}

hostileTest('300 MiB to stdout: truncated, exactly 1 MiB returned, promptly', {
  hostile: async ({ a, diag }) => {
    // The plain loop a program would write (no waiting for 'drain'), like
    // Python's sys.stdout.write loop.
    const { r, sc, ms } = await call(
      a,
      String.raw`const chunk = 'x'.repeat(1 << 20);
for (let i = 0; i < 300; i++) process.stdout.write(chunk);
const e = 'e'.repeat(1 << 20);
for (let i = 0; i < 3; i++) process.stderr.write(e);
`,
      { timeout_seconds: 120 },
    );
    const tail = sc.stderr.replace(/^e*/, '');
    diag(`300 MiB output: ${ms} ms wall, duration_ms ${sc.duration_ms}, exit_code ${sc.exit_code}, timed_out ${sc.timed_out}, truncated ${sc.truncated}, memory_exceeded ${sc.memory_exceeded}, stdout ${Buffer.byteLength(sc.stdout)} bytes, stderr ${Buffer.byteLength(sc.stderr)} bytes${tail ? `, stderr after the e's: ${JSON.stringify(tail.slice(0, 400))}` : ''}`);
    assert.equal(sc.exit_code, 0, `the code ran to its end: exit_code ${sc.exit_code}, stderr after the e's ${JSON.stringify(tail.slice(0, 400))}`);
    assertOutputCapped(r, sc, ms);
  },
});

hostileTest('filling the workspace: ENOSPC inside, then the session deletes the files and writes again', {
  hostile: async ({ a, diag }) => {
    const { sc, ms } = await call(
      a,
      String.raw`import fs from 'node:fs';
const buf = Buffer.alloc(1 << 20, 0xa5);
let written = 0, err = null, i = 0;
while (err === null && written < 4 * 2 ** 30) {
  let fd;
  try {
    fd = fs.openSync('/work/fill-' + i + '.bin', 'w', 0o644);
  } catch (e) {
    err = e.code;
    break;
  }
  try {
    for (let k = 0; k < 256; k++) {
      try {
        written += fs.writeSync(fd, buf);
      } catch (e) {
        err = e.code;
        break;
      }
    }
    try {
      fs.fsyncSync(fd);
    } catch (e) {
      err = err || e.code;
    }
  } finally {
    fs.closeSync(fd);
  }
  i++;
}
const v = fs.statfsSync('/work');
console.log(JSON.stringify({ code: err, written_mib: Math.floor(written / 2 ** 20), files: i, avail_mib: Math.floor((v.bavail * v.bsize) / 2 ** 20) }));
`,
      { timeout_seconds: 120 },
    );
    const rep = report(sc);
    diag(`fill: ${ms} ms wall, report ${show(rep)}, workspace_full ${sc.workspace_full}, exit ${sc.exit_code}`);
    assert.equal(rep.code, 'ENOSPC', `the code saw ENOSPC: ${show(rep)}; ${show(sc)}`);
    assert.ok(rep.written_mib >= 900 && rep.written_mib <= 1024, `about 1 GiB fit: ${rep.written_mib} MiB`);
    assert.equal(sc.exit_code, 0, show(sc));
    assert.equal(sc.timed_out, false, show(sc));
  },
  after: async ({ a }) => {
    const { sc } = await call(
      a,
      String.raw`import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
for (const f of fs.readdirSync('/work')) if (/^fill-\d+\.bin$/.test(f)) fs.rmSync('/work/' + f);
const data = Buffer.concat(Array.from({ length: 16 }, () => randomBytes(1 << 20)));
fs.writeFileSync('/work/again.bin', data);
const ok = fs.readFileSync('/work/again.bin').equals(data);
fs.rmSync('/work/again.bin');
console.log(JSON.stringify({ rewritten: ok, left: fs.readdirSync('/work').filter((f) => f.startsWith('fill-')) }));
`,
    );
    assert.deepEqual(report(sc), { rewritten: true, left: [] }, `after deleting the fill, 16 MiB write and read back: ${show(sc)}`);
    assert.equal(sc.workspace_full, false, `workspace_full is false once space is free: ${show(sc)}`);
  },
});

hostileTest('filling /tmp (256 MiB) and /dev/shm (64 MiB): ENOSPC at their size', {
  hostile: async ({ a, diag }) => {
    const { sc, ms } = await call(
      a,
      String.raw`import fs from 'node:fs';
function fill(p) {
  const buf = Buffer.alloc(1 << 20, 0x5a);
  let written = 0;
  const fd = fs.openSync(p, 'w', 0o600);
  try {
    while (written < 2 * 2 ** 30) written += fs.writeSync(fd, buf);
  } catch (e) {
    return { code: e.code, mib: Math.floor(written / 2 ** 20) };
  } finally {
    fs.closeSync(fd);
    fs.rmSync(p);
  }
  return { code: null, mib: Math.floor(written / 2 ** 20) };
}
console.log(JSON.stringify({ tmp: fill('/tmp/fill'), shm: fill('/dev/shm/fill') }));
`,
      { timeout_seconds: 60 },
    );
    const rep = report(sc);
    diag(`tmpfs fill: ${ms} ms, ${show(rep)}`);
    assert.equal(rep.tmp.code, 'ENOSPC', `/tmp ENOSPC: ${show(rep)}`);
    assert.ok(rep.tmp.mib >= 200 && rep.tmp.mib <= 256, `/tmp holds about 256 MiB: ${rep.tmp.mib}`);
    assert.equal(rep.shm.code, 'ENOSPC', `/dev/shm ENOSPC: ${show(rep)}`);
    assert.ok(rep.shm.mib >= 48 && rep.shm.mib <= 64, `/dev/shm holds about 64 MiB: ${rep.shm.mib}`);
  },
});

/** JavaScript: start a heartbeat writer (a node process that ignores
 * SIGTERM/SIGHUP/SIGINT, has no stdio and rewrites a counter and the time
 * into /work/<file> every 100 ms) by `how`, check it beats, return. */
function daemonCode(file, how) {
  const hb = `/work/${file}`;
  const beat = [
    "const fs = require('fs');",
    "for (const s of ['SIGTERM', 'SIGHUP', 'SIGINT']) process.on(s, () => {});",
    'let n = 0;',
    `setInterval(() => { n++; fs.writeFileSync(${JSON.stringify(hb + '.tmp')}, n + ' ' + Date.now()); fs.renameSync(${JSON.stringify(hb + '.tmp')}, ${JSON.stringify(hb)}); }, 100);`,
  ].join('\n');
  // The middle process of the double fork starts the beater in a session of
  // its own and exits at once, orphaning it.
  const middle = `require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(beat)}], { detached: true, stdio: 'ignore' }).unref();`;
  return String.raw`import fs from 'node:fs';
import { spawn } from 'node:child_process';
const HB = ${JSON.stringify(hb)};
const how = ${JSON.stringify(how)};
if (how === 'detached') {
  spawn(process.execPath, ['-e', ${JSON.stringify(beat)}], { detached: true, stdio: 'ignore' }).unref();
} else {
  const mid = spawn(process.execPath, ['-e', ${JSON.stringify(middle)}], { detached: true, stdio: 'ignore' });
  await new Promise((res) => mid.on('exit', res));
}
const read = () => { try { return fs.readFileSync(HB, 'utf8'); } catch { return null; } };
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
const t = Date.now();
let first = null;
while (Date.now() - t < 8000 && first === null) {
  first = read();
  await sleep(50);
}
await sleep(600);
const second = read();
console.log(JSON.stringify({ first, second }));
`;
}

function checkHeartbeatStops(file) {
  return async ({ a }) => {
    const { sc } = await call(
      a,
      String.raw`import fs from 'node:fs';
const HB = ${JSON.stringify(`/work/${file}`)};
const a = fs.readFileSync(HB, 'utf8');
await new Promise((res) => setTimeout(res, 1000));
const b = fs.readFileSync(HB, 'utf8');
const pids = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number).sort((x, y) => x - y);
console.log(JSON.stringify({ a, b, pids, me: process.pid }));
`,
    );
    const rep = report(sc);
    assert.equal(rep.b, rep.a, `the heartbeat stopped changing after its call ended: ${show(rep)}`);
    assert.deepEqual(rep.pids, [1, rep.me].sort((x, y) => x - y), `no process left but PID 1 and this call: ${show(rep)}`);
  };
}

for (const how of ['detached', 'double-fork']) {
  const file = `heartbeat-js-${how}.txt`;
  hostileTest(`a ${how === 'detached' ? 'detached child (spawn detached + unref)' : 'double fork (orphaned grandchild)'} that tries to outlive its call is killed when the call ends`, {
    hostile: async ({ a, diag }) => {
      const { sc, ms } = await call(a, daemonCode(file, how), { timeout_seconds: 30 });
      diag(`${how}: ${ms} ms wall, ${show(sc)}`);
      const rep = report(sc);
      assert.ok(rep.first && rep.second && rep.first !== rep.second, `the heartbeat was running during the call: ${show(rep)}`);
      assert.equal(sc.exit_code, 0, show(sc));
      assert.equal(sc.timed_out, false, `the call returned when its main process ended: ${show(sc)}`);
      assert.ok(ms < 12000, `returned in ${ms} ms`);
    },
    after: checkHeartbeatStops(file),
  });
}

hostileTest('writes to /, /usr, /etc fail with EROFS or EACCES', {
  hostile: async ({ a, diag }) => {
    const { sc } = await call(
      a,
      String.raw`import fs from 'node:fs';
const attempt = (fn) => { try { fn(); return 'ok'; } catch (e) { return e.code; } };
const res = {};
for (const p of ['/x', '/usr/x', '/usr/bin/x', '/usr/lib/node_modules/x', '/usr/lib/python3/x', '/etc/x', '/bin/x', '/opt/x', '/work/../x']) {
  res['create ' + p] = attempt(() => fs.closeSync(fs.openSync(p, 'w')));
}
for (const p of ['/etc/passwd', '/etc/hosts', '/usr/bin/node', '/usr/bin/python3', '/etc/nsswitch.conf']) {
  res['append ' + p] = attempt(() => fs.closeSync(fs.openSync(p, 'a')));
}
res['write /etc/hosts'] = attempt(() => fs.writeFileSync('/etc/hosts', '6.6.6.6 evil\n'));
res['mkdir /newdir'] = attempt(() => fs.mkdirSync('/newdir'));
res['mkdir /usr/newdir'] = attempt(() => fs.mkdirSync('/usr/newdir'));
res['rename /etc/hosts'] = attempt(() => fs.renameSync('/etc/hosts', '/etc/hosts2'));
res['unlink /usr/bin/node'] = attempt(() => fs.unlinkSync('/usr/bin/node'));
res['chmod /usr/bin/node'] = attempt(() => fs.chmodSync('/usr/bin/node', 0o777));
res['symlink /etc/evil'] = attempt(() => fs.symlinkSync('/work', '/etc/evil'));
res['rm -r /usr/lib/node_modules'] = attempt(() => fs.rmSync('/usr/lib/node_modules/npm/package.json'));
console.log(JSON.stringify(res));
`,
    );
    const rep = report(sc);
    diag(`writes: ${show(rep)}`);
    assertNoWrites(rep);
  },
});

hostileTest('network: only lo; nginx, ports 22/80/5432, a host listener and the host external IP are unreachable', {
  hostile: async ({ a, diag }) => {
    await withHostTargets(diag, async (targets) => {
      const url = new URL(process.env.MCP_URL);
      const { sc, ms } = await call(
        a,
        String.raw`import net from 'node:net';
import dns from 'node:dns/promises';
import dgram from 'node:dgram';
import os from 'node:os';
import fs from 'node:fs';
const targets = ${JSON.stringify(targets)};
const connect = (host, port) => new Promise((res) => {
  const s = net.connect({ host, port });
  const timer = setTimeout(() => { s.destroy(); res('TIMEOUT'); }, 2000);
  s.on('connect', () => { clearTimeout(timer); s.destroy(); res('CONNECTED'); });
  s.on('error', (e) => { clearTimeout(timer); res(e.code || String(e)); });
});
const conn = {};
await Promise.all(targets.map(async ([h, p]) => { conn[h + ':' + p] = await connect(h, p); }));
let lookup, resolve, fetched;
try { await dns.lookup('example.com'); lookup = 'RESOLVED'; } catch (e) { lookup = e.code; }
try { await dns.resolve4('example.com'); resolve = 'RESOLVED'; } catch (e) { resolve = e.code; }
try {
  await fetch(${JSON.stringify(`${url.protocol}//127.0.0.1:${NGINX_PORT}/healthz`)}, { signal: AbortSignal.timeout(3000) });
  fetched = 'ANSWERED';
} catch (e) { fetched = String(e.cause?.code || e.name); }
const udp = await new Promise((res) => {
  const u = dgram.createSocket('udp4');
  u.on('error', (e) => { u.close(); res('error:' + e.code); });
  u.send(Buffer.from('x'), 53, '192.0.2.1', (e) => { try { u.close(); } catch {} res(e ? e.code : 'SENT'); });
});
let sysnet;
try { sysnet = fs.readdirSync('/sys/class/net'); } catch (e) { sysnet = e.code; }
const netdev = fs.readFileSync('/proc/net/dev', 'utf8').split('\n').slice(2).map((l) => l.split(':')[0].trim()).filter(Boolean);
console.log(JSON.stringify({ connect: conn, lookup, resolve, fetched, udp, ifaces: Object.keys(os.networkInterfaces()), netdev, sysnet }));
`,
        { timeout_seconds: 120 },
      );
      const rep = report(sc);
      diag(`network: ${ms} ms, ${show(rep)}`);
      assertNoNetwork(rep, targets);
      assert.notEqual(rep.lookup, 'RESOLVED', 'no DNS (getaddrinfo)');
      assert.notEqual(rep.resolve, 'RESOLVED', 'no DNS (resolver)');
      assert.notEqual(rep.fetched, 'ANSWERED', 'fetch() of the server itself fails');
      assert.deepEqual(rep.netdev, ['lo'], 'only the loopback interface exists (/proc/net/dev)');
    });
  },
});

hostileTest('host secrets: no /etc/shadow, token file, TLS keys, state folder or host accounts inside', {
  hostile: async ({ a, diag }) => {
    const paths = hostSecretPaths();
    const { sc } = await call(
      a,
      String.raw`import fs from 'node:fs';
const paths = ${JSON.stringify(paths)};
const res = {};
for (const p of paths) {
  try { fs.statSync(p); res[p] = 'EXISTS'; } catch (e) { res[p] = e.code; }
}
const listing = (p) => { try { return fs.readdirSync(p).sort(); } catch (e) { return e.code; } };
console.log(JSON.stringify({ paths: res, root: listing('/root'), home: listing('/home'),
  passwd: fs.readFileSync('/etc/passwd', 'utf8'), group: fs.readFileSync('/etc/group', 'utf8') }));
`,
    );
    const rep = report(sc);
    diag(`secrets: ${show(rep.paths)}`);
    assertNoHostSecrets(rep);
  },
});

hostileTest("another session's file: not reachable from session B through /proc, /work/.. or the host path", {
  hostile: async ({ a, b, diag }) => {
    const name = `secret-${randomToken()}.txt`;
    const secret = `top-secret-${randomToken(16)}`;
    const sidA = a.transport.sessionId;
    // The secret travels in env_variables, never in the code: the code of a
    // call is a file in its session's /work (.mcp/main.mjs), which B's
    // search must not find as a false positive of its own.
    const w = await call(a, `require('fs').writeFileSync('/work/${name}', process.env.SECRET);\nconsole.log('ok');\n`, {
      env_variables: { SECRET: secret },
    });
    assert.equal(w.sc.stdout, 'ok\n', show(w.sc));
    const guesses = crossSessionGuesses(name, sidA);
    const { sc } = await call(
      b,
      String.raw`import fs from 'node:fs';
import path from 'node:path';
const name = ${JSON.stringify(name)};
const secret = Buffer.from(process.env.SECRET);
const guesses = {};
for (const p of ${JSON.stringify(guesses)}) {
  try { guesses[p] = 'READ:' + fs.readFileSync(p, 'utf8'); } catch (e) { guesses[p] = e.code; }
}
const ls = (d) => { try { return fs.readdirSync(d); } catch { return []; } };
const exists = (p) => { try { fs.lstatSync(p); return true; } catch { return false; } };
// The globs /proc/*/root/work/<name>, /proc/*/cwd/<name>, /proc/*/root/<name>, /*/<name>, /*/*/<name>.
const hits = [];
for (const pid of ls('/proc')) {
  for (const p of ['/proc/' + pid + '/root/work/' + name, '/proc/' + pid + '/cwd/' + name, '/proc/' + pid + '/root/' + name]) if (exists(p)) hits.push(p);
}
for (const d of ls('/')) {
  if (exists('/' + d + '/' + name)) hits.push('/' + d + '/' + name);
  for (const e of ls('/' + d)) if (exists('/' + d + '/' + e + '/' + name)) hits.push('/' + d + '/' + e + '/' + name);
}
const found = [];
function walk(d) {
  let entries;
  try { entries = fs.readdirSync(d, { withFileTypes: true }); } catch { return; }
  for (const e of entries) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.isFile()) {
      try {
        const fd = fs.openSync(p, 'r');
        const buf = Buffer.alloc(1 << 20);
        const n = fs.readSync(fd, buf, 0, buf.length, 0);
        fs.closeSync(fd);
        if (buf.subarray(0, n).includes(secret)) found.push(p);
      } catch {}
    }
  }
}
for (const top of ['/work', '/tmp', '/dev/shm', '/proc/1/root/work']) walk(top);
console.log(JSON.stringify({ guesses, glob: hits, found, parent: ls('/work/..').sort() }));
`,
      { env_variables: { SECRET: secret } },
    );
    const rep = report(sc);
    diag(`cross-session: ${show(rep)}`);
    assertCrossSessionSealed(sc, rep, secret, sidA);
    const back = await call(a, `console.log(require('fs').readFileSync('/work/${name}', 'utf8') === process.env.SECRET);\n`, {
      env_variables: { SECRET: secret },
    });
    assert.equal(back.sc.stdout, 'true\n', 'session A keeps its file');
  },
});

hostileTest('environment: none of the host variables inside; the token nowhere in /proc/*/environ; /proc/1/environ denied or empty', {
  hostile: async ({ a, diag }) => {
    const { sc } = await call(
      a,
      String.raw`import fs from 'node:fs';
const rd = (p) => { try { return 'DATA:' + fs.readFileSync(p).toString('base64'); } catch (e) { return e.code; } };
const blobs = {};
const procs = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map((p) => '/proc/' + p + '/environ');
for (const p of ['/proc/self/environ', '/proc/self/cmdline', '/proc/1/environ', '/proc/1/cmdline', ...procs]) blobs[p] = rd(p);
console.log(JSON.stringify({ env: process.env, execArgv: process.execArgv, argv: process.argv, blobs }));
`,
    );
    const rep = report(sc);
    diag(`environment inside: ${show(rep.env)}; execArgv ${show(rep.execArgv)}; /proc/1/environ: ${rep.blobs['/proc/1/environ']?.slice(0, 40)}`);
    assertCleanEnvironment(rep);
    for (const arg of [...rep.execArgv, ...rep.argv]) {
      assert.ok(!arg.includes(MCP_TOKEN) && (!STATE_DIR || !arg.includes(STATE_DIR)), `node's arguments name neither the token nor the state folder: ${show(rep.argv)} ${show(rep.execArgv)}`);
    }
  },
});

hostileTest("process.kill(-1, 'SIGKILL') kills only the call's own processes; the call returns, the next call works", {
  hostile: async ({ a, diag }) => {
    const { r, sc, ms } = await call(
      a,
      String.raw`import { spawn } from 'node:child_process';
const kids = [];
for (let i = 0; i < 3; i++) kids.push(spawn('/bin/sleep', ['1000'], { stdio: 'ignore' }));
await Promise.all(kids.map((k) => new Promise((res) => k.on('spawn', res))));
const ends = kids.map((k) => new Promise((res) => k.on('exit', (code, signal) => res(signal))));
console.log('kids', kids.length);
try {
  process.kill(-1, 'SIGKILL');
  console.log('kill(-1) returned');
} catch (e) {
  console.log('kill(-1) failed', e.code);
}
const signals = await Promise.race([Promise.all(ends), new Promise((res) => setTimeout(() => res(null), 5000))]);
console.log('kids killed', JSON.stringify(signals));
`,
      { timeout_seconds: 30 },
    );
    diag(`kill(-1, SIGKILL): ${ms} ms, ${show(sc)}`);
    assert.equal(sc.timed_out, false, `the call returned by itself: ${show(sc)}`);
    assert.match(sc.stdout, /^kids 3$/m, show(sc));
    // Linux does not signal the caller itself with kill(-1): it goes on.
    // gVisor may differ; then the call ends with 137. Either way it returns.
    if (sc.exit_code === 0) {
      assert.match(sc.stdout, /^kill\(-1\) returned$/m, show(sc));
      assert.match(sc.stdout, /^kids killed \["SIGKILL","SIGKILL","SIGKILL"\]$/m, `the call's own children got SIGKILL: ${show(sc)}`);
    } else {
      assert.equal(sc.exit_code, 137, `the caller was SIGKILLed by its own kill(-1): ${show(sc)}`);
    }
    assert.equal(sc.sandbox_restarted, false, `PID 1 survived: ${show(sc)}`);
    assert.ok(ms < 10000, `returned in ${ms} ms`);
    void r;
  },
});

hostileTest('process.kill(1, ...) and setuid(0) fail with EPERM', {
  hostile: async ({ a, diag }) => {
    const { sc } = await call(
      a,
      String.raw`const res = {};
for (const s of ['SIGKILL', 'SIGTERM', 'SIGSTOP', 'SIGINT', 'SIGSEGV']) {
  try { process.kill(1, s); res[s] = 'SENT'; } catch (e) { res[s] = e.code; }
}
for (const [k, fn] of [['setuid0', () => process.setuid(0)], ['setgid0', () => process.setgid(0)], ['seteuid0', () => process.seteuid(0)], ['setgroups0', () => process.setgroups([0])]]) {
  try { fn(); res[k] = 'OK'; } catch (e) { res[k] = e.code; }
}
console.log(JSON.stringify(res));
`,
    );
    const rep = report(sc);
    diag(`kill(1): ${show(rep)}`);
    assert.deepEqual(
      rep,
      { SIGKILL: 'EPERM', SIGTERM: 'EPERM', SIGSTOP: 'EPERM', SIGINT: 'EPERM', SIGSEGV: 'EPERM', setuid0: 'EPERM', setgid0: 'EPERM', seteuid0: 'EPERM', setgroups0: 'EPERM' },
      show(sc),
    );
    assert.equal(sc.sandbox_restarted, false, 'the sandbox was not restarted');
  },
});

hostileTest('seccomp: node runs under the filter; ptrace, mount, unshare, setns, bpf, keyctl, io_uring... fail with EPERM in its child processes', {
  hostile: async ({ a, diag }) => {
    // Node.js has no way to make these system calls itself: its child
    // python3 (ctypes) makes them, under the same filter; util-linux
    // unshare(1) tries a new user namespace the ordinary way.
    const { sc } = await call(
      a,
      String.raw`import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
const seccomp = (p) => (fs.readFileSync(p, 'utf8').match(/^Seccomp:\s*(\d+)/m) || [])[1] ?? null;
const py = spawnSync('/usr/bin/python3', ['-c', ${JSON.stringify(SECCOMP_PY)}], { encoding: 'utf8' });
const sh = spawnSync('/usr/bin/python3', ['-c', 'import re; print(re.search(r"Seccomp:\\s*(\\d+)", open("/proc/self/status").read()).group(1))'], { encoding: 'utf8' });
let unshare = null;
if (fs.existsSync('/usr/bin/unshare')) {
  const u = spawnSync('/usr/bin/unshare', ['--user', '--map-root-user', '/bin/true'], { encoding: 'utf8' });
  unshare = { status: u.status, stderr: u.stderr.trim() };
}
console.log(JSON.stringify({ node: seccomp('/proc/self/status'), child: sh.stdout.trim(), unshare,
  python: { status: py.status, stderr: py.stderr, report: JSON.parse(py.stdout.trim().split('\n').pop() || 'null') } }));
`,
    );
    const rep = report(sc);
    diag(`syscalls: ${show(rep)}`);
    assert.equal(rep.python.status, 0, `the python3 child ran: ${show(rep.python)}`);
    const notEperm = Object.entries(rep.python.report || {}).filter(([, v]) => v !== 'EPERM');
    assert.ok(Object.keys(rep.python.report || {}).length >= 20, 'every call was tried');
    assert.deepEqual(notEperm, [], `every listed system call fails with EPERM: ${show(rep.python.report)}`);
    // /proc/<pid>/status "Seccomp: 2" (filter mode) when the kernel shows it.
    if (rep.node !== null) assert.equal(rep.node, '2', `node itself runs under a seccomp filter: ${show(rep)}`);
    if (rep.child !== '') assert.equal(rep.child, '2', `its child runs under a seccomp filter: ${show(rep)}`);
    if (rep.unshare) assert.notEqual(rep.unshare.status, 0, `unshare --user fails: ${show(rep.unshare)}`);
    assert.equal(sc.exit_code, 0, show(sc));
  },
});

hostileTest('identity: process.getuid/geteuid/getgid 1000, no other groups, CapEff/CapPrm/CapInh 0', {
  hostile: async ({ a, diag }) => {
    const { sc } = await call(
      a,
      String.raw`import fs from 'node:fs';
const st = {};
for (const line of fs.readFileSync('/proc/self/status', 'utf8').split('\n')) {
  const i = line.indexOf(':');
  const k = line.slice(0, i);
  if (k.startsWith('Cap') || ['NoNewPrivs', 'Seccomp', 'Uid', 'Gid', 'Groups'].includes(k)) st[k] = line.slice(i + 1).trim();
}
console.log(JSON.stringify({ uid: process.getuid(), euid: process.geteuid(), gid: process.getgid(), egid: process.getegid(),
  groups: process.getgroups(), user: (() => { try { return require('os').userInfo().username; } catch (e) { return e.code; } })(), status: st }));
`,
    );
    const rep = report(sc);
    diag(`identity: ${show(rep)}`);
    assert.equal(rep.uid, 1000, 'getuid() == 1000');
    assert.equal(rep.euid, 1000, 'geteuid() == 1000');
    assert.equal(rep.gid, 1000, 'getgid() == 1000');
    assert.equal(rep.egid, 1000, 'getegid() == 1000');
    // Node.js adds the effective gid to getgroups(); nothing else may be there.
    assert.deepEqual(rep.groups.filter((g) => g !== 1000), [], `no supplementary groups: ${show(rep.groups)}`);
    assert.deepEqual(rep.status.Uid.split(/\s+/).map(Number), [1000, 1000, 1000, 1000], `real, effective, saved and fs uid 1000: ${rep.status.Uid}`);
    assert.deepEqual(rep.status.Gid.split(/\s+/).map(Number), [1000, 1000, 1000, 1000], `real, effective, saved and fs gid 1000: ${rep.status.Gid}`);
    assert.equal((rep.status.Groups || '').trim(), '', `no supplementary groups in /proc/self/status: ${rep.status.Groups}`);
    assertNoCapabilities(rep.status);
  },
});

// ---- afterwards: nothing left beyond the live sessions ----------------------

leftoverTest();
