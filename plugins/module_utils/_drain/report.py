# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The result of a ``machine_drain`` task, built as the run goes (pure): every
Pod seen and what was decided about it, the Node before and after, the diff
and the result dict the module returns (success or failure alike)."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.escalations import Escalation
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PodDecision, plan_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import DrainPass
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.request import DRAINED, DrainRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stalls import drain_blockers
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import Blocker, as_dicts
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour, is_deleting
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.nodes import is_unschedulable
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now, rfc3339


def with_unschedulable(node: dict, unschedulable: bool) -> dict:
    """The Node as it would be once cordoned (True) or uncordoned (False), for check mode."""
    return {**node, "spec": {**(node.get("spec") or {}), "unschedulable": unschedulable}}


def machine_summary(machine: dict, flavour: Flavour | None) -> dict:
    """The ``machine`` key of the result."""
    meta = machine["metadata"]
    return {
        "name": meta["name"],
        "namespace": meta.get("namespace"),
        "api_version": machine["apiVersion"],
        "flavour": flavour.name if flavour else None,
        "deleting": is_deleting(machine),
    }


class PodLedger:
    """Every Pod the drain saw on the Node during a run, with its latest decision."""

    def __init__(self) -> None:
        self.decisions: dict[str, PodDecision] = {}
        self.present: set[str] = set()
        self.errors: dict[str, str] = {}
        self.evicted: list[str] = []

    def record(self, drain: DrainPass, count_evictions: bool = True) -> None:
        self.present = {decision.key for decision in drain.decisions}
        for decision in drain.decisions:
            self.decisions[decision.key] = decision
        for message, keys in drain.outcome.failures.items():
            for key in keys:
                self.errors[key] = message
        for key in drain.outcome.evicted + drain.outcome.gone:
            self.errors.pop(key, None)
        if count_evictions:
            self.evicted.extend(key for key in drain.outcome.evicted if key not in self.evicted)

    def pods(self) -> list[dict]:
        result = []
        for key in sorted(self.decisions):
            entry = self.decisions[key].as_dict()
            entry["present"] = key in self.present
            entry["eviction_error"] = self.errors.get(key)
            result.append(entry)
        return result

    def batches(self) -> list[dict]:
        return plan_drain(list(self.decisions.values())).batches


class DrainReport:
    """What the task saw and did so far, and the result dict it makes.

    ``changed`` counts the Node and its Pods (cordon, evictions); writes to the
    Machine are the caller's to add (see :meth:`result`).
    """

    def __init__(self, request: DrainRequest, started_at: _dt.datetime):
        self.state = request.state
        self.check_mode = request.check_mode
        self.node_name: str | None = request.node
        self.started_at = started_at
        self.changed = False
        self.passes = 0
        self.ledger = PodLedger()
        self.node_before: dict | None = None
        self.node_after: dict | None = None
        # Check mode: what the preview read and decided (the Node, its Pods, the decisions), for machine_delete's
        # answer for its Machines together (_delete/preflight.py); never part of the result.
        self.preview: dict | None = None
        # What holds the drain after its last pass (docs/stalls.md).
        self.blockers: list[Blocker] = []
        # Pods deleted instead of evicted, as the user asked (escalations).
        self.escalations: list[dict] = []

    def escalated(self, key: str, escalation: Escalation) -> None:
        """A Pod deleted (in check mode: that would be) instead of evicted, as an escalation asked."""
        self.escalations.append({"pod": key, "at": rfc3339(now()), "dry_run": self.check_mode, **escalation.as_dict()})
        self.changed = self.changed or not self.check_mode

    def record_pass(self, drain: DrainPass, act: bool) -> None:
        """A pass over the Node (``act`` False: one that wrote nothing)."""
        self.passes += 1
        self.blockers = drain_blockers(drain, drain.budgets, now())
        if self.node_before is None:
            self.node_before = drain.node
        self.node_after = drain.node
        self.ledger.record(drain, count_evictions=act)
        if drain.cordoned or (act and drain.outcome.evicted):
            self.changed = True

    def record_preview(self, drain: DrainPass) -> None:
        """A pass that wrote nothing, shown as what it would do: the Node cordoned, the current batch evicted."""
        self.record_pass(drain, act=False)
        self.preview = {"node": drain.node, "pods": list(drain.pods), "decisions": [decision.as_dict() for decision in drain.decisions]}
        if drain.node is not None:
            would_cordon = not is_unschedulable(drain.node)
            self.node_after = with_unschedulable(drain.node, True)
            self.changed = self.changed or would_cordon or bool(drain.plan.evict_now)

    def record_node(self, before: dict, after: dict, changed: bool) -> None:
        """A cordon or uncordon."""
        self.node_before, self.node_after, self.changed = before, after, changed

    def result(
        self, completed: bool, message: str, *, elapsed: float, api_requests: int, machine: dict | None = None, machine_changed: bool = False, **extra: Any
    ) -> dict:
        """The module result. ``machine`` is the Machine's summary (see :func:`machine_summary`);
        ``machine_changed`` whether the Machine was written to."""
        result: dict[str, Any] = {
            "changed": self.changed or machine_changed,
            "state": self.state,
            "node": self.node_name,
            "completed": completed,
            "message": message,
            "pods": self.ledger.pods(),
            "batches": self.ledger.batches(),
            "evicted": list(self.ledger.evicted),
            "passes": self.passes,
            "started_at": rfc3339(self.started_at),
            "elapsed_seconds": round(elapsed, 1),
            "api_requests": api_requests,
            "blockers": [] if completed else as_dicts(self.blockers),
            "escalations": list(self.escalations),
            **extra,
        }
        if self.node_after is not None:
            result["unschedulable"] = is_unschedulable(self.node_after)
        if machine is not None:
            result["machine"] = machine
        if self.node_before is not None:
            result["diff"] = self.diff()
        return result

    def diff(self) -> dict:
        def view(node: dict | None, pods: list[str]) -> dict:
            return {"node": self.node_name, "unschedulable": is_unschedulable(node), "pods": pods}

        ledger = self.ledger
        before = sorted(ledger.decisions)
        after = [key for key in before if key in ledger.present and key not in ledger.evicted]
        if self.check_mode and self.state == DRAINED:
            after = [key for key in before if ledger.decisions[key].behavior != DRAIN]
        return {"before": view(self.node_before, before), "after": view(self.node_after, after)}


def go_quote(text: str) -> str:
    """Go's ``%q`` of a plain string, as upstream Event messages quote names."""
    return json.dumps(text, ensure_ascii=False)
