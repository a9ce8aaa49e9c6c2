"""Servers on this machine for the egress allow-list test (tests/conformance.rs).

Servers on every address of this machine, three answering GET with their own name:
`http` (plain), `https` (TLS, a self-signed certificate for `localhost` made here
with openssl) and `other` (plain); and `echo` (plain), which answers with the head of
the request it got (and its body) and, when a file is named as the first argument, appends that head
to it as one JSON line: what arrived, for the test to read. `echo-tls` is `echo` over
TLS, HTTP/1.1 with connections kept alive, its certificate for `localhost` signed by a
CA made here, whose certificate is `ca` in the JSON line. Prints their ports (and
`ca`) as one JSON line, then serves until its standard input closes, so it goes with
the test that started it.
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


class Echo(Named):
    def do_POST(self):
        self.do_GET()

    def do_GET(self):
        head = self.requestline + "\r\n" + str(self.headers)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            head += "\r\n" + self.rfile.read(length).decode("latin-1")
        if len(sys.argv) > 1:
            with open(sys.argv[1], "a") as log:
                log.write(json.dumps(head) + "\n")
        body = head.encode("latin-1")
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class KeptAlive(Echo):
    protocol_version = "HTTP/1.1"


def serve(name, tls=None, handler=Named):
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), handler)
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


def signed_by_a_ca(directory):
    """A CA, and a certificate for `localhost` it signed: the context serving it and
    the CA's certificate, PEM."""
    path = lambda name: os.path.join(directory, name)
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True)
    run("req", "-x509", *curve, "-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "1",
        "-subj", "/CN=sandlot test upstream CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", *curve, "-keyout", path("leaf.key"), "-out", path("leaf.csr"),
        "-subj", "/CN=localhost")
    with open(path("leaf.ext"), "w") as ext:
        ext.write("subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n"
                  "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", path("leaf.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
        "-CAcreateserial", "-out", path("leaf.pem"), "-days", "1", "-extfile", path("leaf.ext"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(path("leaf.pem"), path("leaf.key"))
    with open(path("ca.pem")) as ca:
        return context, ca.read()


with tempfile.TemporaryDirectory() as directory:
    tls = certificate(directory)
with tempfile.TemporaryDirectory() as directory:
    signed, ca = signed_by_a_ca(directory)
ports = {"http": serve("allowed-http"), "https": serve("allowed-https", tls),
         "other": serve("other-http"), "echo": serve("echo", handler=Echo),
         "echo-tls": serve("echo-tls", signed, handler=KeptAlive), "ca": ca}
print(json.dumps(ports), flush=True)
sys.stdin.read()
