// Preloaded into the reference server by scripts/bench (node --require):
// server-everything listens on every interface (app.listen(PORT)); for the
// benchmark it must be reachable on loopback only, behind nginx.  A listen()
// that names only a port gets host 127.0.0.1 added; nothing else changes.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const portOnly = typeof args[0] === "number" || (typeof args[0] === "string" && /^[0-9]+$/.test(args[0]));
  if (portOnly && (args.length === 1 || typeof args[1] === "function")) args.splice(1, 0, "127.0.0.1");
  return listen.apply(this, args);
};
