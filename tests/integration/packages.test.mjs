// Packages: wheels from a local index (tests/packages/make_index.py, served
// by scripts/test), installed inside the session's sandbox.  Needs the stack
// to be started with MCP_PACKAGE_INDEX pointing at that index; the runner
// says so with MCP_TEST_PACKAGE_INDEX.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { TEST_TIMEOUT_MS, connectClient, closeClient, runPython } from './lib/common.mjs';
import { STATE_DIR } from './lib/host.mjs';

const opts = { timeout: TEST_TIMEOUT_MS, skip: process.env.MCP_TEST_PACKAGE_INDEX ? false : 'MCP_TEST_PACKAGE_INDEX not set: the stack has no test index' };

test('install a package with its dependency; later calls import it without reinstalling', opts, async () => {
  const a = await connectClient('packages-a');
  const b = await connectClient('packages-b');
  try {
    const r = await runPython(a.client, {
      code: 'import mcp_test_beta; print(mcp_test_beta.VALUE)',
      packages: ['mcp-test-beta'],
    });
    assert.equal(r.isError, false, JSON.stringify(r));
    assert.equal(r.structuredContent.stdout, 'beta on alpha 2.0\n');
    const later = await runPython(a.client, {
      code: 'import mcp_test_alpha, mcp_test_beta, os; print(mcp_test_alpha.VALUE, os.path.isdir("/work/.local"))',
    });
    assert.equal(later.structuredContent.stdout, '2.0 True\n');
    assert.ok(later.structuredContent.duration_ms < 2000, `no reinstall: ${later.structuredContent.duration_ms} ms`);
    // Another session does not see it.
    const other = await runPython(b.client, { code: 'import mcp_test_beta' });
    assert.equal(other.isError, true);
    assert.match(other.structuredContent.stderr, /ModuleNotFoundError/);
  } finally {
    await closeClient(a);
    await closeClient(b);
  }
});

test('version pins and upgrades within a session', opts, async () => {
  const c = await connectClient('packages-pin');
  try {
    const one = await runPython(c.client, { code: 'import mcp_test_alpha as m; print(m.VALUE)', packages: ['mcp-test-alpha==1.0'] });
    assert.equal(one.structuredContent.stdout, '1.0\n', JSON.stringify(one));
    const two = await runPython(c.client, { code: 'import mcp_test_alpha as m; print(m.VALUE)', packages: ['mcp-test-alpha>=2'] });
    assert.equal(two.structuredContent.stdout, '2.0\n', JSON.stringify(two));
  } finally {
    await closeClient(c);
  }
});

test('hostile or unavailable entries are refused with a clear error; the session stays usable', opts, async () => {
  const c = await connectClient('packages-bad');
  try {
    for (const p of ['-r requirements.txt', '--index-url=http://evil.example/simple', 'git+https://example.com/x.git',
      './local/path', '/abs/path', 'pkg @ https://example.com/x.whl', 'numpy; os_name == "nt"', 'a b', '']) {
      const r = await runPython(c.client, { code: 'print(1)', packages: [p] });
      assert.equal(r.isError, true, p);
      assert.match(r.content[0].text, /Invalid arguments: packages\[0\]/, `${p}: ${r.content[0].text}`);
    }
    // Only a source archive exists: no build script may run, so it fails.
    const sdist = await runPython(c.client, { code: 'print(1)', packages: ['mcp-test-sdist'] });
    assert.equal(sdist.isError, true);
    assert.match(sdist.content[0].text, /could not be downloaded as wheels/);
    const missing = await runPython(c.client, { code: 'print(1)', packages: ['mcp-test-no-such-package'] });
    assert.equal(missing.isError, true);
    const ok = await runPython(c.client, { code: 'print("still fine")' });
    assert.equal(ok.structuredContent.stdout, 'still fine\n');
  } finally {
    await closeClient(c);
  }
});

// Every wheel file a call's code can find below /opt/mcp (links not followed).
const VISIBLE_WHEELS = [
  'import os',
  'seen = []',
  'for root, dirs, files in os.walk("/opt/mcp", onerror=lambda e: None):',
  '    dirs[:] = [d for d in dirs if root != "/opt/mcp" or d != "executor"]',
  '    seen += [f for f in files if f.endswith(".whl")]',
  'print(sorted(seen))',
].join('\n');

test('tenancy: a session sees no wheel another session installed, and a bare name gets what the index offers now, not what another tenant pinned', opts, async () => {
  const a = await connectClient('packages-tenant-a');
  const b = await connectClient('packages-tenant-b');
  try {
    // A pins the yanked 3.0 (PEP 592: an exact pin may have it).
    const ra = await runPython(a.client, { code: 'import mcp_test_alpha as m; print(m.VALUE)', packages: ['mcp-test-alpha==3.0'] });
    assert.equal(ra.structuredContent?.stdout, '3.0\n', JSON.stringify(ra));
    // B asks for the bare name: the index's answer is 2.0 (3.0 is yanked),
    // whatever A left on the host.
    const rb = await runPython(b.client, {
      code: `import mcp_test_alpha as m; print(m.VALUE)\n${VISIBLE_WHEELS}`,
      packages: ['mcp-test-alpha'],
    });
    const lines = (rb.structuredContent?.stdout ?? '').split('\n');
    assert.equal(lines[0], '2.0', `a bare name gets the index's choice: ${JSON.stringify(rb)}`);
    assert.equal(lines[1], "['mcp_test_alpha-2.0-py3-none-any.whl']", `B sees the wheels of its own request only: ${lines[1]}`);
    // Between calls nothing of A's is there either.
    const later = await runPython(b.client, { code: VISIBLE_WHEELS });
    assert.equal(later.structuredContent?.stdout, '[]\n', JSON.stringify(later.structuredContent));
  } finally {
    await closeClient(a);
    await closeClient(b);
  }
});

// scripts/test starts the stack with package_cache_max = this (MCP_PACKAGE_CACHE_MAX).
const CACHE_MAX = Number(process.env.MCP_TEST_PACKAGE_CACHE_MAX || 0);

function treeBytes(dir) {
  let n = 0;
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) n += treeBytes(p);
    else if (e.isFile()) n += fs.lstatSync(p).size;
  }
  return n;
}

test('the package caches on the host stay within package_cache_max, and what was installed keeps working', {
  timeout: TEST_TIMEOUT_MS,
  skip: !process.env.MCP_TEST_PACKAGE_INDEX ? 'MCP_TEST_PACKAGE_INDEX not set' : !CACHE_MAX || !STATE_DIR ? 'MCP_TEST_PACKAGE_CACHE_MAX or MCP_STATE_DIR not set' : false,
}, async () => {
  const c = await connectClient('packages-cache-cap');
  try {
    // A wheel of 1 MiB that does not compress, beyond the cap by itself.
    const r = await runPython(c.client, { code: 'import mcp_test_big as m, os; print(m.VALUE, os.path.getsize(os.path.join(os.path.dirname(m.__file__), "data.bin")))', packages: ['mcp-test-big'] });
    assert.equal(r.structuredContent?.stdout, `big ${1 << 20}\n`, JSON.stringify(r));
    const caches = ['package-cache', 'wheels', 'npm'].map((d) => path.join(STATE_DIR, d));
    const used = caches.reduce((sum, d) => sum + treeBytes(d), 0);
    assert.ok(used <= CACHE_MAX, `the caches (${caches.join(', ')}) hold ${used} bytes, at most package_cache_max = ${CACHE_MAX}`);
    const again = await runPython(c.client, { code: 'import mcp_test_big as m; print(m.VALUE)' });
    assert.equal(again.structuredContent?.stdout, 'big\n', JSON.stringify(again));
  } finally {
    await closeClient(c);
  }
});
