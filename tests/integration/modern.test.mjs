// The 2026-07-28 era with the TypeScript SDK 2.x client
// (@modelcontextprotocol/client 2.4.0) through nginx: its three negotiation
// modes, a sandbox handle's round trip, progress, and cancellation by
// closing the stream. (A handle of another token: faults.test.mjs, whose
// stack has two tokens; tests/unit/test-mcp-modern.c too.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TEST_TIMEOUT_MS, SESSION_ID, connectClient2 as connect2 } from './lib/common.mjs';

const opts = { timeout: TEST_TIMEOUT_MS };
const PIN = { pin: '2026-07-28' };

const py = (client, args, options = {}) =>
  client.callTool({ name: 'execute_python', arguments: args }, { timeout: TEST_TIMEOUT_MS, ...options });

for (const [mode, era] of [
  ['legacy', 'legacy'],
  ['auto', 'modern'],
  [PIN, 'modern'],
]) {
  test(`client 2.4.0, mode ${JSON.stringify(mode)}: the ${era} era, tools listed and a call runs`, opts, async () => {
    const c = await connect2(mode);
    try {
      assert.equal(c.getProtocolEra(), era);
      const names = (await c.listTools()).tools.map((t) => t.name);
      assert.deepEqual(names.slice(0, 1), ['execute_python']);
      assert.equal(names.includes('close_sandbox'), era === 'modern', `close_sandbox only in the modern era: ${names}`);
      const r = await py(c, { code: 'print(6 * 7)' });
      assert.equal(r.structuredContent.stdout, '42\n');
      if (era === 'modern') {
        assert.match(r.structuredContent.sandbox, SESSION_ID, 'a new sandbox, named in the result');
        assert.equal(c.getNegotiatedProtocolVersion(), '2026-07-28');
        const d = c.getDiscoverResult();
        assert.equal(d.supportedVersions[0], '2026-07-28');
        await c.callTool({ name: 'close_sandbox', arguments: { sandbox: r.structuredContent.sandbox } });
      }
    } finally {
      await c.close();
    }
  });
}

test('client 2.4.0: a sandbox handle round trip (create, write, read back in a second call, read as a resource, close)', opts, async () => {
  const c = await connect2('auto');
  try {
    const first = await py(c, { code: 'open("notes.txt", "w").write("kept between calls")\nprint("written")' });
    const handle = first.structuredContent.sandbox;
    assert.match(handle, SESSION_ID);
    assert.ok(
      first.content.some((b) => b.type === 'text' && b.text.includes(handle)),
      'the text names the handle',
    );
    const second = await py(c, { code: 'print(open("notes.txt").read())', sandbox: handle });
    assert.equal(second.structuredContent.stdout, 'kept between calls\n');
    assert.equal(second.structuredContent.sandbox, handle);
    const other = await py(c, { code: 'import os; print(os.path.exists("notes.txt"))' });
    assert.equal(other.structuredContent.stdout, 'False\n', 'a call without sandbox gets a new, empty one');
    assert.notEqual(other.structuredContent.sandbox, handle);
    const read = await c.readResource({ uri: `sandbox://${handle}/notes.txt` });
    assert.equal(read.contents[0].text, 'kept between calls');
    const closed = await c.callTool({ name: 'close_sandbox', arguments: { sandbox: handle } });
    assert.equal(closed.structuredContent.closed, true);
    await c.callTool({ name: 'close_sandbox', arguments: { sandbox: other.structuredContent.sandbox } });
    const after = await py(c, { code: 'print(1)', sandbox: handle });
    assert.equal(after.isError, true);
    assert.match(after.content[0].text, /Omit `sandbox` to start a new one/);
  } finally {
    await c.close();
  }
});

test('client 2.4.0: progress during a call carries its output lines', opts, async () => {
  const c = await connect2(PIN);
  try {
    const seen = [];
    const r = await py(
      c,
      { code: 'import time\nfor i in range(4):\n    print("step", i, flush=True)\n    time.sleep(0.9)', timeout_seconds: 30 },
      { onprogress: (p) => seen.push(p) },
    );
    assert.equal(r.structuredContent.stdout, 'step 0\nstep 1\nstep 2\nstep 3\n');
    assert.ok(seen.length >= 2, `progress notifications: ${JSON.stringify(seen)}`);
    assert.ok(seen.some((p) => /stdout: step \d/.test(p.message ?? '')), `output lines in messages: ${JSON.stringify(seen)}`);
    await c.callTool({ name: 'close_sandbox', arguments: { sandbox: r.structuredContent.sandbox } });
  } finally {
    await c.close();
  }
});

test('client 2.4.0: closing the stream cancels the call; its processes are gone within about a second', opts, async () => {
  const c = await connect2(PIN);
  try {
    const made = await py(c, { code: 'print("ready")' });
    const handle = made.structuredContent.sandbox;
    const ac = new AbortController();
    // Cancelled once its output says the child runs and its pids are
    // written (progress carries output lines), not after a fixed while: on
    // a slow machine the child may not have started yet.
    let childRuns;
    const told = new Promise((resolve) => { childRuns = resolve; });
    const running = py(
      c,
      {
        code:
          'import os, subprocess, sys, time\n' +
          'child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(90)"])\n' +
          'open("pids", "w").write(f"{os.getpid()} {child.pid}")\n' +
          'print("running", flush=True)\n' +
          'time.sleep(90)',
        sandbox: handle,
        timeout_seconds: 100,
      },
      { signal: ac.signal, onprogress: (p) => { if (/stdout: running/.test(p.message ?? '')) childRuns(); } },
    );
    let timer;
    const when = await Promise.race([
      told.then(() => 'told'),
      new Promise((r) => { timer = setTimeout(() => r('not told'), 30000); }),
    ]);
    clearTimeout(timer);
    assert.equal(when, 'told', 'the call said its child runs (a progress notification with its output line)');
    const aborted = Date.now();
    ac.abort();
    const outcome = await running.then((r) => `resolved: ${JSON.stringify(r).slice(0, 600)}`, (e) => e);
    assert.ok(outcome instanceof Error && /abort/i.test(String(outcome)), `the call was aborted: ${outcome}`);
    // The next call waits for the sandbox: it runs once the cancelled one ended.
    const check = await py(c, {
      code:
        'import os\n' +
        'gone = []\n' +
        'for p in open("pids").read().split():\n' +
        '    try:\n' +
        '        os.kill(int(p), 0); gone.append(False)\n' +
        '    except ProcessLookupError:\n' +
        '        gone.append(True)\n' +
        'print(all(gone), len(gone))',
      sandbox: handle,
    });
    const waited = Date.now() - aborted;
    assert.equal(check.structuredContent.stdout, 'True 2\n', 'the call and its child are gone');
    assert.ok(waited - check.structuredContent.duration_ms < 3000, `the sandbox was free again soon (${waited} ms)`);
    await c.callTool({ name: 'close_sandbox', arguments: { sandbox: handle } });
  } finally {
    await c.close();
  }
});
