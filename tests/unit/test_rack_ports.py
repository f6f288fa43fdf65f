"""Ports the rack picks itself (`rtlab rack up --coordinator-port 0
--pdu-port 0`, what the tests use): held from the moment they are picked
until their server binds, so the rack's own port-0 listeners (each board's
console relay, the interrupt-probe twins) cannot be handed the same port.
A port picked and released at once went to a board's relay in a full
`make test` run, and the PDU's bind failed with EADDRINUSE."""
import socket

import pytest

from rtlab.core.procutil import reserve_port
from rtlab.rack.config import load_rack_config
from rtlab.rack.pdu import PDUServer, PowerController
from rtlab.rack.service import Rack


def test_a_reserved_port_is_never_handed_to_a_port_0_bind_and_its_server_still_binds_it():
    held = reserve_port()
    port = held.getsockname()[1]
    try:
        others = []
        for _ in range(3000):  # more than enough for the kernel to come round to it
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            others.append(s.getsockname()[1])
            s.close()
        assert port not in others
        with socket.socket() as other, pytest.raises(OSError, match="in use"):
            other.bind(("127.0.0.1", port))  # held: taken for anyone but a SO_REUSEADDR server
        srv = PDUServer(("127.0.0.1", port), PowerController({}, None))  # SO_REUSEADDR, as the rack's
    finally:
        held.close()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        srv.server_close()


def test_the_rack_holds_the_ports_it_picked_until_their_servers_bind(tmp_path):
    rack = Rack(load_rack_config(), tmp_path, 0, 0)
    try:
        assert rack.reserved["coordinator"].getsockname()[1] == rack.coordinator_port
        assert rack.reserved["PDU"].getsockname()[1] == rack.pdu_port
        for port in (rack.coordinator_port, rack.pdu_port):
            with socket.socket() as other, pytest.raises(OSError, match="in use"):
                other.bind(("127.0.0.1", port))
        rack.release_port("PDU")
        assert "PDU" not in rack.reserved
    finally:
        for what in list(rack.reserved):
            rack.release_port(what)
    fixed = Rack(load_rack_config(), tmp_path / "fixed", 20408, 20409)
    assert fixed.reserved == {} and (fixed.coordinator_port, fixed.pdu_port) == (20408, 20409)
