"""SSH between the hosts of a multi-host lab (``rtlab rack up --hosts N``).

In a real lab a job on a runner host reaches an exporter host by SSH:
labgrid's ``ManagedFile`` (what ``RemoteTFTPProvider`` staging uses) runs
``ssh HOST mkdir/test/ln`` and ``rsync -e ssh`` to put the kernel and the
initramfs where the board's TFTP server finds them. This makes that real
here: every exporter host runs OpenSSH's sshd on its own address (port 22,
inside its namespace: nothing listens in the machine's own), with a host key
and an authorized client key of this lab; every runner host gets its own
``/etc/ssh`` (``ip netns exec`` bind-mounts ``/etc/netns/<ns>/ssh`` over it,
as it does for any namespace) whose ``ssh_config`` gives the lab's addresses
that key, the lab's known_hosts (labgrid connects with
``StrictHostKeyChecking=yes``) and batch mode. ``remove()`` deletes those
``/etc/netns`` entries; :func:`leftover_etc` lists any a killed lab left.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..errors import RtlabError

SSHD = "/usr/sbin/sshd"
ETC_NETNS = Path("/etc/netns")


class HostSSHError(RtlabError):
    pass


def _keygen(path: Path, comment: str) -> str:
    if not path.is_file():
        res = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                             capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            raise HostSSHError(f"ssh-keygen {path}: {res.stderr.strip()}")
    return path.with_suffix(".pub").read_text().strip()


class LabSSH:
    """Keys and configs of one lab's SSH, under *directory* (``<lab>/ssh``)."""

    def __init__(self, directory: Path, net: int):
        self.dir = Path(directory)
        #: the lab's addresses (10.<net>.*): the runner hosts' ssh_config
        #: applies the lab's key and known_hosts to these alone
        self.pattern = f"10.{net}.*"
        self.client_key = self.dir / "id_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self.authorized_keys = self.dir / "authorized_keys"
        self._etc: list[Path] = []

    def prepare(self, exporter_hosts: dict[str, str]) -> None:
        """Client key, one host key per exporter host ({host: address}), the
        authorized_keys and known_hosts that tie them together."""
        if not os.access(SSHD, os.X_OK):
            raise HostSSHError(f"{SSHD} is missing (openssh-server, env/apt-packages.txt): the runner hosts "
                               "reach the exporter hosts by SSH, as labgrid's RemoteTFTPProvider needs")
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        self.authorized_keys.write_text(_keygen(self.client_key, "rtlab-lab-runner") + "\n")
        known = []
        for host, address in exporter_hosts.items():
            pub = _keygen(self.dir / f"host_{host}", f"rtlab-lab-{host}")
            known.append(f"{address} {' '.join(pub.split()[:2])}")
        self.known_hosts.write_text("\n".join(known) + "\n")
        # sshd's privilege-separation directory (made by the ssh service on a
        # host that runs one; here sshd is only ever started by the lab)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)

    def sshd_argv(self, host: str, address: str) -> list[str]:
        """sshd for exporter host *host*, in the foreground, on *address*:22."""
        cfg = self.dir / f"sshd_{host}.conf"
        cfg.write_text("\n".join([
            f"ListenAddress {address}:22",
            f"HostKey {self.dir / f'host_{host}'}",
            f"AuthorizedKeysFile {self.authorized_keys}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            # the lab directory may sit below a world-writable /tmp
            "StrictModes no",
            "PidFile none",
            "PrintMotd no",
            "X11Forwarding no",
            # labgrid opens a control master and several sessions on it
            "MaxSessions 32",
            "Subsystem sftp internal-sftp",
            # Debian's bash sources ~/.bashrc for a command sshd runs when it
            # is a top-level shell: root's may do work there (on this
            # machine, pyenv rehash under a lock that a host killed mid-rehash
            # leaves behind: every command then waited 60 s). SHLVL=1 makes
            # the command's bash a nested shell, which skips ~/.bashrc.
            "SetEnv SHLVL=1",
        ]) + "\n")
        return [SSHD, "-D", "-e", "-f", str(cfg)]

    def configure_runner(self, netns: str) -> None:
        """Give runner namespace *netns* an /etc/ssh of its own."""
        etc = ETC_NETNS / netns / "ssh"
        etc.mkdir(parents=True, exist_ok=True)
        self._etc.append(etc.parent)
        (etc / "ssh_config").write_text("\n".join([
            "# rtlab multi-host lab: this runner host's SSH to the exporter hosts",
            f"Host {self.pattern}",
            "    User root",
            f"    IdentityFile {self.client_key}",
            "    IdentitiesOnly yes",
            f"    UserKnownHostsFile {self.known_hosts}",
            "    StrictHostKeyChecking yes",
            "    BatchMode yes",
            "    ConnectTimeout 15",
        ]) + "\n")

    def remove(self) -> None:
        for d in self._etc:
            shutil.rmtree(d, ignore_errors=True)
        self._etc.clear()


def leftover_etc(prefix: str) -> list[str]:
    """/etc/netns entries of namespaces named *prefix*-* (none after a lab's down)."""
    if not ETC_NETNS.is_dir():
        return []
    return sorted(str(p) for p in ETC_NETNS.iterdir() if p.name.startswith(prefix + "-"))


def reclaim_etc(prefix: str) -> list[str]:
    gone = leftover_etc(prefix)
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return gone
