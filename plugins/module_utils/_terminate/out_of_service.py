# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The out-of-service taint the user asks for (the ``out_of_service`` option, docs/stalls.md) (pure).

When a Node's kubelet is gone for good (its instance powered off or deleted),
nothing confirms that its Pods stopped: they stay Terminating and their volumes
stay attached until the Node object is deleted, which in a Machine's deletion
comes last (after the preTerminate gate and the infrastructure). Kubernetes'
answer is the taint ``node.kubernetes.io/out-of-service`` (non-graceful node
shutdown): on a Node that is not Ready and carries it, kube-controller-manager's
pod garbage collector force-deletes the Pods being deleted, and the
attach/detach controller detaches the Node's volumes without waiting for them
to be unmounted. Both look only at the taint's key.

Nothing but the user can know the instance is gone, so the taint is put on
only when the user says so, by Machine, with a reason; only on a Machine being
deleted, only on its own Node (no other machine's providerID), and never on a
Ready Node - a Node whose kubelet reports Ready is evidently still running. Each
taint is recorded as a Warning Event ``NodeOutOfService`` on the Machine naming
the reason, and in the result; in check mode nothing is written.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339

TAINT_KEY = "node.kubernetes.io/out-of-service"
TAINT_VALUE = "nodeshutdown"
TAINT_EFFECT = "NoExecute"
EVENT_REASON = "NodeOutOfService"
ACTION = "out_of_service_taint"
KEYS = ("machine", "reason")
# Attempts at the taint while someone else writes the Node in between (each a 409).
CONFLICT_RETRIES = 5

# What became of an entry (the result's ``state``).
TAINTED = "tainted"  # put on now (in check mode: would be)
ALREADY = "already tainted"  # the Node carries the taint already: nothing to do
NODE_READY = "node ready"  # never on a Ready Node
NO_NODE = "no node"  # the Machine names no Node, or it is gone: nothing holds its Pods there
NOT_DELETING = "not being deleted"
OTHER_NODE = "another machine's node"
NOT_REACHED = "not reached"  # the Node's cluster did not answer, or refused the taint
# Nothing is left to do for these this run (the others are looked at again in the next round).
SETTLED = (TAINTED, ALREADY, NO_NODE)


@dataclass(frozen=True)
class OutOfService:
    """The user's word that the instance of ``machine`` (namespace/name) is gone, and why they say so."""

    machine: str
    reason: str


def normalize_out_of_service(entries: Sequence[dict] | None, machines: Sequence[str]) -> dict[str, OutOfService]:
    """The ``out_of_service`` option by Machine key; MachineError naming every bad entry, before
    anything is touched: not a mapping, an unknown key, no reason, a Machine given twice or not
    among ``machines`` (the keys of the task's Machines: a typo must not taint nothing quietly)."""
    errors: list[str] = []
    found: dict[str, OutOfService] = {}
    known = set(machines)
    for index, entry in enumerate(entries or []):
        where = f"out_of_service[{index}]"
        if not isinstance(entry, dict):
            errors.append(f"{where} must be a mapping with machine and reason, not {type(entry).__name__}")
            continue
        unknown = sorted(str(key) for key in set(entry) - set(KEYS))
        if unknown:
            errors.append(f"{where} has unknown keys {unknown} (known: {list(KEYS)})")
        reason = entry.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            errors.append(f"{where}.reason must say who confirmed the instance is gone and why: it is recorded on the Machine")
        machine = entry.get("machine")
        if not isinstance(machine, str) or machine.count("/") != 1 or not all(machine.split("/")):
            errors.append(f"{where}.machine must be the Machine's namespace/name, not {machine!r}")
            continue
        if machine not in known:
            errors.append(f"{where}.machine {machine} is not a Machine of this task ({', '.join(sorted(known)) or 'none'})")
        elif machine in found:
            errors.append(f"{where}.machine {machine} is given twice")
        if not errors:
            found[machine] = OutOfService(machine=machine, reason=reason.strip())
    if errors:
        raise MachineError("Invalid out_of_service: " + "; ".join(errors) + "; nothing was changed")
    return found


def node_ready(node: dict | None) -> bool:
    """Whether the Node's Ready condition is True - the pod garbage collector's test: False, Unknown or no
    Ready condition at all is not Ready."""
    for condition in ((node or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def has_taint(node: dict | None) -> bool:
    """Whether the Node carries the out-of-service taint (any value or effect: the controllers look at the key only)."""
    return any(taint.get("key") == TAINT_KEY for taint in ((node or {}).get("spec") or {}).get("taints") or [])


@dataclass(frozen=True)
class Verdict:
    """What to do about one entry: ``apply`` the taint or not, the ``state`` and the words for people."""

    state: str
    apply: bool
    message: str


def decide(*, deleting: bool, node_name: str | None, node: dict | None, conflict: str | None = None, error: str | None = None) -> Verdict:
    """Whether the taint goes on the Machine's Node (``node`` as read, None when gone; ``conflict``: why it
    is another machine's Node; ``error``: why it could not be read)."""
    ready_message = (
        f"Node {node_name} is Ready: its kubelet still reports, so its instance is evidently not gone; it is not "
        "tainted (the taint is put on once the Node is not Ready, in a later round)"
    )
    # In order: the first that holds says why the taint does not go on.
    refusals = (
        (not deleting, NOT_DELETING, "the Machine is not being deleted: its Node is not tainted"),
        (not node_name, NO_NODE, "the Machine names no Node: there is nothing to taint"),
        (bool(error), NOT_REACHED, f"Node {node_name} could not be read, so it is not tainted: {error}"),
        (node is None, NO_NODE, f"Node {node_name} is gone: its Pods and volumes are released with it"),
        (bool(conflict), OTHER_NODE, conflict or ""),
        (has_taint(node), ALREADY, f"Node {node_name} carries {TAINT_KEY} already"),
        (node_ready(node), NODE_READY, ready_message),
    )
    for holds, state, message in refusals:
        if holds:
            return Verdict(state, False, message)
    return Verdict(TAINTED, True, f"Node {node_name} is not Ready: {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT} goes on it")


def taint(added_at: _dt.datetime) -> dict:
    """The taint as it is put on the Node."""
    return {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": TAINT_EFFECT, "timeAdded": rfc3339(added_at)}


def taint_patch(node: dict, added_at: _dt.datetime) -> dict:
    """A merge patch adding the taint to the Node's own (a list replaced whole), guarded by its resourceVersion."""
    taints = [dict(existing) for existing in (node.get("spec") or {}).get("taints") or []]
    return {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": [*taints, taint(added_at)]}}


def event_message(node_name: str, confirmation: OutOfService) -> str:
    """The NodeOutOfService Event's message: what was done and who asked for it."""
    return (
        f"Tainted Node {node_name} {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT} so that its Pods and volumes are released "
        f"(the instance is confirmed gone), as asked: {confirmation.reason}"
    )


def result_entry(confirmation: OutOfService, node_name: str | None, verdict: Verdict, *, at: _dt.datetime, dry_run: bool) -> dict:
    """The result's record of one entry (as the escalations' entries: what, when, whether a dry run, who asked)."""
    return {
        "machine": confirmation.machine,
        "node": node_name,
        "at": rfc3339(at),
        "dry_run": dry_run,
        "action": ACTION,
        "applied": verdict.apply,
        "state": verdict.state,
        "message": verdict.message,
        "reason": confirmation.reason,
        "taint": {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": TAINT_EFFECT},
    }
