"""A stand-in guest: a network namespace that looks to its island exactly
like a microVM does (issue 6 item 9: the full egress matrix without VMs).

The island airlock-<name> is made by the product code (gw_standin create =
net_island_create: lo, tap0 10.0.0.1/30, the island's nftables rules).
Its tap is then replaced by a veth also named tap0 (the rules match on the
name), whose peer eth0 sits in the guest netns airlock-tg-<name> with the
guest's MAC 52:54:00:0a:00:02 and 10.0.0.2/30, a default route via
10.0.0.1 and /etc/netns/<guest>/resolv.conf -> 10.0.0.1. The guest also
gets IPv6 (2001:db8:3::2/64, default route via a permanent neighbour on
the island's side) so that IPv6 attacks really put packets on the wire.
Commands run in the guest with `ip netns exec`: host binaries (curl,
python3, node) as a root user inside a sandbox would.
"""
import os
import shutil
import subprocess

GUEST_MAC = "52:54:00:0a:00:02"
GUEST_ADDR = "10.0.0.2"
HOST_ADDR = "10.0.0.1"
GUEST_ADDR6 = "2001:db8:3::2"
FAKE_ROUTER6 = "fe80::1"


def run(*argv, check=True, input=None, timeout=60):
    r = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(argv), r.returncode,
                                                (r.stderr or r.stdout).strip()))
    return r


class Standin:
    def __init__(self, tool, name):
        self.tool = tool
        self.name = name
        self.island = "airlock-" + name
        self.ns = "airlock-tg-" + name
        self.etc = "/etc/netns/" + self.ns

    def island_run(self, *argv, check=True):
        return run("ip", "netns", "exec", self.island, *argv, check=check)

    def guest_run(self, *argv, check=True, input=None):
        return run("ip", "netns", "exec", self.ns, *argv, check=check, input=input)

    def create(self):
        self.destroy()
        run(self.tool, "create", "--name", self.name)
        try:
            run("ip", "netns", "add", self.ns)
            os.makedirs(self.etc, exist_ok=True)
            with open(os.path.join(self.etc, "resolv.conf"), "w") as f:
                f.write("nameserver %s\n" % HOST_ADDR)
            self.write_hosts("")
            # The tap (a tun device nobody holds) becomes a veth named tap0.
            self.island_run("ip", "link", "del", "tap0")
            self.island_run("ip", "link", "add", "tap0", "type", "veth",
                            "peer", "name", "eth0", "netns", self.ns)
            self.island_run("ip", "addr", "add", HOST_ADDR + "/30", "dev", "tap0")
            self.island_run("ip", "link", "set", "tap0", "up")
            mac = self.island_run("cat", "/sys/class/net/tap0/address").stdout.strip()
            g = self.guest_run
            g("sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=0",
              "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0",
              "net.ipv4.ping_group_range=0 2147483647")
            g("ip", "link", "set", "lo", "up")
            g("ip", "link", "set", "eth0", "address", GUEST_MAC)
            g("ip", "addr", "add", GUEST_ADDR + "/30", "dev", "eth0")
            g("ip", "-6", "addr", "add", GUEST_ADDR6 + "/64", "dev", "eth0", "nodad")
            g("ip", "link", "set", "eth0", "up")
            g("ip", "route", "add", "default", "via", HOST_ADDR)
            g("ip", "-6", "neigh", "add", FAKE_ROUTER6, "lladdr", mac, "dev", "eth0", "nud",
              "permanent")
            g("ip", "-6", "route", "add", "default", "via", FAKE_ROUTER6, "dev", "eth0")
        except BaseException:
            self.destroy()
            raise

    def write_hosts(self, extra):
        """The guest's /etc/hosts (ip netns exec bind-mounts it): an attacker
        who is root in the guest edits it at will."""
        with open(os.path.join(self.etc, "hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n::1 localhost\n" + extra)

    def attach(self, ctl, policy_file):
        return run(self.tool, "attach", "--ctl", ctl, "--name", self.name,
                   "--policy", policy_file, check=False)

    def update(self, ctl, policy_file):
        return run(self.tool, "update", "--ctl", ctl, "--name", self.name,
                   "--policy", policy_file, check=False)

    def detach(self, ctl):
        return run(self.tool, "detach", "--ctl", ctl, "--name", self.name, check=False)

    def destroy(self):
        if os.path.exists("/run/netns/" + self.ns):
            # Guest processes a test left behind (its own curl/python).
            r = run("ip", "netns", "pids", self.ns, check=False)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            run("ip", "netns", "del", self.ns, check=False)
        if os.path.exists("/run/netns/" + self.island):
            run(self.tool, "delete", "--name", self.name, check=False)
        shutil.rmtree(self.etc, ignore_errors=True)
