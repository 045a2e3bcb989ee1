"""What the real-VM egress tests (test_egress_vm.py, test_egress_life.py)
share: the check counters, running a shell snippet in a guest, the daemon's
gateway pointed at the test internet, holding the test internet for the whole
run, and the end-of-run sanitizer checks of airlockd and its gateway."""
import os, signal, sys, time, traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "testnet"))
import testnet                                # noqa: E402

failures = []
passed = 0

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "LeakSanitizer has encountered")


def check(name, cond, detail=""):
    global passed
    if cond:
        passed += 1
        print(f"ok   {name}", flush=True)
    else:
        failures.append(name)
        print(f"FAIL {name} {detail}", flush=True)


def sh(c, sid, script, timeout_s=60):
    """Run a shell snippet as root in the guest; (exit code, stdout, stderr) as text."""
    code, sig, out, err = c.exec(sid, ["/bin/sh", "-c", script], timeout_s=timeout_s, user="root")
    return code, out.decode(errors="replace"), err.decode(errors="replace")


def wait_for(pred, timeout_s, step=0.3):
    end = time.time() + timeout_s
    while True:
        v = pred()
        if v or time.time() >= end:
            return v
        time.sleep(step)


def gateway_env(**extra):
    """airlockd's environment: its gateway dials from the test internet's upstream side."""
    env = {"AIRLOCK_GATEWAY_NETNS": "/run/netns/" + testnet.NS_UP,
           "AIRLOCK_GATEWAY_RESOLVER": testnet.ADDR["dns"],
           "AIRLOCK_GATEWAY_UPSTREAM_CA": testnet.paths()["ca"]}
    env.update(extra)
    return env


def main(run):
    """argv[1] is airlockd; run(binary, root) with the test internet held
    exclusively (checks read what reached it: no other test's traffic may mix in)."""
    binary = sys.argv[1]
    root = os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock")
    gwbin = os.path.join(os.path.dirname(os.path.dirname(binary)), "gateway", "airlock-gateway")
    if not os.access(gwbin, os.X_OK):
        print("skip: airlock-gateway not built")
        return 77
    with testnet.exclusive():
        testnet.acquire()
        try:
            return run(binary, root)
        finally:
            testnet.release()


def run_sections(sections, after=None):
    """(name, fn) in order; an exception fails that section, the run goes on.
    after() runs after each section (e.g. restart a daemon a section left down)."""
    for name, fn in sections:
        print(f"-- {name}", flush=True)
        try:
            fn()
        except Exception as e:      # noqa: BLE001
            traceback.print_exc()
            check(f"{name} raised no exception", False, repr(e))
        if after is not None:
            after()


def _gateway_log(d):
    try:
        with open(os.path.join(d.dir, "logs", "gateway.log"), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def finish(d):
    """Graceful stop; airlockd and its gateway ran clean, the gateway left with it."""
    d.kill(signal.SIGTERM)
    report = d.sanitizer_report()
    check("airlockd ran clean under ASan/UBSan/LSan", report is None, report)
    # The sanitizer build's leak check takes a moment at the gateway's exit.
    wait_for(lambda: not d.gateway_pids(), 30, 0.1)
    check("the gateway exited with airlockd's graceful shutdown (nothing attached)",
          not d.gateway_pids(), d.gateway_pids())
    gwlog = _gateway_log(d)
    bad = [m for m in SANITIZER_MARKERS if m in gwlog]
    check("the gateway ran clean under ASan/UBSan/LSan", not bad, gwlog[-3000:])


def report(d):
    """Log tails on failure, then the summary line; the exit status."""
    if failures:
        print("airlockd log tail:\n" + d.logtail(8000), flush=True)
        print("gateway log tail:\n" + _gateway_log(d)[-4000:], flush=True)
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0
