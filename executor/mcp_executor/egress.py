"""Network by policy, inside the sandbox (README.md): a relay on the
sandbox's loopback, run by PID 1, and the proxy settings of a call.

The sandbox has no network (runsc --network=none: only `lo`).  A call
whose request has an "egress" object gets HTTP_PROXY and friends pointing
at 127.0.0.1:<port>, where this relay listens (bound on the first such
call, kept for the session: PID 1 outlives the calls, which are killed at
their end).  Each connection to it is passed, byte for byte, to the unix
socket the supervisor binds in the session's egress folder
(/opt/mcp/egress/proxy.sock, sandbox/egress.h); the supervisor's relay
and the filtering proxy behind it decide everything.  With no egress in
the session nothing listens and no socket exists.

The relay runs inside the call's wait loop (call.py, Watch): select()
tells which of its sockets are ready; it never blocks.  At the call's end
its connections close.
"""

import os
import socket

FOLDER = "/opt/mcp/egress"
SOCKET = FOLDER + "/proxy.sock"
CA_BUNDLE = FOLDER + "/ca-bundle.pem"  # the system's CAs and the deployment's
CHUNK = 65536
BAD_GATEWAY = (b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
               b"Connection: close\r\n\r\n%s")


def proxy_env(req):
    """The call's proxy variables (and CA variables when the proxy
    terminates TLS for a host of the call with a credential), or {}."""
    egress = req.get("egress")
    if not isinstance(egress, dict) or not egress.get("port"):
        return {}
    url = "http://127.0.0.1:%d" % int(egress["port"])
    env = {}
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        env[name] = env[name.upper()] = url
    env["no_proxy"] = env["NO_PROXY"] = "localhost,127.0.0.1,::1"
    env["npm_config_proxy"] = env["npm_config_https_proxy"] = url
    if egress.get("ca"):
        for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO",
                     "NODE_EXTRA_CA_CERTS"):
            env[name] = CA_BUNDLE
    return env


class Pair:
    """One client connection and its way to the host."""

    def __init__(self, client):
        self.client = client
        self.host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.host.setblocking(False)
        self.up = bytearray()  # client -> host
        self.down = bytearray()  # host -> client
        self.client_eof = self.host_eof = False
        self.up_shut = self.down_shut = False
        err = self.host.connect_ex(SOCKET)
        if err != 0:  # a unix socket connects at once, or not at all
            text = b"egress failed: the relay to the proxy is not there (%s)\n" % os.strerror(err).encode()
            self.down += BAD_GATEWAY % (len(text), text)
            self.host_eof = True
            self.host.close()
            self.host = None

    def fds(self):
        """(readable wanted, writable wanted) as lists of sockets."""
        r, w = [], []
        if not self.client_eof and not self.up:
            r.append(self.client)
        if self.host is not None and not self.host_eof and not self.down:
            r.append(self.host)
        if self.host is not None and self.up:
            w.append(self.host)
        if self.down:
            w.append(self.client)
        return r, w

    def done(self):
        return self.client_eof and self.host_eof and not self.up and not self.down

    def close(self):
        for s in (self.client, self.host):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass

    def step(self, sock, readable, writable):
        """Move what can move; False when the pair is broken."""
        try:
            if readable and sock is self.client:
                data = self.client.recv(CHUNK)
                self.up += data
                self.client_eof = not data
            elif readable and sock is self.host:
                data = self.host.recv(CHUNK)
                self.down += data
                self.host_eof = not data
            if writable and sock is self.host and self.up:
                del self.up[:self.host.send(self.up)]
            if writable and sock is self.client and self.down:
                del self.down[:self.client.send(self.down)]
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        self.pass_ends()
        return True

    def pass_ends(self):
        """An end with nothing left to send goes on to the other side."""
        if self.client_eof and not self.up and not self.up_shut and self.host is not None:
            self.up_shut = True
            shut(self.host)
        if self.host_eof and not self.down and not self.down_shut:
            self.down_shut = True
            shut(self.client)


def shut(sock):
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class Relay:
    """The listener on the sandbox's loopback and its connections."""

    def __init__(self):
        self.listener = None
        self.port = 0
        self.pairs = []

    def ensure(self):
        """Listen (once per session); the port, or 0 when it cannot."""
        if self.listener is None:
            try:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                s.bind(("127.0.0.1", 0))
                s.listen(64)
                self.listener, self.port = s, s.getsockname()[1]
            except OSError:
                return 0
        return self.port

    def select_sets(self):
        """The sockets to select() on for reading and for writing."""
        if self.listener is None:
            return [], []
        r, w = [self.listener], []
        for p in self.pairs:
            pr, pw = p.fds()
            r += pr
            w += pw
        return r, w

    def on_ready(self, readable, writable):
        """After select(): accept, then move bytes."""
        if self.listener is None:
            return
        if self.listener in readable:
            self.accept()
        for p in list(self.pairs):
            ok = True
            for sock in (p.client, p.host):
                if sock is not None and (sock in readable or sock in writable):
                    ok = ok and p.step(sock, sock in readable, sock in writable)
            if not ok or p.done():
                p.close()
                self.pairs.remove(p)

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.pairs.append(Pair(client))

    def end_call(self):
        """The call is over: its connections close, and any still waiting
        to be accepted (its processes are gone)."""
        for p in self.pairs:
            p.close()
        self.pairs = []
        while self.listener is not None:
            try:
                self.listener.accept()[0].close()
            except OSError:
                return
