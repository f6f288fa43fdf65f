"""A small synchronous client for labgrid's coordinator (gRPC, labgrid >= 25).

Only the unary, session-less requests: reading places and reservations,
declaring places (what ``labgrid-client create/add-match/set-tags`` and
labgrid's ``contrib/sync-places.py`` send), releasing a place *from a given
owner* (the request ``labgrid-client release-from HOST/USER`` sends: atomic,
a no-op when somebody else holds the place by now) and cancelling a
reservation. These cost one round trip each, so the rack's reaper can poll
every second without starting a Python process per look.

Reserving and locking need a client *session* (the coordinator records the
session's ``host/user`` as owner), so jobs do those through ``labgrid-client``
itself (:mod:`rtlab.lab.places`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

import grpc
from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2
from labgrid.remote.generated import labgrid_coordinator_pb2_grpc as pb2_grpc

#: labgrid's ReservationState values
RES_STATES = {0: "waiting", 1: "allocated", 2: "acquired", 3: "expired", 4: "invalid"}

DEFAULT_PORT = 20408


class CoordinatorError(Exception):
    """The coordinator could not be reached or refused a request."""


@dataclass
class PlaceInfo:
    name: str
    tags: dict = field(default_factory=dict)
    matches: list = field(default_factory=list)
    acquired: Optional[str] = None
    acquired_resources: list = field(default_factory=list)
    reservation: Optional[str] = None
    comment: str = ""
    #: the coordinator's clock when the place last changed (lock, release, tags)
    changed: float = 0.0

    def has_tags(self, tags: dict) -> bool:
        """labgrid's reservation filter: every key=value present (``name`` is implicit)."""
        mine = {**self.tags, "name": self.name}
        return all(mine.get(k) == v for k, v in tags.items())

    def to_json(self) -> dict:
        return {"name": self.name, "tags": self.tags, "matches": self.matches,
                "acquired": self.acquired, "reservation": self.reservation,
                "acquired_resources": self.acquired_resources}


@dataclass
class ReservationInfo:
    token: str
    owner: str
    state: str
    filters: dict
    allocations: dict
    timeout: float
    prio: float = 0.0
    created: float = 0.0

    @property
    def place(self) -> Optional[str]:
        return self.allocations.get("main")

    def to_json(self) -> dict:
        return {"token": self.token, "owner": self.owner, "state": self.state,
                "filters": self.filters, "allocations": self.allocations}


def normalize_address(address: str) -> str:
    address = address.strip()
    if address.startswith("["):  # [v6]:port
        return address if "]:" in address else f"{address}:{DEFAULT_PORT}"
    if address.count(":") == 1:
        return address
    return f"{address}:{DEFAULT_PORT}"


def match_pattern(m) -> str:
    parts = [m.exporter, m.group, m.cls] + ([m.name] if m.HasField("name") else [])
    return "/".join(parts)


class Coordinator:
    """``with Coordinator("127.0.0.1:20418") as c: c.places()``"""

    def __init__(self, address: Optional[str] = None, timeout: float = 5.0):
        address = address or os.environ.get("LG_COORDINATOR") or f"127.0.0.1:{DEFAULT_PORT}"
        self.address = normalize_address(address)
        self.timeout = timeout
        self._channel = grpc.insecure_channel(self.address)
        self._stub = pb2_grpc.CoordinatorStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, name: str, request):
        try:
            return getattr(self._stub, name)(request, timeout=self.timeout)
        except grpc.RpcError as e:
            code = e.code().name if hasattr(e, "code") and e.code() else "?"
            details = e.details() if hasattr(e, "details") else str(e)
            raise CoordinatorError(f"coordinator {self.address}: {name}: {code}: {details}") from None

    def wait_ready(self, timeout: float) -> None:
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise CoordinatorError(f"coordinator {self.address} not reachable within {timeout:g} s") from None

    # -- reading ---------------------------------------------------------------
    def places(self) -> dict[str, PlaceInfo]:
        resp = self._call("GetPlaces", pb2.GetPlacesRequest())
        out = {}
        for p in resp.places:
            out[p.name] = PlaceInfo(
                name=p.name, tags=dict(p.tags), matches=[match_pattern(m) for m in p.matches],
                acquired=(p.acquired or None) if p.HasField("acquired") else None,
                acquired_resources=list(p.acquired_resources),
                reservation=p.reservation if p.HasField("reservation") else None,
                comment=p.comment, changed=p.changed)
        return out

    def reservations(self) -> dict[str, ReservationInfo]:
        resp = self._call("GetReservations", pb2.GetReservationsRequest())
        return {r.token: ReservationInfo(
            token=r.token, owner=r.owner, state=RES_STATES.get(r.state, str(r.state)),
            filters={k: dict(v.filter) for k, v in r.filters.items()},
            allocations=dict(r.allocations), timeout=r.timeout, prio=r.prio, created=r.created) for r in resp.reservations}

    # -- places (declarative, idempotent) -------------------------------------
    def ensure_place(self, name: str, matches: list[str], tags: dict, comment: str = "") -> None:
        """Create or update a place so it has exactly these matches and tags."""
        have = self.places().get(name)
        if have is None:
            self._call("AddPlace", pb2.AddPlaceRequest(name=name))
            have = PlaceInfo(name=name)
        for pattern in have.matches:
            if pattern not in matches:
                self._call("DeletePlaceMatch", pb2.DeletePlaceMatchRequest(placename=name, pattern=pattern))
        for pattern in matches:
            if pattern not in have.matches:
                self._call("AddPlaceMatch", pb2.AddPlaceMatchRequest(placename=name, pattern=pattern))
        # an empty value deletes a tag (labgrid-client set-tags semantics)
        # (a job's lease tags, rtlab_lease_*, are the job's: never declared away)
        wanted = {**{k: "" for k in have.tags if k not in tags and not k.startswith("rtlab_lease_")},
                  **{k: str(v) for k, v in tags.items()}}
        if wanted and any(have.tags.get(k, "") != v for k, v in wanted.items()):
            self._call("SetPlaceTags", pb2.SetPlaceTagsRequest(placename=name, tags=wanted))
        if comment and have.comment != comment:
            self._call("SetPlaceComment", pb2.SetPlaceCommentRequest(placename=name, comment=comment))

    def set_tags(self, place: str, tags: dict) -> None:
        """Merge tags into a place (an empty value deletes the tag)."""
        self._call("SetPlaceTags", pb2.SetPlaceTagsRequest(placename=place, tags={k: str(v) for k, v in tags.items()}))

    # -- cleanup ---------------------------------------------------------------
    def release_from(self, place: str, owner: str) -> None:
        """Release *place* only if *owner* ("host/user") still holds it."""
        self._call("ReleasePlace", pb2.ReleasePlaceRequest(placename=place, fromuser=owner))

    def cancel_reservation(self, token: str) -> bool:
        """Cancel a reservation; False if it no longer exists."""
        try:
            self._call("CancelReservation", pb2.CancelReservationRequest(token=token))
            return True
        except CoordinatorError as e:
            if "does not exist" in str(e):
                return False
            raise
