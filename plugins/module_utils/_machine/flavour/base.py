# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What both flavours of Machine share: hooks, references, the interface of
a flavour and the rules common to both (see ``openshift.py`` and ``capi.py``
for where each keeps things). Pure: Machine dicts in, values and patch bodies
out."""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import (
    STAGE_BOOTSTRAP,
    STAGE_COMPLETED,
    STAGE_DELETING_NODE,
    STAGE_INFRASTRUCTURE,
    STAGE_PRE_TERMINATE,
    STAGE_VOLUMES,
    Stage,
    set_metav1_condition,
    set_v1beta1_condition,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.owners import OwnerTraits

OPENSHIFT = "openshift"
CLUSTERAPI = "clusterapi"
OPENSHIFT_GROUP = "machine.openshift.io"
CAPI_GROUP = "cluster.x-k8s.io"

PRE_DRAIN = "preDrain"
PRE_TERMINATE = "preTerminate"
PRE_CREATE = "preCreate"
HOOK_POINTS = (PRE_DRAIN, PRE_TERMINATE, PRE_CREATE)

CAPI_HOOK_PREFIXES = {
    PRE_DRAIN: "pre-drain.delete.hook.machine.cluster.x-k8s.io",
    PRE_TERMINATE: "pre-terminate.delete.hook.machine.cluster.x-k8s.io",
}
CAPI_CONTROL_PLANE_LABEL = "cluster.x-k8s.io/control-plane"
# Where OpenShift's move to Cluster API keeps each side of a Machine and its mirror (cluster-capi-operator's defaults).
MAPI_MIGRATION_NAMESPACE = "openshift-machine-api"
CAPI_MIGRATION_NAMESPACE = "openshift-cluster-api"
CAPI_CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"

# Where this collection records start times on OpenShift Machines, whose
# status has no place for them (Cluster API keeps them in status.deletion).
OPENSHIFT_DRAIN_START_ANNOTATION = "lifecycle.machine.dev/node-drain-start-time"
OPENSHIFT_VOLUME_START_ANNOTATION = "lifecycle.machine.dev/volume-detach-start-time"

OPENSHIFT_HOOK_NAME_PATTERN = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
QUALIFIED_NAME_PATTERN = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# metav1.Condition's rules for a condition's type (the same qualified-name rule
# as OpenShift hook names) and reason; v1beta1-style conditions follow them too.
CONDITION_TYPE_PATTERN = OPENSHIFT_HOOK_NAME_PATTERN
CONDITION_REASON_PATTERN = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
# Field limits: Cluster API's v1beta1 condition schema, and metav1.Condition's.
V1BETA1_CONDITION_LIMITS = {"type": 256, "reason": 256, "message": 10240}
METAV1_CONDITION_LIMITS = {"type": 316, "reason": 1024, "message": 32768}
CAPI_DEFAULT_NODE_DELETION_TIMEOUT = 10
# Deleting condition reasons of the stages after the drain (a stage's name is its reason).
PAST_DRAIN_REASONS = (STAGE_VOLUMES, STAGE_PRE_TERMINATE, STAGE_INFRASTRUCTURE, STAGE_BOOTSTRAP, STAGE_DELETING_NODE, STAGE_COMPLETED)


@dataclass(frozen=True)
class Hook:
    """One lifecycle hook. ``key`` is the annotation key on Cluster API Machines."""

    point: str
    name: str
    owner: str
    key: str | None = None

    def as_dict(self) -> dict:
        result = {"name": self.name, "owner": self.owner}
        if self.key:
            result["annotation"] = self.key
        return result


@dataclass(frozen=True)
class ObjectRef:
    """A reference to another object, resolved far enough to address it."""

    kind: str
    name: str
    namespace: str | None
    api_version: str | None = None  # v1beta1 refs carry it
    api_group: str | None = None  # v1beta2 refs carry only the group

    @property
    def group(self) -> str:
        if self.api_group is not None:
            return self.api_group
        return (self.api_version or "").rpartition("/")[0]

    def as_dict(self) -> dict:
        result: dict[str, Any] = {"kind": self.kind, "name": self.name, "namespace": self.namespace}
        if self.api_version:
            result["apiVersion"] = self.api_version
        else:
            result["apiGroup"] = self.api_group
        return result


def meta_of(machine: dict) -> dict:
    return machine.get("metadata") or {}


def spec_of(machine: dict) -> dict:
    return machine.get("spec") or {}


def status_of(machine: dict) -> dict:
    return machine.get("status") or {}


def machine_label(machine: dict) -> str:
    """``namespace/name`` of a Machine, for messages."""
    meta = meta_of(machine)
    return f"{meta.get('namespace')}/{meta.get('name')}"


def is_deleting(machine: dict) -> bool:
    return bool(meta_of(machine).get("deletionTimestamp"))


class Flavour(OwnerTraits):
    """What both flavours share; subclasses say where things live (what their MachineSets do: :class:`OwnerTraits`)."""

    name = ""
    group = ""
    finalizer = ""
    exclude_drain_annotation = ""
    exclude_volume_wait_annotation: str | None = None
    points: tuple[str, ...] = ()
    # Whether the Machine's Node lives in another cluster (Cluster API's workload cluster).
    split_clusters = False
    # The Event the flavour's drain controller records when it writes the drain as skipped (type, reason, message).
    drain_skipped_event: tuple[str, str, str] | None = None
    # Whether the flavour's drain controller writes the drain as skipped for a Machine without a Node too.
    drain_skipped_without_node = False
    # Whether Cluster API's Node rules apply (docs/behaviour.md §2, _machine/deletion.py, _machine/api.py): the Node
    # steps are skipped for a Cluster being deleted or without an active control plane (isDeleteNodeAllowed), a
    # Machine without a nodeRef is given the Node carrying its providerID, and the drain and the volume wait end
    # for good once the preTerminate wait started or the InfraMachine is gone or being deleted.
    capi_node_rules = False
    # Whether what one reconcile of the flavour's controller changes goes in one status write (docs/behaviour.md §2).
    writes_stages_together = False
    # Whether the volume wait's start is recorded only once a volume is found attached (the collection's own
    # annotation, OpenShift), rather than whenever the wait runs (Cluster API; docs/behaviour.md §4).
    volume_start_when_attached = False
    # Whether provider tasks outside the collection terminate the instance (OpenShift), rather than the
    # deletion of infrastructure and bootstrap objects (Cluster API).
    provider_terminates_instance = False
    # The conditions the flavour's controller reports a deletion's progress in, in order (OpenShift's Drainable,
    # Drained, Terminable); empty: it reports it in one Deleting condition (Cluster API v1beta2).
    progress_conditions: tuple[str, ...] = ()
    # The reason of the Event in which the flavour's drain controller names each Pod it could not evict (OpenShift's
    # DrainRequeued; its Drained condition names them too); None: its Deleting condition names them.
    drain_report_event: str | None = None
    # Whether an API server whose Machine schema lacks the field may drop a hook silently (OpenShift's
    # spec.lifecycleHooks): a hook is written as a dry run first.
    hooks_may_be_pruned = False
    # The Events the flavour's drain controller records each time it refuses to drain a control-plane Node
    # while another control-plane Node is cordoned (type, reason, message), in order; empty: the flavour
    # drains control-plane Nodes side by side (_drain/gates.py, docs/behaviour.md row O3).
    control_plane_drain_refused_events: tuple[tuple[str, str, str], ...] = ()
    # Whether Cluster API's pause (its Cluster's spec.paused, the annotation cluster.x-k8s.io/paused) leaves the Machine
    # alone (_machine/pause.py).
    pausable = False
    # OpenShift's move to Cluster API (_machine/migration.py): the namespace this side's Machines live in, where their
    # mirrors live and in which API group, and whether this side's Machine says which is authoritative
    # (status.authoritativeAPI, on the Machine API side).
    migration_namespace: str | None = None
    mirror_namespace: str | None = None
    mirror_group: str | None = None
    holds_authority = False

    def __init__(self, api_version: str):
        self.api_version = api_version
        self.version = api_version.rpartition("/")[2]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.api_version!r})"

    # -- hooks -------------------------------------------------------------
    def hooks(self, machine: dict) -> dict[str, list[Hook]]:
        raise NotImplementedError

    def hook_errors(self, point: str, name: str, owner: str | None) -> list[str]:
        """Why a hook may not be written (empty when it may)."""
        raise NotImplementedError

    def hook_write_errors(self, machine: dict, point: str, name: str, owner: str | None) -> list[str]:
        """Why this Machine, as it is now, may not get (owner given) or lose (owner
        None) the hook: the name rules, and what the API allows at this point
        of the Machine's life. Empty when the write may go ahead."""
        return self.hook_errors(point, name, owner)

    def hook_patch(self, machine: dict, point: str, name: str, owner: str | None) -> dict:
        """A JSON merge patch setting (owner given) or removing (owner None) one hook."""
        raise NotImplementedError

    def find_hook(self, machine: dict, point: str, name: str) -> Hook | None:
        return next((hook for hook in self.hooks(machine).get(point, []) if hook.name == name), None)

    # -- references ----------------------------------------------------------
    def node_name(self, machine: dict) -> str | None:
        return (status_of(machine).get("nodeRef") or {}).get("name") or None

    def infrastructure_ref(self, machine: dict) -> ObjectRef | None:
        return None

    def bootstrap_ref(self, machine: dict) -> ObjectRef | None:
        return None

    def cluster_name(self, machine: dict) -> str | None:
        return None

    def owning_cluster(self, machine: dict) -> str | None:
        """The cluster the Machine belongs to, as its metrics name it (label ``cluster_name``): Cluster API's
        ``spec.clusterName`` (what kube-state-metrics' Cluster API configuration labels ``capi_machine_*`` with)."""
        return self.cluster_name(machine)

    def is_control_plane(self, machine: dict) -> bool:
        return False

    def controller_lease(self, machine: dict) -> tuple[str, str] | None:
        """(namespace, name) of the leader-election Lease the flavour's controller holds where it is installed as
        shipped (``_machine/liveness.py``); None when the collection knows none."""
        return None

    def owner_machine_set(self, machine: dict) -> str | None:
        """The MachineSet the Machine's controller looks up before anything else (Cluster API; ``_machine/inaction.py``)."""
        return None

    # -- deletion settings ---------------------------------------------------
    def drain_timeout(self, machine: dict) -> float | None:
        return None

    def volume_detach_timeout(self, machine: dict) -> float | None:
        return None

    def node_deletion_timeout(self, machine: dict) -> float | None:
        return None

    def drain_excluded(self, machine: dict) -> bool:
        return self.exclude_drain_annotation in (meta_of(machine).get("annotations") or {})

    def volume_wait_excluded(self, machine: dict) -> bool:
        return bool(self.exclude_volume_wait_annotation) and self.exclude_volume_wait_annotation in (meta_of(machine).get("annotations") or {})

    def drain_started_at(self, machine: dict) -> _dt.datetime | None:
        raise NotImplementedError

    def volume_detach_started_at(self, machine: dict) -> _dt.datetime | None:
        raise NotImplementedError

    def start_time_patches(self, drain: _dt.datetime | None = None, volumes: _dt.datetime | None = None) -> tuple[dict | None, dict | None]:
        """(object patch, status patch) recording the first drain / volume-wait attempt."""
        raise NotImplementedError

    def hook_wait_started_at(self, machine: dict, point: str) -> _dt.datetime | None:
        """When the Machine started waiting at ``point``'s gate, where the flavour records it (Cluster API's
        ``status.deletion``); None when it does not, or has not started."""
        return None

    def hook_wait_start_patch(self, point: str, started: _dt.datetime) -> dict | None:
        """A status patch recording when the wait at ``point``'s gate started; None when the flavour keeps no such time."""
        return None

    def provider_id(self, machine: dict) -> str | None:
        return spec_of(machine).get("providerID") or None

    def node_ref(self, node: dict) -> dict:
        """``status.nodeRef`` naming ``node``, as this flavour and version write it."""
        meta = node.get("metadata") or {}
        return {"apiVersion": "v1", "kind": "Node", "name": meta.get("name"), "uid": meta.get("uid")}

    # -- conditions ----------------------------------------------------------
    def conditions(self, machine: dict) -> list[dict]:
        """The conditions users look at first for this flavour and version."""
        return list(status_of(machine).get("conditions") or [])

    def condition(self, machine: dict, condition_type: str) -> dict | None:
        return next((c for c in self.all_conditions(machine) if c.get("type") == condition_type), None)

    def all_conditions(self, machine: dict) -> list[dict]:
        return self.conditions(machine)

    def v1beta2_conditions(self, machine: dict) -> list[dict]:
        """Cluster API's v1beta2 (metav1) conditions, wherever the version keeps them; none for other flavours."""
        return []

    def status_patch(self, machine: dict, stage: Stage | None, now: _dt.datetime) -> dict | None:
        """A merge patch for the status subresource that records ``stage``; None when nothing changes."""
        raise NotImplementedError

    # -- conditions written by others (hook-implementing controllers) ----------
    @property
    def metav1_conditions(self) -> bool:
        """Whether the Machine's own condition list holds metav1.Conditions
        (Cluster API v1beta2) rather than v1beta1-style conditions."""
        return False

    def custom_conditions(self, machine: dict) -> list[dict]:
        """The list a condition set by someone else goes into: ``status.conditions``,
        which is the list ``kubectl describe`` shows for every flavour."""
        return list(status_of(machine).get("conditions") or [])

    def custom_condition(self, machine: dict, condition_type: str) -> dict | None:
        return _find_condition(self.custom_conditions(machine), condition_type)

    def condition_errors(self, condition_type: str, reason: str | None = None, message: str | None = None) -> list[str]:
        """Why a condition may not be written to this flavour's list (empty when it may)."""
        limits = METAV1_CONDITION_LIMITS if self.metav1_conditions else V1BETA1_CONDITION_LIMITS
        errors = []
        if not condition_type or len(condition_type) > limits["type"] or not CONDITION_TYPE_PATTERN.match(condition_type):
            errors.append(f"condition type must be at most {limits['type']} characters matching {CONDITION_TYPE_PATTERN.pattern}")
        if reason is not None:
            if not reason and self.metav1_conditions:
                errors.append("a reason is required in the metav1.Condition conditions of Cluster API v1beta2 Machines")
            elif reason and (len(reason) > limits["reason"] or not CONDITION_REASON_PATTERN.match(reason)):
                errors.append(f"condition reason must be at most {limits['reason']} characters matching {CONDITION_REASON_PATTERN.pattern}")
        if message is not None and len(message) > limits["message"]:
            errors.append(f"condition message must be at most {limits['message']} characters (got {len(message)})")
        return errors

    def set_condition_patch(self, machine: dict, condition: dict, now: _dt.datetime) -> dict | None:
        """A status merge patch (with the resourceVersion) that sets ``condition``
        (type, status, reason, message, severity) by the rules of this flavour's
        list; None when the condition is already so."""
        current = self.custom_conditions(machine)
        if self.metav1_conditions:
            updated = set_metav1_condition(current, condition, now, meta_of(machine).get("generation"))
        else:
            new = {key: condition[key] for key in ("type", "status", "severity", "reason", "message") if condition.get(key)}
            updated = set_v1beta1_condition(current, new, now)
        # Compare the one condition, so a list merely sorted differently is not a change.
        if _find_condition(updated, condition["type"]) == _find_condition(current, condition["type"]):
            return None
        return self._conditions_patch(machine, updated)

    def remove_condition_patch(self, machine: dict, condition_type: str) -> dict | None:
        """A status merge patch removing the condition ``condition_type``; None when there is none."""
        current = self.custom_conditions(machine)
        if _find_condition(current, condition_type) is None:
            return None
        return self._conditions_patch(machine, [c for c in current if c.get("type") != condition_type])

    @staticmethod
    def _conditions_patch(machine: dict, conditions: list[dict]) -> dict:
        # A merge patch replaces the whole list; the resourceVersion makes the
        # server refuse it (409) if anyone changed the Machine since we read it.
        return {"metadata": {"resourceVersion": meta_of(machine).get("resourceVersion")}, "status": {"conditions": conditions}}

    # -- gates -----------------------------------------------------------------
    def drained(self, machine: dict) -> bool:
        """Whether the drain step is finished as far as the Machine records it."""
        raise NotImplementedError

    def gates(self, machine: dict) -> dict[str, bool]:
        """Which deletion gates are open, from the hooks and the conditions."""
        hooks = self.hooks(machine)
        return {
            "drainable": not hooks.get(PRE_DRAIN),
            "drained": self.drained(machine),
            "terminable": not hooks.get(PRE_TERMINATE),
            "creatable": not hooks.get(PRE_CREATE),
        }


def _find_condition(conditions: list[dict], condition_type: str) -> dict | None:
    return next((c for c in conditions if c.get("type") == condition_type), None)


def hooks_summary(hooks: dict[str, list[Hook]]) -> dict[str, list[dict]]:
    """Hooks per point as plain dicts (module return values)."""
    return {point: [hook.as_dict() for hook in point_hooks] for point, point_hooks in hooks.items()}


def hooks_text(hooks: list[Hook]) -> str:
    """``name (owner o), ...`` for messages."""
    return ", ".join(f"{hook.name} (owner {hook.owner})" for hook in hooks)
