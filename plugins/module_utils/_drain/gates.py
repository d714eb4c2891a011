# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Whether a Machine lets its Node be drained, and what to say when it does
not (pure; docs/behaviour.md §2): the preDrain hooks, the exclude-node-draining
annotation, and the Machine's own drain timeout, which counts from the
recorded start of the drain; and, for OpenShift Machines, whether another
control-plane Node being cordoned keeps a control-plane Node from being
cordoned and drained now (docs/behaviour.md row O3)."""

from __future__ import annotations

import datetime as _dt

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_DRAIN, Flavour, Hook, hooks_text, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339


def pre_drain_hooks(flavour: Flavour, machine: dict | None) -> list[Hook]:
    """The preDrain hooks holding the drain (none once the Machine is gone)."""
    return (flavour.hooks(machine).get(PRE_DRAIN) or []) if machine is not None else []


def held_message(node_name: str | None, machine: dict, hooks: list[Hook]) -> str:
    return f"Node {node_name} of Machine {machine_label(machine)} is held by preDrain hooks: {hooks_text(hooks)}"


def gate_timeout_message(wait_timeout: int, machine: dict, hooks: list[Hook]) -> str:
    return f"Timed out after {wait_timeout} s waiting for the preDrain hooks of Machine {machine_label(machine)} to be removed: {hooks_text(hooks)}"


def drain_skip_reason(flavour: Flavour, machine: dict, *, deleting: bool, now: _dt.datetime) -> str | None:
    """Why the drain is skipped: the exclude annotation, or (while the Machine is
    being deleted) its drain timeout having passed since the drain started."""
    if flavour.drain_excluded(machine):
        return f"Machine {machine_label(machine)} has the {flavour.exclude_drain_annotation} annotation"
    if deleting:
        timeout = flavour.drain_timeout(machine)
        started = flavour.drain_started_at(machine)
        if timeout and started is not None and (now - started).total_seconds() >= timeout:
            return f"the node drain timeout of Machine {machine_label(machine)} ({timeout} s) has passed since the drain started at {rfc3339(started)}"
    return None


def drain_timeout_left(flavour: Flavour, machine: dict, *, started_at: _dt.datetime, now: _dt.datetime) -> float | None:
    """Seconds until the pass that finds the Machine's drain timeout passed (one
    second after it); None when the Machine sets no drain timeout."""
    timeout = flavour.drain_timeout(machine)
    if not timeout:
        return None
    return timeout - (now - started_at).total_seconds() + 1


# OpenShift's drain controller drains control-plane Nodes one at a time (docs/behaviour.md row O3):
# a Node is a control-plane Node when it carries either label (any value), and one that is not
# cordoned yet is drained only while no control-plane Node of the cluster is cordoned
# (spec.unschedulable); the controller looks again 20 s later. A Node already cordoned goes on.
CONTROL_PLANE_NODE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
CONTROL_PLANE_RETRY_SECONDS = 20
# Where OpenShift's nodelink controller names a Node's Machine (<namespace>/<name>).
NODE_MACHINE_ANNOTATION = "machine.openshift.io/machine"


def is_control_plane_node(node: dict) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(label in labels for label in CONTROL_PLANE_NODE_LABELS)


def cordoned_control_plane_nodes(node: dict | None, nodes: list[dict]) -> list[dict]:
    """The cordoned control-plane Nodes among ``nodes`` (every Node of the cluster) that keep
    ``node`` from being cordoned and drained now, by name; none when ``node`` is gone, already
    cordoned (an earlier attempt goes on) or no control-plane Node."""
    if node is None or ((node.get("spec") or {}).get("unschedulable")) or not is_control_plane_node(node):
        return []
    name = (node.get("metadata") or {}).get("name")
    others = [other for other in nodes if (other.get("metadata") or {}).get("name") != name]
    found = [other for other in others if is_control_plane_node(other) and (other.get("spec") or {}).get("unschedulable")]
    return sorted(found, key=lambda other: other["metadata"]["name"])


def node_machine(node: dict) -> str | None:
    """The Machine (``<namespace>/<name>``) OpenShift's nodelink controller says the Node is of."""
    value = ((node.get("metadata") or {}).get("annotations") or {}).get(NODE_MACHINE_ANNOTATION) or ""
    return value if value.count("/") == 1 and all(value.split("/")) else None


def control_plane_refusal_message(node_name: str | None, others: list[dict], seconds: int = CONTROL_PLANE_RETRY_SECONDS) -> str:
    names = ", ".join(other["metadata"]["name"] for other in others)
    return (
        f"Node {node_name} is a control-plane Node and control-plane Node {names} is cordoned: control-plane Nodes are drained "
        f"one at a time, so it is neither cordoned nor drained until {'that Node is' if len(others) == 1 else 'those Nodes are'} "
        f"uncordoned or gone; looking again in {seconds} s"
    )
