// Hibernation seen from the host (sandbox/hibernate.h): a session's image,
// its processes and their memory, and the in-memory state the tests look
// for. Shared by hibernate.test.mjs and hibernate.mjs (the restart phases).
// Needs root and MCP_STATE_DIR.
import fs from 'node:fs';
import path from 'node:path';
import { STATE_DIR, sleep, inventory, childrenOf } from './host.mjs';

/**
 * The in-memory state the tests can see without any test hook: the
 * executor (the sandbox's PID 1) imports what a call used (learn_modules)
 * and forks every later call from itself, so a call that starts with numpy
 * and pandas already in sys.modules runs in an executor that imported them
 * earlier; one started anew (a cold boot) has neither. LOAD builds a
 * DataFrame (and so imports both) and writes a file with the secret.
 */
export const loadCode = (secret) =>
  [
    'import numpy, pandas',
    "df = pandas.DataFrame({'a': numpy.arange(1000), 'b': numpy.arange(1000) % 7})",
    `open('kept.txt', 'w').write('${secret}')`,
    "print(int(df.groupby('b')['a'].sum().sum()))",
  ].join('\n');
export const LOAD_OUT = '499500\n';
/** Prints "True True <secret>" in a sandbox that imported numpy and pandas before. */
export const PROBE = "import sys\nprint('numpy' in sys.modules, 'pandas' in sys.modules, open('kept.txt').read())";

export function sessionDir(sid, state = STATE_DIR) {
  return path.join(state, 'sessions', sid);
}

/** The published image's files and their bytes, or null. */
export function image(sid, state = STATE_DIR) {
  const dir = path.join(sessionDir(sid, state), 'hibernated');
  try {
    const info = JSON.parse(fs.readFileSync(path.join(dir, 'info.json'), 'utf8'));
    const files = fs.readdirSync(dir).filter((n) => n !== 'info.json');
    const bytes = files.reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
    return { dir, info, files, bytes };
  } catch {
    return null;
  }
}

/** The session's supervisor and everything below it (runsc sandbox, gofer, ptrace stubs). */
export function sessionPids(sid, cfg, state = STATE_DIR) {
  const inv = inventory(state, cfg);
  const sup = inv.supervisors.find((s) => s.folder === sessionDir(sid, state));
  const out = [];
  const walk = (pid) => {
    out.push(pid);
    for (const c of childrenOf(pid)) walk(c);
  };
  if (sup) walk(sup.pid);
  return out;
}

function pssKiB(pid) {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** What the session holds in memory now, measured on the host: the PSS of
 * its processes and its sandbox's memory cgroup (usage), if any. */
export function sessionMemory(sid, sandboxId, cfg, state = STATE_DIR) {
  const pids = sessionPids(sid, cfg, state);
  let cgroupBytes = null;
  if (cfg.cgroup_parent) {
    try {
      const p = `/sys/fs/cgroup/memory/${cfg.cgroup_parent}/mcp${sandboxId}/memory.usage_in_bytes`;
      cgroupBytes = Number(fs.readFileSync(p, 'utf8'));
    } catch {
      /* no cgroup */
    }
  }
  return { pids, pssKiB: pids.reduce((n, p) => n + pssKiB(p), 0), cgroupBytes };
}

/** Wait until the session is hibernated: its image published, its supervisor gone. */
export async function waitHibernated(sid, cfg, ms, state = STATE_DIR) {
  const started = Date.now();
  for (;;) {
    const img = image(sid, state);
    if (img && sessionPids(sid, cfg, state).length === 0) return { ...img, waitedMs: Date.now() - started };
    if (Date.now() - started > ms) return null;
    await sleep(100);
  }
}

/** The audit log's JSON lines of one session. */
export function auditOf(sid, state = STATE_DIR) {
  let text = '';
  try {
    text = fs.readFileSync(path.join(state, 'logs', 'audit.log'), 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((l) => l.session_id === sid);
}
