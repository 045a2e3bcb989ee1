#!/usr/bin/env python3
"""Template start commands and ready checks (issue 15 item 5), real daemon and VMs.

A template whose start command serves HTTP on guest port 8080 only after a
delay (sleep 3), with ready.port 8080: right after create, cold and from a
pool, the port answers (without the ready wait the sleep would make the
first request fail; without the start command nothing listens). The
sandbox's own env reaches the start command's user in /run/airlock/env.json.
A start command that exits before it is ready fails the create, naming it
and quoting its output.
Usage: test_start.py AIRLOCKD [DATA_ROOT]"""
import json, os, signal, subprocess, sys, tempfile, time, traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, Daemon

failures = []
TMPL = f"test-start-{os.getpid()}"
BAD = f"test-start-bad-{os.getpid()}"
SHAPE = {"vcpus": 2, "memory_mb": 512}
# Serves only 3 s after boot: a create that did not wait for ready.port finds nothing.
START = ("mkdir -p /tmp/www && echo served-by-start > /tmp/www/index.html && sleep 3 && "
         "exec python3 -m http.server 8080 --bind 127.0.0.1 --directory /tmp/www")

def check(name, cond, detail=""):
    print(("ok: " if cond else "FAIL: ") + name + ("" if cond else f" ({detail})"), flush=True)
    if not cond:
        failures.append(name)

def build(cli, root, name, extra):
    recipe = json.load(open(os.path.join(os.path.dirname(__file__), "../../images/base.json")))
    recipe.update(extra)        # base's packages: its debootstrap tree is cached
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(recipe, f)
    env = dict(os.environ, AIRLOCK_DATA_DIR=root)
    r = subprocess.run([cli, "template", "build", name, "--recipe", f.name, "--local", "--agent",
                        os.path.join(root, "bin/airlock-agent")], env=env, capture_output=True,
                       text=True)
    os.unlink(f.name)
    return r

def curl(c, sid):
    return c.exec(sid, ["curl", "-s", "--max-time", "5", "http://127.0.0.1:8080/"])

def test_cold(c):
    sb = c.call("POST", "/v1/sandboxes", dict(SHAPE, template=TMPL, env={"FOO": "bar-cold"}))
    code, _, out, err = curl(c, sb["id"])
    check("cold: the start command answers on its port right after create",
          code == 0 and out == b"served-by-start\n", (code, out, err))
    code, _, out, _ = c.exec(sb["id"], ["sh", "-c", "id -un; cat /run/airlock/env.json"])
    lines = out.decode().split("\n", 1)
    env = json.loads(lines[1]) if len(lines) > 1 and lines[1] else {}
    check("the sandbox env reaches the start command's user (/run/airlock/env.json)",
          code == 0 and lines[0] == "user" and env.get("FOO") == "bar-cold" and
          env.get("AIRLOCK_SANDBOX_ID") == sb["id"], out)
    code, _, out, _ = c.exec(sb["id"], ["sh", "-c", "ps -o user= -C python3 | head -1"])
    check("the start command runs as the template's user", out.strip() == b"user", out)
    c.call("DELETE", f"/v1/sandboxes/{sb['id']}")

def test_bad(c):
    try:
        c.call("POST", "/v1/sandboxes", dict(SHAPE, template=BAD), expect=(201,))
        check("a start command that exits before ready fails the create", False, "created")
    except ApiError as e:
        msg = json.dumps(e.body)
        check("a start command that exits before ready fails the create, naming it",
              e.status >= 500 and "start command: exited with status 3 before it was ready" in msg
              and "broken-start-output" in msg, (e.status, msg[:600]))

def test_pool(d, root):
    c = d.start({"AIRLOCK_POOL": f"{TMPL}=1", "AIRLOCK_POOL_REFILLS": "1"})
    end = time.time() + 900
    p = None
    while time.time() < end:
        p = c.call("GET", "/v1/pools")["pools"][0]
        if p["ready"] >= 1:
            break
        time.sleep(1)
    check("the pool builds its base after ready and fills", p and p["ready"] >= 1, p)
    sb = c.call("POST", "/v1/sandboxes", dict(SHAPE, template=TMPL, env={"FOO": "bar-pool"}))
    check("the create is served by the pool", sb.get("tier") == "pool", sb.get("tier"))
    code, _, out, err = curl(c, sb["id"])
    check("pool: the start command answers on its port right after create",
          code == 0 and out == b"served-by-start\n", (code, out, err))
    code, _, out, _ = c.exec(sb["id"], ["cat", "/run/airlock/env.json"])
    check("pool: /run/airlock/env.json has the claimer's env",
          json.loads(out or b"{}").get("FOO") == "bar-pool", out)
    c.call("DELETE", f"/v1/sandboxes/{sb['id']}")

def main():
    binary = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock")
    cli = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(binary))), "cli/airlock")
    d = Daemon(binary, root)
    try:
        r = build(cli, root, TMPL, {"start": START, "ready": {"port": 8080, "timeout_s": 300}})
        check("a template with start + ready builds", r.returncode == 0, r.stdout + r.stderr)
        meta = json.load(open(os.path.join(root, "templates", TMPL, "template.json")))
        check("template.json records the start config",
              meta.get("start_config", {}).get("ready") == {"port": 8080}, meta.get("start_config"))
        r = build(cli, root, BAD, {"start": "echo broken-start-output; exit 3",
                                   "ready": {"port": 8081}})
        check("a template with a failing start command builds", r.returncode == 0, r.stderr)
        c = d.start()
        print("-- cold", flush=True)
        test_cold(c)
        test_bad(c)
        d.kill(signal.SIGTERM)
        print("-- pool", flush=True)
        test_pool(d, root)
        d.kill(signal.SIGTERM)
    except Exception as e:
        traceback.print_exc()
        check("raised no exception", False, repr(e))
    finally:
        if failures:
            print("airlockd log tail:\n" + d.logtail(), flush=True)
        d.kill()
        d.cleanup()
        for t in (TMPL, BAD):
            subprocess.run([cli, "template", "rm", t], env=dict(os.environ, AIRLOCK_DATA_DIR=root),
                           capture_output=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
