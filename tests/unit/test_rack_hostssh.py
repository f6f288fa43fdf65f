"""The multi-host lab's SSH (rtlab.rack.hostssh): keys, known_hosts, an sshd
configuration that OpenSSH's own `sshd -t` accepts, the runner hosts'
/etc/netns entries and their removal."""
import subprocess

from rtlab.rack import hostssh
from rtlab.rack.hostssh import LabSSH, leftover_etc, reclaim_etc


def test_keys_known_hosts_and_an_sshd_config_sshd_accepts(tmp_path):
    ssh = LabSSH(tmp_path / "ssh", 231)
    ssh.prepare({"exp1": "10.231.1.2", "exp2": "10.231.2.2"})
    known = ssh.known_hosts.read_text().splitlines()
    assert [k.split()[0] for k in known] == ["10.231.1.2", "10.231.2.2"]
    for k, host in zip(known, ("exp1", "exp2")):  # each host's own key
        assert k.split()[1:] == (tmp_path / "ssh" / f"host_{host}.pub").read_text().split()[:2]
    assert ssh.authorized_keys.read_text().split()[:2] == \
        (tmp_path / "ssh" / "id_ed25519.pub").read_text().split()[:2]
    argv = ssh.sshd_argv("exp1", "10.231.1.2")
    cfg = (tmp_path / "ssh" / "sshd_exp1.conf").read_text()
    assert "ListenAddress 10.231.1.2:22" in cfg and "PasswordAuthentication no" in cfg
    assert "SetEnv SHLVL=1" in cfg  # no ~/.bashrc of root's for the lab's commands
    res = subprocess.run([argv[0], "-t", "-f", argv[-1]], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    # prepared again (a restart): the same keys, not new ones
    before = ssh.known_hosts.read_text()
    ssh.prepare({"exp1": "10.231.1.2", "exp2": "10.231.2.2"})
    assert ssh.known_hosts.read_text() == before


def test_runner_hosts_get_their_own_ssh_config_and_lose_it(tmp_path, monkeypatch):
    monkeypatch.setattr(hostssh, "ETC_NETNS", tmp_path / "netns")
    ssh = LabSSH(tmp_path / "ssh", 231)
    ssh.configure_runner("rtlr1-runner1")
    ssh.configure_runner("rtlr1-runner2")
    cfg = (tmp_path / "netns" / "rtlr1-runner1" / "ssh" / "ssh_config").read_text()
    assert "Host 10.231.*" in cfg and f"IdentityFile {ssh.client_key}" in cfg
    assert "StrictHostKeyChecking yes" in cfg and f"UserKnownHostsFile {ssh.known_hosts}" in cfg
    assert len(leftover_etc("rtlr1")) == 2 and leftover_etc("rtlr2") == []
    ssh.remove()
    assert leftover_etc("rtlr1") == []
    # a lab whose service was killed: rack down reclaims what it left
    ssh.configure_runner("rtlr1-runner1")
    assert reclaim_etc("rtlr1") == [str(tmp_path / "netns" / "rtlr1-runner1")]
    assert leftover_etc("rtlr1") == []
