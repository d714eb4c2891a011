# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What machine_terminate reports (pure): the actions it took, the objects it
saw (for ``diff``), the steps as the last decision left them (or, once the
Machine is gone, as the run saw them while it existed) and the module result.

Nothing here talks to the API server: the runner tells the report what it
did and saw, and passes the transport's clock reading to :meth:`Report.result`.
"""

from __future__ import annotations

import datetime as _dt

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import Blocker, as_dicts
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour, ObjectRef
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.logic import (
    AWAIT_INSTANCE,
    BLOCKED,
    DONE,
    FINISHED,
    SKIPPED,
    STEP_NODE,
    STEP_RELEASE,
    WRITE_ACTIONS,
    Decision,
    Facts,
    hook_dicts,
    snapshot,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.stalls import node_deletion_blocker, terminate_blockers
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339


def object_key(ref: ObjectRef) -> str:
    """How an object the run deletes is named in ``actions`` and ``diff``: ``<Kind> <namespace>/<name>``."""
    return f"{ref.kind} {ref.namespace}/{ref.name}"


def node_key(name: str) -> str:
    return f"Node {name}"


def describe(machine: dict | None, first_seen: dict, flavour: Flavour) -> dict:
    """The ``machine`` result: the Machine as the run left it (``None`` when it is gone; then named as first seen)."""
    source = machine or first_seen
    meta = source["metadata"]
    return {
        "name": meta["name"],
        "namespace": meta.get("namespace"),
        "api_version": source["apiVersion"],
        "flavour": flavour.name,
        "node_name": flavour.node_name(source),
        "exists": machine is not None,
        "deletion_timestamp": meta.get("deletionTimestamp"),
        "finalizers": list(meta.get("finalizers") or []) if machine is not None else [],
    }


def gone_result(namespace: str, name: str, api_version: str | None, started_at: _dt.datetime) -> dict:
    """The result for a Machine that does not exist: already terminated and released, nothing to do."""
    return {
        "changed": False,
        "machine": {"name": name, "namespace": namespace, "api_version": api_version, "exists": False},
        "steps": [],
        "next_step": None,
        "blocked_by": [],
        "volumes": None,
        "released": True,
        "gone": True,
        "awaiting_instance_termination": False,
        "actions": [],
        "timing": {"started_at": rfc3339(started_at), "elapsed_seconds": 0.0, "waited_seconds": 0.0},
    }


def unread_result(namespace: str, name: str, api_version: str | None) -> dict:
    """The partial result of a run that failed before it could read the Machine."""
    return {"changed": False, "machine": {"name": name, "namespace": namespace, "api_version": api_version}, "steps": [], "actions": []}


class Report:
    """The record of one run for one Machine, and the module result built from it.

    ``facts`` and ``decision`` are the last decision and what it was taken on
    (the runner updates ``facts.machine`` in place as it writes); ``live`` is
    the last decision taken while the Machine existed.
    """

    def __init__(self, machine: dict, flavour: Flavour, *, started: float, started_at: _dt.datetime, check_mode: bool = False):
        self.first_seen = machine
        self.flavour = flavour
        self.started = started
        self.started_at = started_at
        self.check_mode = check_mode
        self.changed = False
        self.actions: list[str] = []
        self.waited = 0.0
        self.objects_before: dict[str, bool] = {}
        self.objects: dict[str, bool] = {}
        self.decision: Decision | None = None
        self.live: Decision | None = None
        self.facts: Facts | None = None
        # The volume wait as last observed: once the Machine records it finished, later decisions no longer read it.
        self.observed_volumes: dict | None = None
        # What holds the Machine besides what the last decision says (a failed Node deletion).
        self.blockers: list[Blocker] = []
        # How often each write (action, target) was tried: a run that keeps repeating one stops.
        self.writes: dict[tuple, int] = {}

    # -- what the run did and saw ------------------------------------------------
    def note(self, text: str) -> None:
        """An action (in check mode, one the run would take)."""
        self.actions.append(f"would {text}" if self.check_mode else text)

    def wrote(self, *texts: str) -> None:
        """Writes that took effect (or, in check mode, would)."""
        for text in texts:
            self.changed = True
            self.note(text)

    def seen(self, key: str, exists: bool) -> None:
        """Whether an object the run may delete exists; the first sighting is the ``diff``'s before."""
        self.objects_before.setdefault(key, exists)
        self.objects[key] = exists

    def assume_gone(self, key: str) -> None:
        """Check mode: an object a dry-run delete accepted counts as gone in the ``diff``'s after."""
        self.objects[key] = False

    def repeated(self, decision: Decision, most: int) -> bool:
        """Count a write the run is about to repeat; whether it has now been tried more than ``most`` times."""
        if decision.action not in WRITE_ACTIONS:
            return False
        key = (decision.action, decision.target)
        self.writes[key] = self.writes.get(key, 0) + 1
        return self.writes[key] > most

    def add_wait(self, seconds: float) -> None:
        self.waited += seconds

    def decided(self, decision: Decision, facts: Facts) -> None:
        self.decision, self.facts = decision, facts
        if decision.action != FINISHED:
            self.live = decision
        if facts.volumes is not None and decision.volumes is not None:
            self.observed_volumes = decision.volumes

    def block(self, name: str, reason: str) -> None:
        """Report step ``name`` as blocked (an error stopped it), and what blocks it."""
        if name == STEP_NODE:
            self.blockers.append(node_deletion_blocker(self.flavour.node_name(self.machine or self.first_seen) or "", reason))
        for step in self.decision.steps if self.decision else []:
            if step.name == name:
                step.status, step.reason = BLOCKED, reason

    def current_blockers(self) -> list[Blocker]:
        """What holds the Machine where the run stopped (docs/stalls.md)."""
        if self.decision is None or self.facts is None:
            return list(self.blockers)
        return terminate_blockers(self.decision, self.facts, self.flavour) + self.blockers

    # -- the result ------------------------------------------------------------------
    @property
    def machine(self) -> dict | None:
        """The Machine as the run last saw it (None once it is gone)."""
        return self.facts.machine if self.facts else self.first_seen

    def steps(self) -> list[dict]:
        """The steps as reported: once the Machine is gone, what the run saw
        while it existed (why each step was done or skipped), released."""
        decision = self.decision
        if decision is None:
            return []
        if decision.action != FINISHED or self.live is None:
            return [step.as_dict() for step in decision.steps]
        steps = [step.as_dict() for step in self.live.steps]
        for entry in steps:
            if entry["name"] == STEP_RELEASE and entry["status"] != DONE:
                entry.update(status=DONE, reason=f"finalizer {self.flavour.finalizer} removed; the Machine is gone")
        return steps

    def diff(self) -> dict:
        return {
            "before": snapshot(self.first_seen, self.flavour, self.objects_before),
            "after": snapshot(self.machine, self.flavour, self.objects),
        }

    def result(self, clock: float) -> dict:
        """The module result; ``clock`` is the transport's clock now (``api.monotonic()``)."""
        decision = self.decision
        machine = self.machine
        gone = self.facts is not None and self.facts.machine is None
        steps = self.steps()
        volumes = decision.volumes if decision else None
        if decision is not None and decision.action == FINISHED and self.live is not None:
            volumes = self.live.volumes
        if volumes and self.observed_volumes and not volumes.get("skipped") and not volumes.get("waiting"):
            volumes = self.observed_volumes  # what the finished wait saw, not the bare record of it
        result = {
            "changed": self.changed,
            "machine": describe(machine, self.first_seen, self.flavour),
            "steps": steps,
            "next_step": next((entry["name"] for entry in steps if entry["status"] not in (DONE, SKIPPED)), None),
            "blocked_by": hook_dicts(decision.blocked_by) if decision else [],
            "blockers": as_dicts(self.current_blockers()),
            "volumes": volumes,
            "released": gone or bool(decision and decision.released),
            "gone": gone,
            "awaiting_instance_termination": bool(decision and decision.action == AWAIT_INSTANCE),
            "actions": list(self.actions),
            "timing": {
                "started_at": rfc3339(self.started_at),
                "elapsed_seconds": round(clock - self.started, 1),
                "waited_seconds": round(self.waited, 1),
            },
        }
        if self.changed:
            result["diff"] = self.diff()
        return result
