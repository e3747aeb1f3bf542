"""The etcd scenarios: three clients of one key on a three-member etcd cluster (Debian's
etcd, started by tests/cli/etcd_harness.py on loopback), a member's or a quorum's loss
mid-job. The lock is etcd's own recipe, so tokens are create revisions: they must rise.
"""
import os
import shutil
import sys
import time

from scenario import Scenario, Skipped
from workload import Client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import etcd_harness  # noqa: E402

DOWN = 5  # seconds the killed members stay down: past the ttl of 2 s, as FAULT elsewhere


class _Cluster:
    """The harness's cluster of three, closed as a scenario's server."""

    def __init__(self):
        self.cluster = etcd_harness.EtcdCluster(3)

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
        time.sleep(1)


class EtcdLeaderKill(EtcdScenario):
    name = "etcd-leader-kill"
    how = ("three etcd members (heartbeat 50 ms, election 500 ms); 0.3 s into a job the "
           "leader is killed with SIGKILL, started again 5 s later on its data")

    def fault(self, round_number):
        owner, _ = self.wait_section(planned=2)
        if owner is None:
            return False
        time.sleep(0.3)
        leader = self.leader()
        if leader is None:
            return False
        self.note_fault("kill-leader", member=leader.name)
        leader.kill()
        time.sleep(DOWN)
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
        time.sleep(0.3)
        members = self.etcd.cluster.members
        victims = [members[round_number % 3], members[(round_number + 1) % 3]]
        self.note_fault("kill-two", members=[m.name for m in victims])
        for member in victims:
            member.kill()
        time.sleep(DOWN)
        self.bring_back(victims, round_number)
        return True
