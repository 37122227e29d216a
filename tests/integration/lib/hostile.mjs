// Shared machinery of the hostile-code suites (hostile.test.mjs for Python,
// hostile-js.test.mjs for JavaScript; their one table of cases is
// hostile-cases.mjs): result checks, session bookkeeping, the "hostile
// call, then both sessions answer in < 2 s" test shape, host cgroup
// look-ups, the final leftover check and the verdicts several cases share.
//
// hostileKit({tool, aliveCode}) binds it to one tool: `tool` is the tool name
// (execute_python, execute_javascript), `aliveCode(mark)` the code of the
// responsiveness probe that prints `mark` and a newline in that language.
// Each test file runs in its own process (node --test), so the session list
// below is per file.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { MCP_URL, MCP_CA_FILE, MCP_TOKEN, TEST_TIMEOUT_MS, SLACK_MS, connectClient, closeClient, randomToken } from './common.mjs';
import { findPaths } from './host.mjs';

export const opts = { timeout: TEST_TIMEOUT_MS };
export const show = (r) =>
  JSON.stringify(r, (k, v) => (typeof v === 'string' && v.length > 2000 ? `${v.slice(0, 2000)}…(${v.length} chars)` : v));

// Host-side state folder (only for the final leftover check and meta.json).
export const STATE_DIR = process.env.MCP_STATE_DIR ? path.resolve(process.env.MCP_STATE_DIR) : '';
// Paths of host secrets, derived from the CA file the runner was given
// (<state>/tls/ca.pem): the sandbox must not see any of them.
export const TLS_DIR = path.dirname(path.resolve(MCP_CA_FILE));
export const HOST_STATE_GUESS = STATE_DIR || path.dirname(TLS_DIR);
export const NGINX_PORT = Number(new URL(MCP_URL).port || (new URL(MCP_URL).protocol === 'https:' ? 443 : 80));

// The limit on the wall time of a normal call after hostile code (a
// sandbox that is wedged or restarting takes far longer).
export const RESPONSIVE_MS = 2000 + SLACK_MS;

export const BOOL_FIELDS = ['timed_out', 'truncated', 'memory_exceeded', 'cpu_exceeded', 'processes_exceeded', 'workspace_full', 'sandbox_restarted'];

/** The shape of every execute_* result; returns structuredContent. */
export function checkResult(result) {
  const sc = result?.structuredContent;
  assert.equal(typeof sc, 'object', `structuredContent is present: ${show(result)}`);
  assert.notEqual(sc, null);
  assert.equal(typeof sc.stdout, 'string', `stdout: ${show(sc)}`);
  assert.equal(typeof sc.stderr, 'string', `stderr: ${show(sc)}`);
  assert.ok(Number.isInteger(sc.exit_code), `exit_code is an integer: ${show(sc)}`);
  assert.ok(Number.isInteger(sc.duration_ms) && sc.duration_ms >= 0, `duration_ms: ${show(sc)}`);
  for (const k of BOOL_FIELDS) assert.equal(typeof sc[k], 'boolean', `structuredContent.${k} is a boolean: ${show(sc)}`);
  return sc;
}

/** The last stdout line parsed as JSON (the probes print one JSON report). */
export function report(sc) {
  const lines = sc.stdout.trim().split('\n');
  try {
    return JSON.parse(lines[lines.length - 1]);
  } catch {
    assert.fail(`expected a JSON report as the last stdout line: ${show(sc)}`);
  }
}

/** Python: try system calls the sandbox must refuse (x86_64 numbers) with
 * ctypes and print one JSON line {name: "OK" or the errno name}. */
export const SECCOMP_PY = String.raw`import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buf = ctypes.create_string_buffer(256)
P = ctypes.cast(buf, ctypes.c_void_p).value
calls = {
    "ptrace": (101, 0, 0, 0, 0),                                   # PTRACE_TRACEME
    "ptrace_attach_1": (101, 16, 1, 0, 0),                         # PTRACE_ATTACH to PID 1
    "process_vm_readv": (310, 1, P, 1, P, 1, 0),
    "mount": (165, b"none", b"/tmp", b"tmpfs", 0, 0),
    "umount2": (166, b"/tmp", 0),
    "pivot_root": (155, b"/tmp", b"/tmp"),
    "chroot": (161, b"/tmp"),
    "unshare_user": (272, 0x10000000),                              # CLONE_NEWUSER
    "unshare_ns": (272, 0x00020000),                                # CLONE_NEWNS
    "setns": (308, 0, 0),
    "bpf": (321, 0, P, 16),
    "keyctl": (250, 0, -3, 0),                                      # KEYCTL_GET_KEYRING_ID
    "add_key": (248, b"user", b"x", P, 1, -4),
    "perf_event_open": (298, P, 0, -1, -1, 0),
    "io_uring_setup": (425, 1, P),
    "io_uring_enter": (426, 0, 0, 0, 0, 0),
    "io_uring_register": (427, 0, 0, 0, 0),
    "userfaultfd": (323, 0),
    "open_by_handle_at": (304, 0, P, 0),
    "kexec_load": (246, 0, 0, 0, 0),
    "init_module": (175, P, 1, b""),
    "reboot": (169, 0xfee1dead, 672274793, 0x4321fedc, 0),
}
res = {}
for name, (nr, *args) in calls.items():
    ctypes.set_errno(0)
    r = libc.syscall(nr, *args)
    e = ctypes.get_errno()
    res[name] = "OK" if r >= 0 else errno.errorcode.get(e, str(e))
print(json.dumps(res))
`;

// ---- host-side look-ups ------------------------------------------------------

/** Who else is in the sandbox during a call.  Besides PID 1 (the
 * executor) and the call's own processes, only the executor's Python spares
 * may be there: root's processes, children of PID 1, waiting on a pipe that
 * only PID 1 holds (a session that calls back to back keeps one beside a
 * call, executor/mcp_executor/spare.py).  Any other process is a leftover.
 * PY_OTHERS and JS_OTHERS define others(): [pid, uid, ppid] of every process
 * but PID 1 and the caller (one that is gone meanwhile is left out). */
export const PY_OTHERS = String.raw`def others():
    import os
    out = []
    for p in sorted(int(n) for n in os.listdir("/proc") if n.isdigit()):
        if p in (1, os.getpid()):
            continue
        try:
            d = dict(l.split(":", 1) for l in open("/proc/%d/status" % p) if ":" in l)
            out.append([p, int(d["Uid"].split()[0]), int(d["PPid"])])
        except (OSError, ValueError, KeyError):
            pass
    return out
`;
export const JS_OTHERS = String.raw`const others = () => fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number)
  .filter((p) => p !== 1 && p !== process.pid).sort((x, y) => x - y).flatMap((p) => {
    try {
      const st = fs.readFileSync('/proc/' + p + '/status', 'utf8');
      return [[p, Number(/^Uid:\s+(\d+)/m.exec(st)[1]), Number(/^PPid:\s+(\d+)/m.exec(st)[1])]];
    } catch { return []; }
  });
`;

/** Python that prints True when nothing but PID 1, the call and the
 * executor's spares is in the sandbox, else the others. */
export const PY_NO_LEFTOVER = PY_OTHERS + 'left = [o for o in others() if o[1:] != [0, 1]]\nprint(not left or left)\n';

/** The leftovers among others ([pid, uid, ppid]): what is not a spare. */
export function leftovers(others) {
  return (others || []).filter(([, uid, ppid]) => uid !== 0 || ppid !== 1);
}

export function readMeta(sid) {
  if (!STATE_DIR) return null;
  try {
    return JSON.parse(fs.readFileSync(path.join(STATE_DIR, 'sessions', sid, 'meta.json'), 'utf8'));
  } catch {
    return null;
  }
}

/** The host cgroup of session c's current sandbox, or null without MCP_STATE_DIR. */
export function sandboxCgroup(c, controller) {
  const meta = readMeta(c.transport.sessionId);
  if (!meta) return null;
  const base = path.join('/sys/fs/cgroup', controller);
  const parents = fs.existsSync(base) ? fs.readdirSync(base).filter((n) => n.startsWith('mcp-sandbox')) : [];
  for (const parent of parents) {
    const p = path.join(base, parent, `mcp${meta.sandbox_id}`);
    if (fs.existsSync(p)) {
      let limit = '?';
      const file = { memory: 'memory.limit_in_bytes', pids: 'pids.max', cpu: 'cpu.shares' }[controller];
      try {
        if (file) limit = fs.readFileSync(path.join(p, file), 'utf8').trim();
      } catch {
        /* unreadable: reported as '?' */
      }
      return { path: p, exists: true, limit };
    }
  }
  return { path: path.join(base, parents[0] || 'mcp-sandbox', `mcp${meta.sandbox_id}`), exists: false };
}

function leftoversFor(sid, sandboxIds) {
  const left = [];
  if (fs.existsSync(path.join(STATE_DIR, 'sessions', sid))) left.push(`session folder ${path.join(STATE_DIR, 'sessions', sid)}`);
  left.push(...findPaths(path.join(STATE_DIR, 'trash'), (n) => n.includes(sid)).map((p) => `trash ${p}`));
  for (const sb of sandboxIds) {
    const cid = `mcp${sb}`;
    left.push(...findPaths(path.join(STATE_DIR, 'runsc'), (n) => n.includes(cid)).map((p) => `runsc state ${p}`));
    // Every v1 controller: /sys/fs/cgroup/<controller>/mcp-sandbox*/mcp<id>
    for (const ctl of findPaths('/sys/fs/cgroup', () => true)) {
      for (const parent of findPaths(ctl, (n) => n.startsWith('mcp-sandbox'))) {
        const p = path.join(parent, cid);
        if (fs.existsSync(p)) left.push(`cgroup ${p}`);
      }
    }
    left.push(...findPaths(path.join(STATE_DIR, 'pool'), (n) => n.includes(sb)).map((p) => `pool ${p}`));
  }
  // Processes whose command line names the session or one of its sandboxes.
  for (const pid of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    let cmd;
    try {
      cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').replace(/\0/g, ' ');
    } catch {
      continue;
    }
    if (cmd.includes(sid) || [...sandboxIds].some((sb) => cmd.includes(sb))) left.push(`process ${pid}: ${cmd.trim()}`);
  }
  return left;
}

// ---- the kit -----------------------------------------------------------------

export function hostileKit({ tool, aliveCode, persistent = false }) {
  /** sid -> {sandboxIds: Set, deleted: bool, client} */
  const sessions = new Map();

  function noteSandbox(c) {
    const sid = c.transport.sessionId;
    if (!sid) return;
    const rec = sessions.get(sid);
    const meta = readMeta(sid);
    if (rec && meta && typeof meta.sandbox_id === 'string') rec.sandboxIds.add(meta.sandbox_id);
  }

  /** Run code with `tool` and return {r, sc, ms}: the raw result, structuredContent, wall ms. */
  async function call(c, code, extra = {}) {
    const t0 = performance.now();
    const args = { code, ...(persistent ? { persistent: true } : {}), ...extra };
    const r = await c.client.callTool({ name: tool, arguments: args }, undefined, { timeout: TEST_TIMEOUT_MS });
    const ms = Math.round(performance.now() - t0);
    noteSandbox(c);
    return { r, sc: checkResult(r), ms };
  }

  async function open(name, token = MCP_TOKEN) {
    const c = await connectClient(`hostile-${name}`, token);
    const sid = c.transport.sessionId;
    assert.equal(typeof sid, 'string', 'session id issued');
    sessions.set(sid, { sandboxIds: new Set(), deleted: false, client: c });
    noteSandbox(c);
    return c;
  }

  async function close(c) {
    if (!c) return;
    const sid = c.transport.sessionId;
    noteSandbox(c);
    await closeClient(c);
    const rec = sessions.get(sid);
    if (rec) rec.deleted = true;
  }

  /**
   * A call printing a fresh mark must return exactly that line within
   * RESPONSIVE_MS of wall time. Returns the failure message or null.
   */
  async function responsive(c, label, diag = () => {}) {
    const mark = `alive-${randomToken()}`;
    try {
      const { sc, ms } = await call(c, aliveCode(mark));
      diag(`${label}: a ${tool} call afterwards took ${ms} ms (sandbox_restarted ${sc.sandbox_restarted})`);
      const problems = [];
      if (sc.stdout !== `${mark}\n`) problems.push(`stdout ${JSON.stringify(sc.stdout)} != ${JSON.stringify(mark + '\n')}`);
      if (sc.exit_code !== 0) problems.push(`exit_code ${sc.exit_code}`);
      if (ms >= RESPONSIVE_MS) problems.push(`took ${ms} ms (must be < ${RESPONSIVE_MS} ms)`);
      if (problems.length) return `${label}: a ${tool} call afterwards: ${problems.join('; ')}: ${show(sc)}`;
      return null;
    } catch (e) {
      return `${label}: a ${tool} call afterwards failed: ${e?.stack || e}`;
    }
  }

  /**
   * A hostile-code test: session A runs `hostile(ctx)`; then a probe call in
   * A and in the already-initialized session B must each answer within
   * RESPONSIVE_MS;
   * then `after(ctx)` runs its follow-up checks in A. All failures are
   * reported together; the responsiveness check runs even when the outcome
   * assertions failed. `fixture()`, when given, is what the case needs of
   * the stack ({token: A's token, ...}, passed on as ctx.fixture) or a
   * string saying why the stack lacks it: then the test is skipped.
   */
  function hostileTest(name, { hostile, after: afterwards, fixture }) {
    test(name, opts, async (t) => {
      const fx = fixture ? fixture() : null;
      if (typeof fx === 'string') {
        t.skip(fx);
        return;
      }
      const a = await open(`${name}-A`, fx?.token);
      let b;
      const failures = [];
      try {
        b = await open(`${name}-B`);
        // B is initialized and its sandbox answers before the hostile code runs.
        const warm = await call(b, aliveCode('warm'));
        assert.equal(warm.sc.stdout, 'warm\n', `session B answers before the test: ${show(warm.sc)}`);
        // soft(msg): record a failure without stopping the test.
        const ctx = { a, b, t, fixture: fx, diag: (m) => t.diagnostic(m), soft: (m) => failures.push(new Error(m)) };
        try {
          await hostile(ctx);
        } catch (e) {
          failures.push(e);
        }
        for (const [c, label] of [
          [a, 'same session (A)'],
          [b, 'second session (B)'],
        ]) {
          const msg = await responsive(c, label, ctx.diag);
          if (msg) failures.push(new Error(msg));
        }
        if (afterwards) {
          try {
            await afterwards(ctx);
          } catch (e) {
            failures.push(e);
          }
        }
      } finally {
        await close(a);
        await close(b);
      }
      if (failures.length === 1) throw failures[0];
      if (failures.length > 1) {
        const err = new Error(`${failures.length} failures:\n` + failures.map((e, i) => `[${i + 1}] ${e?.message ?? e}`).join('\n'));
        err.failures = failures;
        throw err;
      }
    });
  }

  /** The last test of a file: every session ended, nothing of theirs left on the host. */
  function leftoverTest(suffix = '') {
    test(`afterwards: every session ended, no sandbox, runsc container, cgroup or process of theirs left${suffix}`, opts, async (t) => {
      // End every session this file opened (the tests did; this is a backstop).
      for (const [, rec] of sessions) {
        if (!rec.deleted) await close(rec.client);
      }
      assert.ok(sessions.size > 0, 'this file opened sessions');
      if (!STATE_DIR) {
        t.diagnostic('MCP_STATE_DIR is not set: skipping the host-side leftover check (sessions were ended with DELETE)');
        return;
      }
      const noIds = [...sessions].filter(([, r]) => r.sandboxIds.size === 0).map(([s]) => s);
      assert.deepEqual(noIds, [], `meta.json gave a sandbox_id for every session (state folder ${STATE_DIR})`);
      // Ending a session is asynchronous on the host (its supervisor destroys
      // the sandbox): allow a few seconds.
      const deadline = Date.now() + 15000;
      let left;
      for (;;) {
        left = [];
        for (const [sid, rec] of sessions) left.push(...leftoversFor(sid, rec.sandboxIds));
        if (left.length === 0 || Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      t.diagnostic(`checked ${sessions.size} ended sessions, ${[...sessions.values()].reduce((n, r) => n + r.sandboxIds.size, 0)} sandbox ids`);
      assert.deepEqual(left, [], 'nothing of the ended sessions is left on the host');
    });

    after(async () => {
      for (const [, rec] of sessions) if (!rec.deleted) await closeClient(rec.client);
    });
  }

  return { call, open, close, responsive, hostileTest, leftoverTest, sessions };
}

// The write-outside-the-workspace report ({what: errno name}) of both suites:
// every write fails with EROFS or EACCES.  chmod of a file the caller does not
// own is refused with EPERM before the file system is asked; it is a metadata
// change, not a write.
export function assertNoWrites(rep) {
  const bad = Object.entries(rep).filter(
    ([k, v]) => !(v === 'EROFS' || v === 'EACCES' || (k.startsWith('chmod ') && v === 'EPERM')),
  );
  assert.deepEqual(bad, [], `every write outside /work, /tmp, /dev/shm fails with EROFS or EACCES: ${show(rep)}`);
}

// The network tests' host side: a listener on all host interfaces (proof that
// the targets exist), then fn(targets) with [host, port] pairs the sandbox
// must not reach: nginx, 22/80/5432 and the listener, on loopback and on every
// external IPv4 address of the host.  A control first connects to the
// listener from the host on each address.
export async function withHostTargets(diag, fn) {
  const server = net.createServer((s) => {
    s.on('error', () => {});
    s.end('hello from the host\n');
  });
  await new Promise((res) => server.listen(0, '0.0.0.0', res));
  const hostPort = server.address().port;
  try {
    const ext = Object.values(os.networkInterfaces())
      .flat()
      .filter((i) => i && i.family === 'IPv4' && !i.internal)
      .map((i) => i.address);
    diag(`host external IPv4: ${ext.join(', ') || '(none)'}; host listener port ${hostPort}; nginx port ${NGINX_PORT}`);
    const targets = [
      ['127.0.0.1', NGINX_PORT],
      ['127.0.0.1', 22],
      ['127.0.0.1', 80],
      ['127.0.0.1', 5432],
      ['127.0.0.1', hostPort],
      ['::1', NGINX_PORT],
    ];
    for (const ip of ext) for (const p of [NGINX_PORT, 22, 80, 5432, hostPort]) targets.push([ip, p]);
    for (const ip of ['127.0.0.1', ...ext]) {
      await new Promise((res, rej) => {
        const s = net.connect({ host: ip, port: hostPort, timeout: 3000 }, () => {
          s.end();
          res();
        });
        s.on('error', rej);
        s.on('timeout', () => rej(new Error(`host control connect ${ip}:${hostPort} timed out`)));
      });
    }
    return await fn(targets);
  } finally {
    await new Promise((res) => server.close(res));
  }
}

// ---- verdicts shared by the Python and JavaScript probes --------------------
// Each probe reports failures by errno name (ENOENT, EACCES, ...) in both
// languages, so one verdict serves both suites.

/** What the network probe reports in both languages: connect results per
 * "host:port", udp, and the interfaces that have addresses. */
export function assertNoNetwork(rep, targets) {
  const connected = Object.entries(rep.connect).filter(([, v]) => v === 'CONNECTED');
  assert.deepEqual(connected, [], `no connection from the sandbox succeeds: ${show(rep)}`);
  assert.equal(Object.keys(rep.connect).length, targets.length, 'every target tried');
  assert.notEqual(rep.udp, 'SENT', `UDP to an outside address fails: ${rep.udp}`);
  assert.deepEqual(rep.ifaces, ['lo'], 'only the loopback interface has addresses');
}

/** Host paths a sandbox must not see: accounts, keys, the state folder, TLS. */
export function hostSecretPaths() {
  return [
    '/etc/shadow',
    '/etc/gshadow',
    '/etc/sudoers',
    '/root/.ssh',
    '/root/.bashrc',
    '/root/.profile',
    '/root/.npmrc',
    '/etc/ssl/private',
    '/etc/ssh',
    HOST_STATE_GUESS,
    ...['tokens', 'endpoint.env', 'sessions', 'runsc', 'npm'].map((n) => path.join(HOST_STATE_GUESS, n)),
    TLS_DIR,
    ...['server.key', 'ca.key', 'ca.pem', 'server.pem'].map((n) => path.join(TLS_DIR, n)),
  ];
}

/** The secrets probe reports {paths: {path: errno or EXISTS}, root, home
 * (listings or errno), passwd, group (the files' text)}. */
export function assertNoHostSecrets(rep) {
  const found = Object.entries(rep.paths).filter(([, v]) => v !== 'ENOENT');
  assert.deepEqual(found, [], `none of the host's secret paths exists inside: ${show(rep.paths)}`);
  for (const d of ['root', 'home']) {
    assert.ok(
      rep[d] === 'ENOENT' || rep[d] === 'EACCES' || (Array.isArray(rep[d]) && rep[d].length === 0),
      `/${d} inside is absent or empty, not the host's: ${show(rep[d])}`,
    );
  }
  const hostUsers = fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((l) => l.split(':')[0])
    .filter((n) => n && !['root', 'nobody', 'sandbox'].includes(n));
  const users = rep.passwd.split('\n').map((l) => l.split(':')[0]).filter(Boolean);
  const leaked = users.filter((u) => hostUsers.includes(u));
  assert.deepEqual(leaked, [], `the sandbox's /etc/passwd is generated, without host accounts: ${JSON.stringify(rep.passwd)}`);
  assert.ok(!rep.passwd.includes(MCP_TOKEN) && !rep.group.includes(MCP_TOKEN), 'no token in passwd/group');
}

/** Paths where session B might find the file `name` of session sidA. */
export function crossSessionGuesses(name, sidA) {
  return [
    `/work/${name}`,
    `/work/../${name}`,
    `/work/../../${name}`,
    `/tmp/${name}`,
    `/dev/shm/${name}`,
    path.join(HOST_STATE_GUESS, 'sessions', sidA, 'work', name),
    path.join('/sessions', sidA, 'work', name),
    path.join('/work', '..', 'sessions', sidA, 'work', name),
    path.join('/proc/1/root/work', name),
    path.join('/proc/1/cwd', name),
  ];
}

/** B's probe reports {guesses: {path: "READ:..." or errno}, glob: [paths
 * found by /proc and root globs], found: [files holding the secret],
 * parent: listing of /work/..}; sc is the whole result. */
export function assertCrossSessionSealed(sc, rep, secret, sidA) {
  assert.ok(!sc.stdout.includes(secret), `session B never read A's secret: ${show(rep)}`);
  const opened = Object.entries(rep.guesses).filter(([, v]) => v.startsWith('READ:'));
  assert.deepEqual(opened, [], `no guessed path opens: ${show(rep.guesses)}`);
  assert.deepEqual(rep.glob, [], 'no /proc or root glob finds the file');
  assert.deepEqual(rep.found, [], 'no file under /work, /tmp, /dev/shm holds the secret');
  assert.ok(!rep.parent.includes('sessions') && !rep.parent.includes(sidA), `/work/.. is the sandbox root: ${show(rep.parent)}`);
}

/** The environment probe reports {env: the call's environment, blobs:
 * {path: "DATA:<base64>" or errno} for /proc/self/environ, /proc/1/environ
 * and the environ of every process it can see}. */
export function assertCleanEnvironment(rep) {
  const env = rep.env;
  const mcpKeys = Object.keys(env).filter((k) => /^MCP_|^NODE_|^npm_|^SUDO_|^SSH_/.test(k));
  assert.deepEqual(mcpKeys, [], `no MCP_*, NODE_*, npm_*, SUDO_*, SSH_* variables inside: ${show(env)}`);
  // Every host variable that is not one of the sandbox's own names is absent.
  const own = new Set(['PATH', 'HOME', 'LANG', 'TMPDIR', 'MPLBACKEND', 'PYTHONDONTWRITEBYTECODE', 'LD_PRELOAD', 'LC_CTYPE']);
  const hostOnly = Object.keys(process.env).filter((k) => !own.has(k) && k in env);
  assert.deepEqual(hostOnly, [], `host variables visible inside: ${show(hostOnly)}`);
  const pathDirs = (env.PATH || '').split(':');
  assert.ok(
    pathDirs.every((d) => ['/usr/local/bin', '/usr/bin', '/bin', '/usr/local/sbin', '/usr/sbin', '/sbin'].includes(d)),
    `PATH is the sandbox's own, not the host's: ${env.PATH}`,
  );
  assert.notEqual(env.HOME, process.env.HOME, `HOME is not the host's: ${env.HOME}`);
  for (const [k, v] of Object.entries(env)) {
    assert.ok(!v.includes(MCP_TOKEN), `the token is not in ${k}`);
    if (STATE_DIR) assert.ok(!v.includes(STATE_DIR), `the state folder is not in ${k}`);
  }
  // The token in no readable environ/cmdline of any process inside.
  for (const [p, blob] of Object.entries(rep.blobs)) {
    if (!blob.startsWith('DATA:')) continue;
    const text = Buffer.from(blob.slice(5), 'base64').toString('latin1');
    assert.ok(!text.includes(MCP_TOKEN), `the bearer token appears in ${p}`);
    assert.ok(!text.includes('MCP_TOKEN'), `MCP_TOKEN appears in ${p}`);
  }
  assert.ok(rep.blobs['/proc/self/environ'].startsWith('DATA:'), `/proc/self/environ is readable: ${rep.blobs['/proc/self/environ']}`);
  const p1 = rep.blobs['/proc/1/environ'];
  const p1text = p1.startsWith('DATA:') ? JSON.stringify(Buffer.from(p1.slice(5), 'base64').toString('latin1')) : p1;
  // gVisor lets a call read /proc/1/environ (Linux would deny it: the
  // executor is root), so the executor runs with an empty environment;
  // gVisor itself adds HOME=/root.  Denied or that: nothing else.
  assert.ok(p1 === 'EACCES' || p1text === JSON.stringify('HOME=/root\0'),
    `/proc/1/environ (the executor) is denied or holds only gVisor's HOME=/root; it read ${p1text}`);
}

/** Many processes over the memory limit: the cgroup backstop killed the
 * whole sandbox, the call says so and came back promptly. */
export function assertBackstopKill(r, sc, ms) {
  assert.equal(sc.exit_code, 137, `exit_code 137: ${show(sc)}`);
  assert.equal(sc.memory_exceeded, true, `memory_exceeded: ${show(sc)}`);
  assert.equal(sc.sandbox_restarted, true, `sandbox_restarted: ${show(sc)}`);
  assert.equal(r.isError, true, 'isError');
  assert.doesNotMatch(sc.stdout, /survived/, 'the bomb did not complete');
  assert.ok(ms < 60000, `returned in ${ms} ms`);
}

/** A CPU loop with timeout_seconds 3: the wall clock, not the CPU limit,
 * ended it, within 1.5 s of its limit. */
export function assertWallClockStop(r, sc, ms) {
  assert.equal(sc.timed_out, true, `timed_out: ${show(sc)}`);
  assert.equal(r.isError, true, 'isError');
  assert.equal(sc.cpu_exceeded, false, 'the wall clock, not the CPU limit, ended it');
  assert.ok(sc.duration_ms >= 2900, `duration_ms ${sc.duration_ms} >= ~3000`);
  assert.ok(ms < 4500, `the call returned ${ms} ms after it started (limit 3 s)`);
}

/** 300 MiB of x to stdout and 3 MiB of e to stderr: each stream holds
 * exactly its first 1 MiB, and the code ran to its end. */
export function assertOutputCapped(r, sc, ms) {
  assert.equal(sc.truncated, true, 'truncated');
  assert.equal(Buffer.byteLength(sc.stdout, 'utf8'), 1 << 20, 'stdout is exactly 1 MiB');
  assert.ok(/^x*$/.test(sc.stdout), 'stdout is the first 1 MiB of what was written');
  assert.equal(Buffer.byteLength(sc.stderr, 'utf8'), 1 << 20, 'stderr (3 MiB written) is exactly 1 MiB');
  assert.ok(/^e*$/.test(sc.stderr), 'stderr is the first 1 MiB of what was written');
  assert.equal(sc.timed_out, false, 'not timed out');
  assert.equal(r.isError ?? false, false, 'not an error');
  assert.ok(ms < 30000, `returned in ${ms} ms`);
}

/** /proc/self/status of a call, as {field: value}: no capability at all. */
export function assertNoCapabilities(status) {
  for (const k of ['CapEff', 'CapPrm', 'CapInh']) {
    assert.ok(k in status, `${k} in /proc/self/status: ${show(status)}`);
    assert.equal(BigInt('0x' + status[k]), 0n, `${k} is 0: ${status[k]}`);
  }
  // gVisor's /proc/self/status has no CapAmb line; check it when present.
  if ('CapAmb' in status) assert.equal(BigInt('0x' + status.CapAmb), 0n, `CapAmb is 0: ${status.CapAmb}`);
  if ('NoNewPrivs' in status) assert.equal(status.NoNewPrivs, '1', 'no_new_privs is set');
}
