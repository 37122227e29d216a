// Persistent interpreters (issue 19, points 1-4): `persistent` runs the code
// in the sandbox's long-lived interpreter of its language, like a notebook
// cell; `reset` ends it. TypeScript SDK 1.32.2 against the real stack.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TEST_TIMEOUT_MS, SLACK_MS, connectClient, connectClient2, closeClient } from './lib/common.mjs';
import { STATE_DIR, show, checkResult } from './lib/hostile.mjs';
import { otherToken, effectiveConfig, sessionProcesses, alive, sleep } from './lib/host.mjs';

const opts = { timeout: TEST_TIMEOUT_MS };
const TOOL = { python: 'execute_python', javascript: 'execute_javascript' };

async function run(c, lang, code, extra = {}) {
  const t0 = Date.now();
  const r = await c.client.callTool({ name: TOOL[lang], arguments: { code, persistent: true, ...extra } }, undefined,
    { timeout: TEST_TIMEOUT_MS });
  return { r, sc: checkResult(r), ms: Date.now() - t0 };
}

async function withSession(name, fn) {
  const c = await connectClient(`persistent-${name}`);
  try {
    return await fn(c);
  } finally {
    await closeClient(c);
  }
}

const COUNTER = {
  python: ['x = 1', 'x += 1; x'],
  javascript: ['let x = 1', 'x += 1; x'],
};

test('tools/list: both tools explain the two modes (a fresh process by default; persistent: true, a notebook cell) and take persistent and reset', opts, async () => {
  await withSession('tools', async (c) => {
    const { tools } = await c.client.listTools();
    for (const name of Object.values(TOOL)) {
      const tool = tools.find((x) => x.name === name);
      assert.ok(tool, `${name} is listed`);
      assert.match(tool.description, /By default each call is a fresh process/, `${name}: the default mode: ${tool.description}`);
      assert.match(tool.description, /With persistent: true [^.]*notebook cell[^.]*long-lived/, `${name}: the persistent mode: ${tool.description}`);
      for (const arg of ['persistent', 'reset']) assert.equal(tool.inputSchema.properties[arg]?.type, 'boolean', `${name}.${arg}`);
      assert.match(tool.inputSchema.properties.persistent.description, /starts no new process[^.]*faster/,
        `${name}.persistent says it is the fast way for many small steps`);
      for (const field of ['value', 'state_lost']) assert.ok(tool.outputSchema.properties[field], `${name} outputSchema.${field}`);
    }
  });
});

for (const lang of ['python', 'javascript']) {
  test(`${lang}: the counter example: x = 1, then x += 1; x answers 2 (value in structuredContent and in the text)`, opts, async () => {
    await withSession(`counter-${lang}`, async (c) => {
      const first = await run(c, lang, COUNTER[lang][0]);
      assert.equal(first.sc.exit_code, 0, show(first.sc));
      assert.equal(first.sc.state_lost, false);
      const second = await run(c, lang, COUNTER[lang][1]);
      assert.equal(second.sc.value, '2', show(second.sc));
      assert.ok(second.r.content.some((b) => b.type === 'text' && b.text === 'Out: 2'), `the value is in the text: ${show(second.r)}`);
      const third = await run(c, lang, COUNTER[lang][1]);
      assert.equal(third.sc.value, '3', show(third.sc));
    });
  });

  test(`${lang}: a fresh-process call beside the interpreter sees none of its state, and leaves it as it was`, opts, async () => {
    await withSession(`fresh-${lang}`, async (c) => {
      await run(c, lang, COUNTER[lang][0]);
      const probe = lang === 'python' ? 'print("x" in globals())' : 'console.log(typeof x)';
      const fresh = await c.client.callTool({ name: TOOL[lang], arguments: { code: probe } });
      assert.equal(fresh.structuredContent.stdout.trim(), lang === 'python' ? 'False' : 'undefined', show(fresh));
      assert.equal(fresh.structuredContent.value, undefined, 'a fresh call has no value');
      const again = await run(c, lang, COUNTER[lang][1]);
      assert.equal(again.sc.value, '2', show(again.sc));
    });
  });

  test(`${lang}: reset ends the interpreter: its state is gone for the next persistent call`, opts, async () => {
    await withSession(`reset-${lang}`, async (c) => {
      await run(c, lang, COUNTER[lang][0]);
      const probe = lang === 'python' ? '"x" in globals()' : 'typeof x';
      const after = await run(c, lang, probe, { reset: true });
      assert.equal(after.sc.value, lang === 'python' ? 'False' : "'undefined'", show(after.sc));
    });
  });
}

test('python: a DataFrame built in one call is there in the next', opts, async () => {
  await withSession('dataframe', async (c) => {
    const a = await run(c, 'python', 'import pandas as pd\ndf = pd.DataFrame({"a": range(1000), "b": [i % 7 for i in range(1000)]})\nlen(df)');
    assert.equal(a.sc.value, '1000', show(a.sc));
    const b = await run(c, 'python', 'df.groupby("b")["a"].sum().loc[3]');
    assert.equal(b.sc.value, String([...Array(1000).keys()].filter((i) => i % 7 === 3).reduce((x, y) => x + y)), show(b.sc));
    const d = await run(c, 'python', 'df.head(2)');
    assert.match(d.sc.value, /^\s+a\s+b\n0\s+0\s+0\n1\s+1\s+1$/, `the value is the DataFrame's repr: ${show(d.sc)}`);
  });
});

test('python: a matplotlib figure left open comes back as an image, and is closed', opts, async () => {
  await withSession('figure', async (c) => {
    const { r, sc } = await run(c, 'python', 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.title("open")');
    assert.equal(sc.exit_code, 0, show(sc));
    const images = r.content.filter((b) => b.type === 'image');
    assert.equal(images.length, 1, `one image: ${show(r.content.map((b) => b.type))}`);
    assert.equal(images[0].mimeType, 'image/png');
    assert.equal(Buffer.from(images[0].data, 'base64').subarray(1, 4).toString(), 'PNG');
    const after = await run(c, 'python', 'len(plt.get_fignums())');
    assert.equal(after.sc.value, '0', 'the figure was closed after it was returned');
    assert.equal(after.r.content.filter((b) => b.type === 'image').length, 0, 'no image without an open figure');
  });
});

test('javascript: cells are ES modules: static imports and top-level await declarations persist', opts, async () => {
  await withSession('esm', async (c) => {
    const a = await run(c, 'javascript', "import os from 'node:os';\nimport { join } from 'node:path';\nconst { sep } = await import('node:path');\nconst n = await new Promise((r) => setTimeout(() => r(41), 10));\nfunction inc(v) { return v + 1; }\nclass K { get v() { return inc(n); } }\nimport.meta.url.startsWith('file:///work/')");
    assert.equal(a.sc.value, 'true', show(a.sc));
    const b = await run(c, 'javascript', "[os.platform(), join('a', 'b'), sep, new K().v].join(' ')");
    assert.equal(b.sc.value, "'linux a/b / 42'", show(b.sc));
    const again = await run(c, 'javascript', 'const n = 5; n');
    assert.equal(again.sc.value, '5', `a later cell may declare a name again, as in a notebook: ${show(again.sc)}`);
  });
});

test('a timeout interrupts the cell and keeps the state (KeyboardInterrupt; a synchronous JavaScript loop)', opts, async () => {
  await withSession('interrupt', async (c) => {
    for (const [lang, code, trace] of [
      ['python', 'import time\nprint("before", flush=True)\ntime.sleep(100)', /KeyboardInterrupt/],
      ['javascript', 'console.log("before");\nfor (;;) {}', /interrupted/],
    ]) {
      await run(c, lang, COUNTER[lang][0]);
      const { r, sc, ms } = await run(c, lang, code, { timeout_seconds: 2 });
      assert.equal(sc.timed_out, true, show(sc));
      assert.equal(r.isError, true);
      assert.equal(sc.state_lost, false, `the interpreter came back: ${show(sc)}`);
      assert.equal(sc.stdout, 'before\n');
      assert.match(sc.stderr, trace);
      assert.ok(ms < 2000 + 2000 + SLACK_MS, `returned in ${ms} ms`);
      const after = await run(c, lang, COUNTER[lang][1]);
      assert.equal(after.sc.value, '2', `the state survived the interrupt: ${show(after.sc)}`);
    }
  });
});

test('a timeout that has to kill the interpreter says so (state_lost), and the next call starts a new one', opts, async () => {
  await withSession('kill', async (c) => {
    for (const [lang, code, probe, gone] of [
      ['python', 'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass', '"x" in globals()', 'False'],
      ['javascript', 'await new Promise(() => {})', 'typeof x', "'undefined'"],
    ]) {
      await run(c, lang, COUNTER[lang][0]);
      const { r, sc, ms } = await run(c, lang, code, { timeout_seconds: 2 });
      assert.equal(sc.timed_out, true, show(sc));
      assert.equal(sc.state_lost, true, `the interpreter was killed: ${show(sc)}`);
      assert.equal(r.isError, true);
      assert.ok(r.content.some((b) => b.type === 'text' && /state .* is lost/.test(b.text)), `a note says the state is lost: ${show(r.content)}`);
      assert.ok(ms < 2000 + 2000 + 2000 + SLACK_MS, `returned in ${ms} ms`);
      const after = await run(c, lang, probe);
      assert.equal(after.sc.value, gone, `a new interpreter: ${show(after.sc)}`);
      assert.equal(after.sc.state_lost, false, 'the loss was reported once');
    }
  });
});

test('memory exhaustion ends the interpreter cleanly: memory_exceeded, state_lost, the next call works', opts, async () => {
  await withSession('memory', async (c) => {
    await run(c, 'python', 'x = 1');
    const { sc } = await run(c, 'python', 'keep = []\nwhile True: keep.append(bytearray(16 << 20))', { timeout_seconds: 60 });
    assert.equal(sc.memory_exceeded, true, show(sc));
    assert.equal(sc.state_lost, true, show(sc));
    assert.equal(sc.sandbox_restarted, false, 'one interpreter within its limit does not cost the sandbox');
    assert.match(sc.stderr, /MemoryError/);
    const after = await run(c, 'python', '"x" in globals(), 6 * 7');
    assert.equal(after.sc.value, '(False, 42)', show(after.sc));
  });
});

test('an interpreter that exits during its cell: what it wrote before comes back (stdout, stderr), state_lost', opts, async () => {
  await withSession('exit', async (c) => {
    // The executor may see the interpreter's end before it has read the
    // pipes: they still hold its last words. Three times, as that order
    // varies.
    for (let i = 0; i < 3; i++) {
      const code = `import os, sys\nx = ${i}\nprint("out ${i}")\nsys.stderr.write("bye ${i}\\n")\nsys.stdout.flush()\nsys.stderr.flush()\nos._exit(3)\n`;
      const { sc } = await run(c, 'python', code);
      assert.equal(sc.exit_code, 3, show(sc));
      assert.equal(sc.stdout, `out ${i}\n`, show(sc));
      assert.equal(sc.stderr, `bye ${i}\n`, `stderr written before the exit is kept: ${show(sc)}`);
      assert.equal(sc.state_lost, true, show(sc));
    }
  });
});

test('processes a cell starts end with it; their Popen objects learn how, zombies are reaped; a forked child ends with the cell', opts, async () => {
  await withSession('children', async (c) => {
    // Three rounds: the executor kills the cell's processes while the
    // interpreter's reaper may be running, and the status must stay its
    // Popen's (a reaper that took it would leave the Popen saying 0).
    for (let round = 0; round < 3; round++) {
      const a = await run(c, 'python', 'import subprocess, os\np = subprocess.Popen(["sleep", "1000"])\nif os.fork() == 0:\n    print("child", flush=True)\nelse:\n    os.wait()\nprint("end", os.getpid(), flush=True)');
      const lines = a.sc.stdout.trim().split('\n');
      assert.equal(lines[0], 'child', show(a.sc));
      assert.equal(lines.length, 3, `the child ran the rest of the cell, then ended (no second cell loop): ${show(a.sc)}`);
      const b = await run(c, 'python', 'import os\nzombies = [l for pid in os.listdir("/proc") if pid.isdigit() for l in open("/proc/%s/status" % pid) if l.startswith("State:") and "Z" in l]\n(p.poll(), len(zombies), sorted(int(x) for x in os.listdir("/proc") if x.isdigit()) == sorted([1, os.getpid()]))');
      assert.equal(b.sc.value, '(-9, 0, True)', `round ${round}: Popen learnt SIGKILL, no zombie, only PID 1 and the interpreter: ${show(b.sc)}`);
    }
  });
});

// The sandbox dies between calls (here: killed from the host): the
// interpreters die with it, and the supervisor remembers which languages
// had one, so that the next persistent call of each says its state was lost
// (once), whatever the new sandbox's executor knows.
test('a sandbox killed under idle interpreters: the next persistent call of each language says state_lost, once', opts, async (t) => {
  if (!STATE_DIR) return t.skip("needs MCP_STATE_DIR (root on the stack's host)");
  await withSession('killed', async (c) => {
    for (const lang of ['python', 'javascript']) await run(c, lang, COUNTER[lang][0]);
    const { sandbox } = sessionProcesses(c.transport.sessionId, effectiveConfig());
    assert.ok(sandbox, 'the session has a sandbox process');
    process.kill(sandbox.pid, 'SIGKILL');
    for (const t0 = Date.now(); alive(sandbox.pid) && Date.now() - t0 < 10000;) await sleep(100);
    const fresh = await c.client.callTool({ name: 'execute_python', arguments: { code: 'print("fresh")' } });
    assert.equal(fresh.structuredContent.stdout, 'fresh\n', `a fresh call runs in the new sandbox: ${show(fresh)}`);
    for (const [lang, probe, gone] of [['python', '"x" in globals()', 'False'], ['javascript', 'typeof x', "'undefined'"]]) {
      const after = await run(c, lang, probe);
      assert.equal(after.sc.value, gone, `${lang}: a new interpreter: ${show(after.sc)}`);
      assert.equal(after.sc.state_lost, true, `${lang}: the loss is reported: ${show(after.sc)}`);
      assert.ok(after.r.content.some((b) => b.type === 'text' && /state .* is lost/.test(b.text)), show(after.r.content));
      const again = await run(c, lang, COUNTER[lang][0]);
      assert.equal(again.sc.state_lost, false, `${lang}: once: ${show(again.sc)}`);
    }
  });
});

test('state is never visible to another session, nor to another token', opts, async () => {
  await withSession('owner', async (c) => {
    await run(c, 'python', 'secret_value = 12345');
    await withSession('other-session', async (d) => {
      const o = await run(d, 'python', '"secret_value" in globals()');
      assert.equal(o.sc.value, 'False', show(o.sc));
    });
    const other = STATE_DIR ? otherToken(process.env.MCP_TOKEN) : null;
    if (!other) return;
    const m = await connectClient2({ pin: '2026-07-28' }, other[1], 'persistent-other-token');
    try {
      const r = await m.callTool({ name: 'execute_python', arguments: { code: '"secret_value" in globals()', persistent: true, sandbox: c.transport.sessionId } });
      assert.equal(r.isError, true, `another token cannot use this sandbox: ${show(r)}`);
      assert.doesNotMatch(JSON.stringify(r), /12345/);
    } finally {
      await m.close();
    }
  });
});

test('the 2026-07-28 era offers persistent too: the state lives with the sandbox handle', opts, async () => {
  const m = await connectClient2({ pin: '2026-07-28' });
  let handle;
  try {
    const a = await m.callTool({ name: 'execute_python', arguments: { code: 'y = 20', persistent: true } });
    handle = a.structuredContent.sandbox;
    const b = await m.callTool({ name: 'execute_python', arguments: { code: 'y + 1', persistent: true, sandbox: handle } });
    assert.equal(b.structuredContent.value, '21', show(b));
  } finally {
    if (handle) await m.callTool({ name: 'close_sandbox', arguments: { sandbox: handle } }).catch(() => {});
    await m.close();
  }
});
