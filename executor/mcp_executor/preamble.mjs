// Imported before a JavaScript call's code (node --import), in the cold
// path and in the warm Node.js spare alike; the executor writes it to
// /work/.mcp/preamble.mjs (node_call.py).  CommonJS names for the code,
// and blocking stdout/stderr: on pipes Node.js writes asynchronously and
// would buffer everything a chatty program prints in memory, until V8
// aborts; blocking writes let the executor's output cap drain it instead.
import { createRequire } from 'node:module';
globalThis.require = createRequire('/work/.mcp/main.mjs');
globalThis.__filename = '/work/.mcp/main.mjs';
globalThis.__dirname = '/work';
for (const s of [process.stdout, process.stderr]) s._handle?.setBlocking?.(true);
// Network by policy (README.md): this Node.js's fetch() ignores
// HTTP(S)_PROXY.  When the call has a proxy, fetch's requests go through
// it: https:// as a CONNECT tunnel (TLS end to end), http:// as requests
// with an absolute URL (what the proxy filters, request by request);
// NO_PROXY hosts directly.  The agent's class is the one fetch itself uses
// (undici inside Node.js), taken from its default dispatcher.  spare.mjs
// calls this again once the warm spare has the call's environment.
const DISPATCHER = Symbol.for('undici.globalDispatcher.1');
const env = (name) => process.env[name] ?? process.env[name.toLowerCase()];
function bypass(host) {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return (env('NO_PROXY') ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean)
    .some((e) => e === '*' || h === e.replace(/^\./, '') || h.endsWith(e.startsWith('.') ? e : '.' + e));
}
function tunnel(proxy, ca) {
  const net = require('node:net');
  const tls = require('node:tls');
  return (opts, callback) => {
    let cb = callback;
    const done = (err, sock) => { const c = cb; cb = null; if (c) c(err, sock); };
    const host = opts.hostname.replace(/^\[|\]$/g, '');
    const port = Number(opts.port) || 443;
    const target = `${net.isIPv6(host) ? `[${host}]` : host}:${port}`;
    const sock = net.connect({ host: proxy.hostname, port: Number(proxy.port) || 80 });
    sock.once('error', (e) => done(e));
    sock.once('connect', () => sock.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
    let head = Buffer.alloc(0);
    const refused = () => {
      const text = head.toString('utf8');
      const [status] = text.split('\r\n');
      const body = text.slice(text.indexOf('\r\n\r\n') + 4).trim().split('\n')[0];
      sock.destroy();
      done(Object.assign(new Error(`${status} from the egress proxy for ${target}: ${body}`), { code: 'EGRESS_REFUSED' }));
    };
    const onData = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return head.length > 65536 ? refused() : undefined;
      if (!/^HTTP\/1\.[01] 200/.test(head.toString('latin1', 0, 16))) {
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(head.toString('latin1', 0, end));
        if (head.length - end - 4 >= Math.min(m ? Number(m[1]) : 0, 4096)) refused();
        else sock.once('end', refused);
        return undefined;
      }
      sock.off('data', onData);
      if (head.length > end + 4) sock.unshift(head.subarray(end + 4));
      const servername = net.isIP(host) ? undefined : host;
      const t = tls.connect({ socket: sock, servername, ALPNProtocols: ['http/1.1'], ...(ca ? { ca } : {}) });
      t.once('secureConnect', () => done(null, t));
      t.once('error', (e) => done(e));
      return undefined;
    };
    sock.on('data', onData);
  };
}
function setupEgress() {
  let proxy;
  try { proxy = new URL(env('HTTPS_PROXY') ?? env('HTTP_PROXY')); } catch { return; }
  void globalThis.Headers; // loads fetch's undici, which makes its default dispatcher
  const Agent = globalThis[DISPATCHER]?.constructor;
  if (typeof Agent !== 'function' || globalThis[DISPATCHER].mcpEgress) return;
  // Node.js reads NODE_EXTRA_CA_CERTS at start only (a warm spare started
  // earlier); SSL_CERT_FILE names the deployment's CA bundle when the proxy
  // terminates TLS for a host of the call (egress.py).
  let ca;
  const extra = [env('NODE_EXTRA_CA_CERTS'), env('SSL_CERT_FILE')].filter(Boolean);
  if (extra.length) {
    try { ca = [...require('node:tls').rootCertificates, ...extra.map((f) => require('node:fs').readFileSync(f, 'utf8'))]; } catch {}
  }
  const plain = new Agent();
  const tunnelled = new Agent({ connect: tunnel(proxy, ca) });
  const proxyOrigin = `http://${proxy.host}`;
  globalThis[DISPATCHER] = {
    mcpEgress: true,
    dispatch(opts, handler) {
      const origin = new URL(opts.origin);
      if (bypass(origin.hostname)) return plain.dispatch(opts, handler);
      if (origin.protocol === 'https:') return tunnelled.dispatch(opts, handler);
      let headers = opts.headers ?? {};
      if (Array.isArray(headers)) headers = [...headers, 'host', origin.host];
      else headers = { ...headers, host: origin.host };
      return plain.dispatch({ ...opts, origin: proxyOrigin, path: origin.origin + opts.path, headers }, handler);
    },
    close() { return Promise.all([plain.close(), tunnelled.close()]); },
    destroy() { return Promise.all([plain.destroy(), tunnelled.destroy()]); },
  };
}
globalThis[Symbol.for('mcp.egress.setup')] = setupEgress;
setupEgress();
