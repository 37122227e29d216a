// Integration test with mcp-remote, the stdio<->Streamable HTTP bridge that
// Claude Code / Gemini CLI users run:
//   mcp-remote URL --transport http-only --header "Authorization: Bearer ${MCP_TOKEN}"
// driven over stdio with newline-delimited JSON-RPC. Only stdout carries
// JSON-RPC; mcp-remote logs on stderr.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { createRequire } from 'node:module';
import { MCP_URL, TEST_TIMEOUT_MS, PROTOCOL_VERSION } from './lib/common.mjs';

const require = createRequire(import.meta.url);
const MCP_REMOTE = path.join(path.dirname(require.resolve('mcp-remote/package.json')), 'dist', 'proxy.js');
const REQUEST_TIMEOUT_MS = 60_000;

class StdioPeer {
  constructor(child) {
    this.child = child;
    this.pending = new Map();
    this.stdoutLines = [];
    this.nonJsonLines = [];
    this.stderr = '';
    this.exited = null;
    child.stderr.on('data', (d) => (this.stderr += d));
    createInterface({ input: child.stdout }).on('line', (line) => {
      this.stdoutLines.push(line);
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        this.nonJsonLines.push(line);
        return;
      }
      const p = msg && msg.id !== undefined && this.pending.get(msg.id);
      if (p && (msg.result !== undefined || msg.error !== undefined)) {
        this.pending.delete(msg.id);
        clearTimeout(p.timer);
        p.resolve(msg);
      }
    });
    child.on('exit', (code, signal) => {
      this.exited = { code, signal };
      for (const p of this.pending.values()) {
        clearTimeout(p.timer);
        p.reject(
          new Error(`mcp-remote exited (${code ?? signal}) before answering; stderr:\n${this.tail()}`),
        );
      }
      this.pending.clear();
    });
  }

  tail(n = 4000) {
    return this.stderr.slice(-n);
  }

  send(msg) {
    this.child.stdin.write(JSON.stringify(msg) + '\n');
  }

  request(id, method, params) {
    return new Promise((resolve, reject) => {
      if (this.exited) {
        reject(new Error(`mcp-remote already exited: ${JSON.stringify(this.exited)}\n${this.tail()}`));
        return;
      }
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(
          new Error(
            `no answer to ${method} (id ${id}) within ${REQUEST_TIMEOUT_MS} ms; stderr:\n${this.tail()}`,
          ),
        );
      }, REQUEST_TIMEOUT_MS);
      this.pending.set(id, { resolve, reject, timer });
      this.send({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
    });
  }
}

describe(
  'mcp-remote over stdio (--transport http-only, bearer header)',
  { timeout: TEST_TIMEOUT_MS * 2 },
  () => {
    let tmp;
    let peer;
    // Each step depends on the one before; stop at the first failure instead of
    // waiting for time-outs.
    let broken = null;
    const step = (name, fn) =>
      it(name, { timeout: TEST_TIMEOUT_MS }, async () => {
        if (broken) throw new Error(`not run: earlier step failed (${broken})`);
        try {
          await fn();
        } catch (e) {
          broken = name;
          throw e;
        }
      });

    before(() => {
      // mcp-remote always creates ${MCP_REMOTE_CONFIG_DIR:-$HOME/.mcp-auth}/mcp-remote-v1
      // and reads cached OAuth tokens/client registrations from it: give it a
      // fresh, writable one so nothing cached can change its behaviour.
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-remote-test-'));
      const child = spawn(
        process.execPath,
        [
          MCP_REMOTE,
          MCP_URL,
          '--transport',
          'http-only',
          '--header',
          // Literal ${MCP_TOKEN}: mcp-remote substitutes it from its environment,
          // which keeps the token out of the process list.
          'Authorization: Bearer ${MCP_TOKEN}',
        ],
        {
          env: {
            ...process.env,
            HOME: tmp,
            MCP_REMOTE_CONFIG_DIR: path.join(tmp, 'mcp-auth'),
            // NODE_EXTRA_CA_CERTS (the stack's CA) and MCP_TOKEN are inherited.
          },
          stdio: ['pipe', 'pipe', 'pipe'],
        },
      );
      peer = new StdioPeer(child);
    });

    after(async () => {
      if (peer && !peer.exited) {
        peer.child.stdin.end();
        const exited = await new Promise((resolve) => {
          const t = setTimeout(() => resolve(false), 10_000);
          peer.child.once('exit', () => {
            clearTimeout(t);
            resolve(true);
          });
        });
        if (!exited) peer.child.kill('SIGKILL');
      }
      if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    });

    step('initialize through mcp-remote', async () => {
      const res = await peer.request(1, 'initialize', {
        protocolVersion: PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: 'mcp-remote-integration-test', version: '1.0.0' },
      });
      assert.equal(res.jsonrpc, '2.0');
      assert.equal(res.error, undefined, `initialize error: ${JSON.stringify(res.error)}`);
      assert.equal(res.result.protocolVersion, PROTOCOL_VERSION);
      assert.equal(typeof res.result.serverInfo?.name, 'string');
      assert.ok(res.result.serverInfo.name.length > 0);
      assert.equal(typeof res.result.capabilities?.tools, 'object');
      peer.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    });

    step('tools/list through mcp-remote lists execute_python', async () => {
      const res = await peer.request(2, 'tools/list', {});
      assert.equal(res.error, undefined, `tools/list error: ${JSON.stringify(res.error)}`);
      const tool = res.result.tools.find((t) => t.name === 'execute_python');
      assert.ok(tool, `execute_python listed: ${JSON.stringify(res.result.tools.map((t) => t.name))}`);
      assert.equal(tool.inputSchema?.type, 'object');
      assert.equal(tool.inputSchema?.properties?.code?.type, 'string');
    });

    step('tools/call execute_python print() through mcp-remote', async () => {
      const res = await peer.request(3, 'tools/call', {
        name: 'execute_python',
        arguments: { code: 'print("via mcp-remote", 6 * 7)' },
      });
      assert.equal(res.error, undefined, `tools/call error: ${JSON.stringify(res.error)}`);
      const r = res.result;
      assert.equal(r.isError ?? false, false, JSON.stringify(r));
      assert.equal(r.structuredContent?.stdout, 'via mcp-remote 42\n', JSON.stringify(r));
      assert.equal(r.structuredContent.exit_code, 0);
      assert.equal(r.structuredContent.timed_out, false);
      const text = r.content.find((b) => b.type === 'text');
      assert.ok(text, 'a text content block');
      assert.deepEqual(JSON.parse(text.text), r.structuredContent);
    });

    step('stdout carried only JSON-RPC', async () => {
      assert.deepEqual(peer.nonJsonLines, [], 'every stdout line is JSON');
      const msgs = peer.stdoutLines.map((l) => JSON.parse(l));
      const ids = msgs.filter((m) => m.id !== undefined).map((m) => m.id);
      assert.deepEqual(ids, [1, 2, 3], `exactly one response per request: ${peer.stdoutLines.join('\n')}`);
      for (const m of msgs) {
        assert.equal(m.jsonrpc, '2.0', `JSON-RPC 2.0 message: ${JSON.stringify(m)}`);
        if (m.id === undefined)
          assert.equal(typeof m.method, 'string', `a notification: ${JSON.stringify(m)}`);
      }
    });
  },
);
