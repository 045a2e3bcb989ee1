#!/usr/bin/python3
"""airlock's code-interpreter service: E2B's code-interpreter protocol on :49999.

Guest code, the untrusted side: it runs as the template's user inside the
sandbox, started by the agent as the code-interpreter-v1 template's start
command (images/code-interpreter.json). It only listens once the default
kernel is up and one warm-up execution has run, and the template's ready
check waits for exactly that (ready.port 49999), so the pool's base
snapshot holds a warm kernel and runCode from a pooled sandbox is fast.

The protocol (shared spec e2b-delta.md §3, @e2b/code-interpreter 2.8.0):
  POST /execute {"code", "context_id"?, "language"?, "env_vars"?}
       -> 200, chunked NDJSON, one object per line: number_of_executions,
          stdout/stderr (with timestamp), result (MIME bundle by key),
          error (name, value, traceback), keepalive every 5 s idle,
          end_of_execution last. Both context_id and language: 400; an
          unknown context or an unavailable language: 404 (text).
  POST /contexts {"language", "cwd"} -> {"id", "language", "cwd"}
  GET /contexts, DELETE /contexts/{id}, POST /contexts/{id}/restart
  GET /health -> "OK"
One Jupyter kernel per context, one execution at a time per kernel (the
others wait). A client that goes away mid-execution interrupts the kernel.

Why not upstream's server: it needs pydantic 2 and a Jupyter server;
Debian 12 has pydantic 1.10 and fastapi 0.92. This uses only the standard
library and Debian's python3-jupyter-client / python3-ipykernel, without
a Jupyter server (jupyter_client talks to the kernels directly).

Env: the sandbox's env reaches the guest with /init, after this service
started (and after the snapshot a pooled sandbox is restored from), so
the agent writes it to /run/airlock/env.json at every /init. Before each
execution the context's kernel is brought up to date with that file; the
call's env_vars are set for that execution only, then restored (E2B's
semantics).

Only Python: Debian has no JavaScript, TypeScript, Java or bash kernels
(r-cran-irkernel exists but R is not in this template).
"""
import datetime
import faulthandler
import http.server
import json
import os
import queue
import socketserver
import sys
import threading
import time
import uuid

from jupyter_client.manager import KernelManager

# ipykernel's debugger warns on every kernel start that Python's modules are
# frozen (four lines into the start log): nothing here uses the debugger.
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")

PORT = 49999
KEEPALIVE_S = 5
ENV_FILE = "/run/airlock/env.json"
BODY_MAX = 16 * 1024 * 1024
KERNEL_START_S = 600            # TCG on a loaded host is slow
LANGUAGES = {"python": "python3", "python3": "python3"}

# Jupyter MIME types -> the keys the SDKs read (others keep their name; the SDKs put them in extra).
MIME_KEYS = {
    "text/plain": "text", "text/html": "html", "text/markdown": "markdown",
    "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg",
    "application/pdf": "pdf", "text/latex": "latex", "application/json": "json",
    "application/javascript": "javascript", "e2b/data": "data", "e2b/chart": "chart",
}

# Run in every new (or restarted) kernel: plain tracebacks, and DataFrames
# also as e2b/data (columns of JSON values), which the SDKs expose as data.
KERNEL_SETUP = r'''
%colors NoColor
def _airlock_setup():
    import json
    from IPython import get_ipython
    from IPython.core.formatters import JSONFormatter
    from traitlets import ObjectName, Unicode

    class E2BData(JSONFormatter):
        format_type = Unicode("e2b/data")
        print_method = ObjectName("_repr_e2b_data_")

    def frame(df):
        split = json.loads(df.to_json(orient="split", date_format="iso"))
        return {str(c): [row[i] for row in split["data"]] for i, c in enumerate(split["columns"])}

    ip = get_ipython()
    f = E2BData(parent=ip.display_formatter)
    f.for_type_by_name("pandas.core.frame", "DataFrame", frame)
    ip.display_formatter.formatters["e2b/data"] = f
_airlock_setup()
del _airlock_setup
'''

# The default context runs this once before the port opens: imports and
# one rendered plot and DataFrame, so the snapshot holds their code and
# matplotlib's font cache.
WARMUP = r'''
import faulthandler as _fh, sys as _sys
_fh.dump_traceback_later(60, repeat=True, file=_sys.__stderr__)
import numpy, pandas
import matplotlib.pyplot as _plt
_plt.plot([0, 1], [0, 1])
_plt.show()
pandas.DataFrame({"a": [1]})
_fh.cancel_dump_traceback_later()
del _fh, _sys
'''


# matplotlib's font list for this template's fonts, made natively from the
# template's debootstrap tree (as a user there: python3 -c "import
# matplotlib.font_manager", then ~/.cache/matplotlib/fontlist-v330.json):
# without it the first import of matplotlib scans every font, minutes
# under TCG.
FONTLIST = "/usr/local/lib/airlock/fontlist-v330.json"


def seed_font_cache():
    """Put the shipped font list where matplotlib looks, unless one is there.
    A stale one (another matplotlib, a missing font) matplotlib rebuilds itself."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    dst = os.path.join(base, "matplotlib", os.path.basename(FONTLIST))
    try:
        if not os.path.exists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(FONTLIST, "rb") as f, open(dst + ".tmp", "wb") as g:
                g.write(f.read())
            os.rename(dst + ".tmp", dst)
    except OSError as e:
        log("font cache not seeded: %s" % e)


def log(msg):
    sys.stderr.write("airlock-interp: %s\n" % msg)
    sys.stderr.flush()


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def sandbox_env():
    """The sandbox's env as the agent wrote it at the last /init ({} before any)."""
    try:
        with open(ENV_FILE) as f:
            env = json.load(f)
        return {k: v for k, v in env.items() if isinstance(v, str)}
    except (OSError, ValueError):
        return {}


class Context:
    """One kernel: its client, a lock (one execution at a time), the env it has."""

    def __init__(self, language, cwd):
        self.id = str(uuid.uuid4())
        self.language = language
        self.cwd = cwd
        self.lock = threading.Lock()
        self.km = KernelManager(kernel_name=LANGUAGES[language])
        self.km.start_kernel(cwd=cwd)
        # No heartbeat: after a snapshot restore the clock jumps and it would
        # call a live kernel dead. No stdin channel: input() raises at once.
        self.kc = self.km.client()
        self.kc.start_channels(stdin=False, hb=False)
        self.kc.wait_for_ready(timeout=KERNEL_START_S)
        self.env = {}
        self.setup()

    def json(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    def setup(self):
        self.env = {}
        self.run_silent(KERNEL_SETUP)

    def wait_reply(self, msg_id, timeout=KERNEL_START_S):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                m = self.kc.get_shell_msg(timeout=max(0.1, end - time.monotonic()))
            except queue.Empty:
                break
            if m["parent_header"].get("msg_id") == msg_id:
                return m
        raise TimeoutError("the kernel did not answer")

    def run_silent(self, code):
        self.wait_reply(self.kc.execute(code, silent=True, store_history=False))

    def sync_env(self, call_env):
        """The kernel's os.environ := the sandbox env now, plus the call's env_vars."""
        want = sandbox_env()
        changed = {k: v for k, v in want.items() if self.env.get(k) != v}
        gone = [k for k in self.env if k not in want]
        if not changed and not gone and not call_env:
            return              # the usual case: no extra round trip to the kernel
        code = "import os as _airlock_os\n"
        if changed:
            code += "_airlock_os.environ.update(%r)\n" % changed
        for k in gone:
            code += "_airlock_os.environ.pop(%r, None)\n" % k
        code += "_airlock_saved = {k: _airlock_os.environ.get(k) for k in %r}\n" % list(call_env)
        if call_env:
            code += "_airlock_os.environ.update(%r)\n" % call_env
        self.run_silent(code)
        self.env = want

    def restore_env(self, call_env):
        if call_env:
            self.run_silent("for _k, _v in _airlock_saved.items():\n"
                            "    (_airlock_os.environ.pop(_k, None) if _v is None else\n"
                            "     _airlock_os.environ.__setitem__(_k, _v))\n")

    def execute(self, code, call_env, emit, store_history=True):
        """Run code; emit(obj) -> False once the client is gone (then: interrupt, drain)."""
        with self.lock:
            self.sync_env(call_env)
            msg_id = self.kc.execute(code, store_history=store_history, allow_stdin=False)
            alive = True
            while True:
                try:
                    msg = self.kc.get_iopub_msg(timeout=KEEPALIVE_S)
                except queue.Empty:
                    if not self.km.is_alive():
                        # No heartbeat channel (see __init__): this is how a
                        # kernel that died mid-execution is noticed.
                        why = self.exit_status()
                        log("context %s: the kernel died (%s)" % (self.id, why))
                        if alive:
                            emit({"type": "error", "name": "KernelDied", "value": why,
                                  "traceback": "the kernel process exited: %s" % why})
                        return alive
                    if alive and not emit({"type": "keepalive"}):
                        alive = self.interrupt()
                    continue
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                kind, c = msg["msg_type"], msg["content"]
                if kind == "status" and c.get("execution_state") == "idle":
                    break
                out = self.translate(kind, c)
                if out is not None and alive and not emit(out):
                    alive = self.interrupt()
            try:
                self.wait_reply(msg_id, timeout=30)
            except TimeoutError:
                pass
            self.restore_env(call_env)
            return alive

    def exit_status(self):
        proc = getattr(self.km.provisioner, "process", None)
        rc = proc.poll() if proc is not None else None
        if rc is None:
            return "exit status unknown"
        return "killed by signal %d" % -rc if rc < 0 else "exit status %d" % rc

    def interrupt(self):
        log("client went away: interrupting context %s" % self.id)
        try:
            self.km.interrupt_kernel()
        except Exception as e:          # the kernel may be gone already
            log("interrupt: %r" % e)
        return False

    @staticmethod
    def translate(kind, c):
        if kind == "execute_input":
            return {"type": "number_of_executions", "execution_count": c.get("execution_count")}
        if kind == "stream":
            return {"type": "stdout" if c.get("name") == "stdout" else "stderr",
                    "text": c.get("text", ""), "timestamp": now_iso()}
        if kind in ("execute_result", "display_data"):
            r = {"type": "result", "is_main_result": kind == "execute_result"}
            for mime, v in c.get("data", {}).items():
                # Other MIME types under their own name: the SDKs collect them in extra.
                key = MIME_KEYS.get(mime, mime)
                if key == "text" and isinstance(v, str) and len(v) >= 2 and \
                        v[0] == v[-1] and v[0] in "'\"":
                    v = v[1:-1]     # a str's repr: E2B strips one pair of quotes
                r[key] = v
            return r
        if kind == "error":
            return {"type": "error", "name": c.get("ename", ""), "value": c.get("evalue", ""),
                    "traceback": "\n".join(c.get("traceback", []))}
        return None

    def restart(self):
        with self.lock:
            self.km.restart_kernel(now=True)
            self.kc.wait_for_ready(timeout=KERNEL_START_S)
            self.setup()

    def shutdown(self):
        with self.lock:
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=True)


contexts = {}                   # id -> Context
contexts_lock = threading.Lock()
default = None                  # the default python context


def unavailable(language):
    return ("language %r is not available in this sandbox: the code-interpreter-v1 "
            "template has only Python (airlock builds it from Debian packages, which "
            "have no JavaScript, TypeScript, Java, bash or R kernel here)" % language)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "airlock-interp"

    def log_message(self, fmt, *args):
        pass                    # one line per request would flood the guest log

    def text(self, status, body, ctype="text/plain; charset=utf-8"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def json_reply(self, status, obj):
        self.text(status, json.dumps(obj), "application/json")

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
                if len(data) > BODY_MAX:
                    raise ValueError("body too large")
        elif n > BODY_MAX:
            raise ValueError("body too large")
        else:
            data = self.rfile.read(n)
        if not data:
            return {}
        obj = json.loads(data)
        if not isinstance(obj, dict):
            raise ValueError("the body must be a JSON object")
        return obj

    def route(self):
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def do_GET(self):
        path = self.route()
        if path == "/health":
            self.text(200, '"OK"', "application/json")
        elif path == "/contexts":
            with contexts_lock:
                self.json_reply(200, [c.json() for c in contexts.values()])
        else:
            self.text(404, "not found")

    def do_DELETE(self):
        parts = self.route().split("/")
        if len(parts) == 3 and parts[1] == "contexts":
            with contexts_lock:
                ctx = contexts.pop(parts[2], None)
            if ctx is None:
                self.text(404, "Context %s not found" % parts[2])
                return
            ctx.shutdown()
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.text(404, "not found")

    def do_POST(self):
        try:
            req = self.body()
        except (ValueError, UnicodeDecodeError) as e:
            self.text(400, "bad request body: %s" % e)
            return
        parts = self.route().split("/")
        if parts == ["", "execute"]:
            self.execute(req)
        elif parts == ["", "contexts"]:
            self.create_context(req)
        elif len(parts) == 4 and parts[1] == "contexts" and parts[3] == "restart":
            with contexts_lock:
                ctx = contexts.get(parts[2])
            if ctx is None:
                self.text(404, "Context %s not found" % parts[2])
                return
            ctx.restart()
            self.json_reply(200, ctx.json())
        else:
            self.text(404, "not found")

    def create_context(self, req):
        language = req.get("language") or "python"
        cwd = req.get("cwd") or os.path.expanduser("~")
        if not isinstance(language, str) or not isinstance(cwd, str):
            self.text(400, "language and cwd must be strings")
            return
        if language not in LANGUAGES:
            self.text(404, unavailable(language))
            return
        if not os.path.isdir(cwd):
            self.text(400, "cwd %r is not a directory" % cwd)
            return
        ctx = Context("python", cwd)
        with contexts_lock:
            contexts[ctx.id] = ctx
        self.json_reply(200, ctx.json())

    def execute(self, req):
        code, cid, language = req.get("code"), req.get("context_id"), req.get("language")
        env = req.get("env_vars") or {}
        if not isinstance(code, str):
            self.text(400, "code: must be a string")
            return
        if cid and language:
            self.text(400, "Only one of context_id or language can be provided")
            return
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in env.items()):
            self.text(400, "env_vars: must be an object of strings")
            return
        if cid:
            with contexts_lock:
                ctx = contexts.get(cid)
            if ctx is None:
                self.text(404, "Context %s not found" % cid)
                return
        elif language is not None and not isinstance(language, str):
            self.text(400, "language: must be a string")
            return
        elif language and language not in LANGUAGES:
            self.text(404, unavailable(language))
            return
        else:
            ctx = default
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        ctx.execute(code, env, self.emit)
        if self.emit({"type": "end_of_execution"}):
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass
        self.close_connection = True

    def emit(self, obj):
        """One NDJSON line in its own chunk, flushed; False once the client is gone."""
        line = (json.dumps(obj) + "\n").encode()
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()
            return True
        except OSError:
            return False


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global default
    t0 = time.monotonic()
    # Bound now, listening only once warm: the kernels' ZMQ sockets take
    # ephemeral ports (32768-60999 holds 49999) and must not get this one,
    # while the ready check (a connect) fails until the listen.
    server = Server(("0.0.0.0", PORT), Handler, bind_and_activate=False)
    server.server_bind()
    # Until the port opens, this output reaches the console and the failed
    # create's cause: a start that hangs says where, every minute.
    faulthandler.dump_traceback_later(60, repeat=True)
    seed_font_cache()
    log("starting the default kernel")
    default = Context("python", os.path.expanduser("~"))
    contexts[default.id] = default
    log("kernel up in %.1f s; warming up" % (time.monotonic() - t0))
    # The warm-up's own output is dropped; store_history off keeps the first
    # user execution number 1.
    default.execute(WARMUP, {}, lambda obj: True, store_history=False)
    if not default.km.is_alive():
        log("the default kernel died during the warm-up (%s)" % default.exit_status())
        sys.exit(1)
    faulthandler.cancel_dump_traceback_later()
    log("kernel ready and warmed up in %.1f s; listening on :%d" % (time.monotonic() - t0, PORT))
    server.server_activate()
    server.serve_forever()


if __name__ == "__main__":
    main()
