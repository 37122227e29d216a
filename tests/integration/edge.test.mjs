// The edge of the stack, from the host (root, MCP_STATE_DIR): who may talk
// to the responders, and where the bearer tokens must never be.
//
// - No process of the stack (mcp-server's master, responders and keeper,
//   the supervisors, runsc's sandboxes and gofers, nginx, Squid) holds a token in
//   its environment: scripts/test starts its stack with MCP_TOKENS set, as
//   containers do.
// - The FastCGI socket trusts MCP_TOKEN_ID from whoever connects, so the
//   responders serve only nginx's workers (the members of socket_group, or
//   socket_peer_user) and root: a process of another uid that still gets
//   the socket's group (setpriv) is dropped without an answer, and counted.
// - The master refuses to start when the socket could not be kept to
//   nginx: a missing socket_group, a group without members, an unknown
//   socket_peer_user.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { TEST_TIMEOUT_MS, rawRequest } from './lib/common.mjs';
import { STATE_DIR, allPids, childrenOf, masterPid, proc, sleep, stackTokens } from './lib/host.mjs';

const opts = {
  timeout: TEST_TIMEOUT_MS,
  skip: !STATE_DIR ? 'MCP_STATE_DIR not set: no host access to the stack'
    : process.getuid() !== 0 ? 'needs root (reads /proc/<pid>/environ, runs processes as another uid)' : false,
};

function readText(p) {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch {
    return null;
  }
}

function environ(pid) {
  const env = new Map();
  for (const kv of (readText(`/proc/${pid}/environ`) || '').split('\0')) {
    const i = kv.indexOf('=');
    if (i > 0) env.set(kv.slice(0, i), kv.slice(i + 1));
  }
  return env;
}

/** The tokens of the stack: "name token [options]" lines of <state>/tokens. */
function tokens() {
  return stackTokens().map(([name, token]) => ({ name, token }));
}

const runtimeDir = () => {
  const master = masterPid();
  return path.dirname(environ(master).get('MCP_FCGI_SOCKET'));
};

async function metric(name) {
  const url = process.env.MCP_METRICS_URL;
  if (!url) return null;
  const r = await rawRequest('GET', url);
  const line = r.body.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

test('no process of the stack has a token in its environment', opts, async (t) => {
  const toks = tokens();
  assert.ok(toks.length > 0, 'the tokens file has tokens');
  const master = masterPid();
  const pids = new Map();
  const walk = (pid, role) => {
    if (pids.has(pid)) return;
    pids.set(pid, role);
    for (const c of childrenOf(pid)) walk(c, role === 'mcp-server master' ? 'mcp-server child' : role);
  };
  walk(master, 'mcp-server master');
  const root = `--root=${path.join(STATE_DIR, 'runsc')}`;
  for (const pid of allPids()) {
    const p = proc(pid);
    if (p && p.argv.includes(root)) walk(pid, `runsc (${p.argv[0]})`);
  }
  const nginx = Number((readText(path.join(runtimeDir(), 'nginx.pid')) || '').trim());
  assert.ok(nginx > 0, 'nginx runs');
  walk(nginx, 'nginx');
  // The filtering proxy of network by policy, when the stack runs one.
  const squid = Number((readText(path.join(STATE_DIR, 'egress', 'squid.run.pid')) || '').trim());
  if (squid > 0 && proc(squid)) walk(squid, 'squid');
  // runsc re-executes itself (comm "exe"): its argv[0] says what it is.
  const kinds = new Set([...pids.keys()].map((pid) => path.basename(proc(pid)?.argv[0] || '?').split(' ')[0]));
  t.diagnostic(`${pids.size} processes: ${[...kinds].sort().join(', ')}`);
  assert.ok([...kinds].includes('mcp-sandboxd'), 'supervisors are among them (pool_size > 0)');
  assert.ok([...kinds].some((k) => k.startsWith('runsc')), 'runsc processes are among them');
  const found = [];
  for (const [pid, role] of pids) {
    const env = environ(pid);
    if (env.get('MCP_TOKENS')) found.push(`${role} ${pid}: MCP_TOKENS`);
    const raw = readText(`/proc/${pid}/environ`) || '';
    for (const { name, token } of toks) if (raw.includes(token)) found.push(`${role} ${pid}: the token of ${name}`);
  }
  assert.deepEqual(found, []);
});

/** A FastCGI request straight to the responders' socket, as cgi-fcgi sends it. */
function fcgi(sock, params, asUser) {
  const env = { REQUEST_METHOD: 'DELETE', REQUEST_URI: '/mcp', HTTP_ACCEPT: 'application/json', CONTENT_LENGTH: '0',
    ...params };
  const argv = ['cgi-fcgi', '-bind', '-connect', sock];
  const cmd = asUser ? ['setpriv', `--reuid=${asUser.uid}`, `--regid=${asUser.gid}`, '--clear-groups', ...argv] : argv;
  const r = spawnSync(cmd[0], cmd.slice(1), { env: { PATH: process.env.PATH, ...env }, encoding: 'utf8', timeout: 20_000,
    input: '' });
  return { status: r.status, stdout: r.stdout || '', stderr: r.stderr || '' };
}

test('the responders drop a FastCGI connection from another uid, even one in the socket\'s group', opts, async (t) => {
  const have = spawnSync('sh', ['-c', 'command -v cgi-fcgi && command -v setpriv']);
  if (have.status !== 0) return t.skip('cgi-fcgi (libfcgi-bin) or setpriv is missing');
  const sock = environ(masterPid()).get('MCP_FCGI_SOCKET');
  const st = fs.statSync(sock);
  t.diagnostic(`${sock}: uid ${st.uid}, gid ${st.gid}, mode ${(st.mode & 0o777).toString(8)}`);
  assert.equal(st.mode & 0o007, 0, 'the socket is not open to every local user');
  const name = tokens()[0].name;
  // Root is served: nginx's parameters with MCP_TOKEN_ID (DELETE without a
  // session: 400, not 401, so the token name was taken).
  const asRoot = fcgi(sock, { MCP_TOKEN_ID: name });
  assert.match(asRoot.stdout, /^Status: 400/, `as root: ${asRoot.stdout}${asRoot.stderr}`);
  // nobody, with the socket's group: it can connect, and gets nothing.
  const before = await metric('mcp_fastcgi_peers_refused_total');
  const nobody = { uid: 65534, gid: st.gid };
  const r = fcgi(sock, { MCP_TOKEN_ID: name }, nobody);
  t.diagnostic(`as uid 65534 gid ${st.gid}: exit ${r.status}, ${r.stdout.length} bytes out, stderr ${r.stderr.trim()}`);
  assert.ok(!/Could not connect/.test(r.stderr), 'the process could connect (the check is the peer\'s uid, not the mode)');
  assert.equal(r.stdout, '', 'no answer');
  const after = await metric('mcp_fastcgi_peers_refused_total');
  if (before !== null) assert.equal(after - before, 1, 'mcp_fastcgi_peers_refused_total counted it');
  // The responders still serve nginx.
  assert.match(fcgi(sock, { MCP_TOKEN_ID: name }).stdout, /^Status: 400/, 'root is still served');
});

/**
 * Start mcp-server in a scratch state folder (backend direct, no pool):
 * its exit status and stderr (code null: still running after waitMs, when
 * whileRunning(pid) ran before it was stopped).
 */
async function startServer(env, waitMs = 15_000, whileRunning = null) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-edge-'));
  const exe = fs.readlinkSync(`/proc/${masterPid()}/exe`);
  const sock = path.join(dir, 'sock', 'fcgi.sock');
  const child = spawn(exe, [], {
    env: { PATH: process.env.PATH, MCP_STATE_DIR: dir, MCP_FCGI_SOCKET: sock, MCP_BACKEND: 'direct', MCP_POOL_SIZE: '0',
      MCP_RESPONDERS: '1', MCP_CGROUP_PARENT: '', MCP_AUDIT_LOG: '', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  const exited = new Promise((r) => child.on('exit', (code) => r(code)));
  const code = await Promise.race([exited, sleep(waitMs).then(() => null)]);
  const socketExisted = fs.existsSync(sock);
  const mode = socketExisted ? (fs.statSync(sock).mode & 0o777).toString(8) : null;
  let result;
  if (code === null && whileRunning) {
    try {
      result = whileRunning(child.pid);
    } catch (err) {
      result = err;
    }
  }
  if (code === null) {
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(20_000)]);
  }
  fs.rmSync(dir, { recursive: true, force: true });
  if (result instanceof Error) throw result;
  return { code, stderr, socketExisted, mode, result };
}

test('the master refuses to start without a socket group nginx is in', opts, async (t) => {
  const cases = [['a socket_group that does not exist', { MCP_SOCKET_GROUP: 'mcp-no-such-group' }, /mcp-no-such-group/]];
  // A group without members: none listed, and nobody's primary group.
  const primary = new Set((readText('/etc/passwd') || '').split('\n').map((l) => l.split(':')[3]).filter(Boolean));
  const empty = (readText('/etc/group') || '').split('\n').map((l) => l.split(':'))
    .find((f) => f.length === 4 && f[3] === '' && !primary.has(f[2]) && Number(f[2]) > 0);
  if (empty) cases.push([`a socket_group without members (${empty[0]})`, { MCP_SOCKET_GROUP: empty[0] }, /no member/]);
  else t.diagnostic('no group without members here: that case is not tried');
  cases.push(['a socket_peer_user that does not exist', { MCP_SOCKET_PEER_USER: 'mcp-no-such-user' }, /mcp-no-such-user/]);
  for (const [what, env, says] of cases) {
    const r = await startServer(env);
    t.diagnostic(`${what}: exit ${r.code}; ${r.stderr.trim().split('\n').slice(-1)[0]}`);
    assert.notEqual(r.code, null, `${what}: the master still runs (socket mode ${r.mode})`);
    assert.notEqual(r.code, 0, `${what}: exit status`);
    assert.match(r.stderr, says, `${what}: the message names the problem`);
    assert.equal(r.socketExisted, false, `${what}: no socket was opened`);
  }
});

test('a master started with MCP_TOKENS wipes it: neither it nor its children show the tokens', opts, async (t) => {
  const secret = `s3cr3t${'0123456789abcdef'.repeat(3)}`;
  const r = await startServer({ MCP_TOKENS: `alice:${secret} ${secret}x` }, 3000, (pid) => {
    const pids = [pid, ...childrenOf(pid)];
    const found = pids.filter((p) => (readText(`/proc/${p}/environ`) || '').includes(secret) || environ(p).get('MCP_TOKENS'));
    return { pids, found };
  });
  assert.equal(r.code, null, `the master runs: ${r.stderr}`);
  t.diagnostic(`master and children: ${r.result.pids.join(', ')}`);
  assert.ok(r.result.pids.length >= 2, 'the master forked its responders');
  assert.deepEqual(r.result.found, [], 'processes whose environment shows the tokens');
});
