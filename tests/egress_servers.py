"""Servers on this machine for the egress allow-list test (tests/conformance.rs).

Three servers on every address of this machine, each answering GET with its own
name: `http` (plain), `https` (TLS, a self-signed certificate for `localhost` made
here with openssl) and `other` (plain). Prints their ports as one JSON line, then
serves until its standard input closes, so it goes with the test that started it.
"""

import http.server
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading


class Named(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.server.name.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(name, tls=None):
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Named)
    server.name = name
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def certificate(directory):
    key, cert = os.path.join(directory, "key.pem"), os.path.join(directory, "cert.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


with tempfile.TemporaryDirectory() as directory:
    tls = certificate(directory)
ports = {"http": serve("allowed-http"), "https": serve("allowed-https", tls),
         "other": serve("other-http")}
print(json.dumps(ports), flush=True)
sys.stdin.read()
