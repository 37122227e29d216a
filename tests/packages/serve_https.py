#!/usr/bin/python3
"""Serve a folder over HTTPS: the tests' package index and npm registry
(scripts/test), with a certificate of a test CA that the service trusts only
through the CA bundle of its environment (SSL_CERT_FILE), as a company's
intercepting proxy is trusted through the system's store.  pip and npm on the
host must take that bundle: without it every install fails with a
certificate error.

    serve_https.py HOST PORT FOLDER CERT KEY
"""

import functools
import http.server
import ssl
import sys


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


def main():
    host, port, folder, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    srv = http.server.ThreadingHTTPServer((host, port), functools.partial(Quiet, directory=folder))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
