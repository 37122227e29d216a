// Hibernation (sandbox/hibernate.h, README "Hibernation"): an idle session's
// sandbox is checkpointed to disk and its memory released; the next call
// restores it with what it had in memory; a checkpoint that cannot be
// restored gives state_lost, never a crash or a hang; a busy sandbox and a
// pre-started one never hibernate. (hibernate.mjs checks a restore across a
// restart of the whole service.)
//
// It needs a stack with a short hibernate_after (scripts/test starts one in
// run-test-hibernate/ with 2 s) and root on its host with MCP_STATE_DIR: it
// measures the session's processes and memory, corrupts images and reads
// the audit log. In-memory state is what the executor really keeps: the
// modules an earlier call imported (lib/hibernation.mjs), and the variables
// and objects of the persistent interpreters of both languages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { TEST_TIMEOUT_MS, SLACK_MS, randomToken, scrapeMetrics } from './lib/common.mjs';
import { RawSession, resultText, show } from './lib/rpc.mjs';
import { STATE_DIR, sleep, effectiveConfig, inventory, leftoversOf, sandboxIdOf } from './lib/host.mjs';
import { loadCode, LOAD_OUT, PROBE, sessionDir, image, sessionMemory, waitHibernated, auditOf } from './lib/hibernation.mjs';

if (!STATE_DIR) throw new Error('hibernate.test.mjs needs MCP_STATE_DIR (the state folder of the stack under test)');
if (process.getuid() !== 0) throw new Error('hibernate.test.mjs must run as root (it reads the stack\'s processes and files)');

const opts = { timeout: TEST_TIMEOUT_MS };
const cfg = effectiveConfig();
if (!(cfg.hibernate_after > 0 && cfg.hibernate_after <= 10))
  throw new Error(`hibernate.test.mjs needs a stack with a short hibernate_after (it has ${cfg.hibernate_after})`);
// Long enough for hibernate_after, a checkpoint of a sandbox with numpy and
// pandas (seconds on a busy machine) and the machine's slack.
const HIBERNATE_MS = cfg.hibernate_after * 1000 + 30_000 + SLACK_MS;

async function okCall(s, code, args = {}) {
  const r = await s.run(code, args);
  assert.equal(r.status, 200, `tools/call: HTTP ${r.status} ${r.body}`);
  assert.ok(!r.result.isError, `the call failed: ${show(r.result)}`);
  return r.result.structuredContent;
}

/** A session whose sandbox imported numpy and pandas and wrote kept.txt. */
async function loaded(name) {
  const s = new RawSession({ name });
  const r = await s.init();
  assert.equal(r.status, 200, `initialize: ${r.body}`);
  const secret = randomToken();
  assert.equal((await okCall(s, loadCode(secret))).stdout, LOAD_OUT);
  return { s, secret, sandboxId: sandboxIdOf(s.sid) };
}

async function hibernated(s) {
  const img = await waitHibernated(s.sid, cfg, HIBERNATE_MS);
  assert.ok(img, `the idle session hibernated within ${HIBERNATE_MS} ms`);
  return img;
}

const metric = (m, k) => m.get(k) ?? 0;

test('an idle sandbox hibernates: its memory is released (measured on the host) and the next call has its state back', opts, async () => {
  const before = await scrapeMetrics();
  const { s, secret, sandboxId } = await loaded('hibernate-state');
  const sc = await okCall(s, PROBE);
  assert.equal(sc.stdout, `True True ${secret}\n`, 'numpy and pandas are in memory before (the observable works)');
  const live = sessionMemory(s.sid, sandboxId, cfg);
  assert.ok(live.pids.length >= 3 && live.pssKiB > 10 * 1024,
    `the live session holds processes and memory: ${live.pids.length} processes, ${live.pssKiB} KiB PSS`);

  const img = await hibernated(s);
  const gone = sessionMemory(s.sid, sandboxId, cfg);
  console.log(`# live: ${live.pids.length} processes, PSS ${(live.pssKiB / 1024).toFixed(1)} MiB, cgroup ` +
    `${live.cgroupBytes === null ? 'none' : (live.cgroupBytes / 2 ** 20).toFixed(1) + ' MiB'}; hibernated after ` +
    `${img.waitedMs} ms: ${gone.pids.length} processes, PSS ${gone.pssKiB} KiB, image ${(img.bytes / 2 ** 20).toFixed(1)} MiB`);
  assert.equal(gone.pids.length, 0, 'no supervisor, sandbox or gofer of the session is left');
  assert.equal(gone.pssKiB, 0, 'so it holds no memory');
  assert.equal(gone.cgroupBytes, null, 'and its sandbox cgroup is gone');
  const inv = inventory(STATE_DIR, cfg);
  assert.ok(!inv.containers.some((c) => c.id === sandboxId), 'no runsc container of it');
  assert.ok(!inv.mounts.some((m) => m.startsWith(sessionDir(s.sid))), 'its workspace is not mounted');
  assert.ok(img.bytes > 1 << 20 && img.files.includes('checkpoint.img'), `an image on disk: ${img.bytes} bytes`);
  assert.equal(img.info.token, 'default', 'the image names its token');
  const mid = await scrapeMetrics();
  assert.ok(metric(mid, 'mcp_sessions_hibernated') >= 1, 'mcp_sessions_hibernated counts it');
  assert.ok(metric(mid, 'mcp_hibernations_total') > metric(before, 'mcp_hibernations_total'), 'mcp_hibernations_total');

  const t0 = Date.now();
  const back = await okCall(s, PROBE);
  console.log(`# the first call after the hibernation (restore and answer) took ${Date.now() - t0} ms`);
  assert.equal(back.stdout, `True True ${secret}\n`, 'numpy and pandas are still in memory, kept.txt in /work');
  assert.equal(back.state_lost, false, 'state_lost is false');
  assert.ok(!fs.existsSync(path.join(sessionDir(s.sid), 'hibernated')), 'the image is gone once restored');
  const after = await scrapeMetrics();
  assert.ok(metric(after, 'mcp_restores_total') > metric(before, 'mcp_restores_total'), 'mcp_restores_total');
  const events = auditOf(s.sid).map((l) => l.event || (l.restored ? 'call restored' : 'call'));
  const h = events.lastIndexOf('hibernated');
  assert.deepEqual(events.slice(h), ['hibernated', 'restored', 'call restored'], `the audit log says so: ${events}`);
  assert.equal((await okCall(s, PROBE)).stdout, `True True ${secret}\n`, 'and the restored sandbox goes on');
  await s.del();
});

/** tools/call of any tool; the CallToolResult's structuredContent (asserted a success). */
async function okTool(s, name, args) {
  const r = await s.rpc('tools/call', { name, arguments: args });
  assert.equal(r.status, 200, `tools/call ${name}: HTTP ${r.status} ${r.body}`);
  const result = r.json?.result;
  assert.ok(result && !result.isError, `${name} failed: ${show(r.json)}`);
  return result.structuredContent;
}
const py = (s, code) => okTool(s, 'execute_python', { code, persistent: true });
const js = (s, code) => okTool(s, 'execute_javascript', { code, persistent: true });

test('persistent interpreters of both languages live through a hibernation: the counters, a DataFrame, state_lost false', opts, async () => {
  const s = new RawSession({ name: 'hibernate-persistent' });
  assert.equal((await s.init()).status, 200);
  await py(s, "import numpy, pandas\ndf = pandas.DataFrame({'a': numpy.arange(1000), 'b': numpy.arange(1000) % 7})\nx = 1");
  await js(s, 'let counter = 1;');
  const img = await hibernated(s);
  assert.ok(img.bytes > 1 << 20, `an image on disk: ${img.bytes} bytes`);
  const x = await py(s, 'x += 1\nx');
  assert.equal(x.value, '2', `the Python counter: ${show(x)}`);
  assert.equal(x.state_lost, false);
  assert.equal((await py(s, "int(df.groupby('b')['a'].sum().sum())")).value, '499500', 'the DataFrame is still there');
  const c = await js(s, 'counter += 1; counter');
  assert.equal(c.value, '2', `the JavaScript counter: ${show(c)}`);
  assert.equal(c.state_lost, false);
  assert.ok(auditOf(s.sid).some((l) => l.event === 'restored'), 'the sandbox was restored, not booted');
  // And again: the restored interpreters hibernate and come back once more.
  await hibernated(s);
  assert.equal((await py(s, 'x += 1\nx')).value, '3', 'a second hibernation keeps it too');
  await s.del();
});

test('a sandbox with a background run does not hibernate while it runs; its idle time counts from the run\'s end', opts, async () => {
  const s = new RawSession({ name: 'hibernate-run' });
  assert.equal((await s.init()).status, 200);
  const hold = cfg.hibernate_after * 2 + 4;
  const started = await okTool(s, 'execute_python', { code: `import time\ntime.sleep(${hold})\nprint('ran')`, background: true });
  assert.equal(started.status, 'running', show(started));
  const dir = sessionDir(s.sid);
  const end = Date.now() + hold * 1000 - 500;
  while (Date.now() < end) {
    for (const n of ['hibernate.new', 'hibernated'])
      assert.ok(!fs.existsSync(path.join(dir, n)), `no ${n} while the run is active`);
    await sleep(100);
  }
  const done = await okTool(s, 'get_run', { run: started.run, wait_seconds: 30 });
  assert.equal(done.status, 'finished', show(done));
  assert.equal(done.stdout, 'ran\n');
  await hibernated(s); // once the run ended it may
  assert.equal((await okTool(s, 'execute_python', { code: 'print(1)' })).stdout, '1\n');
  await s.del();
});

for (const damage of ['flipped bytes', 'truncated']) {
  test(`a checkpoint with ${damage} gives state_lost with the files kept, never a crash or a hang`, opts, async () => {
    const before = await scrapeMetrics();
    const { s, secret } = await loaded(`hibernate-${damage.replace(' ', '-')}`);
    const img = await hibernated(s);
    const file = path.join(img.dir, 'checkpoint.img');
    const size = fs.statSync(file).size;
    if (damage === 'truncated') {
      fs.truncateSync(file, Math.floor(size / 3));
    } else {
      const fd = fs.openSync(file, 'r+');
      const buf = Buffer.alloc(65536);
      const at = Math.floor(size / 2);
      fs.readSync(fd, buf, 0, buf.length, at);
      for (let i = 0; i < buf.length; i++) buf[i] ^= 0xa5;
      fs.writeSync(fd, buf, 0, buf.length, at);
      fs.closeSync(fd);
    }
    const t0 = Date.now();
    const r = await s.run(PROBE);
    const ms = Date.now() - t0;
    assert.equal(r.status, 200, `tools/call: HTTP ${r.status} ${r.body}`);
    const sc = r.result.structuredContent;
    assert.equal(sc.exit_code, 0, show(r.result));
    assert.equal(r.result.isError, false, 'the call itself succeeded');
    assert.equal(sc.stdout, `False False ${secret}\n`, 'a new sandbox (nothing imported) with the same /work');
    assert.equal(sc.state_lost, true, 'state_lost says the memory is gone');
    assert.match(resultText(r.result), /could not be restored/, 'and a sentence says so');
    assert.ok(ms < 60_000 + SLACK_MS, `answered in ${ms} ms, not hung`);
    const next = await okCall(s, PROBE);
    assert.equal(next.state_lost, false, 'said once: the next call has state_lost false');
    assert.equal(next.stdout, `False False ${secret}\n`, 'in the same new sandbox');
    const after = await scrapeMetrics();
    assert.ok(metric(after, 'mcp_restore_failures_total') > metric(before, 'mcp_restore_failures_total'),
      'mcp_restore_failures_total');
    assert.ok(auditOf(s.sid).some((l) => l.event === 'restore_failed'), 'an audit line says the restore failed');
    await s.del();
  });
}

test('a corrupted checkpoint under a persistent interpreter: the next persistent call says state_lost, a new interpreter runs it', opts, async () => {
  const s = new RawSession({ name: 'hibernate-persistent-lost' });
  assert.equal((await s.init()).status, 200);
  await py(s, "x = 41\nopen('kept.txt', 'w').write('still here')");
  const img = await hibernated(s);
  const file = path.join(img.dir, 'checkpoint.img');
  fs.truncateSync(file, Math.floor(fs.statSync(file).size / 2));
  const r = await s.run("print(open('kept.txt').read(), 'x' in globals())\nx = 1\nx", { persistent: true });
  assert.equal(r.status, 200, r.body);
  const sc = r.result.structuredContent;
  assert.equal(r.result.isError, false, show(r.result));
  assert.equal(sc.stdout, 'still here False\n', 'a new interpreter, the same /work');
  assert.equal(sc.state_lost, true, `state_lost: ${show(sc)}`);
  assert.equal(sc.value, '1');
  assert.match(resultText(r.result), /state \(variables, imports\) is lost/, 'the sentence of a persistent call');
  const next = await py(s, 'x += 1\nx');
  assert.equal(next.value, '2', 'the new interpreter keeps its own state');
  assert.equal(next.state_lost, false, 'said once');
  await s.del();
});

test('a busy sandbox is never checkpointed, and calls in a row keep it awake', opts, async () => {
  const { s, secret } = await loaded('hibernate-busy');
  const dir = sessionDir(s.sid);
  const seen = [];
  let done = false;
  const watch = (async () => {
    while (!done) {
      for (const n of ['hibernate.new', 'hibernated']) if (fs.existsSync(path.join(dir, n))) seen.push(n);
      await sleep(50);
    }
  })();
  const hold = (cfg.hibernate_after + 3) * 1000;
  const sc = await okCall(s, `import time\ntime.sleep(${hold / 1000})\n${PROBE}`, { timeout_seconds: 60 });
  for (let i = 0; i < 3; i++) {
    await sleep(cfg.hibernate_after * 250);
    assert.equal((await okCall(s, PROBE)).stdout, `True True ${secret}\n`);
  }
  done = true;
  await watch;
  assert.equal(sc.stdout, `True True ${secret}\n`, 'the long call ran in the same sandbox');
  assert.deepEqual([...new Set(seen)], [], 'no image was written while a call ran or between calls closer than hibernate_after');
  await s.del();
});

test('a call that comes while the image is being written waits for it and finds its state', opts, async () => {
  const { s, secret } = await loaded('hibernate-race');
  const dir = sessionDir(s.sid);
  const deadline = Date.now() + HIBERNATE_MS;
  let caught = false;
  while (Date.now() < deadline) {
    if (fs.existsSync(path.join(dir, 'hibernate.new'))) {
      caught = true;
      break;
    }
    if (fs.existsSync(path.join(dir, 'hibernated'))) break;
    await sleep(10);
  }
  const sc = await okCall(s, PROBE);
  console.log(`# the call came ${caught ? 'while the checkpoint was being written' : 'after the image was published'}`);
  assert.equal(sc.stdout, `True True ${secret}\n`, 'the state came back');
  assert.equal(sc.state_lost, false);
  await s.del();
});

test('resources/read of a hibernated session restores it and reads the file', opts, async () => {
  const { s, secret } = await loaded('hibernate-resources');
  await hibernated(s);
  const r = await s.rpc('resources/read', { uri: 'file:///work/kept.txt' });
  assert.equal(r.status, 200, r.body);
  assert.equal(r.json?.result?.contents?.[0]?.text, secret, `the file's text: ${show(r.json)}`);
  assert.ok(!fs.existsSync(path.join(sessionDir(s.sid), 'hibernated')), 'the sandbox was restored to read it');
  assert.equal((await okCall(s, PROBE)).stdout, `True True ${secret}\n`, 'with its state');
  await s.del();
});

test('a hibernated session ends like any other: DELETE leaves nothing, image included', opts, async () => {
  const { s, sandboxId } = await loaded('hibernate-delete');
  await hibernated(s);
  const del = await s.del();
  assert.ok(del.status === 204 || del.status === 200, `DELETE: HTTP ${del.status}`);
  let left;
  const deadline = Date.now() + 15_000;
  do {
    left = leftoversOf(s.sid, [sandboxId], cfg);
    if (left.length) await sleep(250);
  } while (left.length && Date.now() < deadline);
  assert.deepEqual(left, [], 'nothing of the session is left');
});

test('pre-started sandboxes never hibernate', opts, async () => {
  const ready = () => inventory(STATE_DIR, cfg).folders.pool.filter((f) => /^[0-9a-f]{32}$/.test(f.name));
  const deadline = Date.now() + 30_000 + SLACK_MS;
  while (ready().length < cfg.pool_size && Date.now() < deadline) await sleep(250);
  const first = ready().map((f) => f.name);
  assert.equal(first.length, cfg.pool_size, `the pool is full: ${first}`);
  // Ready and idle for well over hibernate_after, unclaimed.
  await sleep(cfg.hibernate_after * 2000 + 2000);
  const inv = inventory(STATE_DIR, cfg);
  const pool = inv.folders.pool.filter((f) => first.includes(f.name));
  assert.equal(pool.length, cfg.pool_size, `the same sandboxes are still in the pool: ${pool.map((f) => f.name)}`);
  for (const f of pool) {
    assert.ok(inv.supervisors.some((x) => x.folder === f.path), `${f.name} has its supervisor`);
    assert.ok(!fs.existsSync(path.join(f.path, 'hibernated')), `${f.name} has no image`);
  }
  const m = await scrapeMetrics();
  assert.equal(metric(m, 'mcp_sandboxes_ready'), cfg.pool_size, 'mcp_sandboxes_ready');
});
