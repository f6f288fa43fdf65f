"""The rack's HTTP PDU: one outlet per virtual board.

Speaks the two HTTP shapes labgrid's ``NetworkPowerDriver`` has backends for
(``labgrid/driver/power/simplerest.py`` and ``rest.py``)::

    simplerest  host: 'http://127.0.0.1:PORT/relay/{index}/{value}'
        GET /relay/<i>/1 | /relay/<i>/0    switch           -> 200
        GET /relay/<i>                     state            -> "1" | "0"
    rest        host: 'http://127.0.0.1:PORT/relay/{index}/value'
        PUT /relay/<i>/value  body 1 | 0   switch           -> 200
        GET /relay/<i>/value               state            -> "1" | "0"

Unknown outlets answer 404, bad values 400 (labgrid raises on non-2xx).
Rack administration, which no real PDU has, lives under ``/rack/``::

    GET  /rack/status                      JSON: outlets, boards
    POST /rack/fault/<board>  body hang-boot | hang-now | clear

Switching is done by one controller thread, in order (as a PDU's relay
controller would), so QEMU children are owned by a thread that lives as long
as the rack. Every switch is appended to ``pdu.jsonl``.
"""
from __future__ import annotations

import json
import queue
import re
import threading
import time
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

from .board import VirtualBoard

FAULTS = ("hang-boot", "hang-now", "clear")


class PowerController(threading.Thread):
    def __init__(self, boards: dict[int, VirtualBoard], log_path: Path):
        super().__init__(name="pdu-controller", daemon=True)
        self.outlets = boards
        self.log_path = log_path
        self.q: "queue.Queue[tuple[Callable, Future]]" = queue.Queue()

    def run(self) -> None:
        while True:
            item = self.q.get()
            if item is None:
                return
            fn, fut = item
            try:
                fut.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                fut.set_exception(e)

    def submit(self, fn: Callable, timeout: float = 30.0):
        fut: Future = Future()
        self.q.put((fn, fut))
        return fut.result(timeout=timeout)

    def stop(self) -> None:
        self.q.put(None)

    def switch(self, outlet: int, on: bool, via: str, client: str = "") -> None:
        """Switch *outlet*; the log names how (*via*) and, for a request, the
        address it came from (*client*: in a multi-host lab, the runner host)."""
        board = self.outlets[outlet]

        def do():
            was = board.powered
            board.power_on() if on else board.power_off()
            with open(self.log_path, "a") as f:
                f.write(json.dumps({"t": round(time.time(), 3), "outlet": outlet, "board": board.name,
                                    "set": "on" if on else "off", "was": "on" if was else "off",
                                    "via": via, **({"from": client} if client else {})}) + "\n")
        self.submit(do)

    def fault(self, outlet: int, fault: str) -> dict:
        board = self.outlets[outlet]

        def do():
            if fault == "clear":
                board.fault = None
            elif fault == "hang-boot":
                board.fault = "hang-boot"
            elif fault == "hang-now":
                if not board.hang_now():
                    raise ValueError(f"board {board.name} is not running")
            return board.status()
        return self.submit(do)


class _Handler(BaseHTTPRequestHandler):
    server: "PDUServer"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: pdu.jsonl is the log
        pass

    def _reply(self, code: int, body: str = "", ctype: str = "text/plain") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _outlet(self, text: str):
        try:
            i = int(text)
        except ValueError:
            return None
        return i if i in self.server.controller.outlets else None

    def _state(self, outlet: int) -> str:
        return "1" if self.server.controller.outlets[outlet].powered else "0"

    def do_GET(self):  # noqa: N802 - http.server naming
        path = self.path.split("?", 1)[0].rstrip("/")
        m = re.fullmatch(r"/relay/([^/]+)(?:/([^/]*))?", path)
        if m:
            outlet = self._outlet(m.group(1))
            if outlet is None:
                return self._reply(404, f"no outlet {m.group(1)}\n")
            value = m.group(2)
            if value in (None, "", "value"):
                return self._reply(200, self._state(outlet))
            if value not in ("0", "1"):
                return self._reply(400, f"bad value {value!r} (0 or 1)\n")
            try:
                self.server.controller.switch(outlet, value == "1", via="GET", client=self.client_address[0])
            except Exception as e:  # noqa: BLE001 - a PDU error, not a crash
                return self._reply(500, f"{type(e).__name__}: {e}\n")
            return self._reply(200, self._state(outlet))
        if path == "/rack/status":
            boards = [b.status() for _, b in sorted(self.server.controller.outlets.items())]
            return self._reply(200, json.dumps({"outlets": boards}), "application/json")
        return self._reply(404, "not found\n")

    def _body(self) -> str:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n).decode(errors="replace").strip() if n else ""

    def do_PUT(self):  # noqa: N802
        path = self.path.split("?", 1)[0].rstrip("/")
        m = re.fullmatch(r"/relay/([^/]+)/value", path)
        if not m:
            return self._reply(404, "not found\n")
        outlet = self._outlet(m.group(1))
        if outlet is None:
            return self._reply(404, f"no outlet {m.group(1)}\n")
        value = self._body()
        if value not in ("0", "1"):
            return self._reply(400, f"bad value {value!r} (0 or 1)\n")
        try:
            self.server.controller.switch(outlet, value == "1", via="PUT", client=self.client_address[0])
        except Exception as e:  # noqa: BLE001
            return self._reply(500, f"{type(e).__name__}: {e}\n")
        return self._reply(200, self._state(outlet))

    def do_POST(self):  # noqa: N802
        path = self.path.split("?", 1)[0].rstrip("/")
        m = re.fullmatch(r"/rack/fault/([^/]+)", path)
        if not m:
            return self._reply(404, "not found\n")
        outlet = next((o for o, b in self.server.controller.outlets.items() if b.name == m.group(1)), None)
        if outlet is None:
            return self._reply(404, f"no board {m.group(1)}\n")
        fault = self._body()
        if fault not in FAULTS:
            return self._reply(400, f"bad fault {fault!r} (one of {', '.join(FAULTS)})\n")
        try:
            status = self.server.controller.fault(outlet, fault)
        except ValueError as e:
            return self._reply(409, f"{e}\n")
        return self._reply(200, json.dumps(status), "application/json")


class PDUServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], controller: PowerController):
        self.controller = controller
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self.serve_forever, name="pdu-http", daemon=True)
        t.start()
        return t
