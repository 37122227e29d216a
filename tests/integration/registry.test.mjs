// Packages from the real npm registry, through the service's own install
// path (npm as package_user on the host, the tree copied into the session,
// require() in the sandbox). Needs a stack whose npm_registry is the real
// one: scripts/test starts the faults stack that way and says so with
// MCP_TEST_REAL_NPM_REGISTRY when the registry answers from this machine
// (it may be reached through an intercepting proxy whose CA is in the
// system's trust store only); otherwise the test is skipped with a note.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TEST_TIMEOUT_MS, connectClient, closeClient } from './lib/common.mjs';

const REAL = process.env.MCP_TEST_REAL_NPM_REGISTRY || '';

test('the real npm registry: lodash@4 installs through the service and loads in the sandbox, within seconds', {
  timeout: TEST_TIMEOUT_MS,
  skip: REAL ? false : 'MCP_TEST_REAL_NPM_REGISTRY not set: the real npm registry was not reachable from this machine (scripts/test checks)',
}, async (t) => {
  const c = await connectClient('registry-real');
  try {
    const t0 = Date.now();
    const r = await c.client.callTool({
      name: 'execute_javascript',
      arguments: {
        code: "const _ = require('lodash'); console.log(_.VERSION.split('.')[0], _.chunk([1, 2, 3, 4, 5], 2).length)",
        packages: ['lodash@4'],
      },
    }, undefined, { timeout: TEST_TIMEOUT_MS });
    const ms = Date.now() - t0;
    t.diagnostic(`execute_javascript with packages ["lodash@4"] from ${REAL}: ${ms} ms`);
    assert.equal(r.isError ?? false, false, JSON.stringify(r).slice(0, 3000));
    assert.equal(r.structuredContent.stdout, '4 3\n');
    assert.ok(ms < 60000, `the call took ${ms} ms`);
  } finally {
    await closeClient(c);
  }
});
