"""How `rtlab rack up --hosts N` shares the rack's boards among exporter
hosts (rtlab.rack.multihost, rtlab.rack.service.host_share), without
namespaces: the multi-host lab itself is tests/integration/test_rack_multihost.py."""
import pytest

from rtlab.rack.config import load_rack_config
from rtlab.rack.multihost import MultiHostError, MultiHostRack, split_boards
from rtlab.rack.service import RackError, host_share


def test_boards_are_dealt_so_the_two_aarch64_places_sit_on_different_hosts():
    cfg = load_rack_config()
    shares = split_boards(cfg, 2)
    assert sorted(b for bs in shares.values() for b in bs) == sorted(cfg.boards)  # every board once
    host_of = {b: h for h, bs in shares.items() for b in bs}
    assert host_of["vb0"] != host_of["vb1"]


def test_a_host_share_exports_its_boards_under_its_own_name_with_their_places():
    cfg = load_rack_config()
    share = host_share(cfg, ["vb1", "ipc0"], "rtlab-rack-exp2")
    assert list(share.boards) == ["vb1", "ipc0"] and share.name == "rtlab-rack-exp2"
    assert set(share.places) == {"rack-vb1", "rack-ipc0"}
    assert share.places["rack-vb1"].matches == ("rtlab-rack-exp2/vb1/*",)
    assert share.places["rack-vb1"].tags == cfg.places["rack-vb1"].tags  # jobs reserve it as before
    with pytest.raises(RackError, match="no boards vb9"):
        host_share(cfg, ["vb9"], "x")


@pytest.mark.parametrize("n", [1, 9])
def test_the_number_of_hosts_is_ranged(tmp_path, n):
    with pytest.raises(MultiHostError, match=r"--hosts must be in \[2, 8\]"):
        MultiHostRack(load_rack_config(), tmp_path, n)
