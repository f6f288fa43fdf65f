"""The rack's HTTP PDU speaks the shapes labgrid's power backends send.

Driven with labgrid's own backends (simplerest, rest), so a change on either
side shows up here; boards are stand-ins that record power calls.
"""
import json
import urllib.error
import urllib.request

import pytest
import requests
from labgrid.driver.power import rest, simplerest

from rtlab.rack.pdu import PDUServer, PowerController


class FakeBoard:
    def __init__(self, name):
        self.name = name
        self.powered = False
        self.fault = None
        self.frozen = False
        self.calls = []

    def power_on(self):
        self.calls.append("on")
        self.powered = True

    def power_off(self):
        self.calls.append("off")
        self.powered = False

    def hang_now(self):
        if not self.powered:
            return False
        self.frozen = True
        return True

    def status(self):
        return {"name": self.name, "power": "on" if self.powered else "off",
                "frozen": self.frozen, "pending_fault": self.fault}


@pytest.fixture
def pdu(tmp_path):
    boards = {0: FakeBoard("vb0"), 3: FakeBoard("vb3")}
    ctl = PowerController(boards, tmp_path / "pdu.jsonl")
    ctl.start()
    srv = PDUServer(("127.0.0.1", 0), ctl)
    srv.start()
    yield srv, boards, tmp_path / "pdu.jsonl"
    srv.shutdown()
    srv.server_close()
    ctl.stop()


def _req(url, method="GET", body=None):
    req = urllib.request.Request(url, method=method, data=body.encode() if body else None)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_simplerest_shape_switches_and_reads_outlets(pdu, monkeypatch):
    monkeypatch.delenv("http_proxy", raising=False)
    srv, boards, log = pdu
    host = srv.url + "/relay/{index}/{value}"
    assert simplerest.power_get(host, None, 3) is False
    simplerest.power_set(host, None, 3, True)
    assert simplerest.power_get(host, None, 3) is True
    assert boards[3].calls == ["on"] and boards[0].calls == []
    simplerest.power_set(host, None, 3, True)   # on when on: no second power-on
    assert boards[3].calls == ["on", "on"] and boards[3].powered
    simplerest.power_set(host, None, 3, False)
    assert simplerest.power_get(host, None, 3) is False
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["board"], e["set"], e["was"]) for e in events] == [
        ("vb3", "on", "off"), ("vb3", "on", "on"), ("vb3", "off", "on")]


def test_rest_shape(pdu):
    srv, boards, _ = pdu
    host = srv.url + "/relay/{index}/value"
    rest.power_set(host, None, 0, True)
    assert rest.power_get(host, None, 0) is True and boards[0].powered
    rest.power_set(host, None, 0, False)
    assert rest.power_get(host, None, 0) is False


def test_errors_are_http_errors_labgrid_raises_on(pdu):
    srv, _, _ = pdu
    assert _req(srv.url + "/relay/7/1")[0] == 404          # no such outlet
    assert _req(srv.url + "/relay/0/2")[0] == 400          # not 0/1
    assert _req(srv.url + "/relay/0/value", "PUT", "yes")[0] == 400
    with pytest.raises(requests.HTTPError):  # labgrid's driver: raise_for_status
        simplerest.power_set(srv.url + "/relay/{index}/{value}", None, 9, True)


def test_faults_and_status(pdu):
    srv, boards, _ = pdu
    code, body = _req(srv.url + "/rack/fault/vb0", "POST", "hang-boot")
    assert code == 200 and json.loads(body)["pending_fault"] == "hang-boot"
    assert boards[0].fault == "hang-boot"
    assert _req(srv.url + "/rack/fault/vb0", "POST", "hang-now")[0] == 409  # not running
    _req(srv.url + "/relay/0/1")
    code, body = _req(srv.url + "/rack/fault/vb0", "POST", "hang-now")
    assert code == 200 and json.loads(body)["frozen"] is True
    assert _req(srv.url + "/rack/fault/vb0", "POST", "explode")[0] == 400
    assert _req(srv.url + "/rack/fault/nope", "POST", "clear")[0] == 404
    code, body = _req(srv.url + "/rack/status")
    assert code == 200 and [b["name"] for b in json.loads(body)["outlets"]] == ["vb0", "vb3"]


def test_a_port_left_in_time_wait_is_free_for_the_next_rack_a_listener_is_not():
    """`rtlab rack down; rtlab rack up` within a minute: TIME-WAIT must not block."""
    import socket

    from rtlab.rack.service import port_taken
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    cli = socket.create_connection(("127.0.0.1", port))
    conn, _ = srv.accept()
    assert port_taken("127.0.0.1", port)  # a listener: taken
    conn.close()  # the server side closes first: its end goes to TIME-WAIT
    cli.close()
    srv.close()
    ss = __import__("subprocess").run(["ss", "-tan", f"sport = :{port}"], capture_output=True, text=True).stdout
    assert "TIME-WAIT" in ss, ss
    assert port_taken("127.0.0.1", port) == ""
