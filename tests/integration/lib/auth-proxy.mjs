// A small local proxy for clients that cannot send headers or trust our CA
// (the conformance suite): plain HTTP on 127.0.0.1 (random free port), every
// request forwarded to MCP_URL's origin with `Authorization: Bearer TOKEN`
// added, TLS verified against MCP_CA_FILE. Responses are streamed chunk by
// chunk (SSE) without buffering, and a client disconnect aborts the upstream
// request.
//
// Host/Origin: the proxy's own authority (the one the client was given, e.g.
// Host `127.0.0.1:PORT`, Origin `http://127.0.0.1:PORT`) is rewritten to the
// upstream's (Host `127.0.0.1:8443`, Origin `https://127.0.0.1:8443`), so a
// same-origin request through the proxy looks like a same-origin request to
// the real server. Any other Host or Origin value (e.g. `evil.example.com`) is
// forwarded unchanged, so the server's own Host/Origin checks are exercised.
//
// Standalone: MCP_URL=... MCP_TOKEN=... MCP_CA_FILE=... node lib/auth-proxy.mjs [PORT]
// prints the local URL and logs each request on stderr.
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import net from 'node:net';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

export async function startAuthProxy({ upstreamUrl, token, caPem, port = 0, onLog = () => {} }) {
  const upstream = new URL(upstreamUrl);
  const isHttps = upstream.protocol === 'https:';
  const upstreamPort = upstream.port || (isHttps ? '443' : '80');
  const upstreamHostname = upstream.hostname.replace(/^\[|\]$/g, '');
  const upstreamAuthority = upstream.host; // hostname[:port] as in the URL
  const upstreamOrigin = upstream.origin;
  const agent = isHttps
    ? new https.Agent({
        keepAlive: true,
        ca: caPem,
        // No SNI for an IP address; otherwise the upstream's name, never the
        // (possibly hostile) Host header the client sent.
        servername: net.isIP(upstreamHostname) ? '' : upstreamHostname,
        checkServerIdentity: (_host, cert) => tls.checkServerIdentity(upstreamHostname, cert),
      })
    : new http.Agent({ keepAlive: true });
  const mod = isHttps ? https : http;
  let proxyAuthority = '';
  let seq = 0;

  const server = http.createServer((req, res) => {
    const n = ++seq;
    const headers = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (!HOP_BY_HOP.has(k)) headers[k] = v;
    }
    if (headers.host === proxyAuthority) headers.host = upstreamAuthority;
    if (headers.origin === `http://${proxyAuthority}`) headers.origin = upstreamOrigin;
    headers.authorization = `Bearer ${token}`;
    // Request bodies (one JSON-RPC message) are small: read them whole so the
    // log can name the JSON-RPC method; responses are streamed.
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('error', () => res.destroy());
    req.on('end', () => forward(Buffer.concat(chunks)));

    function forward(body) {
      let rpc = '';
      if (body.length) {
        try {
          const m = JSON.parse(body.toString('utf8'));
          rpc = Array.isArray(m)
            ? ' rpc=[batch]'
            : ` rpc=${m.method ?? (m.result !== undefined || m.error !== undefined ? 'response' : '?')}${m.id !== undefined ? `(id ${m.id})` : ''}`;
        } catch {
          rpc = ' rpc=<not json>';
        }
        delete headers['content-length'];
        headers['content-length'] = String(body.length);
      }
      const desc = `[${n}] ${req.method} ${req.url}${rpc} host=${headers.host ?? '-'} origin=${headers.origin ?? '-'} sid=${
        headers['mcp-session-id'] ?? '-'
      } pv=${headers['mcp-protocol-version'] ?? '-'} accept=${headers.accept ?? '-'}`;

      const up = mod.request({
        agent,
        hostname: upstreamHostname,
        port: upstreamPort,
        method: req.method,
        path: req.url,
        headers,
      });
      up.on('response', (ur) => {
        onLog(`${desc} -> ${ur.statusCode} ${ur.headers['content-type'] ?? ''}`);
        const out = {};
        for (const [k, v] of Object.entries(ur.headers)) {
          if (!HOP_BY_HOP.has(k)) out[k] = v;
        }
        res.writeHead(ur.statusCode, ur.statusMessage, out);
        res.flushHeaders();
        ur.on('data', (chunk) => res.write(chunk));
        ur.on('end', () => res.end());
        ur.on('error', () => res.destroy());
        ur.on('aborted', () => res.destroy());
      });
      up.on('error', (err) => {
        onLog(`${desc} -> upstream error: ${err.message}`);
        if (!res.headersSent) {
          res.writeHead(502, { 'content-type': 'text/plain' });
          res.end(`auth-proxy: upstream error: ${err.message}\n`);
        } else {
          res.destroy();
        }
      });
      // Client went away (e.g. it cancelled an SSE stream): drop the upstream too.
      res.on('close', () => {
        if (!res.writableFinished) up.destroy();
      });
      up.end(body);
    }
  });
  server.on('connection', (s) => s.setNoDelay(true));

  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const { port: actualPort } = server.address();
  proxyAuthority = `127.0.0.1:${actualPort}`;
  const url = `http://${proxyAuthority}${upstream.pathname}${upstream.search}`;

  return {
    url,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
        agent.destroy();
      }),
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === fs.realpathSync(process.argv[1])) {
  const { MCP_URL, MCP_TOKEN, MCP_CA_FILE } = process.env;
  if (!MCP_URL || !MCP_TOKEN || !MCP_CA_FILE) {
    console.error('usage: MCP_URL=... MCP_TOKEN=... MCP_CA_FILE=... node lib/auth-proxy.mjs [PORT]');
    process.exit(2);
  }
  const p = await startAuthProxy({
    upstreamUrl: MCP_URL,
    token: MCP_TOKEN,
    caPem: fs.readFileSync(MCP_CA_FILE),
    port: Number(process.argv[2] || 0),
    onLog: (l) => console.error(l),
  });
  console.log(p.url);
}
