// Packages: wheels from a local index (tests/packages/make_index.py, served
// by scripts/test), installed inside the session's sandbox.  Needs the stack
// to be started with MCP_PACKAGE_INDEX pointing at that index; the runner
// says so with MCP_TEST_PACKAGE_INDEX.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TEST_TIMEOUT_MS, connectClient, closeClient, runPython } from './lib/common.mjs';

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
