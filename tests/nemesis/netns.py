"""A network namespace for one client: a veth pair from the host side (where the server
listens on the pair's host address) into the namespace, and a cut that drops every
packet in the namespace (iptables DROP on INPUT and OUTPUT: silent, as a partition is).

Needs root, ip(8) and iptables(8). The namespace (and with it the veth pair) is
always deleted: close() is called from a finally and atexit.
"""
import os
import random
import shutil
import subprocess

_made = set()
_PREFIX = "nxnemesis-"  # then the pid of the nemesis that made it: see remove_stale()


def available():
    """None if namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return "%s(8) is not installed (scripts/install-deps installs it)" % tool
    return None


def _run(*args):
    subprocess.run(args, check=True, capture_output=True, timeout=10)


class Namespace:
    """Namespace `name` with a veth pair: host side `host_address`, inside `client_address`."""

    def __init__(self):
        tag = "%d%04x" % (os.getpid() % 100000, random.getrandbits(16))
        self.name = "%s%d-%s" % (_PREFIX, os.getpid(), tag)
        self.host_if = "nxh" + tag
        self.client_if = "nxc" + tag
        # A /30 in 10.213.0.0/16, picked at random: one per namespace, unlikely to clash.
        subnet = random.randrange(1, 16384) * 4
        self.host_address = "10.213.%d.%d" % (subnet // 256, subnet % 256 + 1)
        self.client_address = "10.213.%d.%d" % (subnet // 256, subnet % 256 + 2)
        _made.add(self.name)
        try:
            _run("ip", "netns", "add", self.name)
            _run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name",
                 self.client_if, "netns", self.name)
            _run("ip", "addr", "add", self.host_address + "/30", "dev", self.host_if)
            _run("ip", "link", "set", self.host_if, "up")
            _run("ip", "-n", self.name, "addr", "add", self.client_address + "/30", "dev",
                 self.client_if)
            _run("ip", "-n", self.name, "link", "set", self.client_if, "up")
            _run("ip", "-n", self.name, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def cut(self):
        """Drops every packet in and out of the namespace, silently."""
        for chain in ("INPUT", "OUTPUT"):
            _run("ip", "netns", "exec", self.name, "iptables", "-A", chain, "-j", "DROP")

    def cut_port(self, port):
        """Drops every packet between the namespace and one server, the host side's TCP
        `port`, silently; the namespace's other links stay up. heal() ends it too."""
        _run("ip", "netns", "exec", self.name, "iptables", "-A", "OUTPUT", "-p", "tcp",
             "-d", self.host_address, "--dport", str(port), "-j", "DROP")
        _run("ip", "netns", "exec", self.name, "iptables", "-A", "INPUT", "-p", "tcp",
             "-s", self.host_address, "--sport", str(port), "-j", "DROP")

    def heal(self):
        for chain in ("INPUT", "OUTPUT"):
            _run("ip", "netns", "exec", self.name, "iptables", "-F", chain)

    def close(self):
        """Deletes the namespace; the veth pair goes with it."""
        if self.name in _made:
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=10)
            subprocess.run(["ip", "link", "del", self.host_if], capture_output=True, timeout=10)
            _made.discard(self.name)


def remove_all():
    """Deletes every namespace made here that is still there (atexit)."""
    for name in list(_made):
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
        _made.discard(name)


def remove_stale():
    """Deletes the namespaces that an earlier nemesis, killed by SIGKILL before it could
    clean up, left behind (their pid is no longer a running process)."""
    if not os.path.isdir("/run/netns"):
        return
    for name in os.listdir("/run/netns"):
        pid = name[len(_PREFIX):].split("-", 1)[0]
        if name.startswith(_PREFIX) and pid.isdigit() and not os.path.exists("/proc/" + pid):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
