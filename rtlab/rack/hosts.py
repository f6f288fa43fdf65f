"""Lab hosts on one machine: one network namespace per host.

A real lab has a coordinator host, exporter hosts and CI runner hosts; what
differs between them for rtlab is the network (who reaches whom, at which
address) and what dies together (a host that crashes takes every process on
it). :class:`HostLab` makes both real: each host is a network namespace that
it creates, linked to the coordinator host by a veth pair created inside the
namespaces (nothing is added to the machine's own namespace)::

    coordinator host  ns <prefix>-coord   10.<net>.<k>.1 on veth c<k>  (forwards between hosts)
    host k            ns <prefix>-<name>  10.<net>.<k>.2 on veth h<k>  default route via .1

Processes run in a host with ``ip netns exec``; :meth:`HostLab.kill_host`
SIGKILLs every process of a namespace (``ip netns pids``), which is what a
runner host that loses power looks like to the rest of the lab.
:meth:`HostLab.down` kills every process of every host and deletes the
namespaces (their veths and addresses go with them). Needs CAP_NET_ADMIN.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Optional

from ..errors import RtlabError


class HostLabError(RtlabError):
    pass


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise HostLabError(f"ip {' '.join(args)}: {res.stderr.strip()}")
    return res


@dataclass
class Host:
    name: str
    netns: str
    address: str            # this host's address, as others reach it
    #: the coordinator host's address on this host's link
    gateway: Optional[str] = None


@dataclass
class HostLab:
    """``with HostLab(["runner-a", "runner-b"]) as lab: lab.popen("runner-a", [...])``"""

    names: list
    prefix: str = field(default_factory=lambda: f"rtl{os.getpid() % 100000}")
    net: int = 231
    hosts: dict = field(default_factory=dict)

    @property
    def coordinator(self) -> Host:
        return self.hosts["coord"]

    def up(self) -> "HostLab":
        if len(set(self.names)) != len(self.names) or "coord" in self.names:
            raise HostLabError(f"host names must be unique and not 'coord': {self.names}")
        try:
            coord_ns = f"{self.prefix}-coord"
            self._add_ns(coord_ns)
            _ip("netns", "exec", coord_ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            self.hosts["coord"] = Host("coord", coord_ns, f"10.{self.net}.1.1")
            for k, name in enumerate(self.names, start=1):
                ns = f"{self.prefix}-{name}"
                self._add_ns(ns)
                c_if, h_if = f"{self.prefix}c{k}", f"{self.prefix}h{k}"
                # both ends created inside the namespaces: nothing in the machine's own
                _ip("-n", coord_ns, "link", "add", c_if, "type", "veth", "peer", "name", h_if, "netns", ns)
                _ip("-n", coord_ns, "addr", "add", f"10.{self.net}.{k}.1/24", "dev", c_if)
                _ip("-n", ns, "addr", "add", f"10.{self.net}.{k}.2/24", "dev", h_if)
                _ip("-n", coord_ns, "link", "set", c_if, "up")
                _ip("-n", ns, "link", "set", h_if, "up")
                _ip("-n", ns, "route", "add", "default", "via", f"10.{self.net}.{k}.1")
                self.hosts[name] = Host(name, ns, f"10.{self.net}.{k}.2", gateway=f"10.{self.net}.{k}.1")
        except BaseException:
            self.down()
            raise
        return self

    def _add_ns(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self._made.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def __post_init__(self) -> None:
        self._made: list[str] = []

    def command(self, host: str, argv: list) -> list:
        return ["ip", "netns", "exec", self.hosts[host].netns, *map(str, argv)]

    def popen(self, host: str, argv: list, **kw) -> subprocess.Popen:
        """Start *argv* on *host* (LG_HOSTNAME is the host's name: a network
        namespace shares the machine's hostname)."""
        env = {**(kw.pop("env", None) or os.environ), "LG_HOSTNAME": host}
        return subprocess.Popen(self.command(host, argv), env=env, **kw)

    def pids(self, host: str) -> list[int]:
        return netns_pids(self.hosts[host].netns)

    def kill_host(self, host: str, timeout: float = 10.0) -> int:
        """SIGKILL every process of *host*, as a power loss would; how many."""
        return kill_netns(self.hosts[host].netns, timeout, what=f"host {host}")

    def down(self) -> None:
        """Kill every process of every host, delete the namespaces (veths and
        addresses with them); safe to call twice."""
        for ns in reversed(self._made):
            host = next((h for h, v in self.hosts.items() if v.netns == ns), None)
            if host is not None:
                try:
                    self.kill_host(host)
                except HostLabError:
                    pass
            _ip("netns", "del", ns, check=False)
        self._made.clear()
        self.hosts.clear()

    def __enter__(self) -> "HostLab":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()


def netns_pids(ns: str) -> list[int]:
    """The processes in network namespace *ns* (none when it is gone)."""
    return [int(x) for x in _ip("netns", "pids", ns, check=False).stdout.split()]


def kill_netns(ns: str, timeout: float = 10.0, *, what: str = "") -> int:
    """SIGKILL every process in *ns* until none is left (a process may fork
    while it is killed); how many were killed. HostLabError after *timeout*."""
    killed = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = netns_pids(ns)
        if not pids:
            return killed
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    raise HostLabError(f"{what or 'namespace ' + ns}: processes {netns_pids(ns)} survive SIGKILL")


def leftovers(prefix: str) -> list[str]:
    """Namespaces and links whose names start with *prefix* (none after down())."""
    ns = [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines()
          if line.startswith(prefix)]
    links = [line.split(":")[1].strip().split("@")[0] for line in _ip("-o", "link", check=False).stdout.splitlines()
             if len(line.split(":")) > 1 and line.split(":")[1].strip().startswith(prefix)]
    return ns + links


def reclaim(prefix: str) -> list[str]:
    """What a lab with namespaces *prefix*-* left when its owner was killed
    before down(): SIGKILL every process in them, delete them; their names."""
    gone = []
    for ns in [n for n in leftovers(prefix) if n.startswith(prefix + "-")]:
        try:
            kill_netns(ns, timeout=5.0)
        except HostLabError:
            pass  # deleted anyway, as before: what survives is the kernel's to reap
        _ip("netns", "del", ns, check=False)
        gone.append(ns)
    return gone
