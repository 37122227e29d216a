// Host-side view of a running stack, for tests that run as root on the
// machine of the stack (MCP_STATE_DIR set): its processes (master,
// responders, keeper, supervisors, runsc sandboxes and gofers), its folders
// (sessions, pool, trash), runsc containers, cgroups and workspace mounts,
// and the check that nothing exists beyond the live sessions and the pool.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { SESSION_ID } from './common.mjs';

export const STATE_DIR = process.env.MCP_STATE_DIR ? path.resolve(process.env.MCP_STATE_DIR) : '';

const HEX32 = /^[0-9a-f]{32}$/;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function readText(p) {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch {
    return null;
  }
}

function readLink(p) {
  try {
    return fs.readlinkSync(p);
  } catch {
    return null;
  }
}

function list(dir) {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

/** Paths below dir (down to `depth` levels, not following links) whose
 * name and path satisfy pred(name, path). */
export function findPaths(dir, pred, depth = 1) {
  let out = [];
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (pred(e.name, p)) out.push(p);
    if (depth > 1 && e.isDirectory()) out = out.concat(findPaths(p, pred, depth - 1));
  }
  return out;
}

/** {pid, ppid, argv, threads} of a process, or null when it is gone. */
export function proc(pid) {
  const stat = readText(`/proc/${pid}/stat`);
  const cmd = readText(`/proc/${pid}/cmdline`);
  if (stat === null || cmd === null) return null;
  // comm may hold spaces and parentheses: the fields follow the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return {
    pid: Number(pid),
    state: rest[0],
    ppid: Number(rest[1]),
    threads: Number(rest[17]),
    argv: cmd.split('\0').filter((s, i, a) => !(i === a.length - 1 && s === '')),
  };
}

export function alive(pid) {
  const p = proc(pid);
  return p !== null && p.state !== 'Z';
}

export function allPids() {
  return list('/proc').filter((n) => /^\d+$/.test(n)).map(Number);
}

/** Children of pid (every thread's children). */
export function childrenOf(pid) {
  const out = [];
  for (const t of list(`/proc/${pid}/task`)) {
    const c = readText(`/proc/${pid}/task/${t}/children`);
    if (c) out.push(...c.trim().split(/\s+/).filter(Boolean).map(Number));
  }
  return out;
}

/** Targets of the process's open fds (readlink of /proc/pid/fd/N). */
export function fdTargets(pid) {
  return list(`/proc/${pid}/fd`).map((fd) => readLink(`/proc/${pid}/fd/${fd}`)).filter(Boolean);
}

export function masterPid(state = STATE_DIR) {
  const t = readText(path.join(state, 'mcp-server.pid'));
  const pid = t ? Number(t.trim()) : NaN;
  if (!Number.isInteger(pid) || !alive(pid)) throw new Error(`no live mcp-server (pid file in ${state})`);
  return pid;
}

/**
 * The configuration the running server uses: `mcp-server --print-config`
 * with the master's own environment (MCP_<KEY> variables and mcp.conf).
 */
export function effectiveConfig(state = STATE_DIR) {
  const pid = masterPid(state);
  const env = {};
  for (const kv of (readText(`/proc/${pid}/environ`) || '').split('\0')) {
    const i = kv.indexOf('=');
    if (i > 0) env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  const exe = readLink(`/proc/${pid}/exe`);
  const out = execFileSync(exe, ['--print-config'], { env, encoding: 'utf8' });
  const cfg = {};
  for (const line of out.split('\n')) {
    const m = /^\s*([a-z_]+)\s*=\s*(.*)$/.exec(line);
    if (m) cfg[m[1]] = /^\d+$/.test(m[2]) ? Number(m[2]) : m[2];
  }
  return cfg;
}

/** Every session's folder with its sandbox id and metadata. */
function folders(state) {
  const read = (dir) =>
    list(path.join(state, dir)).map((name) => {
      const p = path.join(state, dir, name);
      const sb = (readText(path.join(p, 'sandbox')) || '').trim();
      let meta = null;
      try {
        meta = JSON.parse(readText(path.join(p, 'meta.json')));
      } catch {
        /* none (yet) */
      }
      return { dir, name, path: p, sandboxId: HEX32.test(sb) ? sb : null, meta };
    });
  return { sessions: read('sessions'), pool: read('pool'), trash: read('trash') };
}

/** The fcgi listening socket inodes the master holds (responders share them). */
function socketInodes(pid) {
  return new Set(fdTargets(pid).filter((t) => t.startsWith('socket:')));
}

/**
 * Everything of the stack on this host. Processes are classified by their
 * place in the tree: the master's children are responders (they share the
 * master's FastCGI socket), the keeper, supervisors (mcp-sandboxd), and
 * runsc processes adopted when their supervisor died; the runsc sandbox and
 * gofer of a live supervisor are its children.
 */
export function inventory(state = STATE_DIR, cfg = null) {
  const master = masterPid(state);
  const root = `--root=${path.join(state, 'runsc')}`;
  const masterSockets = socketInodes(master);
  const inv = {
    master,
    responders: [],
    keepers: [],
    supervisors: [],
    sandboxes: [],
    gofers: [],
    others: [],
    folders: folders(state),
    containers: [],
    cgroups: [],
    mounts: [],
  };
  for (const pid of childrenOf(master)) {
    const p = proc(pid);
    if (!p || p.state === 'Z') continue;
    const exe = path.basename(p.argv[0] || '');
    if (exe === 'mcp-server') {
      const shares = [...socketInodes(pid)].some((s) => masterSockets.has(s));
      (shares ? inv.responders : inv.keepers).push(pid);
    }
  }
  // The master's subtree: everything the service started (supervisors are
  // adopted by the master, and so are runsc processes whose supervisor died).
  const subtree = new Set();
  const walk = (pid) => {
    subtree.add(pid);
    for (const c of childrenOf(pid)) walk(c);
  };
  walk(master);
  const candidates = [];
  for (const pid of allPids()) {
    const p = proc(pid);
    if (!p || p.state === 'Z' || pid === master) continue;
    if (inv.responders.includes(pid) || inv.keepers.includes(pid)) continue;
    const cmd = p.argv.join(' ');
    const exe = path.basename(p.argv[0] || '');
    if (exe === 'mcp-sandboxd' && (p.argv[1] || '').startsWith(`${state}/`)) {
      // Its folder moves (pool -> sessions -> trash): the sup.lock it holds
      // open says where it is now.
      const lock = fdTargets(pid).find((t) => t.endsWith('/sup.lock'));
      inv.supervisors.push({ pid, ppid: p.ppid, folder: lock ? path.dirname(lock) : null, argv: p.argv });
    } else if (p.argv[0] === 'runsc-sandbox' && p.argv.includes(root)) {
      inv.sandboxes.push({ pid, ppid: p.ppid, cid: p.argv[p.argv.length - 1] });
    } else if (p.argv[0] === 'runsc-gofer' && p.argv.includes(root)) {
      inv.gofers.push({ pid, ppid: p.ppid });
    } else if (subtree.has(pid) || p.argv.includes(root)) {
      candidates.push({ pid, ppid: p.ppid, cmd });
    }
  }
  // A sandbox's and a gofer's own processes (ptrace stubs) are theirs.
  const owned = new Set();
  const own = (pid) => {
    for (const c of childrenOf(pid)) {
      owned.add(c);
      own(c);
    }
  };
  for (const x of [...inv.sandboxes, ...inv.gofers]) own(x.pid);
  inv.others = candidates.filter((c) => !owned.has(c.pid));
  for (const n of list(path.join(state, 'runsc'))) {
    const m = /^mcp([0-9a-f]{32})_sandbox:/.exec(n);
    inv.containers.push({ file: n, id: m ? m[1] : null });
  }
  const parent = cfg?.cgroup_parent;
  if (parent) {
    for (const ctl of list('/sys/fs/cgroup')) {
      for (const n of list(path.join('/sys/fs/cgroup', ctl, parent))) {
        const m = /^mcp([0-9a-f]{32})$/.exec(n);
        if (m) inv.cgroups.push({ path: path.join('/sys/fs/cgroup', ctl, parent, n), id: m[1] });
      }
    }
  }
  for (const line of (readText('/proc/self/mountinfo') || '').split('\n')) {
    const mp = line.split(' ')[4];
    if (mp && mp.startsWith(`${state}/`)) inv.mounts.push(mp.replace(/\\040/g, ' '));
  }
  return inv;
}

/**
 * What exists beyond the live sessions and the pool, as sentences (empty:
 * nothing). Live: the folders in sessions/ (with meta.json) and pool/.
 * Everything else must belong to one of them: each supervisor to a live
 * folder (one per folder), each runsc sandbox and gofer to a live supervisor
 * (its parent), each runsc container, cgroup and workspace mount to a live
 * folder's sandbox; trash must be empty, and the service (the master's
 * subtree) runs no other process, nor does any runsc command of its root.
 */
export function strays(inv, state = STATE_DIR) {
  const out = [];
  const live = new Map(); // folder path -> sandbox id
  for (const f of inv.folders.sessions) {
    if (!SESSION_ID.test(f.name)) out.push(`unexpected entry in sessions/: ${f.name}`);
    else if (!f.meta) out.push(`session folder without meta.json: ${f.path}`);
    if (f.sandboxId) live.set(f.path, f.sandboxId);
  }
  for (const f of inv.folders.pool) if (f.sandboxId) live.set(f.path, f.sandboxId);
  for (const f of inv.folders.trash) out.push(`trash entry: ${f.path}`);
  const liveIds = new Set(live.values());
  const supByPid = new Map();
  const supFolders = new Map();
  for (const s of inv.supervisors) {
    supByPid.set(s.pid, s);
    if (!s.folder || !live.has(s.folder)) out.push(`supervisor ${s.pid} of no live folder (${s.folder || 'none'}): ${s.argv.join(' ')}`);
    if (s.folder) {
      if (supFolders.has(s.folder)) out.push(`two supervisors for ${s.folder}: ${supFolders.get(s.folder)} and ${s.pid}`);
      supFolders.set(s.folder, s.pid);
    }
  }
  for (const sb of inv.sandboxes) {
    const sup = supByPid.get(sb.ppid);
    const id = sb.cid.replace(/^mcp/, '');
    if (!sup) out.push(`runsc sandbox ${sb.pid} (${sb.cid}) has no supervisor (parent ${sb.ppid})`);
    else if (live.get(sup.folder) !== id) out.push(`runsc sandbox ${sb.pid} (${sb.cid}) is not its supervisor's (${sup.folder})`);
    if (!liveIds.has(id)) out.push(`runsc sandbox ${sb.pid} (${sb.cid}) of no live session`);
  }
  for (const g of inv.gofers) if (!supByPid.has(g.ppid)) out.push(`runsc gofer ${g.pid} has no supervisor (parent ${g.ppid})`);
  for (const c of inv.containers) if (!c.id || !liveIds.has(c.id)) out.push(`runsc state of no live session: ${c.file}`);
  for (const c of inv.cgroups) if (!liveIds.has(c.id)) out.push(`cgroup of no live session: ${c.path}`);
  const liveWork = new Set([...live.keys()].map((p) => `${p}/work`));
  for (const m of inv.mounts) if (!liveWork.has(m)) out.push(`mount of no live session: ${m}`);
  for (const o of inv.others) out.push(`process ${o.pid} (parent ${o.ppid}): ${o.cmd}`);
  return out;
}

/** Poll until strays() is empty (teardown is asynchronous); returns the last list. */
export async function waitNoStrays(cfg, ms = 15000, state = STATE_DIR) {
  const deadline = Date.now() + ms;
  let left;
  for (;;) {
    left = strays(inventory(state, cfg), state);
    if (left.length === 0 || Date.now() > deadline) return left;
    await sleep(250);
  }
}

/** What is on the host for one session id and its sandbox ids (hostile.test.mjs's check). */
export function leftoversOf(sid, sandboxIds, cfg, state = STATE_DIR) {
  const inv = inventory(state, cfg);
  const left = [];
  if (fs.existsSync(path.join(state, 'sessions', sid))) left.push(`session folder sessions/${sid}`);
  for (const f of inv.folders.trash) if (f.name.includes(sid)) left.push(`trash/${f.name}`);
  for (const id of sandboxIds) {
    for (const c of inv.containers) if (c.id === id) left.push(`runsc state ${c.file}`);
    for (const c of inv.cgroups) if (c.id === id) left.push(`cgroup ${c.path}`);
    for (const s of inv.sandboxes) if (s.cid === `mcp${id}`) left.push(`runsc sandbox process ${s.pid}`);
  }
  for (const pid of allPids()) {
    const p = proc(pid);
    if (!p) continue;
    const cmd = p.argv.join(' ');
    if (cmd.includes(sid) || [...sandboxIds].some((id) => cmd.includes(id))) left.push(`process ${pid}: ${cmd}`);
  }
  for (const m of inv.mounts) if (m.includes(sid)) left.push(`mount ${m}`);
  return left;
}

/** A session's sandbox id (meta.json), or null. */
export function sandboxIdOf(sid, state = STATE_DIR) {
  try {
    return JSON.parse(fs.readFileSync(path.join(state, 'sessions', sid, 'meta.json'), 'utf8')).sandbox_id;
  } catch {
    return null;
  }
}

/** The supervisor and runsc sandbox processes of a session (by folder). */
export function sessionProcesses(sid, cfg, state = STATE_DIR) {
  const inv = inventory(state, cfg);
  const folder = path.join(state, 'sessions', sid);
  const sup = inv.supervisors.find((s) => s.folder === folder) || null;
  const sandbox = sup ? inv.sandboxes.find((s) => s.ppid === sup.pid) || null : null;
  return { supervisor: sup, sandbox, inv };
}

/** The responder (pid) that has the session's folder or call.lock open, or null. */
export function responderServing(sid, cfg, state = STATE_DIR) {
  const inv = inventory(state, cfg);
  const folder = path.join(state, 'sessions', sid);
  for (const pid of inv.responders) {
    if (fdTargets(pid).some((t) => t === folder || t.startsWith(`${folder}/`))) return pid;
  }
  return null;
}

/** The stack's tokens file: [name, token, options] for each token, in order. */
export function stackTokens(state = STATE_DIR) {
  const out = [];
  for (const line of (readText(path.join(state, 'tokens')) || '').split('\n')) {
    const [name, tok, ...options] = line.trim().split(/\s+/);
    if (!name || name.startsWith('#') || !tok) continue;
    out.push([name, tok, options.join(' ')]);
  }
  return out;
}

/** A token of the stack's tokens file other than `token`: [name, token] or null. */
export function otherToken(token, state = STATE_DIR) {
  const t = stackTokens(state).find(([, tok]) => tok !== token);
  return t ? [t[0], t[1]] : null;
}
