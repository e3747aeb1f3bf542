"""The etcd scenarios: three clients of one key on a three-member etcd cluster (Debian's
etcd, started by tests/cli/etcd_harness.py on loopback), a member's or a quorum's loss
mid-job, a holder's key deleted while its member is frozen or cut off from it, waiters
through a failover or a stall. The lock is etcd's own recipe, so tokens are create
revisions: they must rise.
"""
import shutil
import signal
import subprocess
import time

import netns
import processes
from scenario import Scenario, Skipped  # (it puts tests/cli on the path)
from workload import Client

import etcd_harness  # noqa: E402

DOWN = 5  # seconds the killed members stay down: past the ttl of 2 s, as FAULT elsewhere


class _Cluster:
    """The harness's cluster of three, closed as a scenario's server; `hosts`: addresses
    it also serves clients on (a namespace's veth pair)."""

    def __init__(self, hosts=()):
        self.cluster = etcd_harness.EtcdCluster(3, hosts=hosts)

    def close(self):
        self.cluster.stop()


class EtcdScenario(Scenario):
    def setup(self):
        if not (shutil.which("etcd") and shutil.which("etcdctl")):
            raise Skipped("etcd is not installed (scripts/install-deps installs it)")
        self.etcd = _Cluster()
        self.servers.append(self.etcd)
        # Exclusive holds only: --shared and --slots are refused on etcd (64).
        self.clients = [Client(self, name, "x", ["-u", self.etcd.cluster.url()], ttl=self.ttl,
                               seconds=(1, 4)) for name in ("A", "B", "C")]

    def leader(self):
        try:
            return self.etcd.cluster.wait_leader(timeout=20)
        except AssertionError as error:
            self.notes.append(str(error))
            return None

    def bring_back(self, members, round_number):
        for member in members:
            member.restart()
        self.note_fault("restarted", members=[m.name for m in members])
        if self.leader() is None:
            self.notes.append("round %d: no leader after the restart" % round_number)
        self.let_run(1)


class EtcdLeaderKill(EtcdScenario):
    name = "etcd-leader-kill"
    how = ("three etcd members (heartbeat 50 ms, election 500 ms); 0.3 s into a job the "
           "leader is killed with SIGKILL, started again 5 s later on its data")

    def fault(self, round_number):
        owner, _ = self.wait_section(planned=2)
        if owner is None:
            return False
        self.let_run(0.3)
        leader = self.leader()
        if leader is None:
            return False
        self.note_fault("kill-leader", member=leader.name)
        leader.kill()
        self.let_run(DOWN)
        self.bring_back([leader], round_number)
        return True


class EtcdQuorumLoss(EtcdScenario):
    name = "etcd-quorum-loss"
    how = ("three etcd members; 0.3 s into a job two of them (a different pair each round) "
           "are killed with SIGKILL, so the third has no quorum; both are started again 5 s "
           "later on their data")

    def fault(self, round_number):
        owner, _ = self.wait_section(planned=2)
        if owner is None:
            return False
        self.let_run(0.3)
        members = self.etcd.cluster.members
        victims = [members[round_number % 3], members[(round_number + 1) % 3]]
        self.note_fault("kill-two", members=[m.name for m in victims])
        for member in victims:
            member.kill()
        self.let_run(DOWN)
        self.bring_back(victims, round_number)
        return True


def _rotations(members):
    """Each member first once, the others after it: client i's calls and watches go to
    member i while it answers."""
    return [members[i:] + members[:i] for i in range(len(members))]


class EtcdBlindDelete(EtcdScenario):
    name = "etcd-blind-delete"
    overlap_allowance = 2 / 3  # a third of the ttl: the next renewal (checker.py)
    how = ("three etcd members, each client's calls and watch on its own one; 0.3 s into a "
           "job the holder's member is frozen (SIGSTOP; odd rounds, where namespaces can be "
           "made: client A in its own namespace, its link to that member alone cut by "
           "iptables), 2 s later its key deleted through the others (etcdctl del, or "
           "nxlock unlock --force), then 2.5 s later the member is continued or the link "
           "healed")
    FROZEN_BEFORE_DELETE = 2  # seconds: the holder's calls have moved to another member
    AFTER_DELETE = 2.5

    def setup(self):
        if not (shutil.which("etcd") and shutil.which("etcdctl")):
            raise Skipped("etcd is not installed (scripts/install-deps installs it)")
        self.ns = None
        if netns.available() is None:
            self.ns = netns.Namespace()
            self.servers.append(self.ns)
        hosts = (self.ns.host_address,) if self.ns else ()
        self.etcd = _Cluster(hosts)
        self.servers.append(self.etcd)
        cluster = self.etcd.cluster
        self.first = {}
        self.clients = []
        for name, order in zip(("A", "B", "C"), _rotations(cluster.members)):
            inside = self.ns is not None and name == "A"
            url = cluster.url(order, host=self.ns.host_address) if inside else cluster.url(order)
            self.clients.append(Client(self, name, "x", ["-u", url], ttl=self.ttl,
                                       seconds=(5.5, 7), netns=self.ns.name if inside else None))
            self.first[name] = order[0]

    def take_away(self, members, round_number):
        """Deletes the holder's key through `members`: what was deleted, or None."""
        cluster = self.etcd.cluster
        try:
            if round_number % 4 < 2:
                keys = cluster.keys("nemesis-x/", members=members)
                if not keys:
                    return None
                cluster.ctl("del", keys[0], members=members, timeout=10)
                return keys[0]
            result = subprocess.run(
                [self.nxlock, "-u", cluster.url(members), "unlock", "--force", "nemesis-x"],
                capture_output=True, timeout=10)
            return "unlock --force: %d" % result.returncode
        except (AssertionError, subprocess.TimeoutExpired) as error:
            self.notes.append("round %d: the delete failed: %s" % (round_number, error))
            return None

    def fault(self, round_number):
        cut = self.ns is not None and round_number % 2 == 1
        owner, _ = self.wait_section(client="A" if cut else None, planned=5)
        if owner is None:
            return False
        self.let_run(0.3)
        member = self.first[owner.client]
        others = [m for m in self.etcd.cluster.members if m is not member]
        if cut:
            self.note_fault("cut-link", client=owner.client, member=member.name)
            self.ns.cut_port(member.client_port)
        else:
            self.note_fault("freeze", client=owner.client, member=member.name)
            member.kill(signal.SIGSTOP)
        try:
            self.let_run(self.FROZEN_BEFORE_DELETE)
            deleted = self.take_away(others, round_number)
            self.note_fault("deleted", key=deleted)
            self.let_run(self.AFTER_DELETE)
        finally:
            if cut:
                self.ns.heal()
            else:
                member.kill(signal.SIGCONT)
            self.note_fault("healed")
        if self.leader() is None:
            self.notes.append("round %d: no leader after the fault" % round_number)
        self.let_run(1)
        return deleted is not None


class EtcdWaitersFailover(EtcdScenario):
    name = "etcd-waiters-failover"
    overlap_allowance = 2 / 3  # a lease a frozen leader revokes as it comes back
    how = ("three etcd members, each client's calls and watch on its own one, --io-timeout "
           "0.5 and -w 30; while one holds and the others wait, the leader is killed "
           "(SIGKILL, started again 5 s later) or, odd rounds, frozen (SIGSTOP) for 8 s: "
           "no waiter may give up (69) while its wait lasts")
    STALL = 8

    def setup(self):
        super().setup()
        cluster = self.etcd.cluster
        self.clients = [Client(self, name, "x", ["-u", cluster.url(order), "--io-timeout", "0.5"],
                               ttl=self.ttl, wait=30, seconds=(2, 5))
                        for name, order in zip(("A", "B", "C"), _rotations(cluster.members))]
        self.faults = []  # when each fault began

    def waiting(self, owner):
        """True when the clients other than `owner` have waited in line a second."""
        now = time.monotonic()
        return all(c.current is not None and c.current_started is not None
                   and now - c.current_started > 1 for c in self.clients if c is not owner)

    def fault(self, round_number):
        owner, start = self.wait_section(planned=2.5)
        if owner is None:
            return False
        # 0.3 s into the job, or once the others have waited a second, if later.
        if not processes.wait_until(lambda: self.waiting(owner),
                                  max(0.0, start["t"] + 1.5 - time.monotonic()), interval=0.05):
            return False
        self.let_run(max(0.0, start["t"] + 0.3 - time.monotonic()))
        leader = self.leader()
        if leader is None:
            return False
        self.faults.append(time.monotonic())
        if round_number % 2 == 0:
            self.note_fault("kill-leader", member=leader.name)
            leader.kill()
            self.let_run(DOWN)
            self.bring_back([leader], round_number)
            return True
        self.note_fault("freeze-leader", member=leader.name)
        leader.kill(signal.SIGSTOP)
        try:
            self.let_run(self.STALL)
        finally:
            leader.kill(signal.SIGCONT)
            self.note_fault("continued", member=leader.name)
        if self.leader() is None:
            self.notes.append("round %d: no leader after the stall" % round_number)
        self.let_run(1)
        return True

    def verdict_extra(self, counts):
        # A run in line a second before a fault that then exits 69 gave up during it: its
        # first calls had been answered, and its wait (30 s) outlasts every fault.
        gave_up = [r for r in self.history.records() if r.get("ev") == "run"
                   and r.get("status") == 69
                   and any(r["t0"] < f - 1 and r["t"] > f for f in self.faults)]
        if gave_up:
            return ["%d waiters gave up (69) during a failover or a stall, in line before it"
                    % len(gave_up)]
        return []
