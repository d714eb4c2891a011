# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""OpenShift's control-plane turn-taking (docs/behaviour.md row O3): a flavour whose drain controller
drains control-plane Nodes one at a time (its ``control_plane_drain_refused_events``, ``_machine/flavour/``)
makes a control-plane Node not cordoned yet wait, before the drain's first pass, while another
control-plane Node is cordoned: nothing is cordoned or evicted and no condition written; the flavour's
Events are recorded once per task, and the drain looks again every ``CONTROL_PLANE_RETRY_SECONDS``, as
the controller requeues. The rule is ``gates.cordoned_control_plane_nodes`` (pure), what holds the Node
``stalls.control_plane_blockers``; the drain (``run.py``) takes its turn here before its first pass.
"""

from __future__ import annotations

from collections.abc import Callable

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.gates import (
    CONTROL_PLANE_RETRY_SECONDS,
    control_plane_refusal_message,
    cordoned_control_plane_nodes,
    is_control_plane_node,
    node_machine,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stalls import control_plane_blockers
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import NODES
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import DeletionRecorder, get_node, machine_path
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import Blocker
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.nodes import is_unschedulable


def read_control_plane_gate(api: KubeApi, node_name: str, machine_api_version: str) -> tuple[dict | None, list[dict], set[str]]:
    """What the rule for control-plane Nodes (``gates.cordoned_control_plane_nodes``) looks at, through
    ``api`` (an OpenShift Machine's cluster holds both its Nodes and Machines): the Node, the cordoned
    control-plane Nodes that keep it from being drained now, and, of the Machines (``machine_api_version``)
    their nodelink annotation names, those being deleted (one GET each, for the verdict; one that cannot
    be read counts as not being deleted). A Node that is gone, already cordoned or no
    control-plane Node costs one GET and no list."""
    node = get_node(api, node_name)
    if node is None or is_unschedulable(node) or not is_control_plane_node(node):
        return node, [], set()
    others = cordoned_control_plane_nodes(node, api.list(NODES))
    deleting = set()
    for machine in {node_machine(other) for other in others} - {None}:
        namespace, name = machine.split("/")
        try:
            found = api.get(machine_path(machine_api_version, namespace, name))
        except ApiError:
            found = None
        if found is not None and (found.get("metadata") or {}).get("deletionTimestamp"):
            deleting.add(machine)
    return node, others, deleting


class ControlPlaneTurn:
    """A drain's turn among the control-plane Nodes of its cluster, for the Machine ``recorder`` records on
    (None: a bare Node, which takes no turn)."""

    def __init__(self, recorder: DeletionRecorder | None, node_api: Callable[[], KubeApi]):
        self.recorder = recorder
        self.node_api = node_api
        self.recorded = False

    @property
    def taken(self) -> bool:
        """Whether the Machine's flavour makes its control-plane Nodes take turns at all."""
        return self.recorder is not None and bool(self.recorder.flavour.control_plane_drain_refused_events)

    def look(self, node_name: str | None) -> tuple[str, list[Blocker]] | None:
        """One look (ApiError when the read fails): None when it is the Node's turn; else why not (the
        refusal message) and the cordoned control-plane Nodes that hold it, the flavour's Events recorded
        the first time."""
        _node, others, deleting = read_control_plane_gate(self.node_api(), node_name, self.recorder.flavour.api_version)
        if not others:
            return None
        if not self.recorded:
            for event in self.recorder.flavour.control_plane_drain_refused_events:
                self.recorder.event(*event)
            self.recorded = True
        return control_plane_refusal_message(node_name, others), control_plane_blockers(others, deleting)

    @staticmethod
    def next_look(now: float, ends: list[float]) -> float:
        """When to look again: as the controller requeues, never past ``ends`` (the task's deadline, the progress interval)."""
        return min([now + CONTROL_PLANE_RETRY_SECONDS, *ends])
