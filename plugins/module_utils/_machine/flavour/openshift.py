# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""OpenShift Machine API Machines (``machine.openshift.io/v1beta1``): hooks in
``spec.lifecycleHooks``, the Drainable / Drained / Terminable conditions, and
the rules the OpenShift API and its admission webhook enforce on hooks (pure)."""

from __future__ import annotations

import datetime as _dt

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import (
    Stage,
    openshift_conditions,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.base import (
    CAPI_GROUP,
    CAPI_MIGRATION_NAMESPACE,
    MAPI_MIGRATION_NAMESPACE,
    OPENSHIFT,
    OPENSHIFT_DRAIN_START_ANNOTATION,
    OPENSHIFT_GROUP,
    OPENSHIFT_HOOK_NAME_PATTERN,
    OPENSHIFT_VOLUME_START_ANNOTATION,
    PRE_CREATE,
    PRE_DRAIN,
    PRE_TERMINATE,
    Flavour,
    Hook,
    is_deleting,
    meta_of,
    spec_of,
    status_of,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import parse_time, rfc3339

# The points whose hooks OpenShift freezes once a Machine is marked for deletion.
IMMUTABLE_POINTS = {PRE_DRAIN: "pre-drain", PRE_TERMINATE: "pre-terminate"}


# The values of status.authoritativeAPI for which OpenShift's controllers leave a MachineSet alone (its
# MachineAPIMigration feature gate on: Paused True, as for a Machine; _machine/migration.py).
PAUSED_AUTHORITIES = ("ClusterAPI", "Migrating")

# The labels an OpenShift installation puts on its control-plane Machines.
OPENSHIFT_ROLE_LABEL = "machine.openshift.io/cluster-api-machine-role"
OPENSHIFT_TYPE_LABEL = "machine.openshift.io/cluster-api-machine-type"


# The Event OpenShift's drain controller records on a Machine whose drain it tries again in 20 s, naming why
# (and, after a failed try, each Pod it could not evict).
DRAIN_REQUEUED = "DrainRequeued"
# The label that names an OpenShift Machine's cluster (its infrastructure name).
OPENSHIFT_CLUSTER_LABEL = "machine.openshift.io/cluster-api-cluster"
# Where each platform's machine controller holds its leader-election Lease: the machine-api-operator's namespace,
# one Lease ID per platform (by the kind of the Machine's providerSpec).
OPENSHIFT_LEASE_NAMESPACE = "openshift-machine-api"
OPENSHIFT_PLATFORMS = {
    "AWSMachineProviderConfig": "aws",
    "AzureMachineProviderSpec": "azure",
    "GCPMachineProviderSpec": "gcp",
    "VSphereMachineProviderSpec": "vsphere",
}


class OpenShiftFlavour(Flavour):
    name = OPENSHIFT
    group = OPENSHIFT_GROUP
    finalizer = "machine.machine.openshift.io"
    exclude_drain_annotation = "machine.openshift.io/exclude-node-draining"
    exclude_volume_wait_annotation = None
    points = (PRE_DRAIN, PRE_TERMINATE, PRE_CREATE)
    # delete_policy.go: top priority under every policy, when its value is not empty.
    delete_machine_annotation = "machine.openshift.io/delete-machine"
    # The MachineSet controller leaves Machines being deleted out of its count (shouldExcludeMachine).
    machine_set_counts_deleting = False
    scalable_owner_kinds = ("MachineSet",)
    drain_skipped_event = ("Normal", "DrainSkipped", "Node drain skipped")
    drain_skipped_without_node = True
    volume_start_when_attached = True
    provider_terminates_instance = True
    progress_conditions = ("Drainable", "Drained", "Terminable")
    drain_report_event = DRAIN_REQUEUED
    hooks_may_be_pruned = True
    migration_namespace, mirror_namespace, mirror_group = MAPI_MIGRATION_NAMESPACE, CAPI_MIGRATION_NAMESPACE, CAPI_GROUP
    holds_authority = True
    # drain_controller.go, Reconcile and isDrainAllowed: DrainProceeds, then the refusal as a requeue after 20 s.
    control_plane_drain_refused_events = (
        ("Normal", "DrainProceeds", "Node drain proceeds"),
        ("Normal", DRAIN_REQUEUED, "Node drain requeued: drain not permitted: requeue in: 20s"),
    )

    def owning_cluster(self, machine: dict) -> str | None:
        """OpenShift's cluster (its infrastructure name), from the label the installer puts on every Machine."""
        return (meta_of(machine).get("labels") or {}).get(OPENSHIFT_CLUSTER_LABEL) or None

    def controller_lease(self, machine: dict) -> tuple[str, str] | None:
        value = (spec_of(machine).get("providerSpec") or {}).get("value") or {}
        platform = OPENSHIFT_PLATFORMS.get(str(value.get("kind") or "")) if isinstance(value, dict) else None
        return (OPENSHIFT_LEASE_NAMESPACE, f"cluster-api-provider-{platform}-leader") if platform else None

    def is_control_plane(self, machine: dict) -> bool:
        labels = meta_of(machine).get("labels") or {}
        return labels.get(OPENSHIFT_ROLE_LABEL) == "master" or labels.get(OPENSHIFT_TYPE_LABEL) == "master"

    def owner_paused(self, owner: dict, cluster: dict | None) -> str | None:
        # With MachineAPIMigration, a MachineSet whose authority is not the Machine API is paused (Paused True).
        authority = status_of(owner).get("authoritativeAPI") or ""
        if authority in PAUSED_AUTHORITIES:
            return f"its status.authoritativeAPI is '{authority}' (the Machine API is not authoritative for it)"
        paused = next((c for c in status_of(owner).get("conditions") or [] if c.get("type") == "Paused"), None)
        if paused is not None and paused.get("status") == "True":
            return f"its Paused condition is True ({paused.get('message') or paused.get('reason') or 'no message'})"
        return None

    def hooks(self, machine: dict) -> dict[str, list[Hook]]:
        lifecycle = spec_of(machine).get("lifecycleHooks") or {}
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

    def hook_write_errors(self, machine: dict, point: str, name: str, owner: str | None) -> list[str]:
        errors = self.hook_errors(point, name, owner)
        if errors or owner is None or point not in IMMUTABLE_POINTS or not is_deleting(machine):
            return errors
        existing = self.find_hook(machine, point, name)
        if existing is None or existing.owner != owner:
            # Once deletion starts, OpenShift's admission webhook refuses new or
            # re-owned hooks (removing stays allowed), with this text.
            errors.append(
                f"{IMMUTABLE_POINTS[point]} hooks are immutable when machine is marked for deletion: "
                f"the following hooks are new or changed: [{{Name:{name} Owner:{owner}}}]"
            )
        return errors

    def hook_patch(self, machine: dict, point: str, name: str, owner: str | None) -> dict:
        current = list((spec_of(machine).get("lifecycleHooks") or {}).get(point) or [])
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
        return {"metadata": {"resourceVersion": meta_of(machine).get("resourceVersion")}, "spec": {"lifecycleHooks": {point: current or None}}}

    def drain_started_at(self, machine: dict) -> _dt.datetime | None:
        return parse_time((meta_of(machine).get("annotations") or {}).get(OPENSHIFT_DRAIN_START_ANNOTATION))

    def volume_detach_started_at(self, machine: dict) -> _dt.datetime | None:
        return parse_time((meta_of(machine).get("annotations") or {}).get(OPENSHIFT_VOLUME_START_ANNOTATION))

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
        if is_deleting(machine) and status_of(machine).get("phase") != "Deleting":
            patch["phase"] = "Deleting"
        return {"status": patch} if patch else None
