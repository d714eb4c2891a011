# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The flavour adapter: the only place that knows where an OpenShift Machine
API or a Cluster API Machine keeps its hooks, conditions, timeouts, node and
infrastructure references. Modules ask it; they never branch on apiVersion.

Everything here is pure: functions take Machine dicts as the API returns them
and return values or patch bodies. Nothing here talks to the API server.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._common import MachineError, parse_duration, parse_time, rfc3339
from ansible_collections.lifecycle.machine.plugins.module_utils._conditions import (
    STAGE_BOOTSTRAP,
    STAGE_COMPLETED,
    STAGE_DELETING_NODE,
    STAGE_INFRASTRUCTURE,
    STAGE_PRE_TERMINATE,
    STAGE_VOLUMES,
    Stage,
    capi_deleting_condition,
    capi_v1beta1_conditions,
    openshift_conditions,
    set_metav1_condition,
    set_v1beta1_condition,
)

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


def _meta(machine: dict) -> dict:
    return machine.get("metadata") or {}


def _spec(machine: dict) -> dict:
    return machine.get("spec") or {}


def _status(machine: dict) -> dict:
    return machine.get("status") or {}


def machine_label(machine: dict) -> str:
    """``namespace/name`` of a Machine, for messages."""
    meta = _meta(machine)
    return f"{meta.get('namespace')}/{meta.get('name')}"


def is_deleting(machine: dict) -> bool:
    return bool(_meta(machine).get("deletionTimestamp"))


class Flavour:
    """What both flavours share; subclasses say where things live."""

    name = ""
    group = ""
    finalizer = ""
    exclude_drain_annotation = ""
    exclude_volume_wait_annotation: str | None = None
    points: tuple[str, ...] = ()

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

    def hook_patch(self, machine: dict, point: str, name: str, owner: str | None) -> dict:
        """A JSON merge patch setting (owner given) or removing (owner None) one hook."""
        raise NotImplementedError

    def find_hook(self, machine: dict, point: str, name: str) -> Hook | None:
        return next((hook for hook in self.hooks(machine).get(point, []) if hook.name == name), None)

    # -- references ----------------------------------------------------------
    def node_name(self, machine: dict) -> str | None:
        return (_status(machine).get("nodeRef") or {}).get("name") or None

    def infrastructure_ref(self, machine: dict) -> ObjectRef | None:
        return None

    def bootstrap_ref(self, machine: dict) -> ObjectRef | None:
        return None

    def cluster_name(self, machine: dict) -> str | None:
        return None

    def is_control_plane(self, machine: dict) -> bool:
        return False

    # -- deletion settings ---------------------------------------------------
    def drain_timeout(self, machine: dict) -> int | None:
        return None

    def volume_detach_timeout(self, machine: dict) -> int | None:
        return None

    def node_deletion_timeout(self, machine: dict) -> int | None:
        return None

    def drain_excluded(self, machine: dict) -> bool:
        return self.exclude_drain_annotation in (_meta(machine).get("annotations") or {})

    def volume_wait_excluded(self, machine: dict) -> bool:
        return bool(self.exclude_volume_wait_annotation) and self.exclude_volume_wait_annotation in (_meta(machine).get("annotations") or {})

    def drain_started_at(self, machine: dict) -> _dt.datetime | None:
        raise NotImplementedError

    def volume_detach_started_at(self, machine: dict) -> _dt.datetime | None:
        raise NotImplementedError

    def start_time_patches(self, drain: _dt.datetime | None = None, volumes: _dt.datetime | None = None) -> tuple[dict | None, dict | None]:
        """(object patch, status patch) recording the first drain / volume-wait attempt."""
        raise NotImplementedError

    # -- conditions ----------------------------------------------------------
    def conditions(self, machine: dict) -> list[dict]:
        """The conditions users look at first for this flavour and version."""
        return list(_status(machine).get("conditions") or [])

    def condition(self, machine: dict, condition_type: str) -> dict | None:
        return next((c for c in self.all_conditions(machine) if c.get("type") == condition_type), None)

    def all_conditions(self, machine: dict) -> list[dict]:
        return self.conditions(machine)

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
        return list(_status(machine).get("conditions") or [])

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
            updated = set_metav1_condition(current, condition, now, _meta(machine).get("generation"))
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
        return {"metadata": {"resourceVersion": _meta(machine).get("resourceVersion")}, "status": {"conditions": conditions}}

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


class OpenShiftFlavour(Flavour):
    name = OPENSHIFT
    group = OPENSHIFT_GROUP
    finalizer = "machine.machine.openshift.io"
    exclude_drain_annotation = "machine.openshift.io/exclude-node-draining"
    exclude_volume_wait_annotation = None
    points = (PRE_DRAIN, PRE_TERMINATE, PRE_CREATE)

    def hooks(self, machine: dict) -> dict[str, list[Hook]]:
        lifecycle = _spec(machine).get("lifecycleHooks") or {}
        return {point: [Hook(point, h.get("name", ""), h.get("owner", "")) for h in lifecycle.get(point) or []] for point in self.points}

    def hook_errors(self, point: str, name: str, owner: str | None) -> list[str]:
        errors = []
        if point not in self.points:
            errors.append(f"point must be one of {', '.join(self.points)}")
        if not 3 <= len(name) <= 256:
            errors.append(f"hook name must be 3 to 256 characters long (got {len(name)})")
        if not OPENSHIFT_HOOK_NAME_PATTERN.match(name):
            errors.append(f"hook name must match {OPENSHIFT_HOOK_NAME_PATTERN.pattern}")
        if owner is not None and not 3 <= len(owner) <= 512:
            errors.append(f"hook owner must be 3 to 512 characters long (got {len(owner)})")
        return errors

    def hook_patch(self, machine: dict, point: str, name: str, owner: str | None) -> dict:
        current = list((_spec(machine).get("lifecycleHooks") or {}).get(point) or [])
        index = next((i for i, hook in enumerate(current) if hook.get("name") == name), None)
        if owner is None:
            if index is not None:
                current.pop(index)
        elif index is None:
            current.append({"name": name, "owner": owner})
        else:
            current[index] = {"name": name, "owner": owner}
        # A merge patch replaces the whole list; the resourceVersion makes the
        # server refuse it (409) if anyone changed the Machine since we read it.
        return {"metadata": {"resourceVersion": _meta(machine).get("resourceVersion")}, "spec": {"lifecycleHooks": {point: current or None}}}

    def drain_started_at(self, machine: dict) -> _dt.datetime | None:
        return parse_time((_meta(machine).get("annotations") or {}).get(OPENSHIFT_DRAIN_START_ANNOTATION))

    def volume_detach_started_at(self, machine: dict) -> _dt.datetime | None:
        return parse_time((_meta(machine).get("annotations") or {}).get(OPENSHIFT_VOLUME_START_ANNOTATION))

    def start_time_patches(self, drain: _dt.datetime | None = None, volumes: _dt.datetime | None = None) -> tuple[dict | None, dict | None]:
        annotations = {}
        if drain:
            annotations[OPENSHIFT_DRAIN_START_ANNOTATION] = rfc3339(drain)
        if volumes:
            annotations[OPENSHIFT_VOLUME_START_ANNOTATION] = rfc3339(volumes)
        return ({"metadata": {"annotations": annotations}} if annotations else None), None

    def drained(self, machine: dict) -> bool:
        condition = self.condition(machine, "Drained")
        return bool(condition) and condition.get("status") == "True"

    def status_patch(self, machine: dict, stage: Stage | None, now: _dt.datetime) -> dict | None:
        current = self.conditions(machine)
        updated = openshift_conditions(current, self.hooks(machine), stage, now)
        patch: dict = {}
        if updated != current:
            patch["conditions"] = updated
        if is_deleting(machine) and _status(machine).get("phase") != "Deleting":
            patch["phase"] = "Deleting"
        return {"status": patch} if patch else None


class ClusterAPIFlavour(Flavour):
    name = CLUSTERAPI
    group = CAPI_GROUP
    finalizer = "machine.cluster.x-k8s.io"
    exclude_drain_annotation = "machine.cluster.x-k8s.io/exclude-node-draining"
    exclude_volume_wait_annotation = "machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach"
    points = (PRE_DRAIN, PRE_TERMINATE)

    @property
    def v1beta2(self) -> bool:
        return self.version != "v1beta1"

    @property
    def metav1_conditions(self) -> bool:
        return self.v1beta2

    def hooks(self, machine: dict) -> dict[str, list[Hook]]:
        annotations = _meta(machine).get("annotations") or {}
        result: dict[str, list[Hook]] = {point: [] for point in self.points}
        for key in sorted(annotations):
            for point, prefix in CAPI_HOOK_PREFIXES.items():
                # Any key that starts with the prefix blocks; the value is never interpreted.
                if key.startswith(prefix):
                    name = key[len(prefix) + 1 :] if key.startswith(prefix + "/") else key
                    result[point].append(Hook(point, name, str(annotations[key]), key))
        return result

    @staticmethod
    def hook_key(point: str, name: str) -> str:
        return f"{CAPI_HOOK_PREFIXES[point]}/{name}"

    def find_hook(self, machine: dict, point: str, name: str) -> Hook | None:
        if point not in CAPI_HOOK_PREFIXES:
            return None
        key = self.hook_key(point, name)
        return next((hook for hook in self.hooks(machine).get(point, []) if hook.key == key), None)

    def hook_errors(self, point: str, name: str, owner: str | None) -> list[str]:
        errors = []
        if point not in self.points:
            errors.append(f"{point} hooks exist only on OpenShift Machine API machines; Cluster API supports {' and '.join(self.points)}")
        if not name or len(name) > 63 or not QUALIFIED_NAME_PATTERN.match(name):
            errors.append(
                "hook name must be a valid annotation name after the hook prefix: at most 63 characters, "
                "alphanumeric at both ends, with '-', '_' and '.' allowed inside"
            )
        if owner is not None and not owner:
            errors.append("hook owner must not be empty")
        return errors

    def hook_patch(self, machine: dict, point: str, name: str, owner: str | None) -> dict:
        # One annotation key per hook: a merge patch of that key cannot clobber other writers.
        return {"metadata": {"annotations": {self.hook_key(point, name): owner}}}

    # -- references ----------------------------------------------------------
    def _ref(self, machine: dict, ref: dict | None) -> ObjectRef | None:
        if not ref or not ref.get("name") or not ref.get("kind"):
            return None
        namespace = ref.get("namespace") or _meta(machine).get("namespace")
        if self.v1beta2:
            return ObjectRef(kind=ref["kind"], name=ref["name"], namespace=namespace, api_group=ref.get("apiGroup", ""))
        return ObjectRef(kind=ref["kind"], name=ref["name"], namespace=namespace, api_version=ref.get("apiVersion"))

    def infrastructure_ref(self, machine: dict) -> ObjectRef | None:
        return self._ref(machine, _spec(machine).get("infrastructureRef"))

    def bootstrap_ref(self, machine: dict) -> ObjectRef | None:
        return self._ref(machine, (_spec(machine).get("bootstrap") or {}).get("configRef"))

    def control_plane_ref(self, cluster: dict) -> ObjectRef | None:
        """The object a Cluster's spec.controlPlaneRef points at (Cluster and Machine share the API version)."""
        return self._ref(cluster, _spec(cluster).get("controlPlaneRef"))

    def cluster_name(self, machine: dict) -> str | None:
        return _spec(machine).get("clusterName") or (_meta(machine).get("labels") or {}).get(CAPI_CLUSTER_NAME_LABEL)

    def is_control_plane(self, machine: dict) -> bool:
        return CAPI_CONTROL_PLANE_LABEL in (_meta(machine).get("labels") or {})

    # -- deletion settings ---------------------------------------------------
    def _timeout(self, machine: dict, v1beta1_field: str, v1beta2_field: str) -> int | None:
        spec = _spec(machine)
        if self.v1beta2:
            value = (spec.get("deletion") or {}).get(v1beta2_field)
            return int(value) if value else None
        try:
            return parse_duration(spec.get(v1beta1_field))
        except ValueError as exc:
            raise MachineError(f"Machine {machine_label(machine)} has an invalid spec.{v1beta1_field}: {exc}") from None

    def drain_timeout(self, machine: dict) -> int | None:
        return self._timeout(machine, "nodeDrainTimeout", "nodeDrainTimeoutSeconds")

    def volume_detach_timeout(self, machine: dict) -> int | None:
        return self._timeout(machine, "nodeVolumeDetachTimeout", "nodeVolumeDetachTimeoutSeconds")

    def node_deletion_timeout(self, machine: dict) -> int | None:
        spec = _spec(machine)
        unset = (spec.get("deletion") or {}).get("nodeDeletionTimeoutSeconds") is None if self.v1beta2 else spec.get("nodeDeletionTimeout") is None
        if unset:
            return CAPI_DEFAULT_NODE_DELETION_TIMEOUT
        return self._timeout(machine, "nodeDeletionTimeout", "nodeDeletionTimeoutSeconds")

    def drain_started_at(self, machine: dict) -> _dt.datetime | None:
        return parse_time((_status(machine).get("deletion") or {}).get("nodeDrainStartTime"))

    def volume_detach_started_at(self, machine: dict) -> _dt.datetime | None:
        return parse_time((_status(machine).get("deletion") or {}).get("waitForNodeVolumeDetachStartTime"))

    def start_time_patches(self, drain: _dt.datetime | None = None, volumes: _dt.datetime | None = None) -> tuple[dict | None, dict | None]:
        deletion = {}
        if drain:
            deletion["nodeDrainStartTime"] = rfc3339(drain)
        if volumes:
            deletion["waitForNodeVolumeDetachStartTime"] = rfc3339(volumes)
        return None, ({"status": {"deletion": deletion}} if deletion else None)

    # -- conditions ----------------------------------------------------------
    def v1beta1_conditions(self, machine: dict) -> list[dict]:
        status = _status(machine)
        if self.v1beta2:
            return list(((status.get("deprecated") or {}).get("v1beta1") or {}).get("conditions") or [])
        return list(status.get("conditions") or [])

    def v1beta2_conditions(self, machine: dict) -> list[dict]:
        status = _status(machine)
        if self.v1beta2:
            return list(status.get("conditions") or [])
        return list((status.get("v1beta2") or {}).get("conditions") or [])

    def all_conditions(self, machine: dict) -> list[dict]:
        return self.v1beta2_conditions(machine) + self.v1beta1_conditions(machine)

    def drained(self, machine: dict) -> bool:
        # DrainingSucceeded is only written when a drain ran; a skipped drain
        # shows in the Deleting condition having moved past the drain.
        condition = next((c for c in self.v1beta1_conditions(machine) if c.get("type") == "DrainingSucceeded"), None)
        if condition and condition.get("status") == "True":
            return True
        deleting = next((c for c in self.v1beta2_conditions(machine) if c.get("type") == "Deleting"), None)
        return bool(deleting) and deleting.get("status") == "True" and deleting.get("reason") in PAST_DRAIN_REASONS

    def status_patch(self, machine: dict, stage: Stage | None, now: _dt.datetime) -> dict | None:
        old_v1 = self.v1beta1_conditions(machine)
        old_v2 = self.v1beta2_conditions(machine)
        new_v1 = capi_v1beta1_conditions(old_v1, stage, now)
        new_v2 = capi_deleting_condition(old_v2, stage, now, machine_generation=_meta(machine).get("generation"))
        patch: dict = {}
        if self.v1beta2:
            if new_v2 != old_v2:
                patch["conditions"] = new_v2
            if new_v1 != old_v1:
                patch["deprecated"] = {"v1beta1": {"conditions": new_v1}}
        else:
            if new_v1 != old_v1:
                patch["conditions"] = new_v1
            if new_v2 != old_v2:
                patch["v1beta2"] = {"conditions": new_v2}
        if is_deleting(machine) and _status(machine).get("phase") != "Deleting":
            patch["phase"] = "Deleting"
        return {"status": patch} if patch else None


def _find_condition(conditions: list[dict], condition_type: str) -> dict | None:
    return next((c for c in conditions if c.get("type") == condition_type), None)


def flavour_for(machine_or_api_version: dict | str) -> Flavour:
    """The flavour of a Machine (or of an apiVersion string)."""
    api_version = machine_or_api_version if isinstance(machine_or_api_version, str) else machine_or_api_version.get("apiVersion", "")
    group = api_version.rpartition("/")[0]
    if group == OPENSHIFT_GROUP:
        return OpenShiftFlavour(api_version)
    if group == CAPI_GROUP:
        return ClusterAPIFlavour(api_version)
    raise MachineError(f"Unsupported Machine apiVersion {api_version!r}: expected {OPENSHIFT_GROUP}/v1beta1 or {CAPI_GROUP}/v1beta1 or v1beta2")


def hooks_summary(hooks: dict[str, list[Hook]]) -> dict[str, list[dict]]:
    """Hooks per point as plain dicts (module return values)."""
    return {point: [hook.as_dict() for hook in point_hooks] for point, point_hooks in hooks.items()}
