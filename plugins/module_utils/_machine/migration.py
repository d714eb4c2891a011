# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""OpenShift's move from the Machine API to Cluster API (pure; docs/behaviour.md
"OpenShift's move to Cluster API").

While OpenShift migrates a cluster, each Machine API Machine in
``openshift-machine-api`` has a Cluster API mirror of the same name in
``openshift-cluster-api``. The Machine API Machine's ``status.authoritativeAPI``
(``MachineAPI``, ``ClusterAPI``, or ``Migrating`` while the migration controller
hands over) says which of the two acts; the other's controller leaves it alone
(OpenShift's machine controller writes ``Paused`` True
``AuthoritativeAPINotMachineAPI``; the Cluster API mirror carries
``cluster.x-k8s.io/paused``). Admission policies refuse, to anyone but the
controllers, a change of the non-authoritative object's spec and of its
``machine.openshift.io/*`` and ``cluster.x-k8s.io`` annotations - hooks
included; deleting either deletes both, and the authority cannot change once
either is being deleted.

So the collection acts only through the authoritative Machine: on the other it
refuses, naming the authoritative object and its API; while ``Migrating`` it
holds, as both controllers do; a hook goes only where the admission policy
lets it (the sync copies it to the mirror).
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import (
    KIND_AUTHORITY_ELSEWHERE,
    KIND_MIGRATING,
    NEEDS_ACTION,
    PHASE_PAUSED,
    Blocker,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import CAPI_HOOK_PREFIXES, OPENSHIFT_GROUP, Flavour, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.pause import HandsOff, paused_since

MACHINE_API, CLUSTER_API, MIGRATING = "MachineAPI", "ClusterAPI", "Migrating"
# The finalizer the sync controller keeps on both sides.
SYNC_FINALIZER = "sync.machine.openshift.io/finalizer"
API_NAMES = {MACHINE_API: "the Machine API", CLUSTER_API: "Cluster API"}


@dataclass(frozen=True)
class Mirror:
    """Where a Machine's mirror on the other side of the migration lives."""

    group: str
    namespace: str
    name: str

    def label(self, api_version: str | None = None) -> str:
        return f"Machine {self.namespace}/{self.name} ({api_version or self.group})"


def mirror_of(machine: dict, flavour: Flavour) -> Mirror | None:
    """The mirror of a Machine the migration keeps on the other side; None outside the migration's namespaces."""
    meta = machine.get("metadata") or {}
    if flavour.migration_namespace is None or meta.get("namespace") != flavour.migration_namespace:
        return None
    return Mirror(flavour.mirror_group or "", flavour.mirror_namespace or "", meta.get("name") or "")


def mirror_beside(mapi_machine: dict, flavour: Flavour) -> Mirror:
    """Where a Machine API Machine's Cluster API mirror is (or would be, outside the migration's namespace)."""
    return mirror_of(mapi_machine, flavour) or Mirror(
        flavour.mirror_group or "", flavour.mirror_namespace or "", (mapi_machine.get("metadata") or {}).get("name") or ""
    )


def authority(mapi_machine: dict) -> str:
    """Which API acts for a Machine API Machine and its mirror: its ``status.authoritativeAPI``; before the
    migration controller first sets it, its ``spec.authoritativeAPI`` (OpenShift's machine controller copies
    the one into the other); ``MachineAPI`` without either (a cluster not migrating)."""
    status = (mapi_machine.get("status") or {}).get("authoritativeAPI")
    spec = (mapi_machine.get("spec") or {}).get("authoritativeAPI")
    return str(status or spec or MACHINE_API)


def _migrating(machine: dict, flavour: Flavour, mapi_label: str, other: str) -> HandsOff:
    reason = (
        f"a migration between the Machine API and Cluster API is under way ({mapi_label}'s status.authoritativeAPI is {MIGRATING}): "
        f"neither controller acts on it or on {other} until the migration controller hands authority to one of them, and neither "
        "does the collection; run again once it has"
    )
    blocker = Blocker(PHASE_PAUSED, KIND_MIGRATING, mapi_label, NEEDS_ACTION, reason, paused_since(flavour, machine), {"authoritative_api": MIGRATING})
    return HandsOff(f"Machine {machine_label(machine)} is paused: {reason}; nothing was changed", blocker)


def _elsewhere(machine: dict, flavour: Flavour, value: str, authoritative: str, how: str) -> HandsOff:
    reason = (
        f"{API_NAMES.get(value, value)} is authoritative for it (status.authoritativeAPI {value}): {authoritative} acts for both, and {how}; "
        f"act on {authoritative} instead (deleting either deletes both)"
    )
    evidence = {"authoritative_api": value, "authoritative": authoritative}
    blocker = Blocker(PHASE_PAUSED, KIND_AUTHORITY_ELSEWHERE, authoritative, NEEDS_ACTION, reason, paused_since(flavour, machine), evidence)
    return HandsOff(f"Machine {machine_label(machine)} is not the authoritative one: {reason}; nothing was changed", blocker, refuse=True)


def openshift_side(machine: dict, flavour: Flavour, mirror_api_version: str | None = None, mirror_found: bool | None = None) -> HandsOff | None:
    """A Machine API Machine the Machine API is not authoritative for (``ClusterAPI``: refused, naming its
    Cluster API mirror; ``Migrating``: held); None when the Machine API acts for it. ``mirror_api_version``:
    the mirror's, when it was read; ``mirror_found`` False when it was looked for and is not there."""
    value = authority(machine)
    if value == MACHINE_API:
        return None
    label = mirror_beside(machine, flavour).label(mirror_api_version)
    if mirror_found is False:
        label += ", which does not exist (yet)"
    if value == MIGRATING:
        return _migrating(machine, flavour, f"Machine {machine_label(machine)}", label)
    how = (
        f"OpenShift's machine controller leaves this one alone (its Paused condition, AuthoritativeAPINotMachineAPI: The AuthoritativeAPI "
        f"status is set to '{value}'), and OpenShift's admission policy refuses changes to its spec and its machine.openshift.io and "
        "cluster.x-k8s.io annotations"
    )
    return _elsewhere(machine, flavour, value, label, how)


def cluster_api_side(machine: dict, flavour: Flavour, mapi_machine: dict | None) -> HandsOff | None:
    """A Cluster API Machine that mirrors a Machine API Machine (``mapi_machine``, read from the other
    namespace; None when there is none) the Machine API is authoritative for (refused, naming it) or
    being migrated (held); None when Cluster API acts for it (or it mirrors nothing)."""
    if mapi_machine is None:
        return None
    value = authority(mapi_machine)
    mapi_label = f"Machine {machine_label(mapi_machine)} ({mapi_machine.get('apiVersion') or OPENSHIFT_GROUP})"
    if value == CLUSTER_API:
        return None
    if value == MIGRATING:
        return _migrating(machine, flavour, mapi_label, f"Machine {machine_label(machine)}")
    how = (
        "Cluster API's controllers leave this mirror alone (it carries cluster.x-k8s.io/paused), and OpenShift's admission policy "
        "refuses changes to its spec and its machine.openshift.io and cluster.x-k8s.io annotations"
    )
    return _elsewhere(machine, flavour, value, mapi_label, how)


def hook_refusal(machine: dict, flavour: Flavour, point: str, name: str, mapi_machine: dict | None) -> str | None:
    """Why OpenShift's admission policy would refuse a change of this hook on this Machine (the non-authoritative
    side, as the policy reads it: the Machine API Machine's ``status.authoritativeAPI`` exactly ``ClusterAPI`` for
    the Machine API side, the mirror's exactly ``MachineAPI`` for the Cluster API side); None when it lets it.
    The refusal names where the hook goes instead; the sync copies it across."""
    if flavour.holds_authority:
        if (machine.get("status") or {}).get("authoritativeAPI") != CLUSTER_API:
            return None
        mirror = mirror_beside(machine, flavour)
        prefix = CAPI_HOOK_PREFIXES.get(point)
        where = f"as the annotation {prefix}/{name}" if prefix else f"(Cluster API has no {point} hooks)"
        return (
            "Cluster API is authoritative for it (status.authoritativeAPI ClusterAPI): OpenShift's admission policy refuses changes "
            f"to its spec but by the controllers; write the hook on the authoritative {mirror.label()} {where}, and the sync copies it here"
        )
    if mapi_machine is None or (mapi_machine.get("status") or {}).get("authoritativeAPI") != MACHINE_API:
        return None
    return (
        f"it mirrors Machine {machine_label(mapi_machine)} ({mapi_machine.get('apiVersion') or OPENSHIFT_GROUP}), which is authoritative "
        "(status.authoritativeAPI MachineAPI): OpenShift's admission policy refuses changes to this one's cluster.x-k8s.io annotations "
        f"but by the controllers; write the hook there (spec.lifecycleHooks.{point}), and the sync copies it here"
    )
