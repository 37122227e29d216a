// The MCP Inspector (@modelcontextprotocol/inspector 2.12.0, pinned) in CLI
// mode, as a developer checking a server runs it:
//
//   mcp-inspector --cli URL --transport http --header "Authorization: Bearer T" --method M ...
//
// It speaks the 2025 era (a session per run). Its exit codes are part of
// what users script against: 0 for a result, 5 when the tool said isError,
// 3 when the server wants authentication. NODE_EXTRA_CA_CERTS (set by
// tests/integration/run) makes it trust the stack's CA.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { MCP_URL, MCP_TOKEN, TEST_TIMEOUT_MS } from './lib/common.mjs';

const BIN = path.join(import.meta.dirname, 'node_modules', '.bin', 'mcp-inspector');
const opts = { timeout: TEST_TIMEOUT_MS };

/** One CLI run: {code, out (parsed JSON when it is), stdout, stderr}. */
function inspector(args, token = MCP_TOKEN) {
  return new Promise((resolve, reject) => {
    const p = spawn(BIN, ['--cli', MCP_URL, '--transport', 'http', '--header', `Authorization: Bearer ${token}`, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MCP_CATALOG_PATH: path.join(process.env.TMPDIR || '/tmp', `inspector-catalog-${process.pid}.json`) },
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), TEST_TIMEOUT_MS - 5000);
    p.on('error', reject);
    p.on('close', (code) => {
      clearTimeout(timer);
      let out = null;
      try {
        out = JSON.parse(stdout);
      } catch {
        /* not JSON: the test says so */
      }
      resolve({ code, out, stdout, stderr });
    });
  });
}

const show = (r) => `exit ${r.code}; stdout ${r.stdout.slice(0, 1500)}; stderr ${r.stderr.slice(0, 1500)}`;

test('inspector: tools/list shows both tools with their schemas', opts, async () => {
  const r = await inspector(['--method', 'tools/list']);
  assert.equal(r.code, 0, show(r));
  const names = r.out?.tools?.map((t) => t.name) ?? [];
  assert.ok(names.includes('execute_python'), show(r));
  assert.ok(names.includes('execute_javascript'), show(r));
  const py = r.out.tools.find((t) => t.name === 'execute_python');
  assert.equal(py.inputSchema.type, 'object');
  assert.deepEqual(py.inputSchema.required, ['code']);
  assert.equal(py.outputSchema?.type, 'object', 'the output schema is there');
});

test('inspector: tools/call runs Python and JavaScript and returns structuredContent', opts, async () => {
  const r = await inspector(['--method', 'tools/call', '--tool-name', 'execute_python', '--tool-arg', 'code=print(6 * 7)']);
  assert.equal(r.code, 0, show(r));
  assert.equal(r.out?.structuredContent?.stdout, '42\n', show(r));
  assert.equal(r.out.isError, false);
  const js = await inspector(['--method', 'tools/call', '--tool-name', 'execute_javascript', '--tool-arg', 'code=console.log(6 * 7)']);
  assert.equal(js.code, 0, show(js));
  assert.equal(js.out?.structuredContent?.stdout, '42\n', show(js));
});

test('inspector: a failing call exits 5 (isError), with the traceback in stderr', opts, async () => {
  const r = await inspector(['--method', 'tools/call', '--tool-name', 'execute_python', '--tool-arg', 'code=raise ValueError("nope")']);
  assert.equal(r.code, 5, show(r));
  assert.match(r.stdout, /ValueError: nope/, show(r));
});

test('inspector: resources/list and prompts/list answer', opts, async () => {
  const r = await inspector(['--method', 'resources/list']);
  assert.equal(r.code, 0, show(r));
  assert.ok(Array.isArray(r.out?.resources), show(r));
  const p = await inspector(['--method', 'prompts/list']);
  assert.equal(p.code, 0, show(p));
  assert.deepEqual(p.out?.prompts, [], show(p));
});

test('inspector: a wrong token exits 3 (authentication required)', opts, async () => {
  const r = await inspector(['--method', 'tools/list'], 'not-the-token-0123456789abcdef');
  assert.equal(r.code, 3, show(r));
});
