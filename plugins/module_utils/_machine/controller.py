# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Who carries out a Machine's deletion: its own controller, or the collection (pure).

In a real cluster the Machine's controller (Cluster API's Machine controller,
OpenShift's machine controller) is usually running. Once a Machine is marked
for deletion, a live controller drains the Node, deletes the infrastructure
and the Node and removes the finalizer itself; if the collection did the same
at the same time, both would evict the same Pods and delete the same objects.
So each Machine being deleted has one actor:

- ``controller``: the collection marks it, serves nothing of the controller's
  work and follows the controller's progress through the Machine's conditions;
- ``collection``: no controller carries it out (stopped, scaled down for a
  teardown, filtered out), so the collection does every step itself.

The ``machine_controller`` option chooses: ``live`` (the controller acts),
``absent`` (the collection acts), or ``auto`` (the default), which looks for the
controller's hand. A controller writes a Machine's status; the API server
records each writer in ``metadata.managedFields`` (manager name, subresource,
time of its last write). The collection's own writes carry its user agent as
manager. So:

- a status write by another manager at or after the deletion request means a
  live controller: it follows;
- a Machine whose status no other manager ever wrote has no controller: the
  collection acts at once;
- otherwise (a controller served it once, nothing yet since the deletion) the
  controller's leader-election Lease decides at once when it can
  (``liveness.py``: held, the controller is live and followed; vacant for good,
  the collection acts); when it cannot (absent, unreadable, vacant only
  recently), the collection waits up to ``controller_grace`` seconds from the
  deletion for the controller to answer, and acts only when none did.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.base import Flavour, meta_of, status_of
from ansible_collections.lifecycle.machine.plugins.module_utils._options.specs import CONTROLLER_GRACE_DEFAULT, MACHINE_CONTROLLER_SETTINGS
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import parse_time, rfc3339

# The field manager the API server records for the collection's writes (its user agent).
OUR_MANAGER = "lifecycle.machine"

# The machine_controller option's settings and the controller_grace default have their one home in _options/specs.py.
SETTINGS = MACHINE_CONTROLLER_SETTINGS
AUTO, LIVE, ABSENT = SETTINGS
DEFAULT_GRACE = CONTROLLER_GRACE_DEFAULT

CONTROLLER, COLLECTION, UNDECIDED = "controller", "collection", "undecided"

# The phase of the deletion a live controller is in, from what it last wrote.
DRAIN, TERMINATE = "drain", "terminate"
# Cluster API's v1beta2 Deleting reasons of the steps up to the end of the drain.
CAPI_DRAIN_REASONS = ("WaitingForPreDrainHook", "DrainingNode")


@dataclass(frozen=True)
class Actor:
    """Who carries out a Machine's deletion, and why the collection thinks so."""

    who: str  # CONTROLLER, COLLECTION or UNDECIDED (auto: still within the grace)
    reason: str
    manager: str = ""  # the controller's field manager, when one was seen
    wait_until: float | None = None  # UNDECIDED: epoch seconds until which to look for the controller
    # Decided by the grace alone: a controller wrote the status once, none since the deletion (its Lease may say more).
    grace: bool = False

    @property
    def controller(self) -> bool:
        return self.who == CONTROLLER

    def as_dict(self) -> dict:
        result = {"carried_out_by": self.who, "reason": self.reason}
        if self.manager:
            result["controller"] = self.manager
        return result


def _managed_time(entry: dict) -> _dt.datetime | None:
    try:
        return parse_time(entry.get("time"))
    except (TypeError, ValueError):
        return None


def status_writers(machine: dict, *, since: _dt.datetime | None = None, ours: str = OUR_MANAGER) -> list[tuple[str, _dt.datetime | None]]:
    """``[(manager, time of its last status write)]`` of every manager but ``ours``
    that wrote the Machine's status (at or after ``since``, when given), newest first."""
    found = []
    for entry in meta_of(machine).get("managedFields") or []:
        if not isinstance(entry, dict) or entry.get("subresource") != "status":
            continue
        manager = str(entry.get("manager") or "")
        if not manager or manager == ours:
            continue
        when = _managed_time(entry)
        if since is not None and (when is None or when < since.replace(microsecond=0)):
            continue
        found.append((manager, when))
    return sorted(found, key=lambda item: item[1].timestamp() if item[1] else 0.0, reverse=True)


def deletion_time(machine: dict) -> _dt.datetime | None:
    try:
        return parse_time(meta_of(machine).get("deletionTimestamp"))
    except (TypeError, ValueError):
        return None


_TOLD = {
    LIVE: Actor(CONTROLLER, "machine_controller is live: its controller carries out the deletion"),
    ABSENT: Actor(COLLECTION, "machine_controller is absent: the collection carries out the deletion"),
}


def who_deletes(machine: dict, setting: str, grace: float, now: float, *, marked_at: float | None = None) -> Actor:
    """The actor of a Machine's deletion as far as ``machine`` (read after the
    deletion was requested) tells. ``marked_at``: when this task asked for the
    deletion (epoch seconds), else the Machine's deletionTimestamp counts."""
    if setting in _TOLD:
        return _TOLD[setting]
    deleted = deletion_time(machine)
    if deleted is None:
        return Actor(COLLECTION, "the Machine is not being deleted: no controller drains it")
    since_deletion = status_writers(machine, since=deleted)
    if since_deletion:
        manager, when = since_deletion[0]
        at = f" at {rfc3339(when)}" if when else ""
        return Actor(CONTROLLER, f"its controller ({manager}) wrote its status{at}, after the deletion was requested", manager=manager)
    ever = status_writers(machine)
    if not ever:
        return Actor(COLLECTION, "no controller ever wrote its status: the collection carries out the deletion")
    manager = ever[0][0]
    start = marked_at if marked_at is not None else deleted.timestamp()
    if now < start + grace:
        reason = f"waiting up to {grace:g} s for its controller ({manager}) to answer the deletion"
        return Actor(UNDECIDED, reason, manager=manager, wait_until=start + grace, grace=True)
    reason = f"its controller ({manager}) did not answer within {grace:g} s of the deletion: the collection carries out the deletion"
    return Actor(COLLECTION, reason, manager=manager, grace=True)


def _condition(conditions: list[dict], kind: str) -> dict:
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == kind), {})


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0].rstrip(":") if (text or "").strip() else ""


def controller_progress(machine: dict | None, flavour: Flavour | None) -> dict:
    """Where a live controller stands with a Machine's deletion, from what it
    wrote: ``{"phase": drain|terminate|gone, "drained": bool, "reason", "message"}``
    (a Machine that is gone needs no flavour)."""
    if machine is None or flavour is None:
        return {"phase": "gone", "drained": True, "reason": "", "message": "the Machine is gone"}
    drained = flavour.drained(machine)
    if flavour.progress_conditions:  # OpenShift's Drainable, Drained, Terminable
        conditions = list(status_of(machine).get("conditions") or [])
        for kind in flavour.progress_conditions:
            condition = _condition(conditions, kind)
            if condition and condition.get("status") == "False":
                reason = str(condition.get("reason") or kind)
                text = _first_line(str(condition.get("message") or ""))
                message = f"{kind} False: {reason}{': ' + text if text else ''}"
                return {"phase": TERMINATE if drained else DRAIN, "drained": drained, "reason": reason, "message": message}
        phase = status_of(machine).get("phase") or "Deleting"
        return {"phase": TERMINATE if drained else DRAIN, "drained": drained, "reason": phase, "message": f"phase {phase}"}
    deleting = _condition(flavour.v1beta2_conditions(machine), "Deleting")
    reason = str(deleting.get("reason") or "")
    full = str(deleting.get("message") or "").strip()
    text = _first_line(full)
    if reason and reason not in CAPI_DRAIN_REASONS and reason != "NotDeleting":
        drained = True
    message = f"{reason}: {text}" if reason and text else (reason or "waiting for the controller to report")
    # What the controller lists under its first line (the Pods a drain waits for, say), at most five lines.
    details = [line.rstrip() for line in full.splitlines()[1:] if line.strip()][:5]
    return {"phase": TERMINATE if drained else DRAIN, "drained": drained, "reason": reason, "message": message, "details": details}


def following_message(actor: Actor, progress: dict) -> str:
    """The line an operator reads while the controller carries a Machine's deletion out."""
    who = f"its controller ({actor.manager})" if actor.manager else "its controller"
    return "\n".join([f"{who} is deleting it: {progress['message']}", *progress.get("details", [])])


def done_message(actor: Actor) -> str:
    """What a followed deletion reads once the Machine is gone."""
    return f"deleted by its controller{f' ({actor.manager})' if actor.manager else ''}"


def timeout_message(actor: Actor, progress: dict, timeout: int) -> str:
    """The failure when the controller did not get past a phase within its budget."""
    who = f"its controller ({actor.manager})" if actor.manager else "its controller"
    return (
        f"Timed out after {timeout} s waiting for {who} to finish the {progress['phase']} phase: {progress['message']}"
        " (if the controller is stopped, run again with machine_controller: absent to let the collection carry out the deletion)"
    )


def predicted_actor(machine: dict, setting: str) -> Actor:
    """Check mode: who would carry out the deletion of ``machine`` (not marked,
    so no answer of a controller can be seen yet)."""
    if setting in _TOLD:
        return _TOLD[setting]
    if meta_of(machine).get("deletionTimestamp"):
        return who_deletes(machine, setting, 0, float("inf"))
    ever = status_writers(machine)
    if ever:
        return Actor(CONTROLLER, f"its controller ({ever[0][0]}) wrote its status: it would carry out the deletion if it answers", manager=ever[0][0])
    return Actor(COLLECTION, "no controller ever wrote its status: the collection would carry out the deletion")
