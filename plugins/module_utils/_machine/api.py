# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""API calls about Machines and the objects around them: finding Machines of
either flavour, patching them, their Cluster, referenced objects and Events.

Functions take a ``KubeApi`` and plain values, never the module object.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.watch import wait_for_object
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.deletion import node_with_provider_id, provider_id
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import (
    CAPI_CLUSTER_NAME_LABEL,
    CAPI_CONTROL_PLANE_LABEL,
    CAPI_GROUP,
    OPENSHIFT_GROUP,
    Flavour,
    ObjectRef,
    is_deleting,
    machine_label,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.inaction import gone_owner, owner_machine_deployment, owner_machine_set
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.migration import MACHINE_API, authority, cluster_api_side, mirror_of, openshift_side
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.pause import HandsOff, capi_pause, override_event
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.scope import CachedMachines
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection, served_machine_apis, unserved_api_version
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now, rfc3339

EVENT_SOURCE = "lifecycle.machine"
NO_NODE_REF = "the Machine has no nodeRef"
CONFLICT_RETRIES = 10


def capi_api_version(api: KubeApi) -> str | None:
    """The Cluster API version to use: v1beta2 when served, else v1beta1; None when not served."""
    versions = api.served_versions(CAPI_GROUP)
    for version in ("v1beta2", "v1beta1"):
        if version in versions:
            return f"{CAPI_GROUP}/{version}"
    return None


def machine_api_versions(api: KubeApi, api_version: str | None = None) -> list[str]:
    """apiVersions to look for Machines in: the one given, else every served flavour.

    A given one that serves no Machines fails, naming those that do."""
    if api_version:
        served = served_machine_apis(api.served_versions)
        if api_version not in served:
            raise MachineError(unserved_api_version(api_version, served))
        return [api_version]
    found = []
    if "v1beta1" in api.served_versions(OPENSHIFT_GROUP):
        found.append(f"{OPENSHIFT_GROUP}/v1beta1")
    capi = capi_api_version(api)
    if capi:
        found.append(capi)
    if not found:
        raise MachineError(f"Neither {OPENSHIFT_GROUP} nor {CAPI_GROUP} Machines are served by this cluster")
    return found


def machine_path(machine_or_api_version: dict | str, namespace: str | None = None, name: str | None = None) -> str:
    if isinstance(machine_or_api_version, dict):
        meta = machine_or_api_version.get("metadata") or {}
        return resource_path(machine_or_api_version["apiVersion"], "machines", meta.get("namespace"), meta.get("name"))
    return resource_path(machine_or_api_version, "machines", namespace, name)


def _with_api_version(machine: dict, api_version: str) -> dict:
    # LIST items carry no apiVersion/kind; the flavour adapter needs them.
    machine.setdefault("apiVersion", api_version)
    machine.setdefault("kind", "Machine")
    return machine


def get_machine(api: KubeApi, namespace: str, name: str, api_version: str | None = None) -> dict | None:
    """The Machine ``namespace/name`` of whichever flavour the cluster serves; None if absent.

    A name that exists in both flavours is ambiguous and needs ``api_version``.
    """
    found = []
    for version in machine_api_versions(api, api_version):
        machine = api.get(machine_path(version, namespace, name))
        if machine is not None:
            found.append(_with_api_version(machine, version))
    if len(found) > 1:
        raise MachineError(f"Machine {namespace}/{name} exists as both {found[0]['apiVersion']} and {found[1]['apiVersion']}; set api_version to choose one")
    return found[0] if found else None


def list_machines(api: KubeApi, namespace: str | None, label_selector: str | None, api_version: str | None = None) -> list[dict]:
    machines = []
    for version in machine_api_versions(api, api_version):
        try:
            listed = api.list(machine_path(version, namespace), label_selector=label_selector)
        except ApiError as exc:
            if exc.status == 400 and label_selector:  # the server could not parse the selector
                raise MachineError(f"Invalid label selector {label_selector!r}: {exc.message}") from None
            raise
        machines.extend(_with_api_version(m, version) for m in listed)
    return sorted(machines, key=lambda m: (m["metadata"].get("namespace") or "", m["metadata"]["name"], m["apiVersion"]))


def list_machines_of(api: KubeApi, api_version: str, namespace: str | None, label_selector: str | None) -> tuple[list[dict], str | None]:
    """The Machines of one API, and the list's resourceVersion to watch them from."""
    machines, version = api.list_with_version(machine_path(api_version, namespace), label_selector=label_selector)
    return [_with_api_version(m, api_version) for m in machines], version


def select_machines(api: KubeApi, selection: MachineSelection) -> list[dict]:
    """Machines chosen by name or by label selectors (ANDed, as kubernetes.core does).
    Choosing none in a namespace that does not exist fails (:func:`require_namespace`)."""
    if selection.machine:
        if not selection.namespace:
            raise MachineError(f"namespace is required to find Machine {selection.machine}")
        machine = get_machine(api, selection.namespace, selection.machine, selection.api_version)
        if machine is None:
            require_namespace(api, selection.namespace)
            raise MachineError(f"Machine {selection.namespace}/{selection.machine} not found")
        return [machine]
    machines = list_machines(api, selection.namespace, selection.label_selector, selection.api_version)
    if not machines and selection.namespace:
        require_namespace(api, selection.namespace)
    return machines


def node_path(name: str) -> str:
    return resource_path("v1", "nodes", name=name)


def get_node(api: KubeApi, name: str) -> dict | None:
    """The Node ``name`` (through ``api``: a Cluster API Machine's is its workload cluster's); None when it does not exist."""
    return api.get(node_path(name))


def namespace_missing(api: KubeApi, namespace: str) -> bool:
    """Whether the Namespace certainly does not exist (a user who may not read Namespaces cannot tell: False)."""
    try:
        return api.get(resource_path("v1", "namespaces", name=namespace)) is None
    except ApiError as exc:
        if exc.status == 403:
            return False
        raise


def require_namespace(api: KubeApi, namespace: str) -> None:
    """Fail when ``namespace`` does not exist: finding no Machine in it must not read as "already done"."""
    if namespace_missing(api, namespace):
        raise MachineError(f"Namespace {namespace} not found, so no Machine can be in it: check the namespace; nothing was changed")


def refresh(api: KubeApi, machine: dict) -> dict | None:
    """The Machine as it is now; None when it is gone."""
    current = api.get(machine_path(machine))
    return _with_api_version(current, machine["apiVersion"]) if current is not None else None


def patch_machine(api: KubeApi, machine: dict, patch: dict, *, status: bool = False, dry_run: bool = False) -> dict:
    result = api.patch(machine_path(machine), patch, dry_run=dry_run, subresource_status=status)
    return _with_api_version(result, machine["apiVersion"])


def update_with_retry(
    api: KubeApi, machine: dict, build: Callable[[dict], dict | None], *, status: bool = False, dry_run: bool = False
) -> tuple[dict, dict | None]:
    """Apply ``build(current) -> patch`` with optimistic concurrency.

    ``build`` sees the freshest Machine and returns a merge patch (or None when
    nothing is to change). Patches carrying ``metadata.resourceVersion`` are
    refused with 409 if someone wrote in between; the Machine is then re-read
    and the patch rebuilt. Returns (resulting Machine, patch sent or None).

    When an attempt's answer was lost (the transport retried it and then got
    409), the write may have been ours: if the fresh Machine needs no patch any
    more, the patch is reported as sent.
    """
    current = machine
    landed: dict | None = None
    for _attempt in range(CONFLICT_RETRIES):
        patch = build(current)
        if patch is None:
            return current, landed
        try:
            return patch_machine(api, current, patch, status=status, dry_run=dry_run), patch
        except ApiError as exc:
            if exc.status != 409:
                raise
            landed = patch if exc.after_ambiguous else None
        fresh = refresh(api, current)
        if fresh is None:
            raise MachineError(f"Machine {machine_label(machine)} was deleted while being updated")
        current = fresh
        api.sleep(0.05)
    raise MachineError(f"Machine {machine_label(machine)} kept changing; gave up after {CONFLICT_RETRIES} conflicting updates")


def write_stage(api: KubeApi, machine: dict, flavour: Flavour, stage: Any, *, dry_run: bool = False) -> tuple[dict, bool]:
    """Record a deletion stage in the Machine's conditions; (Machine, changed)."""

    def build(current: dict) -> dict | None:
        patch = flavour.status_patch(current, stage, now())
        if patch is not None:
            patch["metadata"] = {"resourceVersion": current["metadata"].get("resourceVersion")}
        return patch

    result, patch = update_with_retry(api, machine, build, status=True, dry_run=dry_run)
    return result, patch is not None


# A time written with deletion stages (write_together): its status patch and whether a Machine records it already.
TimePatch = tuple[dict, Callable[[dict], bool]]


def write_together(
    api: KubeApi, machine: dict, flavour: Flavour, stages: list, times: list[TimePatch], *, dry_run: bool = False
) -> tuple[dict, list, list[int]]:
    """Record start times and deletion stages in one status write, as Cluster API's
    Machine controller writes what one reconcile changed in one patch (docs/behaviour.md §2).

    ``times``: (status patch, recorded) pairs; a time is sent unless ``recorded`` holds for
    the Machine as read. Each stage's conditions are computed on the Machine as the
    times and the stages before it leave it. Guarded by the resourceVersion (rebuilt on
    a conflict). Returns (Machine, the stages that changed something, the indexes of
    the times sent); nothing is sent when nothing changes."""
    outcome: dict[str, list] = {"stages": [], "times": []}

    def build(current: dict) -> dict | None:
        local = json.loads(json.dumps(current))
        combined: dict = {}
        outcome["stages"], outcome["times"] = [], []
        for index, (patch, recorded) in enumerate(times):
            if not recorded(current):
                merge_patch(combined, patch, keep_null=True)
                merge_patch(local, patch)
                outcome["times"].append(index)
        for stage in stages:
            patch = flavour.status_patch(local, stage, now())
            if patch is not None:
                merge_patch(combined, patch, keep_null=True)
                merge_patch(local, patch)
                outcome["stages"].append(stage)
        if not combined:
            return None
        combined["metadata"] = {"resourceVersion": current["metadata"].get("resourceVersion")}
        return combined

    result, patch = update_with_retry(api, machine, build, status=True, dry_run=dry_run)
    if patch is None:
        return result, [], []
    return result, outcome["stages"], outcome["times"]


def merge_patch(target: dict, patch: dict, *, keep_null: bool = False) -> None:
    """Apply the JSON merge patch ``patch`` to ``target`` in place (RFC 7386: lists replace, null
    removes); ``keep_null``: ``target`` is itself a merge patch, so a null stays to remove on the server."""
    for key, value in patch.items():
        if value is None and not keep_null:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value, keep_null=keep_null)
        else:
            target[key] = json.loads(json.dumps(value))


def get_cluster(api: KubeApi, machine: dict, flavour: Flavour, view: CachedMachines | None = None) -> dict | None:
    """The Cluster API Cluster of a Machine (same API version); None for OpenShift or when absent.
    ``view``: the task's watch-fed feeds (``_machine/feed.py``), asked first."""
    name = flavour.cluster_name(machine)  # none for a flavour without Clusters (OpenShift)
    if not name:
        return None
    if view is not None:
        known, cluster = view.cluster(machine["apiVersion"], machine["metadata"]["namespace"], name)
        if known:
            return cluster
    return api.get(resource_path(machine["apiVersion"], "clusters", machine["metadata"]["namespace"], name))


def node_steps_skip_reason(api: KubeApi, machine: dict, flavour: Flavour, view: CachedMachines | None = None) -> str | None:
    """Why Cluster API skips the preDrain gate, drain, volume wait and Node
    deletion for this Machine (docs/behaviour.md §2), or None when it does not.

    As the Cluster API Machine controller's isDeleteNodeAllowed: the Cluster
    being deleted, no nodeRef (:func:`find_node_ref` looks for the Node by
    providerID first), the control plane object being deleted, or no active
    control-plane Machine left in the Cluster, unless its control plane is
    externally managed. Only a flavour with Cluster API's Node rules skips (``Flavour.capi_node_rules``). ``view``: the task's
    watch-fed Clusters and control-plane Machines (``_machine/feed.py``), asked
    first, as the controller asks its cache.
    """
    if not flavour.capi_node_rules:
        return None
    cluster_name = flavour.cluster_name(machine)
    namespace = machine["metadata"]["namespace"]
    cluster = get_cluster(api, machine, flavour, view)
    if cluster is None:
        raise MachineError(f"Cluster {namespace}/{cluster_name} of Machine {machine_label(machine)} not found")
    if cluster["metadata"].get("deletionTimestamp"):
        return f"Cluster {namespace}/{cluster_name} is being deleted"
    if not flavour.node_name(machine):
        return NO_NODE_REF
    return _control_plane_skip_reason(api, machine, flavour, cluster, view)


def _control_plane_skip_reason(api: KubeApi, machine: dict, flavour: Flavour, cluster: dict, view: CachedMachines | None = None) -> str | None:
    """The control plane's part of :func:`node_steps_skip_reason`."""
    cluster_name = cluster["metadata"]["name"]
    namespace = machine["metadata"]["namespace"]
    control_plane = flavour.control_plane_ref(cluster)
    if control_plane is not None:
        obj = api.get(ref_path(api, control_plane))
        if obj is not None and obj["metadata"].get("deletionTimestamp"):
            return f"{control_plane.kind} {namespace}/{control_plane.name} is being deleted"
        if obj is not None and (obj.get("status") or {}).get("externalManagedControlPlane") is True:
            return None  # a managed service runs the control plane: no control-plane Machine is expected
    listed = view.control_plane_machines(machine["apiVersion"], namespace, cluster_name) if view is not None else None
    if listed is None:
        selector = f"{CAPI_CLUSTER_NAME_LABEL}={cluster_name},{CAPI_CONTROL_PLANE_LABEL}"
        listed = api.list(machine_path(machine["apiVersion"], namespace), label_selector=selector)
    active = [m for m in listed if not m["metadata"].get("deletionTimestamp")]
    if not active:
        return f"no active control plane Machine is left in Cluster {namespace}/{cluster_name}"
    return None


def get_infrastructure(api: KubeApi, machine: dict, flavour: Flavour) -> dict | None:
    """The InfraMachine of a Cluster API Machine; None when it has none, or it is gone."""
    ref = flavour.infrastructure_ref(machine)
    return api.get(ref_path(api, ref)) if ref is not None else None


def find_node_ref(api: KubeApi, machine: dict, flavour: Flavour, node_side: Callable[[], KubeApi], *, dry_run: bool = False) -> dict:
    """A Cluster API Machine being deleted that has no nodeRef: as Cluster API
    does before it decides about the Node steps, the one Node in its workload
    cluster (``node_side()``) whose ``spec.providerID`` is the Machine's own,
    else its InfraMachine's, becomes its ``status.nodeRef`` (written, so that
    every later step and run sees it). Returns the Machine as it is then;
    unchanged when the Cluster is being deleted, no providerID is known, or
    not exactly one Node carries it."""
    if not flavour.capi_node_rules or not is_deleting(machine) or flavour.node_name(machine):
        return machine
    cluster = get_cluster(api, machine, flavour)
    if cluster is None or cluster["metadata"].get("deletionTimestamp"):
        return machine
    infrastructure = None if flavour.provider_id(machine) else get_infrastructure(api, machine, flavour)
    wanted = provider_id(flavour, machine, infrastructure)
    if not wanted:
        return machine
    node = node_with_provider_id(node_side().list(resource_path("v1", "nodes")), wanted)
    if node is None:
        return machine

    def build(current: dict) -> dict | None:
        if flavour.node_name(current):
            return None
        return {"metadata": {"resourceVersion": current["metadata"].get("resourceVersion")}, "status": {"nodeRef": flavour.node_ref(node)}}

    machine, _patch = update_with_retry(api, machine, build, status=True, dry_run=dry_run)
    return machine


def _resource_for(api: KubeApi, group_version: str, kind: str) -> str:
    resource = api.discovery.resource(group_version, kind=kind)
    if resource is None:
        raise MachineError(f"The cluster serves no {kind} in {group_version}")
    return resource["name"]


def ref_path(api: KubeApi, ref: ObjectRef) -> str:
    """REST path of a referenced object. v1beta2 references name only the API
    group: the version is the group's preferred one, as discovery reports it."""
    if ref.api_version:
        group_version = ref.api_version
    else:
        versions = api.served_versions(ref.group)
        if not versions:
            raise MachineError(f"The cluster serves no API group {ref.group} (for {ref.kind} {ref.namespace}/{ref.name})")
        group_version = f"{ref.group}/{versions[0]}" if ref.group else versions[0]
    return resource_path(group_version, _resource_for(api, group_version, ref.kind), ref.namespace, ref.name)


def emit_event(api: KubeApi, machine: dict, event_type: str, reason: str, message: str, *, dry_run: bool = False) -> dict | None:
    """Record a core/v1 Event on the Machine, as the upstream controllers' recorders do."""
    if dry_run:
        return None
    meta = machine["metadata"]
    stamp = rfc3339(now())
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": machine["apiVersion"],
            "kind": "Machine",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message[:1024],
        "type": event_type,
        "source": {"component": EVENT_SOURCE},
        "reportingComponent": EVENT_SOURCE,
        "reportingInstance": EVENT_SOURCE,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    # A generated name: a retry after a lost answer may record the Event twice, which is harmless.
    return api.create(resource_path("v1", "events", meta["namespace"]), event, retry=True)


def wait_for_machine(api: KubeApi, machine: dict, satisfied: Callable[[dict | None], bool], deadline: float) -> tuple[dict | None, bool]:
    """Wait until ``satisfied(current Machine or None when gone)`` holds, or
    ``deadline`` (an ``api.monotonic()`` value) passes; (Machine, satisfied).
    Watches the Machine, so the wait ends as soon as the change lands."""
    return wait_for_object(api, machine_path(machine), satisfied, deadline, adapt=lambda m: _with_api_version(m, machine["apiVersion"]))


class DeletionRecorder:
    """What a runner writes on a Machine while it is being deleted, as the
    upstream controllers do (docs/behaviour.md §2): deletion stages in its
    conditions, Events, and the start time of a step, recorded once.

    Holds the Machine as last read or written (``machine``; a runner that
    reads it again sets it). Nothing is written while the Machine is not being
    deleted. In a dry run, writes are server-side dry runs and no Event is
    sent. ``changed`` says whether anything was (or, in a dry run, would have
    been) written.
    """

    def __init__(self, api: KubeApi, machine: dict, flavour: Flavour, *, dry_run: bool = False):
        self.api = api
        self.machine = machine
        self.flavour = flavour
        self.dry_run = dry_run
        self.changed = False

    @property
    def deleting(self) -> bool:
        return is_deleting(self.machine)

    def stage(self, stage: Any) -> bool:
        """Write a deletion stage to the Machine's conditions; whether anything changed."""
        if not self.deleting:
            return False
        self.machine, wrote = write_stage(self.api, self.machine, self.flavour, stage, dry_run=self.dry_run)
        self.changed = self.changed or wrote
        return wrote

    def event(self, event_type: str, reason: str, message: str) -> None:
        """Record an Event on the Machine; best effort, as upstream's recorders."""
        if self.deleting and not self.dry_run:
            with contextlib.suppress(ApiError):
                emit_event(self.api, self.machine, event_type, reason, message)

    def hook_wait_start(self, point: str) -> None:
        """Record, once, when the Machine started waiting at ``point``'s gate, where the flavour keeps that time
        (Cluster API's ``status.deletion``); a resourceVersion-guarded write, so a concurrent recorder's time wins."""
        if not self.deleting or self.flavour.hook_wait_started_at(self.machine, point) is not None:
            return
        patch = self.flavour.hook_wait_start_patch(point, now())
        if patch is None:
            return
        self.machine, sent = record_once(
            self.api, self.machine, patch, lambda current: self.flavour.hook_wait_started_at(current, point) is not None, dry_run=self.dry_run
        )
        self.changed = self.changed or sent

    def start_time(self, step: str) -> _dt.datetime | None:
        """When ``step`` (``"drain"`` or ``"volumes"``) was first attempted: as
        recorded on the Machine, else now, recorded once (a resourceVersion-guarded
        write, so a concurrent recorder's time wins). None while not deleting."""
        if not self.deleting:
            return None
        started_at = {"drain": self.flavour.drain_started_at, "volumes": self.flavour.volume_detach_started_at}[step]
        recorded = started_at(self.machine)
        if recorded is not None:
            return recorded
        stamp = now()
        for patch, status in zip(self.flavour.start_time_patches(**{step: stamp}), (False, True), strict=True):
            if patch is not None:
                self.machine, sent = record_once(
                    self.api, self.machine, patch, lambda current: started_at(current) is not None, status=status, dry_run=self.dry_run
                )
                self.changed = self.changed or sent
        return started_at(self.machine) or stamp


def record_once(api: KubeApi, machine: dict, patch: dict, recorded: Callable[[dict], bool], *, status: bool = True, dry_run: bool = False) -> tuple[dict, bool]:
    """Write ``patch`` (a time recorded once; to the status subresource unless ``status`` is
    False) unless ``recorded(current)`` already holds; guarded by the resourceVersion, so a
    concurrent writer's time wins. (Machine, whether it was sent)."""

    def build(current: dict) -> dict | None:
        if recorded(current):
            return None
        guarded = json.loads(json.dumps(patch))
        guarded.setdefault("metadata", {})["resourceVersion"] = current["metadata"].get("resourceVersion")
        return guarded

    machine, sent = update_with_retry(api, machine, build, status=status, dry_run=dry_run)
    return machine, sent is not None


def read_hands_off(api: KubeApi, machine: dict, flavour: Flavour, view: Any = None) -> HandsOff | None:
    """Why the collection leaves ``machine`` alone, as its controllers do (``_machine/pause.py``,
    ``_machine/migration.py``); None when it may act. The migration first (reading the Machine's mirror on
    the other side, only in the migration's namespaces or for a Machine API Machine another API is
    authoritative for), then Cluster API's pause (its Cluster, from ``view`` when the task has one)."""
    mirror = mirror_of(machine, flavour)
    if flavour.holds_authority:
        if authority(machine) == MACHINE_API:
            return None
        served = capi_api_version(api) if mirror is not None else None
        found = get_machine(api, mirror.namespace, mirror.name, served) if mirror is not None and served else None
        return openshift_side(machine, flavour, (found or {}).get("apiVersion"), None if not served else found is not None)
    held = cluster_api_side(machine, flavour, read_mirror_authority(api, machine, flavour))
    if held is not None or not flavour.pausable:
        return held
    return capi_pause(machine, flavour, get_cluster(api, machine, flavour, view))


def hands_off_result(held: HandsOff) -> str:
    """What a step's failure result says of a Machine it left alone (``hands_off``): ``refuse`` (the wrong side of a
    migration: machine_delete fails it) or ``hold`` (paused, migrating: machine_delete holds it in progress)."""
    return "refuse" if held.refuse else "hold"


def read_mirror_authority(api: KubeApi, machine: dict, flavour: Flavour) -> dict | None:
    """The Machine API Machine a Cluster API Machine mirrors (its authority decides where hooks may go); None
    when it mirrors none (outside the migration's namespace, or the cluster serves no Machine API)."""
    mirror = mirror_of(machine, flavour)
    if flavour.holds_authority or mirror is None or "v1beta1" not in api.served_versions(mirror.group):
        return None
    return get_machine(api, mirror.namespace, mirror.name, f"{mirror.group}/v1beta1")


def who_asks(api: KubeApi) -> str | None:
    """The user the API server knows the task as (a SelfSubjectReview); None when it cannot tell."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = api.create(resource_path("authentication.k8s.io/v1", "selfsubjectreviews"), body, retry=True)
    except ApiError:
        return None
    return ((answer.get("status") or {}).get("userInfo") or {}).get("username") or None


def record_pause_override(api: KubeApi, machine: dict, held: HandsOff, reason: str, *, dry_run: bool = False) -> None:
    """The Warning Event that records, on a paused Machine the collection acts on, who asked and why
    (``override_pause``); none in a dry run. Best effort, as the upstream recorders."""
    if dry_run:
        return
    meta = machine["metadata"]
    _type, event_reason, _message = override_event(held, reason, None)
    with contextlib.suppress(ApiError):
        # Once per Machine and request: a later round (progress_interval), or a later run asked the same, finds it.
        selector = f"involvedObject.uid={meta.get('uid')},reason={event_reason}"
        for event in api.list(resource_path("v1", "events", meta["namespace"]), field_selector=selector):
            if str(event.get("message") or "").endswith(f": {reason}"):
                return
        emit_event(api, machine, *override_event(held, reason, who_asks(api)))


def read_gone_owner(api: KubeApi, machine: dict, flavour: Flavour) -> str | None:
    """The owner Cluster API v1.14.2's Machine controller looks up for ``machine`` and would not find (its
    MachineSet, then that MachineSet's MachineDeployment: one GET each, only as far as it has them);
    None when every one is there."""
    machine_set_name = owner_machine_set(machine, flavour)
    if machine_set_name is None:
        return None
    namespace = machine["metadata"]["namespace"]
    machine_set = api.get(resource_path(machine["apiVersion"], "machinesets", namespace, machine_set_name))
    deployment_name = owner_machine_deployment(machine_set)
    deployment = api.get(resource_path(machine["apiVersion"], "machinedeployments", namespace, deployment_name)) if deployment_name else None
    return gone_owner(machine, machine_set_name, machine_set, deployment_name, deployment)
