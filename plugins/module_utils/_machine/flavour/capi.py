# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Cluster API Machines (``cluster.x-k8s.io`` v1beta1 and v1beta2): hooks as
annotations, deletion settings in ``spec`` (durations in v1beta1, seconds in
v1beta2), start times in ``status.deletion``, v1beta1 and v1beta2 condition
lists, and references with an apiVersion (v1beta1) or an apiGroup (v1beta2) (pure)."""

from __future__ import annotations

import datetime as _dt

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import (
    Stage,
    capi_deleting_condition,
    capi_ready_while_deleting,
    capi_v1beta1_conditions,
    capi_v1beta2_infrastructure_ready,
    set_metav1_condition,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.base import (
    CAPI_CLUSTER_NAME_LABEL,
    CAPI_CONTROL_PLANE_LABEL,
    CAPI_DEFAULT_NODE_DELETION_TIMEOUT,
    CAPI_GROUP,
    CAPI_HOOK_PREFIXES,
    CAPI_MIGRATION_NAMESPACE,
    CLUSTERAPI,
    MAPI_MIGRATION_NAMESPACE,
    OPENSHIFT_GROUP,
    PAST_DRAIN_REASONS,
    PRE_DRAIN,
    PRE_TERMINATE,
    QUALIFIED_NAME_PATTERN,
    Flavour,
    Hook,
    ObjectRef,
    is_deleting,
    machine_label,
    meta_of,
    spec_of,
    status_of,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import parse_duration, parse_time, rfc3339

# Cluster API's pause of one object (util/annotations HasPaused): its controller does nothing while it is there.
CAPI_PAUSED_ANNOTATION = "cluster.x-k8s.io/paused"
# Cluster API's core manager: its LeaderElectionID, in the namespace it is installed in.
CAPI_LEASE = ("capi-system", "controller-leader-election-capi")
# Where Cluster API records, in ``status.deletion``, when a Machine started waiting at each gate.
HOOK_WAIT_START_FIELDS = {PRE_DRAIN: "waitForPreDrainHookStartTime", PRE_TERMINATE: "waitForPreTerminateHookStartTime"}


class ClusterAPIFlavour(Flavour):
    name = CLUSTERAPI
    split_clusters = True
    group = CAPI_GROUP
    finalizer = "machine.cluster.x-k8s.io"
    exclude_drain_annotation = "machine.cluster.x-k8s.io/exclude-node-draining"
    exclude_volume_wait_annotation = "machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach"
    points = (PRE_DRAIN, PRE_TERMINATE)
    delete_machine_annotation = "cluster.x-k8s.io/delete-machine"
    # The MachineSet controller lists a MachineSet's Machines deleting ones included (syncReplicas).
    machine_set_counts_deleting = True
    scalable_owner_kinds = ("MachineSet", "MachineDeployment")
    capi_node_rules = True
    writes_stages_together = True
    pausable = True
    migration_namespace, mirror_namespace, mirror_group = CAPI_MIGRATION_NAMESPACE, MAPI_MIGRATION_NAMESPACE, OPENSHIFT_GROUP

    @property
    def v1beta2(self) -> bool:
        return self.version != "v1beta1"

    @property
    def metav1_conditions(self) -> bool:
        return self.v1beta2

    def hooks(self, machine: dict) -> dict[str, list[Hook]]:
        annotations = meta_of(machine).get("annotations") or {}
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
        namespace = ref.get("namespace") or meta_of(machine).get("namespace")
        if self.v1beta2:
            return ObjectRef(kind=ref["kind"], name=ref["name"], namespace=namespace, api_group=ref.get("apiGroup", ""))
        return ObjectRef(kind=ref["kind"], name=ref["name"], namespace=namespace, api_version=ref.get("apiVersion"))

    def infrastructure_ref(self, machine: dict) -> ObjectRef | None:
        return self._ref(machine, spec_of(machine).get("infrastructureRef"))

    def bootstrap_ref(self, machine: dict) -> ObjectRef | None:
        return self._ref(machine, (spec_of(machine).get("bootstrap") or {}).get("configRef"))

    def control_plane_ref(self, cluster: dict) -> ObjectRef | None:
        """The object a Cluster's spec.controlPlaneRef points at (Cluster and Machine share the API version)."""
        return self._ref(cluster, spec_of(cluster).get("controlPlaneRef"))

    def controller_lease(self, machine: dict) -> tuple[str, str] | None:
        return CAPI_LEASE

    def cluster_name(self, machine: dict) -> str | None:
        return spec_of(machine).get("clusterName") or (meta_of(machine).get("labels") or {}).get(CAPI_CLUSTER_NAME_LABEL)

    def owner_machine_set(self, machine: dict) -> str | None:
        """As v1.14.2's Machine controller: the first ``ownerReferences`` entry of kind MachineSet in this group, whatever its version."""
        for ref in meta_of(machine).get("ownerReferences") or []:
            if ref.get("kind") == "MachineSet" and str(ref.get("apiVersion") or "").rpartition("/")[0] == self.group and ref.get("name"):
                return str(ref["name"])
        return None

    def is_control_plane(self, machine: dict) -> bool:
        return CAPI_CONTROL_PLANE_LABEL in (meta_of(machine).get("labels") or {})

    def owner_paused(self, owner: dict, cluster: dict | None) -> str | None:
        # util/paused: the Cluster's spec.paused, or the object's paused annotation.
        if cluster is not None and spec_of(cluster).get("paused") is True:
            return f"its Cluster {meta_of(cluster).get('name')} has spec.paused set to true"
        if CAPI_PAUSED_ANNOTATION in (meta_of(owner).get("annotations") or {}):
            return f"it has the {CAPI_PAUSED_ANNOTATION} annotation"
        return None

    # -- deletion settings ---------------------------------------------------
    def _timeout(self, machine: dict, v1beta1_field: str, v1beta2_field: str) -> float | None:
        spec = spec_of(machine)
        if self.v1beta2:
            value = (spec.get("deletion") or {}).get(v1beta2_field)
            # As Cluster API: zero or less is no limit.
            return int(value) if value and int(value) > 0 else None
        try:
            return parse_duration(spec.get(v1beta1_field))
        except ValueError as exc:
            raise MachineError(f"Machine {machine_label(machine)} has an invalid spec.{v1beta1_field}: {exc}") from None

    def drain_timeout(self, machine: dict) -> float | None:
        return self._timeout(machine, "nodeDrainTimeout", "nodeDrainTimeoutSeconds")

    def volume_detach_timeout(self, machine: dict) -> float | None:
        return self._timeout(machine, "nodeVolumeDetachTimeout", "nodeVolumeDetachTimeoutSeconds")

    def node_deletion_timeout(self, machine: dict) -> float | None:
        spec = spec_of(machine)
        unset = (spec.get("deletion") or {}).get("nodeDeletionTimeoutSeconds") is None if self.v1beta2 else spec.get("nodeDeletionTimeout") is None
        if unset:
            return CAPI_DEFAULT_NODE_DELETION_TIMEOUT
        return self._timeout(machine, "nodeDeletionTimeout", "nodeDeletionTimeoutSeconds")

    def drain_started_at(self, machine: dict) -> _dt.datetime | None:
        return parse_time((status_of(machine).get("deletion") or {}).get("nodeDrainStartTime"))

    def volume_detach_started_at(self, machine: dict) -> _dt.datetime | None:
        return parse_time((status_of(machine).get("deletion") or {}).get("waitForNodeVolumeDetachStartTime"))

    def start_time_patches(self, drain: _dt.datetime | None = None, volumes: _dt.datetime | None = None) -> tuple[dict | None, dict | None]:
        deletion = {}
        if drain:
            deletion["nodeDrainStartTime"] = rfc3339(drain)
        if volumes:
            deletion["waitForNodeVolumeDetachStartTime"] = rfc3339(volumes)
        return None, ({"status": {"deletion": deletion}} if deletion else None)

    def hook_wait_started_at(self, machine: dict, point: str) -> _dt.datetime | None:
        field = HOOK_WAIT_START_FIELDS.get(point)
        return parse_time((status_of(machine).get("deletion") or {}).get(field)) if field else None

    def hook_wait_start_patch(self, point: str, started: _dt.datetime) -> dict | None:
        field = HOOK_WAIT_START_FIELDS.get(point)
        return {"status": {"deletion": {field: rfc3339(started)}}} if field else None

    def node_ref(self, node: dict) -> dict:
        # v1beta2 names the Node only; v1beta1 keeps an object reference.
        return {"name": (node.get("metadata") or {}).get("name")} if self.v1beta2 else super().node_ref(node)

    # -- conditions ----------------------------------------------------------
    def v1beta1_conditions(self, machine: dict) -> list[dict]:
        status = status_of(machine)
        if self.v1beta2:
            return list(((status.get("deprecated") or {}).get("v1beta1") or {}).get("conditions") or [])
        return list(status.get("conditions") or [])

    def v1beta2_conditions(self, machine: dict) -> list[dict]:
        status = status_of(machine)
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
        new_v2 = capi_deleting_condition(old_v2, stage, now, machine_generation=meta_of(machine).get("generation"))
        ref = self.infrastructure_ref(machine)
        # Whether the Machine records its InfraMachine provisioned (v1beta1: status.infrastructureReady).
        status = status_of(machine)
        provisioned = (status.get("initialization") or {}).get("infrastructureProvisioned") is True or status.get("infrastructureReady") is True
        infrastructure = capi_v1beta2_infrastructure_ready(stage, kind=ref.kind if ref else "", provisioned=provisioned)
        if infrastructure is not None and is_deleting(machine):
            new_v2 = set_metav1_condition(new_v2, infrastructure, now, meta_of(machine).get("generation"))
        if is_deleting(machine) and new_v2 != old_v2:
            deleted_at = parse_time(meta_of(machine).get("deletionTimestamp"))
            new_v2 = capi_ready_while_deleting(
                new_v2, deleted_at=deleted_at, drain_started=self.drain_started_at(machine), now=now, machine_generation=meta_of(machine).get("generation")
            )
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
        if is_deleting(machine) and status_of(machine).get("phase") != "Deleting":
            patch["phase"] = "Deleting"
        return {"status": patch} if patch else None
