# A web server the SDK tests start inside the sandbox (sdk.mjs, "ports:" cases),
# reached through airlock's guest-port route (getHost(port), E2b-Sandbox-Port).
#   GET /info    -> the Host and path it was asked for, header X-Guest: yes
#   GET /stream  -> NDJSON, chunked: line 0, then line 1 only once /tmp/go-ID exists
#                   (?id=ID): a proxy that held the answer would never show line 0
#   POST /echo   -> the body back (Content-Length or chunked)
#   GET /ws      -> WebSocket: each text frame comes back prefixed "echo:"
import base64, hashlib, os, socketserver, sys, time, http.server
from urllib.parse import urlparse, parse_qs

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def ws(self):
        key = self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept",
                         base64.b64encode(hashlib.sha1(key.encode()).digest()).decode())
        self.end_headers()
        self.wfile.flush()
        while True:
            h = self.rfile.read(2)
            if len(h) < 2 or h[0] & 0x0F == 8:
                return
            n, mask = h[1] & 0x7F, self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            out = b"echo:" + data
            self.wfile.write(bytes([0x81, len(out)]) + out)
            self.wfile.flush()

    def do_GET(self):
        u = urlparse(self.path)
        if u.path == "/ws":
            return self.ws()
        if u.path == "/stream":
            go = "/tmp/go-" + parse_qs(u.query).get("id", ["x"])[0]
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(2):
                line = ('{"n":%d}\n' % i).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
                while i == 0 and not os.path.exists(go):
                    time.sleep(0.05)
            self.wfile.write(b"0\r\n\r\n")
            return
        body = ("host=%s path=%s" % (self.headers.get("Host"), self.path)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("X-Guest", "yes")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = b""
        if self.headers.get("Transfer-Encoding") == "chunked":
            while True:
                n = int(self.rfile.readline().strip(), 16)
                body += self.rfile.read(n)
                self.rfile.readline()
                if n == 0:
                    break
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

Server(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()
