# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Whether a Machine's controller is live, read from its leader-election Lease (pure).

Both machine controllers run with leader election in a real deployment: Cluster
API's core manager (``--leader-elect``, set in its shipped manifest) holds the
Lease ``controller-leader-election-capi`` in its own namespace (``capi-system``
as installed); each OpenShift machine controller holds
``cluster-api-provider-<platform>-leader`` in ``openshift-machine-api`` (the
machine-api-operator starts it with ``--leader-elect=true``, lease duration
120 s). A controller with leader election acts only while it holds its Lease,
renewing it every few seconds, and its manager exits when it cannot renew.
So, for a Machine whose status a controller once wrote but that no controller
answered since its deletion (``machine_controller: auto``, ``controller.py``):

- **held** (``holderIdentity`` set, ``renewTime`` within ``leaseDurationSeconds``
  of now, with :data:`SKEW` seconds of allowance): a live controller holds
  leadership: it carries the deletion out, followed at once;
- **vacant** (no holder, or not renewed within its duration) for longer than
  another candidate would need to take it over (:func:`takeover_seconds`), and
  no controller wrote the Machine's status since the Lease went vacant: no
  controller with leader election can act, and the writer of the status was the
  one that held it, so the collection acts at once;
- anything else - the Lease is absent (the controller may run without leader
  election), cannot be read (403, an error), has no default for the flavour
  (an OpenShift platform not listed), went vacant only recently (a standby may
  be taking over), a controller wrote the status while the Lease was vacant (a
  controller outside leader election), or our clock disagrees with the API
  server's - leaves the decision to the grace (``controller_grace``), as before.

The rule is "never act while a live controller could still act": a vacant Lease
alone never lets the collection act, only one that stayed vacant past any
takeover and that the Machine's own history agrees with.

Times: ``renewTime`` is the holder's clock, ``now`` the collection's; both are
compared with :data:`SKEW` seconds of allowance, always in the direction that
keeps a controller live. When this task asked for the deletion, the API
server's ``deletionTimestamp`` tells whether the collection's clock runs ahead
of the server's by more than the allowance; then no vacant Lease is trusted.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import (
    COLLECTION,
    CONTROLLER,
    Actor,
    deletion_time,
    status_writers,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import parse_time, rfc3339

# Seconds of clock difference allowed between the Lease's holder, the API server and the collection.
SKEW = 5.0
# Seconds a vacant Lease is given, beyond its own duration, for a standby candidate to take it over: a
# candidate retries every retry period, shorter than the lease duration; a released Lease records a
# duration of 1 s, so a floor covers the retry periods of both controllers (2 s Cluster API, 26 s OpenShift).
TAKEOVER_FLOOR = 30.0


# How reading the Lease went (waits.py reads it).
FOUND, MISSING, FORBIDDEN, FAILED, NO_LEASE = "found", "missing", "forbidden", "failed", "no-lease"
# What the Lease says.
HELD, VACANT, UNKNOWN = "held", "vacant", "unknown"


@dataclass(frozen=True)
class LeaseRef:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class LeaseReading:
    """One read of a controller's Lease: how it went (:data:`FOUND`, :data:`MISSING`,
    :data:`FORBIDDEN`, :data:`FAILED`, :data:`NO_LEASE`), the Lease when found,
    the error's text when it failed."""

    ref: LeaseRef | None
    outcome: str
    lease: dict | None = None
    detail: str = ""


@dataclass(frozen=True)
class Liveness:
    """What a Lease says at one instant: :data:`HELD` (``holder`` renewed at
    ``renewed``, valid until ``until``), :data:`VACANT` (vacant since ``until``)
    or :data:`UNKNOWN`; ``reason`` says it in a sentence's tail."""

    state: str
    reason: str
    holder: str = ""
    until: float | None = None  # epoch seconds: HELD, the end of its validity; VACANT, since when it is vacant
    duration: float = 0.0


def default_lease(machine: dict) -> LeaseRef | None:
    """The Lease a Machine's controller holds where it is installed as shipped; None
    when the flavour's controller has no Lease the collection knows."""
    try:
        found = flavour_for(machine).controller_lease(machine)
    except MachineError:  # not a Machine of either flavour
        return None
    return LeaseRef(*found) if found is not None else None


def _epoch(value: object) -> float | None:
    try:
        parsed = parse_time(value) if isinstance(value, str) else None
    except (TypeError, ValueError):
        return None
    return parsed.timestamp() if parsed else None


def _at(epoch: float) -> str:
    return rfc3339(_dt.datetime.fromtimestamp(epoch, _dt.UTC))


def takeover_seconds(duration: float) -> float:
    """How long after a Lease went vacant a standby candidate may still take it over."""
    return max(duration, TAKEOVER_FLOOR)


def _unreadable(reading: LeaseReading) -> str:
    """Why ``reading`` holds no Lease to judge (empty when it holds one)."""
    ref = reading.ref
    if reading.outcome == NO_LEASE or ref is None:
        return "no Lease is known for its controller"
    if reading.outcome == MISSING:
        return f"its controller's Lease {ref} does not exist (leader election may be off)"
    if reading.outcome == FORBIDDEN:
        return f"its controller's Lease {ref} may not be read (403 Forbidden: grant get on leases in {ref.namespace})"
    if reading.outcome != FOUND or not isinstance(reading.lease, dict):
        return f"its controller's Lease {ref} could not be read ({reading.detail or 'no answer'})"
    return ""


def liveness(reading: LeaseReading, now: float) -> Liveness:
    """What ``reading`` says at ``now`` (epoch seconds, the collection's clock)."""
    unreadable = _unreadable(reading)
    if unreadable:
        return Liveness(UNKNOWN, unreadable)
    ref = reading.ref
    spec = (reading.lease or {}).get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    renewed = _epoch(spec.get("renewTime")) or _epoch(spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    if renewed is None or not isinstance(duration, int) or isinstance(duration, bool) or duration <= 0:
        return Liveness(UNKNOWN, f"its controller's Lease {ref} has no renewTime or leaseDurationSeconds")
    until = renewed + duration
    if holder and now <= until + SKEW:
        reason = f"its controller's Lease {ref} is held by {holder}, renewed at {_at(renewed)} (valid {duration} s)"
        return Liveness(HELD, reason, holder=holder, until=until, duration=float(duration))
    what = f"released at {_at(renewed)}" if not holder else f"held by {holder} until {_at(until)}, not renewed since"
    return Liveness(VACANT, f"its controller's Lease {ref} is vacant ({what})", holder=holder, until=until, duration=float(duration))


def _vacant_doubt(said: Liveness, machine: dict, now: float, marked_at: float | None) -> str:
    """Why a vacant Lease does not yet show that no controller can act (empty when it does)."""
    vacant_since = said.until or 0.0
    settled = vacant_since + takeover_seconds(said.duration) + SKEW
    if now < settled:
        return f"a standby may still take it over until {_at(settled)}"
    written = [when.timestamp() for _manager, when in status_writers(machine) if when is not None]
    if written and max(written) > vacant_since + SKEW:
        return f"but a controller wrote the Machine's status at {_at(max(written))}, after it went vacant (leader election off?)"
    deleted = deletion_time(machine)
    if marked_at is not None and deleted is not None and marked_at - deleted.timestamp() > SKEW + 1:
        return f"but this host's clock runs {marked_at - deleted.timestamp():.0f} s ahead of the API server's"
    return ""


def lease_actor(by_grace: Actor, machine: dict, reading: LeaseReading, now: float, *, marked_at: float | None = None) -> tuple[Actor | None, str]:
    """For a Machine ``machine_controller: auto`` leaves to the grace (``by_grace.grace``: its
    status written once, no answer since the deletion; within the grace or past it): the actor
    the Lease decides, or None to keep the grace's; and the Lease's word, for the grace's messages.
    A held Lease wins over a grace that is over: a live controller could still act."""
    if not by_grace.grace:
        return by_grace, ""
    said = liveness(reading, now)
    manager = by_grace.manager
    who = f"its controller ({manager})" if manager else "its controller"
    if said.state == HELD:
        return Actor(CONTROLLER, f"{said.reason}: {who} is live and carries out the deletion", manager=manager), said.reason
    if said.state != VACANT:
        return None, said.reason
    doubt = _vacant_doubt(said, machine, now, marked_at)
    if doubt:
        return None, f"{said.reason}{', ' if doubt.startswith('but') else '; '}{doubt}"
    reason = f"{said.reason}: no controller with leader election can act, and {who} did not write its status since; the collection carries out the deletion"
    return Actor(COLLECTION, reason, manager=manager), said.reason


def with_lease_note(actor: Actor, note: str) -> Actor:
    """``actor`` (a grace's, still waiting or given up) with the Lease's word appended to its reason."""
    if not note or actor.who == CONTROLLER:
        return actor
    return Actor(actor.who, f"{actor.reason} ({note})", manager=actor.manager, wait_until=actor.wait_until, grace=actor.grace)
