#!/usr/bin/env python3
"""bench/gateway_scale.py: aggregate HTTPS throughput of the egress gateway
with 1, 4 and 16 concurrent sandboxes, by gateway thread count.

For each thread count (--threads 1, and one per online core) a real
airlock-gateway is started in the test internet's upstream namespace
(tests/testnet) and K netns stand-in guests (tests/lib/standin.py:
the product's island, rules and sockets, a veth where the VM's tap would be)
are attached to it. Each guest downloads BULK/K bytes over HTTPS from the
same test-internet server at the same time (allowlist mode: TLS terminated,
the request checked, dialled by name, upstream TLS verified, audit line);
the figure is all bytes over the wall time of the slowest download, the
median of --repeat runs (every sample is in the output), run interleaved
(direct, threads=1, threads=N, again) so a loaded host's slow phases hit
each alike, with the gateway's CPU seconds per GB moved (load changes the
MB/s much more than that). The
same K downloads run directly from the gateway's own namespace for the
"direct" column. Also: one guest's connection flood at its accept-rate
limit beside K-1 downloading guests (how many refusals the gateway
summarised in its audit log and what the others still moved).

Prints one JSON object. Needs the release build (build/) and the test
internet (taken exclusively, as bench/gateway.py does). On a 2-core host
the server, curl and the gateway share the two cores: see
docs/performance.md for how to read that.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "testnet"))
sys.path.insert(0, os.path.join(TOP, "tests", "lib"))
import testnet as tn            # noqa: E402
from standin import Standin     # noqa: E402

BUILD = os.environ.get("BUILD", os.path.join(TOP, "build"))
GWBIN = os.path.join(BUILD, "src", "gateway", "airlock-gateway")
TOOL = os.path.join(BUILD, "tests", "lib", "gw_standin")
HOST = tn.name("allowed")
# Any address: the island's rules redirect every guest TCP SYN to the gateway.
FLOOD_DST = "203.0.113.7"


def download(ns, cacert, nbytes):
    """One curl: seconds and bytes received."""
    argv = ["ip", "netns", "exec", ns, "curl", "-sS", "--cacert", cacert, "-o", "/dev/null",
            "-w", "%{size_download} %{time_total}", "https://%s/bytes/%d" % (HOST, nbytes)]
    r = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=900)
    size, secs = r.stdout.split()
    return int(size), float(secs)


def cpu_s(pid):
    """User + system CPU seconds of a process (all its threads)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parallel(jobs, gw=None):
    """Run (ns, cacert, nbytes) downloads at once: aggregate MB/s over the wall time,
    and with gw the gateway's CPU seconds per GB moved (what load does not change)."""
    results, errors = [None] * len(jobs), []
    cpu0 = cpu_s(gw.proc.pid) if gw is not None else 0

    def one(i, job):
        try:
            results[i] = download(*job)
        except Exception as e:     # reported, not hidden
            errors.append(str(e))
    threads = [threading.Thread(target=one, args=(i, j)) for i, j in enumerate(jobs)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    if errors:
        raise RuntimeError("downloads failed: %s" % errors[:3])
    total = sum(size for size, _ in results)
    out = {"MBps": round(total / wall / 1e6, 1), "wall_s": round(wall, 2),
           "slowest_s": round(max(s for _, s in results), 2), "bytes": total}
    if gw is not None:
        out["gw_cpu_s_per_GB"] = round((cpu_s(gw.proc.pid) - cpu0) / (total / 1e9), 2)
    return out


def flood(ns, seconds):
    """A guest connecting to port 443 in a loop (no bytes sent), as fast as it can."""
    code = ("import socket,time\n"
            "end=time.time()+%f;n=0;held=[]\n"
            "while time.time()<end:\n"
            " s=socket.socket();s.settimeout(1)\n"
            " try:\n"
            "  s.connect(('%s',443));n+=1\n"
            "  held.append(s) if len(held)<200 else s.close()\n"
            " except OSError: s.close()\n"
            "print(n)\n") % (seconds, FLOOD_DST)
    return subprocess.Popen(["ip", "netns", "exec", ns, "python3", "-c", code],
                            stdout=subprocess.PIPE, text=True)


class Gateway:
    def __init__(self, scratch, threads, gwca, tp):
        self.ctl = os.path.join(scratch, "gw%d.sock" % threads)
        self.audit = os.path.join(scratch, "audit%d" % threads)
        log = open(os.path.join(scratch, "gateway%d.log" % threads), "ab")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", tn.NS_UP, GWBIN, "--ctl", self.ctl, "--audit-dir", self.audit,
             "--ca-cert", gwca["cert"], "--ca-key", gwca["key"], "--upstream-ca", tp["ca"],
             "--resolver", tn.ADDR["dns"], "--uid", "65534", "--gid", "65534",
             "--threads", str(threads)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        for _ in range(100):
            if subprocess.run([TOOL, "hello", "--ctl", self.ctl],
                              capture_output=True).returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("gateway with %d threads did not answer" % threads)

    def stats(self):
        r = subprocess.run([TOOL, "stats", "--ctl", self.ctl], capture_output=True, text=True,
                           check=True)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def summaries(self, sandbox):
        total = lines = 0
        with open(os.path.join(self.audit, "audit.log")) as f:
            for line in f:
                j = json.loads(line)
                if j.get("event") == "deny_summary" and j.get("sandbox") == sandbox:
                    total += j["count"]
                    lines += 1
        return total, lines

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def median_of(runs):
    runs = sorted(runs, key=lambda r: r["MBps"])
    med = dict(runs[len(runs) // 2])
    med["samples_MBps"] = [r["MBps"] for r in runs]
    if "gw_cpu_s_per_GB" in med:
        med["gw_cpu_s_per_GB"] = statistics.median(r["gw_cpu_s_per_GB"] for r in runs)
    return med


def attach_all(gw, guests, policy):
    for g in guests:
        r = g.attach(gw.ctl, policy)
        if r.returncode != 0:
            raise RuntimeError("attach: " + r.stdout + r.stderr)


def bench(args):
    tp = tn.paths()
    scratch = tempfile.mkdtemp(prefix="airlock-gwscale-")
    os.chmod(scratch, 0o755)
    gwca = tn.make_gateway_ca(os.path.join(scratch, "gwca"))
    policy = os.path.join(scratch, "policy.json")
    with open(policy, "w") as f:
        json.dump({"mode": "allowlist", "allow": [HOST]}, f)
    kmax = max(args.sandboxes)
    guests = [Standin(TOOL, "gwscale%d" % i) for i in range(kmax + 1)]
    ncpu = os.cpu_count() or 1
    variants = sorted({1, ncpu})
    out = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "host": os.uname().nodename, "cpus": ncpu, "bulk_bytes": args.bulk,
           "repeat": args.repeat, "load_before": os.getloadavg()[0],
           "direct": {}, "via_gateway": {}, "flood": {}}
    gws = {}
    try:
        for g in guests:
            g.create()
        for t in variants:
            gws[t] = Gateway(scratch, t, gwca, tp)
        # Interleaved (direct, threads=1, threads=N, direct, ...): a loaded
        # host's slow phases hit every variant alike.
        runs = {}
        for _ in range(args.repeat):
            for k in args.sandboxes:
                runs.setdefault(("direct", k), []).append(
                    parallel([(tn.NS_UP, tp["ca"], args.bulk // k)] * k))
            for t in variants:
                attach_all(gws[t], guests, policy)
                for k in args.sandboxes:
                    runs.setdefault((t, k), []).append(
                        parallel([(g.ns, gwca["root"], args.bulk // k) for g in guests[:k]],
                                 gws[t]))
                for g in guests:
                    g.detach(gws[t].ctl)
        for k in args.sandboxes:
            out["direct"][str(k)] = median_of(runs[("direct", k)])
        for t in variants:
            row = {}
            for k in args.sandboxes:
                row[str(k)] = median_of(runs[(t, k)])
                row[str(k)]["ratio_vs_direct"] = round(
                    row[str(k)]["MBps"] / out["direct"][str(k)]["MBps"], 2)
            out["via_gateway"]["threads=%d" % t] = row
        for t in variants:
            # One attacker (the extra guest) floods while up to 4 others download.
            gw = gws[t]
            attach_all(gw, guests, policy)
            k = min(4, kmax)
            attacker = guests[kmax]
            p = flood(attacker.ns, args.flood_s)
            moved = parallel([(g.ns, gwca["root"], args.bulk // k) for g in guests[:k]])
            connects = int(p.communicate(timeout=args.flood_s + 60)[0].strip() or 0)
            time.sleep(1.5)     # the summary window closes
            denied = gw.stats()["sandboxes"][attacker.name]["conns_denied"]
            total, lines = gw.summaries(attacker.name)
            out["flood"]["threads=%d" % t] = {
                "attacker_connects": connects, "attacker_conns_denied": denied,
                "deny_summary_lines": lines, "deny_summary_total": total,
                "others_downloading": k, "others_MBps": moved["MBps"]}
            for g in guests:
                g.detach(gw.ctl)
        out["load_after"] = os.getloadavg()[0]
        print(json.dumps(out, indent=1))
    finally:
        for gw in gws.values():
            gw.stop()
        for g in guests:
            g.destroy()
        if os.environ.get("KEEP_SCRATCH"):
            print("scratch kept in %s" % scratch, file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sandboxes", type=lambda s: [int(x) for x in s.split(",")],
                    default=[1, 4, 16], help="comma-separated counts (default 1,4,16)")
    ap.add_argument("--bulk", type=int, default=256 << 20,
                    help="bytes per run, split between the sandboxes")
    ap.add_argument("--flood-s", type=float, default=8.0)
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the median is kept")
    args = ap.parse_args()
    for p in (GWBIN, TOOL):
        if not os.access(p, os.X_OK):
            sys.exit("bench/gateway_scale.py: %s missing (make build)" % p)
    with tn.exclusive():
        tn.acquire()
        try:
            bench(args)
        finally:
            tn.release()


if __name__ == "__main__":
    main()
