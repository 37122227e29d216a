// The hostile-code cases of both languages, as one table (issue
// "Containment"; issue "A second language": every hostile-code test has its
// JavaScript counterpart). hostile.test.mjs runs it for execute_python,
// hostile-js.test.mjs for execute_javascript: hostileSuite(language).
//
// A case is
//
//   {
//     name: 'the test name',            // when both languages share it
//     only: 'javascript',               // only for a case of one language
//     async hostile(ctx) { ... },       // the flow and the shared verdict
//     async after(ctx) { ... },         // optional follow-up in A (after the 2 s check)
//     fixture() { ... },                // optional: what A needs of the stack ({token, ...},
//                                       // as ctx.fixture), or why it is missing (a skip)
//     python: { code: ..., ... },       // the probes of each language
//     javascript: { code: ..., ... },
//   }
//
// The flow runs once per language with ctx = {a, b, t, diag, soft} of
// hostileTest (lib/hostile.mjs) plus `call` (the language's tool), `lang`
// ('python' or 'javascript') and `probe`, the case's block for that
// language: its probe code (`code`, or a function of what the test knows
// only at run time, plus further snippets some flows need), its own `name`
// where the test name names the language's code, its options (timeouts)
// where the languages need different ones, and its own expectations
// (`expect(...)`, or data such as a pattern the shared verdict matches)
// only where the languages genuinely differ (a V8 heap limit is not
// Python's MemoryError). Both language blocks are required unless `only`
// names the one the case has; the table is checked when it loads.
//
// Probes that collect several facts print one JSON line (report() parses
// the last line); they report failures by errno name in both languages, so
// one verdict serves both.
import assert from 'node:assert/strict';
import { MCP_URL, MCP_TOKEN, randomToken, SLACK_MS } from './common.mjs';
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
  PY_OTHERS,
  JS_OTHERS,
  leftovers,
} from './hostile.mjs';
import { EGRESS_CASES } from './hostile-egress.mjs';

/** The languages: the tool, the responsiveness probe printing `mark`, and a
 * probe printing {others: [pid, uid, ppid] of every process but PID 1 and
 * itself (hostile.mjs), me: its own pid}. */
export const LANGUAGES = {
  python: {
    tool: 'execute_python',
    aliveCode: (mark) => `print(${JSON.stringify(mark)})\n`,
    listPids: PY_OTHERS + 'import os, json\nprint(json.dumps({"others": others(), "me": os.getpid()}))\n',
  },
  javascript: {
    tool: 'execute_javascript',
    aliveCode: (mark) => `console.log(${JSON.stringify(mark)});\n`,
    listPids: String.raw`import fs from 'node:fs';
` + JS_OTHERS + String.raw`console.log(JSON.stringify({ others: others(), me: process.pid }));
`,
  },
};

// ---- verdicts and follow-ups shared by several cases --------------------------

/** Follow-up: only PID 1 (the executor), this call's process and the
 * executor's spares are left. */
async function onlyExecutorLeft({ a, call, lang }) {
  const { sc } = await call(a, LANGUAGES[lang].listPids);
  const rep = report(sc);
  assert.ok(Array.isArray(rep.others), `the probe listed the processes: ${show(sc)}`);
  assert.deepEqual(leftovers(rep.others), [], `no process left in the sandbox but PID 1, this call and the executor's spares: ${show(rep)}`);
}

/** Host side (when the state folder is known): the sandbox's cgroup of
 * `controller`, the backstop a bomb meets, exists with its limit. */
function noteCgroup({ a, diag, soft }, controller) {
  const cg = sandboxCgroup(a, controller);
  if (!cg) return;
  const what = controller === 'pids' ? 'pids.max' : 'limit';
  diag(`sandbox ${controller} cgroup ${cg.path}: ${cg.exists ? `${what} ${cg.limit}` : 'MISSING'}`);
  if (!cg.exists) soft(`the sandbox's ${controller} cgroup ${cg.path} is missing before the bomb: its backstop is gone (removed by something else)`);
}

/** One process out of memory within its own limit: the call says so, the
 * sandbox is not touched. */
function assertOneProcessOutOfMemory(r, sc) {
  assert.equal(sc.memory_exceeded, true, `memory_exceeded: ${show(sc)}`);
  assert.equal(r.isError, true, 'isError');
  assert.equal(sc.timed_out, false, 'not timed out');
  assert.equal(sc.sandbox_restarted, false, 'one process within its limit does not cost the sandbox');
}

/** An endless sleep with timeout_seconds 5: timed out, output kept, prompt.
 * (5 s, not less: on a loaded machine Node.js alone may take 2 s to start
 * and print.) */
async function endlessSleep({ a, call, probe, diag }) {
  const { r, sc, ms } = await call(a, probe.code, { timeout_seconds: 5 });
  diag(`${probe.label}: ${ms} ms wall, ${show(sc)}`);
  assert.equal(sc.timed_out, true, `timed_out: ${show(sc)}`);
  assert.equal(r.isError, true, 'isError');
  assert.equal(sc.stdout, 'sleeping\n', 'output before the timeout is kept');
  assert.ok(sc.duration_ms >= 4900, `duration_ms ${sc.duration_ms} >= ~5000`);
  assert.ok(ms <= 6000 + SLACK_MS, `the call returned ${ms} ms after it started (limit 5 s, must be within ~6 s and the machine's slack of ${SLACK_MS} ms)`);
}

/** The heartbeat probes of each language: `start(file, how)` starts a
 * heartbeat writer by `how` and checks it beats, `check(file)` reports it
 * twice a second apart and lists the processes left. */
const DAEMON = {
  python: { start: pyDaemonCode, check: pyHeartbeatCheck, file: (how) => `heartbeat-${how}.txt`, returnMs: 10000 },
  // The first beat of a node child may take several seconds (the probe waits
  // up to 8 s for it).
  javascript: { start: jsDaemonCode, check: jsHeartbeatCheck, file: (how) => `heartbeat-js-${how}.txt`, returnMs: 12000 },
};

/** A daemon case; ways = {language: [how, what]}: how that language starts
 * its heartbeat, and what the test name calls it. */
function daemonCase(ways) {
  const probes = {};
  for (const [lang, [how, what]] of Object.entries(ways)) {
    probes[lang] = { ...DAEMON[lang], how, name: `a ${what} that tries to outlive its call is killed when the call ends` };
  }
  return {
    async hostile({ a, call, probe, diag }) {
      const { sc, ms } = await call(a, probe.start(probe.file(probe.how), probe.how), { timeout_seconds: 30 });
      diag(`${probe.how}: ${ms} ms wall, ${show(sc)}`);
      const rep = report(sc);
      assert.ok(rep.first && rep.second && rep.first !== rep.second, `the heartbeat was running during the call: ${show(rep)}`);
      assert.equal(sc.exit_code, 0, show(sc));
      assert.equal(sc.timed_out, false, `the call returned when its main process ended: ${show(sc)}`);
      assert.ok(ms < probe.returnMs, `returned in ${ms} ms`);
    },
    async after({ a, call, probe }) {
      const { sc } = await call(a, probe.check(probe.file(probe.how)));
      const rep = report(sc);
      assert.equal(rep.b, rep.a, `the heartbeat stopped changing after its call ended: ${show(rep)}`);
      assert.ok(Array.isArray(rep.others), `the probe listed the processes: ${show(rep)}`);
      assert.deepEqual(leftovers(rep.others), [], `no process left but PID 1, this call and the executor's spares: ${show(rep)}`);
    },
    ...probes,
  };
}

/** Python: start a heartbeat writer (a process that writes a counter and the
 * time into /work/<file> every 100 ms) by `how`, check it beats, return. */
function pyDaemonCode(file, how) {
  return String.raw`import json, os, signal, sys, time
HB = "/work/${file}"
def beat():
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
    for fd in (0, 1, 2):
        try:
            os.close(fd)
        except OSError:
            pass
    n = 0
    while True:
        n += 1
        tmp = HB + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d %f" % (n, time.time()))
        os.replace(tmp, HB)
        time.sleep(0.1)
how = "${how}"
pid = os.fork()
if pid == 0:
    if how == "setsid":
        os.setsid()
        beat()
    else:  # double fork: the grandchild is orphaned at once
        os.setsid()
        if os.fork() == 0:
            beat()
        os._exit(0)
if how == "double-fork":
    os.waitpid(pid, 0)
def read():
    try:
        return open(HB).read()
    except FileNotFoundError:
        return None
t = time.time()
first = None
while time.time() - t < 5 and first is None:
    first = read()
    time.sleep(0.05)
time.sleep(0.6)
second = read()
print(json.dumps({"first": first, "second": second}))
`;
}

function pyHeartbeatCheck(file) {
  return PY_OTHERS + String.raw`import json, os, time
HB = "/work/${file}"
a = open(HB).read()
time.sleep(1.0)
b = open(HB).read()
print(json.dumps({"a": a, "b": b, "others": others(), "me": os.getpid()}))
`;
}

/** JavaScript: start a heartbeat writer (a node process that ignores
 * SIGTERM/SIGHUP/SIGINT, has no stdio and rewrites a counter and the time
 * into /work/<file> every 100 ms) by `how`, check it beats, return. */
function jsDaemonCode(file, how) {
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

function jsHeartbeatCheck(file) {
  return String.raw`import fs from 'node:fs';
const HB = ${JSON.stringify(`/work/${file}`)};
const a = fs.readFileSync(HB, 'utf8');
await new Promise((res) => setTimeout(res, 1000));
const b = fs.readFileSync(HB, 'utf8');
` + JS_OTHERS + String.raw`console.log(JSON.stringify({ a, b, others: others(), me: process.pid }));
`;
}

/** The Python fork bomb (the table's first case; runs.test.mjs runs it as a
 * background run): every process forks forever; the first one to get
 * EAGAIN says so (once: an O_EXCL marker file elects it). The bomb runs in
 * a bare interpreter that the call starts (as a bomb script would run): a
 * fork of the call's own process, which holds the warm imports (numpy,
 * pandas), costs gVisor's sentry several times more. */
export const PY_FORK_BOMB = String.raw`import subprocess, sys
bomb = """
import os, time
t0 = time.time()
told = False
while True:
    try:
        os.fork()
    except OSError as e:
        if not told:
            told = True
            try:
                os.close(os.open("/work/eagain", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
                os.write(1, ("fork failed errno %d after %.2f s\\n" % (e.errno, time.time() - t0)).encode())
            except OSError:
                pass
"""
sys.stdout.flush()
subprocess.run([sys.executable, "-S", "-c", bomb])
`;

// ---- the table ---------------------------------------------------------------

export const CASES = [
  {
    async hostile(ctx) {
      const { a, call, probe, diag, persistent } = ctx;
      noteCgroup(ctx, 'pids');
      const limit = probe.timeout_seconds;
      const { r, sc, ms } = await call(a, probe.code, { timeout_seconds: limit });
      diag(`fork bomb: ${ms} ms wall, ${show(sc)}`);
      // RLIMIT_NPROC must stop it before any backstop. The host-task guard's
      // replacement of the sandbox may come before the bomb's answer on a
      // loaded machine (TASKS_CUT_WAIT_MS): its result says so.
      assert.ok(!sc.sandbox_restarted || sc.processes_exceeded, `the fork bomb did not cost the sandbox, unless through the host-task guard: ${show(sc)}`);
      assert.match(sc.stdout, probe.eagain, `a bomb process saw EAGAIN (RLIMIT_NPROC): ${show(sc)}`);
      // Held at RLIMIT_NPROC, the bomb's failed forks keep growing gVisor's
      // host tasks: the wall clock ends it, or the supervisor stops it
      // first near the sandbox's pids backstop (processes_exceeded).
      assert.ok(sc.timed_out || sc.processes_exceeded, `the wall clock or the host-task guard ended the bomb: ${show(sc)}`);
      // The guard replaces the sandbox once the bomb is stopped (gVisor keeps
      // the host tasks): a cell's interpreter goes with it, and says so.
      if (persistent && sc.processes_exceeded) assert.equal(sc.state_lost, true, `the guard's cut costs the interpreter its state, and the result says so: ${show(sc)}`);
      assert.equal(r.isError, true, 'isError');
      assert.ok(ms < limit * 1000 + 1500 + SLACK_MS, `the call returned ${ms} ms after it started (limit ${limit} s, slack ${SLACK_MS} ms)`);
    },
    after: onlyExecutorLeft,
    python: {
      name: 'fork bomb: RLIMIT_NPROC stops it (EAGAIN), the wall clock ends it, the sandbox survives',
      // Forks under gVisor's ptrace platform cost 30-40 ms of the sentry on a
      // quiet machine and several times that on a loaded one (CI): 128
      // processes may take more than 10 s to reach.
      timeout_seconds: 20,
      eagain: /^fork failed errno 11 after /m,
      code: PY_FORK_BOMB,
    },
    javascript: {
      name: 'fork bomb: child_process.spawn in a loop hits RLIMIT_NPROC (EAGAIN), the wall clock ends it, the sandbox survives',
      // Node.js forks a large process for every spawn (30-80 ms under gVisor,
      // one after the other): about 120 children take 3-9 s on a loaded
      // machine, so the limit is longer than Python's 20 s (where every
      // process forks) for the spawner to reach RLIMIT_NPROC well before the
      // wall clock (40 s: on a machine loaded to 10 or more a spawn took
      // 250 ms and more).
      timeout_seconds: 40,
      eagain: /^spawn failed EAGAIN errno 11 after /m,
      // Children in their own sessions (detached), spawned as fast as
      // possible, forever; the first spawn error is printed once.
      code: String.raw`import { spawn } from 'node:child_process';
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
    },
  },

  {
    name: 'memory bomb (V8 heap): the heap limit stops it, memory_exceeded',
    only: 'javascript', // Python has no heap limit of its own: its one-process bomb is next
    async hostile({ a, call, probe, diag }) {
      const { r, sc, ms } = await call(a, probe.code, { timeout_seconds: 60 });
      diag(`heap bomb: ${ms} ms wall, exit ${sc.exit_code}, memory_exceeded ${sc.memory_exceeded}, last line ${JSON.stringify(sc.stdout.trim().split('\n').pop())}, stderr ${JSON.stringify(sc.stderr.slice(-300))}`);
      const reached = [...sc.stdout.matchAll(/^heap (\d+) MiB$/gm)].map((m) => Number(m[1]));
      assert.ok(reached.length > 0, `the bomb ran: ${show(sc)}`);
      assert.ok(Math.max(...reached) <= 576, `at most ~512 MiB of heap before it stopped: ${Math.max(...reached)} MiB`);
      assert.match(sc.stderr, /heap out of memory/, `V8 says the heap is exhausted: ${show(sc)}`);
      assert.notEqual(sc.exit_code, 0, 'a failed exit status');
      assertOneProcessOutOfMemory(r, sc);
    },
    javascript: {
      // Arrays of 2^20 small integers: 8 MiB of heap each.
      code: String.raw`const hoard = [];
for (let n = 1; ; n++) {
  hoard.push(new Array(1 << 20).fill(n));
  if (n % 8 === 0) process.stdout.write('heap ' + (n * 8) + ' MiB\n');
}
`,
    },
  },

  {
    // Python's MemoryError and its JavaScript counterpart: Buffers live
    // outside V8's heap, so --max-old-space-size does not bound them; the
    // address-space limit does.
    async hostile({ a, call, probe, diag }) {
      const { r, sc, ms } = await call(a, probe.code, { timeout_seconds: 60 });
      diag(`memory bomb: ${ms} ms wall, exit ${sc.exit_code}, memory_exceeded ${sc.memory_exceeded}, ${show(sc)}`);
      probe.expect(sc);
      assertOneProcessOutOfMemory(r, sc);
    },
    python: {
      name: 'memory bomb (one process): MemoryError at the address-space limit, memory_exceeded',
      code: String.raw`import sys
hoard = []
try:
    while True:
        hoard.append(bytearray(16 << 20))
except MemoryError:
    n = len(hoard)
    hoard = None
    print("MemoryError after", n * 16, "MiB", flush=True)
    raise
`,
      expect(sc) {
        const m = /^MemoryError after (\d+) MiB$/m.exec(sc.stdout);
        assert.ok(m, `MemoryError raised in the code: ${show(sc)}`);
        assert.ok(Number(m[1]) <= 512, `at most 512 MiB allocated before MemoryError: ${m[1]}`);
        assert.match(sc.stderr, /MemoryError/, 'traceback names MemoryError');
        assert.equal(sc.exit_code, 1, 'exit_code 1 (uncaught MemoryError)');
      },
    },
    javascript: {
      name: 'memory bomb (Buffers, outside the heap): allocation fails at the memory limit, memory_exceeded',
      // Node.js either throws a RangeError (which the code prints and lets
      // go uncaught) or V8 aborts with "out of memory": either way the call
      // ran out of memory.
      code: String.raw`const hoard = [];
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
      expect(sc) {
        const reached = Math.max(0, ...[...sc.stdout.matchAll(/^buffers (\d+) MiB$/gm)].map((m) => Number(m[1])));
        const thrown = /^allocation failed after (\d+) MiB: (\w+)$/m.exec(sc.stdout);
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
      },
    },
  },

  {
    name: 'memory bomb (many processes): the cgroup backstop kills the sandbox (137, memory_exceeded, sandbox_restarted), /work survives',
    async hostile(ctx) {
      const { a, call, probe, diag } = ctx;
      const keep = `keep-${randomToken()}`;
      const w = await call(a, probe.writeKeep(keep));
      assert.equal(w.sc.stdout, 'written\n', show(w.sc));
      a.keep = keep;
      noteCgroup(ctx, 'memory');
      // Eight processes, each below the per-process limits, that together
      // need ~3.2 GiB: far beyond the whole-sandbox backstop.
      const { r, sc, ms } = await call(a, probe.code, { timeout_seconds: 90 });
      diag(`multi-process memory bomb: ${ms} ms wall, ${show(sc)}`);
      assertBackstopKill(r, sc, ms);
    },
    async after({ a, call, probe }) {
      if (!a.keep) return;
      const { sc } = await call(a, probe.readKeep);
      assert.equal(sc.stdout, `${a.keep}\n`, `the workspace survived the sandbox restart: ${show(sc)}`);
      assert.equal(sc.sandbox_restarted, false, 'no further restart');
    },
    python: {
      writeKeep: (keep) => `open("/work/keep.txt", "w").write(${JSON.stringify(keep)})\nprint("written")\n`,
      readKeep: 'print(open("/work/keep.txt").read())\n',
      code: String.raw`import os, time
kids = []
for i in range(8):
    pid = os.fork()
    if pid == 0:
        try:
            block = b"\x01" * (400 << 20)
            time.sleep(120)
        finally:
            os._exit(0)
    kids.append(pid)
print("forked", len(kids), flush=True)
for pid in kids:
    os.waitpid(pid, 0)
print("survived", flush=True)
`,
    },
    javascript: {
      writeKeep: (keep) => `require('fs').writeFileSync('/work/keep.txt', ${JSON.stringify(keep)});\nconsole.log('written');\n`,
      readKeep: "console.log(require('fs').readFileSync('/work/keep.txt', 'utf8'));\n",
      // Eight node processes, each with 400 MiB of Buffer, touched.
      code: String.raw`import { spawn } from 'node:child_process';
const kids = [];
for (let i = 0; i < 8; i++) {
  kids.push(spawn(process.execPath, ['-e', 'const block = Buffer.alloc(400 << 20, 1); setTimeout(() => {}, 120000);'], { stdio: 'ignore' }));
}
console.log('spawned', kids.length);
await Promise.all(kids.map((k) => new Promise((res) => k.on('exit', res))));
console.log('survived');
`,
    },
  },

  {
    async hostile({ a, call, probe, diag }) {
      const { r, sc, ms } = await call(a, probe.code, { timeout_seconds: 3 });
      diag(`cpu loop: ${ms} ms wall, ${show(sc)}`);
      assertWallClockStop(r, sc, ms);
      // Only a boot goes first on the cores (cpu.shares 4096 until the
      // executor is ready): a sandbox at work, this spinner's too, weighs
      // what any other does (cgroup v1; with MCP_STATE_DIR).
      const cg = sandboxCgroup(a, 'cpu');
      if (cg?.exists) assert.equal(cg.limit, '1024', `the sandbox's cpu.shares after its boot (${cg.path})`);
    },
    python: {
      name: 'CPU loop: timeout_seconds 3 stops `while True: pass` (timed_out, about 3 s)',
      code: 'while True:\n    pass\n',
    },
    javascript: {
      name: 'CPU loop: timeout_seconds 3 stops `for (;;) {}` (timed_out, about 3 s)',
      code: 'for (;;) {}\n',
    },
  },

  {
    // `spinning` comes after every spinner has started: the follow-up then
    // proves the wall clock killed them all.
    async hostile({ a, call, probe, diag }) {
      const limit = probe.timeout_seconds;
      const { r, sc, ms } = await call(a, probe.code, { timeout_seconds: limit });
      diag(`cpu loop x7: ${ms} ms wall, ${show(sc)}`);
      assert.equal(sc.stdout, 'spinning\n', show(sc));
      assert.equal(sc.timed_out, true, `timed_out: ${show(sc)}`);
      assert.equal(r.isError, true, 'isError');
      assert.ok(ms < limit * 1000 + 1500 + SLACK_MS, `the call returned ${ms} ms after it started (limit ${limit} s, slack ${SLACK_MS} ms)`);
    },
    after: onlyExecutorLeft,
    python: {
      name: 'CPU loop in many processes: timeout_seconds 8 ends the call and kills every spinner',
      // Six forks of the call's process (it holds the warm imports), each
      // new spinner taking CPU from the next fork: at a load of 15 they did
      // not all start within 3 s.
      timeout_seconds: 8,
      code: String.raw`import os
for i in range(6):
    if os.fork() == 0:
        os.setsid()
        while True:
            pass
print("spinning", flush=True)
while True:
    pass
`,
    },
    javascript: {
      name: 'CPU loop in many processes: timeout_seconds 8 ends the call and kills every detached spinner',
      // Every spawn forks the whole node process, and the spinners already
      // started take the CPU from the next one: six spawns took 2.7-3.4 s
      // on a loaded two-core machine, so 3 s (Python's limit, where a fork
      // is cheap) missed `spinning` there.
      timeout_seconds: 8,
      code: String.raw`import { spawn } from 'node:child_process';
for (let i = 0; i < 6; i++) {
  spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore', detached: true }).unref();
}
console.log('spinning');
for (;;) {}
`,
    },
  },

  {
    hostile: endlessSleep,
    python: {
      name: 'time.sleep(10**6) with timeout_seconds 5 returns within ~6 s with timed_out',
      label: 'sleep',
      code: 'import time\nprint("sleeping", flush=True)\ntime.sleep(10**6)\n',
    },
    javascript: {
      name: 'an endless setTimeout with timeout_seconds 5 returns within ~6 s with timed_out',
      label: 'setTimeout',
      code: "console.log('sleeping');\nawait new Promise((res) => setTimeout(res, 2 ** 31 - 1));\nconsole.log('woke');\n",
    },
  },

  {
    name: 'an endless Atomics.wait with timeout_seconds 5 returns within ~6 s with timed_out',
    only: 'javascript', // a second way for JavaScript to block: the thread itself, not the event loop
    hostile: endlessSleep,
    javascript: {
      label: 'Atomics.wait',
      code: "console.log('sleeping');\nAtomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);\nconsole.log('woke');\n",
    },
  },

  {
    name: '300 MiB to stdout: truncated, exactly 1 MiB returned, promptly',
    // The plain loop a program would write (no waiting for 'drain' in Node.js).
    async hostile({ a, call, probe, diag }) {
      const { r, sc, ms } = await call(a, probe.code, { timeout_seconds: 120 });
      const tail = sc.stderr.replace(/^e*/, '');
      diag(`300 MiB output: ${ms} ms wall, duration_ms ${sc.duration_ms}, exit_code ${sc.exit_code}, timed_out ${sc.timed_out}, truncated ${sc.truncated}, memory_exceeded ${sc.memory_exceeded}, stdout ${Buffer.byteLength(sc.stdout)} bytes, stderr ${Buffer.byteLength(sc.stderr)} bytes${tail ? `, stderr after the e's: ${JSON.stringify(tail.slice(0, 400))}` : ''}`);
      assert.equal(sc.exit_code, 0, `the code ran to its end: exit_code ${sc.exit_code}, stderr after the e's ${JSON.stringify(tail.slice(0, 400))}`);
      assertOutputCapped(r, sc, ms);
    },
    python: {
      code: String.raw`import sys
chunk = "x" * (1 << 20)
w = sys.stdout.write
for _ in range(300):
    w(chunk)
sys.stdout.flush()
e = "e" * (1 << 20)
for _ in range(3):
    sys.stderr.write(e)
`,
    },
    javascript: {
      code: String.raw`const chunk = 'x'.repeat(1 << 20);
for (let i = 0; i < 300; i++) process.stdout.write(chunk);
const e = 'e'.repeat(1 << 20);
for (let i = 0; i < 3; i++) process.stderr.write(e);
`,
    },
  },

  {
    async hostile({ a, call, probe, diag }) {
      const { sc, ms } = await call(a, probe.code, { timeout_seconds: 120 });
      const rep = report(sc);
      diag(`fill: ${ms} ms wall, report ${show(rep)}, workspace_full ${sc.workspace_full}, exit ${sc.exit_code}`);
      assert.equal(rep.code, 'ENOSPC', `the code saw ENOSPC: ${show(rep)}; ${show(sc)}`);
      assert.ok(rep.written_mib >= 900 && rep.written_mib <= 1024, `about 1 GiB fit: ${rep.written_mib} MiB`);
      assert.equal(sc.exit_code, 0, show(sc));
      assert.equal(sc.timed_out, false, show(sc));
    },
    async after({ a, call, probe }) {
      const { sc } = await call(a, probe.refill);
      assert.deepEqual(report(sc), { rewritten: true, left: [] }, `after deleting the fill, 16 MiB write and read back: ${show(sc)}`);
      assert.equal(sc.workspace_full, false, `workspace_full is false once space is free: ${show(sc)}`);
    },
    python: {
      name: 'filling the workspace: ENOSPC inside, then the session deletes the file and writes again',
      code: String.raw`import errno, json, os
buf = b"\xa5" * (1 << 20)
written = 0
err = None
i = 0
while err is None and written < (4 << 30):
    fd = os.open("/work/fill-%d.bin" % i, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for _ in range(256):
            try:
                n = os.write(fd, buf)
            except OSError as e:
                err = e.errno
                break
            written += n
            if n < len(buf):
                continue
        try:
            os.fsync(fd)
        except OSError as e:
            err = err or e.errno
    finally:
        os.close(fd)
    i += 1
v = os.statvfs("/work")
print(json.dumps({"errno": err, "code": errno.errorcode.get(err), "written_mib": written >> 20,
                  "files": i, "avail_mib": (v.f_bavail * v.f_frsize) >> 20}))
`,
      refill: String.raw`import glob, hashlib, json, os
for f in glob.glob("/work/fill-*.bin"):
    os.remove(f)
data = os.urandom(1 << 20) * 16
with open("/work/again.bin", "wb") as f:
    f.write(data)
ok = open("/work/again.bin", "rb").read() == data
os.remove("/work/again.bin")
print(json.dumps({"rewritten": ok, "left": glob.glob("/work/fill-*")}))
`,
    },
    javascript: {
      name: 'filling the workspace: ENOSPC inside, then the session deletes the files and writes again',
      code: String.raw`import fs from 'node:fs';
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
      refill: String.raw`import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
for (const f of fs.readdirSync('/work')) if (/^fill-\d+\.bin$/.test(f)) fs.rmSync('/work/' + f);
const data = Buffer.concat(Array.from({ length: 16 }, () => randomBytes(1 << 20)));
fs.writeFileSync('/work/again.bin', data);
const ok = fs.readFileSync('/work/again.bin').equals(data);
fs.rmSync('/work/again.bin');
console.log(JSON.stringify({ rewritten: ok, left: fs.readdirSync('/work').filter((f) => f.startsWith('fill-')) }));
`,
    },
  },

  {
    name: 'filling /tmp (256 MiB) and /dev/shm (64 MiB): ENOSPC at their size',
    async hostile({ a, call, probe, diag }) {
      const { sc, ms } = await call(a, probe.code, { timeout_seconds: 60 });
      const rep = report(sc);
      diag(`tmpfs fill: ${ms} ms, ${show(rep)}`);
      assert.equal(rep.tmp.code, 'ENOSPC', `/tmp ENOSPC: ${show(rep)}`);
      assert.ok(rep.tmp.mib >= 200 && rep.tmp.mib <= 256, `/tmp holds about 256 MiB: ${rep.tmp.mib}`);
      assert.equal(rep.shm.code, 'ENOSPC', `/dev/shm ENOSPC: ${show(rep)}`);
      assert.ok(rep.shm.mib >= 48 && rep.shm.mib <= 64, `/dev/shm holds about 64 MiB: ${rep.shm.mib}`);
    },
    python: {
      code: String.raw`import errno, json, os
def fill(path):
    buf = b"\x5a" * (1 << 20)
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while written < (2 << 30):
            written += os.write(fd, buf)
    except OSError as e:
        return {"code": errno.errorcode.get(e.errno, str(e.errno)), "mib": written >> 20}
    finally:
        os.close(fd)
        os.remove(path)
    return {"code": None, "mib": written >> 20}
print(json.dumps({"tmp": fill("/tmp/fill"), "shm": fill("/dev/shm/fill")}))
`,
    },
    javascript: {
      code: String.raw`import fs from 'node:fs';
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
    },
  },

  // A daemon in a session of its own, and an orphaned grandchild.
  daemonCase({ python: ['setsid', 'setsid daemon'], javascript: ['detached', 'detached child (spawn detached + unref)'] }),
  daemonCase({ python: ['double-fork', 'double fork'], javascript: ['double-fork', 'double fork (orphaned grandchild)'] }),

  {
    name: 'writes to /, /usr, /etc fail with EROFS or EACCES',
    async hostile({ a, call, probe, diag }) {
      const { sc } = await call(a, probe.code);
      const rep = report(sc);
      diag(`writes: ${show(rep)}`);
      assertNoWrites(rep);
    },
    python: {
      code: String.raw`import errno, json, os
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
res = {}
for p in ["/x", "/usr/x", "/usr/bin/x", "/usr/lib/python3/x", "/etc/x", "/bin/x", "/opt/x", "/work/../x"]:
    res["create " + p] = attempt(lambda: open(p, "w").close())
for p in ["/etc/passwd", "/etc/hosts", "/usr/bin/python3", "/etc/nsswitch.conf"]:
    res["append " + p] = attempt(lambda: open(p, "a").close())
res["mkdir /newdir"] = attempt(lambda: os.mkdir("/newdir"))
res["mkdir /usr/newdir"] = attempt(lambda: os.mkdir("/usr/newdir"))
res["rename /etc/hosts"] = attempt(lambda: os.rename("/etc/hosts", "/etc/hosts2"))
res["unlink /usr/bin/python3"] = attempt(lambda: os.unlink("/usr/bin/python3"))
res["chmod /usr/bin/python3"] = attempt(lambda: os.chmod("/usr/bin/python3", 0o777))
res["symlink /etc/evil"] = attempt(lambda: os.symlink("/work", "/etc/evil"))
print(json.dumps(res))
`,
    },
    javascript: {
      code: String.raw`import fs from 'node:fs';
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
    },
  },

  {
    name: 'network: only lo; nginx, ports 22/80/5432, a host listener and the host external IP are unreachable',
    async hostile({ a, call, probe, diag }) {
      await withHostTargets(diag, async (targets) => {
        const { sc, ms } = await call(a, probe.code(targets), { timeout_seconds: 120 });
        const rep = report(sc);
        diag(`network: ${ms} ms, ${show(rep)}`);
        assertNoNetwork(rep, targets);
        assert.notEqual(rep.lookup, 'RESOLVED', 'no DNS (getaddrinfo)');
        probe.expect?.(rep);
      });
    },
    python: {
      code: (targets) => String.raw`import errno, json, socket
targets = json.loads(${JSON.stringify(JSON.stringify(targets))})
res = {}
for host, port in targets:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((host, port))
        res["%s:%d" % (host, port)] = "CONNECTED"
    except OSError as e:
        res["%s:%d" % (host, port)] = errno.errorcode.get(e.errno, type(e).__name__)
    finally:
        s.close()
try:
    socket.getaddrinfo("example.com", 443)
    lookup = "RESOLVED"
except OSError as e:
    lookup = type(e).__name__
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("192.0.2.1", 53))
    udp = "SENT"
except OSError as e:
    udp = errno.errorcode.get(e.errno, type(e).__name__)
print(json.dumps({"connect": res, "lookup": lookup, "udp": udp, "ifaces": [n for _, n in socket.if_nameindex()]}))
`,
    },
    javascript: {
      code: (targets) => String.raw`import net from 'node:net';
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
  await fetch(${JSON.stringify(`${new URL(MCP_URL).protocol}//127.0.0.1:${NGINX_PORT}/healthz`)}, { signal: AbortSignal.timeout(3000) });
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
      // Node.js has a resolver of its own beside getaddrinfo, and fetch().
      expect(rep) {
        assert.notEqual(rep.resolve, 'RESOLVED', 'no DNS (resolver)');
        assert.notEqual(rep.fetched, 'ANSWERED', 'fetch() of the server itself fails');
        assert.deepEqual(rep.netdev, ['lo'], 'only the loopback interface exists (/proc/net/dev)');
      },
    },
  },

  {
    name: 'host secrets: no /etc/shadow, token file, TLS keys, state folder or host accounts inside',
    async hostile({ a, call, probe, diag }) {
      const { sc } = await call(a, probe.code(hostSecretPaths()));
      const rep = report(sc);
      diag(`secrets: ${show(rep.paths)}`);
      assertNoHostSecrets(rep);
    },
    python: {
      code: (paths) => String.raw`import errno, json, os
paths = json.loads(${JSON.stringify(JSON.stringify(paths))})
res = {}
for p in paths:
    try:
        os.stat(p)
        res[p] = "EXISTS"
    except OSError as e:
        res[p] = errno.errorcode.get(e.errno, type(e).__name__)
def listing(p):
    try:
        return sorted(os.listdir(p))
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__)
print(json.dumps({"paths": res, "root": listing("/root"), "home": listing("/home"),
                  "passwd": open("/etc/passwd").read(), "group": open("/etc/group").read()}))
`,
    },
    javascript: {
      code: (paths) => String.raw`import fs from 'node:fs';
const paths = ${JSON.stringify(paths)};
const res = {};
for (const p of paths) {
  try { fs.statSync(p); res[p] = 'EXISTS'; } catch (e) { res[p] = e.code; }
}
const listing = (p) => { try { return fs.readdirSync(p).sort(); } catch (e) { return e.code; } };
console.log(JSON.stringify({ paths: res, root: listing('/root'), home: listing('/home'),
  passwd: fs.readFileSync('/etc/passwd', 'utf8'), group: fs.readFileSync('/etc/group', 'utf8') }));
`,
    },
  },

  {
    name: "another session's file: not reachable from session B through /proc, /work/.. or the host path",
    // A writes a secret file, B searches for it, A reads it back. `options`
    // are the call options that carry the secret where a language needs it.
    async hostile({ a, b, call, probe, diag }) {
      const name = `secret-${randomToken()}.txt`;
      const secret = `top-secret-${randomToken(16)}`;
      const sidA = a.transport.sessionId;
      const options = probe.options(secret);
      const w = await call(a, probe.write(name, secret), options);
      assert.equal(w.sc.stdout, 'ok\n', show(w.sc));
      const guesses = crossSessionGuesses(name, sidA);
      const { sc } = await call(b, probe.search(name, secret, guesses), options);
      const rep = report(sc);
      diag(`cross-session: ${show(rep)}`);
      assertCrossSessionSealed(sc, rep, secret, sidA);
      const back = await call(a, probe.readBack(name, secret), options);
      assert.equal(back.sc.stdout, probe.readBackSays(secret), 'session A keeps its file');
    },
    python: {
      options: () => ({}),
      write: (name, secret) => `open("/work/${name}", "w").write(${JSON.stringify(secret)})\nprint("ok")\n`,
      search: (name, secret, guesses) => String.raw`import errno, glob, json, os
name = ${JSON.stringify(name)}
secret = ${JSON.stringify(secret)}
res = {}
for p in json.loads(${JSON.stringify(JSON.stringify(guesses))}):
    try:
        res[p] = "READ:" + open(p).read()
    except OSError as e:
        res[p] = errno.errorcode.get(e.errno, type(e).__name__)
hits = []
for pattern in ["/proc/*/root/work/" + name, "/proc/*/cwd/" + name, "/proc/*/root/" + name, "/*/" + name, "/*/*/" + name]:
    hits += glob.glob(pattern)
found = []
for top in ["/work", "/tmp", "/dev/shm", "/proc/1/root/work"]:
    for d, dirs, files in os.walk(top):
        for f in files:
            p = os.path.join(d, f)
            try:
                with open(p, "rb") as fh:
                    if secret.encode() in fh.read(1 << 20):
                        found.append(p)
            except OSError:
                pass
print(json.dumps({"guesses": res, "glob": hits, "found": found, "parent": sorted(os.listdir("/work/.."))}))
`,
      readBack: (name) => `print(open("/work/${name}").read())\n`,
      readBackSays: (secret) => `${secret}\n`,
    },
    javascript: {
      // The secret travels in env_variables, never in the code: the code of
      // a call is a file in its session's /work (.mcp/main.mjs), which B's
      // search must not find as a false positive of its own.
      options: (secret) => ({ env_variables: { SECRET: secret } }),
      write: (name) => `require('fs').writeFileSync('/work/${name}', process.env.SECRET);\nconsole.log('ok');\n`,
      search: (name, secret, guesses) => String.raw`import fs from 'node:fs';
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
      readBack: (name) => `console.log(require('fs').readFileSync('/work/${name}', 'utf8') === process.env.SECRET);\n`,
      readBackSays: () => 'true\n',
    },
  },

  {
    async hostile({ a, call, probe, diag }) {
      const { sc } = await call(a, probe.code);
      const rep = report(sc);
      diag(`environment inside: ${show(rep.env)}; ${rep.execArgv ? `execArgv ${show(rep.execArgv)}; ` : ''}/proc/1/environ: ${rep.blobs['/proc/1/environ']?.slice(0, 40)}`);
      assertCleanEnvironment(rep);
      probe.expect?.(rep);
    },
    python: {
      name: 'environment: none of the host variables inside; the token nowhere in /proc/self/environ; /proc/1/environ denied or empty',
      code: String.raw`import base64, errno, glob, json, os
def rd(p):
    try:
        with open(p, "rb") as f:
            return "DATA:" + base64.b64encode(f.read()).decode()
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__)
blobs = {}
for p in ["/proc/self/environ", "/proc/self/cmdline", "/proc/1/environ", "/proc/1/cmdline"] + glob.glob("/proc/[0-9]*/environ"):
    blobs[p] = rd(p)
print(json.dumps({"env": dict(os.environ), "blobs": blobs}))
`,
    },
    javascript: {
      name: 'environment: none of the host variables inside; the token nowhere in /proc/*/environ; /proc/1/environ denied or empty',
      code: String.raw`import fs from 'node:fs';
const rd = (p) => { try { return 'DATA:' + fs.readFileSync(p).toString('base64'); } catch (e) { return e.code; } };
const blobs = {};
const procs = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map((p) => '/proc/' + p + '/environ');
for (const p of ['/proc/self/environ', '/proc/self/cmdline', '/proc/1/environ', '/proc/1/cmdline', ...procs]) blobs[p] = rd(p);
console.log(JSON.stringify({ env: process.env, execArgv: process.execArgv, argv: process.argv, blobs }));
`,
      // node's own arguments (the executor passes some) leak nothing either.
      expect(rep) {
        for (const arg of [...rep.execArgv, ...rep.argv]) {
          assert.ok(!arg.includes(MCP_TOKEN) && (!STATE_DIR || !arg.includes(STATE_DIR)), `node's arguments name neither the token nor the state folder: ${show(rep.argv)} ${show(rep.execArgv)}`);
        }
      },
    },
  },

  {
    async hostile({ a, call, probe, diag }) {
      const { sc, ms } = await call(a, probe.code, { timeout_seconds: 30 });
      diag(`kill(-1): ${ms} ms, ${show(sc)}`);
      assert.equal(sc.timed_out, false, `the call returned by itself: ${show(sc)}`);
      assert.match(sc.stdout, /^kids 3$/m, show(sc));
      // Linux does not signal the caller itself with kill(-1): it goes on.
      // gVisor may differ; then the call ends with 137. Either way it returns.
      if (sc.exit_code === 0) {
        assert.match(sc.stdout, /^kill\(-1\) returned$/m, show(sc));
        assert.match(sc.stdout, probe.killed, `the call's own children got SIGKILL: ${show(sc)}`);
      } else {
        assert.equal(sc.exit_code, 137, `the caller was SIGKILLed by its own kill(-1): ${show(sc)}`);
      }
      assert.equal(sc.sandbox_restarted, false, `PID 1 survived: ${show(sc)}`);
      assert.ok(ms < 10000, `returned in ${ms} ms`);
    },
    python: {
      name: "os.kill(-1, 9) kills only the call's own processes; the call returns, the next call works",
      killed: /^kids killed True$/m,
      code: String.raw`import os, signal, time
kids = []
for i in range(3):
    pid = os.fork()
    if pid == 0:
        time.sleep(1000)
        os._exit(0)
    kids.append(pid)
print("kids", len(kids), flush=True)
try:
    os.kill(-1, signal.SIGKILL)
    print("kill(-1) returned", flush=True)
except OSError as e:
    print("kill(-1) failed", e.errno, flush=True)
time.sleep(0.2)
st = [os.waitpid(p, 0)[1] for p in kids]
print("kids killed", all(os.WIFSIGNALED(s) and os.WTERMSIG(s) == 9 for s in st), flush=True)
`,
    },
    javascript: {
      name: "process.kill(-1, 'SIGKILL') kills only the call's own processes; the call returns, the next call works",
      killed: /^kids killed \["SIGKILL","SIGKILL","SIGKILL"\]$/m,
      code: String.raw`import { spawn } from 'node:child_process';
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
    },
  },

  {
    // Each language reports refusals in its own terms (Python's exception
    // name, Node.js's error code) and tries its own set of id changes.
    async hostile({ a, call, probe, diag }) {
      const { sc } = await call(a, probe.code);
      const rep = report(sc);
      diag(`kill(1): ${show(rep)}`);
      assert.deepEqual(rep, probe.refused, show(sc));
      assert.equal(sc.sandbox_restarted, false, 'the sandbox was not restarted');
    },
    python: {
      name: 'os.kill(1, 9) and other signals to PID 1 fail with PermissionError',
      refused: { SIGKILL: 'PermissionError', SIGTERM: 'PermissionError', SIGSTOP: 'PermissionError', SIGINT: 'PermissionError', SIGSEGV: 'PermissionError', setuid0: 'PermissionError' },
      code: String.raw`import json, os, signal
res = {}
for name in ["SIGKILL", "SIGTERM", "SIGSTOP", "SIGINT", "SIGSEGV"]:
    try:
        os.kill(1, getattr(signal, name))
        res[name] = "SENT"
    except OSError as e:
        res[name] = type(e).__name__
try:
    os.setuid(0)
    res["setuid0"] = "OK"
except OSError as e:
    res["setuid0"] = type(e).__name__
print(json.dumps(res))
`,
    },
    javascript: {
      name: 'process.kill(1, ...) and setuid(0) fail with EPERM',
      refused: { SIGKILL: 'EPERM', SIGTERM: 'EPERM', SIGSTOP: 'EPERM', SIGINT: 'EPERM', SIGSEGV: 'EPERM', setuid0: 'EPERM', setgid0: 'EPERM', seteuid0: 'EPERM', setgroups0: 'EPERM' },
      code: String.raw`const res = {};
for (const s of ['SIGKILL', 'SIGTERM', 'SIGSTOP', 'SIGINT', 'SIGSEGV']) {
  try { process.kill(1, s); res[s] = 'SENT'; } catch (e) { res[s] = e.code; }
}
for (const [k, fn] of [['setuid0', () => process.setuid(0)], ['setgid0', () => process.setgid(0)], ['seteuid0', () => process.seteuid(0)], ['setgroups0', () => process.setgroups([0])]]) {
  try { fn(); res[k] = 'OK'; } catch (e) { res[k] = e.code; }
}
console.log(JSON.stringify(res));
`,
    },
  },

  {
    // The system calls are made by SECCOMP_PY (lib/hostile.mjs) in both
    // languages: Node.js has no way to make them itself, so its code runs
    // that probe as a python3 child, under the same filter (the policy
    // belongs to the sandbox and applies to every process in it).
    async hostile({ a, call, probe, diag }) {
      const { sc } = await call(a, probe.code);
      const rep = report(sc);
      diag(`syscalls: ${show(rep)}`);
      const calls = probe.syscalls ? probe.syscalls(rep) : rep;
      const notEperm = Object.entries(calls).filter(([, v]) => v !== 'EPERM');
      assert.deepEqual(notEperm, [], `every listed system call fails with EPERM: ${show(calls)}`);
      probe.expect?.(rep);
      assert.equal(sc.exit_code, 0, show(sc));
    },
    python: {
      name: 'seccomp: ptrace, mount, unshare, setns, bpf, keyctl, perf_event_open, io_uring, userfaultfd... fail with EPERM',
      code: SECCOMP_PY,
    },
    javascript: {
      name: 'seccomp: node runs under the filter; ptrace, mount, unshare, setns, bpf, keyctl, io_uring... fail with EPERM in its child processes',
      // util-linux unshare(1) tries a new user namespace the ordinary way.
      code: String.raw`import fs from 'node:fs';
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
      /** The python3 child's report, once it is known to have run in full. */
      syscalls(rep) {
        assert.equal(rep.python.status, 0, `the python3 child ran: ${show(rep.python)}`);
        assert.ok(Object.keys(rep.python.report || {}).length >= 20, 'every call was tried');
        return rep.python.report || {};
      },
      expect(rep) {
        // /proc/<pid>/status "Seccomp: 2" (filter mode) when the kernel shows it.
        if (rep.node !== null) assert.equal(rep.node, '2', `node itself runs under a seccomp filter: ${show(rep)}`);
        if (rep.child !== '') assert.equal(rep.child, '2', `its child runs under a seccomp filter: ${show(rep)}`);
        if (rep.unshare) assert.notEqual(rep.unshare.status, 0, `unshare --user fails: ${show(rep.unshare)}`);
      },
    },
  },

  {
    async hostile({ a, call, probe, diag }) {
      const { sc } = await call(a, probe.code);
      const rep = report(sc);
      diag(`identity: ${show(rep)}`);
      assert.equal(rep.uid, 1000, 'getuid() == 1000');
      assert.equal(rep.euid, 1000, 'geteuid() == 1000');
      assert.equal(rep.gid, 1000, 'getgid() == 1000');
      assert.equal(rep.egid, 1000, 'getegid() == 1000');
      probe.expect(rep);
      assertNoCapabilities(rep.status);
    },
    python: {
      name: 'identity: uid/euid/gid 1000, no groups, CapEff/CapPrm/CapInh 0',
      code: String.raw`import json, os
st = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    if k.startswith("Cap") or k in ("NoNewPrivs", "Seccomp", "Uid", "Gid", "Groups"):
        st[k] = v.strip()
print(json.dumps({"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "egid": os.getegid(),
                  "resuid": list(os.getresuid()), "groups": os.getgroups(), "status": st}))
`,
      expect(rep) {
        assert.deepEqual(rep.resuid, [1000, 1000, 1000], 'real, effective and saved uid 1000');
        assert.deepEqual(rep.groups, [], 'no supplementary groups');
      },
    },
    javascript: {
      name: 'identity: process.getuid/geteuid/getgid 1000, no other groups, CapEff/CapPrm/CapInh 0',
      code: String.raw`import fs from 'node:fs';
const st = {};
for (const line of fs.readFileSync('/proc/self/status', 'utf8').split('\n')) {
  const i = line.indexOf(':');
  const k = line.slice(0, i);
  if (k.startsWith('Cap') || ['NoNewPrivs', 'Seccomp', 'Uid', 'Gid', 'Groups'].includes(k)) st[k] = line.slice(i + 1).trim();
}
console.log(JSON.stringify({ uid: process.getuid(), euid: process.geteuid(), gid: process.getgid(), egid: process.getegid(),
  groups: process.getgroups(), user: (() => { try { return require('os').userInfo().username; } catch (e) { return e.code; } })(), status: st }));
`,
      expect(rep) {
        // Node.js adds the effective gid to getgroups(); nothing else may be there.
        assert.deepEqual(rep.groups.filter((g) => g !== 1000), [], `no supplementary groups: ${show(rep.groups)}`);
        assert.deepEqual(rep.status.Uid.split(/\s+/).map(Number), [1000, 1000, 1000, 1000], `real, effective, saved and fs uid 1000: ${rep.status.Uid}`);
        assert.deepEqual(rep.status.Gid.split(/\s+/).map(Number), [1000, 1000, 1000, 1000], `real, effective, saved and fs gid 1000: ${rep.status.Gid}`);
        assert.equal((rep.status.Groups || '').trim(), '', `no supplementary groups in /proc/self/status: ${rep.status.Groups}`);
      },
    },
  },
];

// Network by policy: a session with an egress policy attacks the relay and
// the proxy (lib/hostile-egress.mjs; skipped where the stack has no egress).
CASES.push(...EGRESS_CASES);

// Every case has both language blocks, or exactly the one `only` names.
for (const c of CASES) {
  const has = Object.keys(LANGUAGES).filter((l) => c[l]);
  const want = c.only ? [c.only] : Object.keys(LANGUAGES);
  const label = c.name ?? c.python?.name ?? c.javascript?.name;
  if (has.join() !== want.join()) throw new Error(`hostile case "${label}": probes for ${has.join(', ') || 'no language'}, expected ${want.join(', ')}`);
  for (const l of has) if (!(c[l].name ?? c.name)) throw new Error(`hostile case "${label}": no test name for ${l}`);
}

/** Register the table's tests for one language, then the leftover check. */
export function hostileSuite(lang, { persistent = false } = {}) {
  const { tool, aliveCode } = LANGUAGES[lang];
  // The test shape, session bookkeeping and the leftover check live in
  // lib/hostile.mjs; each test file runs in a process of its own.
  // persistent: every call of the case (the probe, its follow-ups and the
  // responsiveness calls) runs in the sandbox's persistent interpreter
  // (hostile-persistent.test.mjs): the same verdicts hold there.
  const { call, hostileTest, leftoverTest } = hostileKit({ tool, aliveCode, persistent });
  const mode = persistent ? ' (persistent)' : '';
  for (const c of CASES) {
    const probe = c[lang];
    if (!probe) continue;
    const bind = (fn) => fn && ((ctx) => fn({ ...ctx, call, lang, probe, persistent }));
    hostileTest((probe.name ?? c.name) + mode, { hostile: bind(c.hostile), after: bind(c.after), fixture: c.fixture });
  }
  leftoverTest(mode);
}
