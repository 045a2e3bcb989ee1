#!/usr/bin/env python3
"""bench/gateway.py: what the egress gateway costs.

In one run, against the same HTTPS server of the test internet
(tests/testnet), from a netns stand-in guest behind the real
airlock-gateway (TLS terminated, every request checked, dialled by name,
upstream TLS verified) and directly from the gateway's own namespace:
  - per-request latency on a kept-alive connection (p50/p90/p99),
  - new-connection latency (TCP + TLS + first request),
  - download throughput (MB/s) of a 256 MiB body,
  - the gateway's resident memory per attached idle sandbox.
Prints one JSON object; bench/run.sh stores it in bench/results/gateway.json
and docs/performance.md reports it. Needs the release build (build/).
"""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "testnet"))
sys.path.insert(0, os.path.join(TOP, "tests", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib                 # noqa: E402
import testnet as tn            # noqa: E402
from standin import Standin     # noqa: E402

BUILD = os.environ.get("BUILD", os.path.join(TOP, "build"))
GWBIN = os.path.join(BUILD, "src", "gateway", "airlock-gateway")
TOOL = os.path.join(BUILD, "tests", "lib", "gw_standin")
HOST = tn.name("allowed")
KEEPALIVE_N = 300
FRESH_N = 40
BULK = 256 << 20
IDLE_N = 40


def summary_ms(xs):
    return benchlib.summary(xs, digits=3)


def curl_times(ns, cacert, urls, extra=()):
    """One curl process (one kept-alive connection): time_total per URL."""
    argv = ["ip", "netns", "exec", ns, "curl", "-sS", "--cacert", cacert,
            "-w", "%{time_total} %{http_code}\\n", *extra]
    for u in urls:      # curl pairs each -o with one URL
        argv += ["-o", "/dev/null", u]
    r = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600)
    out = [line.split() for line in r.stdout.splitlines()]
    bad = [c for _, c in out if c != "200"]
    if bad:
        raise RuntimeError("non-200 answers: %s" % bad[:5])
    return [float(t) for t, _ in out]


def measure(ns, cacert):
    url = "https://%s/bench" % HOST
    keep = curl_times(ns, cacert, [url] * KEEPALIVE_N)[1:]     # [0] includes the handshake
    fresh = [curl_times(ns, cacert, [url])[0] for _ in range(FRESH_N)]
    speeds = []
    for _ in range(3):
        argv = ["ip", "netns", "exec", ns, "curl", "-sS", "--cacert", cacert, "-o", "/dev/null",
                "-w", "%{speed_download}", "https://%s/bytes/%d" % (HOST, BULK)]
        r = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600)
        speeds.append(float(r.stdout) / 1e6)
    return {"keepalive": summary_ms(keep), "new_connection": summary_ms(fresh),
            "throughput_MBps": round(statistics.median(speeds), 1)}


def rss_kb(ctl):
    r = subprocess.run([TOOL, "stats", "--ctl", ctl], capture_output=True, text=True, check=True)
    return int(json.loads(r.stdout.strip().splitlines()[-1])["rss_kb"])


def main():
    for p in (GWBIN, TOOL):
        if not os.access(p, os.X_OK):
            sys.exit("bench/gateway.py: %s missing (make build)" % p)
    with tn.exclusive():
        tn.acquire()
        try:
            bench()
        finally:
            tn.release()


def bench():
    tp = tn.paths()
    scratch = tempfile.mkdtemp(prefix="airlock-gwbench-")
    os.chmod(scratch, 0o755)
    ctl = os.path.join(scratch, "gw.sock")
    gwca = tn.make_gateway_ca(os.path.join(scratch, "gwca"))
    policy = os.path.join(scratch, "policy.json")
    with open(policy, "w") as f:
        json.dump({"mode": "allowlist", "allow": [HOST]}, f)
    log = open(os.path.join(scratch, "gateway.log"), "ab")
    gw = subprocess.Popen(["ip", "netns", "exec", tn.NS_UP, GWBIN, "--ctl", ctl,
                           "--audit-dir", os.path.join(scratch, "audit"),
                           "--ca-cert", gwca["cert"], "--ca-key", gwca["key"],
                           "--upstream-ca", tp["ca"], "--resolver", tn.ADDR["dns"],
                           "--uid", "65534", "--gid", "65534"],
                          stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    guests = []
    try:
        for _ in range(100):
            if subprocess.run([TOOL, "hello", "--ctl", ctl], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        g = Standin(TOOL, "gwbench")
        guests.append(g)
        g.create()
        r = g.attach(ctl, policy)
        if r.returncode != 0:
            sys.exit("attach: " + r.stdout + r.stderr)
        direct = measure(tn.NS_UP, tp["ca"])
        via = measure(g.ns, gwca["root"])
        ratio = {
            "keepalive_p50": round(via["keepalive"]["p50_ms"] / direct["keepalive"]["p50_ms"], 2),
            "new_connection_p50": round(via["new_connection"]["p50_ms"] /
                                        direct["new_connection"]["p50_ms"], 2),
            "throughput": round(via["throughput_MBps"] / direct["throughput_MBps"], 2),
        }
        # Memory: idle sandboxes (island, rules, two sockets, policy) attached, no traffic.
        before = rss_kb(ctl)
        for i in range(IDLE_N):
            s = Standin(TOOL, "gwidle%d" % i)
            guests.append(s)
            subprocess.run([TOOL, "create", "--name", s.name], check=True, capture_output=True)
            r = s.attach(ctl, policy)
            if r.returncode != 0:
                sys.exit("attach idle: " + r.stdout + r.stderr)
        after = rss_kb(ctl)
        out = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "host": os.uname().nodename, "cpus": os.cpu_count(),
               "direct": direct, "via_gateway": via, "ratio_via_over_direct": ratio,
               "memory": {"idle_sandboxes": IDLE_N, "rss_kb_before": before, "rss_kb_after": after,
                          "kb_per_idle_sandbox": round((after - before) / IDLE_N, 1)}}
        print(json.dumps(out, indent=1))
    finally:
        for g in guests:
            g.detach(ctl)
            g.destroy()
        gw.terminate()
        try:
            gw.wait(timeout=10)
        except subprocess.TimeoutExpired:
            gw.kill()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
