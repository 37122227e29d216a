// The whole service killed at once (kill -9 of the master, its responders,
// keeper, supervisors and every runsc process: a crash, an OOM kill of the
// service, a power cut without the reboot), then started again
// (scripts/test does: crash.mjs before, start_stack, crash.mjs after).
//   node crash.mjs before STATE_FILE   a session writes a file; pool
//                                      sandboxes are up; then everything
//                                      but nginx is killed with SIGKILL
//   node crash.mjs after STATE_FILE    (after the new start) containers and
//                                      cgroups of the previous run that
//                                      belong to no live session are reaped;
//                                      the session continues with its file
// Needs root and MCP_STATE_DIR. Exit status 0 when the phase holds.
import fs from 'node:fs';
import path from 'node:path';
import { randomToken } from './lib/common.mjs';
import { RawSession, show } from './lib/rpc.mjs';
import {
  STATE_DIR,
  sleep,
  alive,
  allPids,
  proc,
  childrenOf,
  masterPid,
  effectiveConfig,
  inventory,
  waitNoStrays,
  leftoversOf,
  sandboxIdOf,
} from './lib/host.mjs';

const [phase, stateFile] = process.argv.slice(2);

function fail(msg) {
  console.error(`crash ${phase}: ${msg}`);
  process.exit(1);
}
const say = (msg) => console.log(`crash ${phase}: ${msg}`);

if (!STATE_DIR) fail('MCP_STATE_DIR is not set');

/** pid and all its descendants. */
function tree(pid) {
  const out = [pid];
  for (const c of childrenOf(pid)) out.push(...tree(c));
  return out;
}

async function okCall(s, code) {
  const r = await s.run(code);
  if (r.status !== 200 || r.result?.isError || r.result?.structuredContent?.exit_code !== 0)
    fail(`tools/call: HTTP ${r.status} ${show(r.json ?? r.body)}`);
  return r.result.structuredContent;
}

if (phase === 'before') {
  const cfg = effectiveConfig();
  const s = new RawSession({ name: 'crash-test' });
  const r = await s.init();
  if (r.status !== 200) fail(`initialize: HTTP ${r.status} ${r.body}`);
  const secret = randomToken();
  await okCall(s, `open("crash.txt", "w").write("${secret}")`);
  // Let the keeper fill the pool: its sandboxes are the containers that
  // will belong to no live session after the crash.
  const deadline = Date.now() + 30000;
  let inv = inventory(STATE_DIR, cfg);
  while (inv.folders.pool.filter((f) => /^[0-9a-f]{32}$/.test(f.name)).length < cfg.pool_size && Date.now() < deadline) {
    await sleep(250);
    inv = inventory(STATE_DIR, cfg);
  }
  const poolIds = inv.folders.pool.map((f) => f.sandboxId).filter(Boolean);
  if (cfg.pool_size > 0 && poolIds.length === 0) fail('no pool sandbox to leave behind');
  // SIGKILL to everything of the stack except nginx: the master first, so
  // that nothing is restarted, then its whole tree (responders, keeper,
  // supervisors, runsc sandboxes and gofers) and any other supervisor or
  // runsc process of this state folder, with their descendants.
  const master = masterPid();
  const victims = new Set(tree(master));
  const root = `--root=${path.join(STATE_DIR, 'runsc')}`;
  for (const pid of allPids()) {
    const p = proc(pid);
    if (!p) continue;
    const sup = path.basename(p.argv[0] || '') === 'mcp-sandboxd' && (p.argv[1] || '').startsWith(`${STATE_DIR}/`);
    if (sup || p.argv.includes(root)) for (const d of tree(pid)) victims.add(d);
  }
  victims.delete(process.pid);
  process.kill(master, 'SIGKILL');
  for (const pid of victims) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone already */
    }
  }
  const until = Date.now() + 10000;
  while ([...victims].some(alive) && Date.now() < until) await sleep(50);
  const survivors = [...victims].filter(alive);
  if (survivors.length) fail(`still alive after SIGKILL: ${survivors}`);
  // What the crash left: runsc state files and cgroups of dead sandboxes.
  const left = fs.readdirSync(path.join(STATE_DIR, 'runsc')).filter((n) => n.endsWith('.state'));
  const cgroups = cfg.cgroup_parent
    ? fs.readdirSync('/sys/fs/cgroup').flatMap((ctl) => {
        try {
          return fs.readdirSync(path.join('/sys/fs/cgroup', ctl, cfg.cgroup_parent)).filter((n) => n.startsWith('mcp'));
        } catch {
          return [];
        }
      })
    : [];
  say(`killed ${victims.size} processes; left behind: ${left.length} runsc containers, ${cgroups.length} cgroup directories`);
  if (left.length === 0) fail('the crash left no runsc container behind: nothing to test');
  fs.writeFileSync(stateFile, JSON.stringify({ sid: s.sid, secret, sandboxId: sandboxIdOf(s.sid), poolIds }));
  say(`session ${s.sid} wrote crash.txt; pool sandboxes ${poolIds.join(' ')}`);
} else if (phase === 'after') {
  const { sid, secret, sandboxId, poolIds } = JSON.parse(fs.readFileSync(stateFile, 'utf8'));
  const cfg = effectiveConfig();
  // The keeper reaps at its start: the previous run's pool sandboxes belong
  // to no live session.
  const reapDeadline = Date.now() + 20000;
  let old;
  for (;;) {
    old = poolIds.flatMap((id) => leftoversOf('-no-session-', [id], cfg));
    if (old.length === 0 || Date.now() > reapDeadline) break;
    await sleep(250);
  }
  if (old.length) fail(`left by the previous run and not reaped: ${old.join('; ')}`);
  // The session continues with its file (its sandbox starts again).
  const s = new RawSession({ name: 'crash-test' });
  s.sid = sid;
  const sc = await okCall(s, 'print(open("crash.txt").read())');
  if (sc.stdout !== `${secret}\n`) fail(`read back: ${show(sc)}`);
  if (sandboxIdOf(sid) !== sandboxId) fail('the session got another sandbox id');
  const strays = await waitNoStrays(cfg, 15000);
  if (strays.length) fail(`beyond the live sessions after the restart: ${strays.join('; ')}`);
  const del = await s.del();
  if (del.status !== 204 && del.status !== 200) fail(`DELETE: HTTP ${del.status}`);
  const deadline = Date.now() + 15000;
  let left;
  for (;;) {
    left = leftoversOf(sid, [sandboxId], cfg);
    if (left.length === 0 || Date.now() > deadline) break;
    await sleep(250);
  }
  if (left.length) fail(`after DELETE: ${left.join('; ')}`);
  say(`previous run's ${poolIds.length} pool containers reaped; session ${sid} still had crash.txt; nothing left after DELETE`);
} else {
  fail('usage: node crash.mjs before|after STATE_FILE');
}
