# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""API calls for the Alive object (the cluster deletion signal): find where it
is served, read it, write one finalizer with optimistic concurrency, and wait
on it with a watch. The decisions are in ``_alive.py``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ansible_collections.lifecycle.machine.plugins.module_utils._alive.logic import ALIVE_KIND, add_finalizer_patch, alive_label, remove_finalizer_patch
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import JSON_PATCH, resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.watch import wait_for_object

CONFLICT_RETRIES = 10


@dataclass(frozen=True)
class AliveRef:
    """Where one Alive object lives."""

    api_version: str
    plural: str
    namespaced: bool
    name: str
    namespace: str | None

    @property
    def path(self) -> str:
        return resource_path(self.api_version, self.plural, self.namespace, self.name)

    @property
    def collection(self) -> str:
        return resource_path(self.api_version, self.plural, self.namespace)

    @property
    def label(self) -> str:
        return alive_label(self.namespace, self.name)


def resolve(api: KubeApi, api_version: str, name: str, namespace: str | None) -> AliveRef:
    """Find the Alive resource in ``api_version`` by discovery.

    Fails when the API is not served: a mistyped api_version, or a cluster
    without the CRD, must not look like an Alive object that is already gone
    (a teardown would then skip every component's cleanup).
    """
    if "/" not in api_version:
        raise MachineError(f"api_version {api_version!r} must be <group>/<version>; Alive is a custom resource")
    if not api.discovery.serves(api_version):
        raise MachineError(
            f"The API {api_version} is not served by this cluster, so it has no Alive object: install the Alive CustomResourceDefinition "
            "(see the collection's docs/cluster_deletion.md) or set api_version to the API that serves Alive"
        )
    resource = api.discovery.resource(api_version, kind=ALIVE_KIND)
    if resource is None:
        raise MachineError(f"The API {api_version} serves no {ALIVE_KIND} kind")
    namespaced = bool(resource.get("namespaced"))
    if namespaced and not namespace:
        raise MachineError(f"Alive objects of {api_version} are namespaced: namespace is required")
    return AliveRef(api_version, resource["name"], namespaced, name, namespace if namespaced else None)


def get(api: KubeApi, ref: AliveRef) -> dict | None:
    return api.get(ref.path)


def namespace_exists(api: KubeApi, namespace: str) -> bool:
    return api.get(resource_path("v1", "namespaces", name=namespace)) is not None


def create_namespace(api: KubeApi, namespace: str, dry_run: bool = False) -> dict:
    return api.create(resource_path("v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, dry_run=dry_run)


def create(api: KubeApi, ref: AliveRef, dry_run: bool = False) -> dict:
    metadata = {"name": ref.name}
    if ref.namespace:
        metadata["namespace"] = ref.namespace
    # An empty spec: the object's existence is the signal (docs/behaviour.md §5).
    return api.create(ref.collection, {"apiVersion": ref.api_version, "kind": ALIVE_KIND, "metadata": metadata, "spec": {}}, dry_run=dry_run)


def delete(api: KubeApi, ref: AliveRef, uid: str | None, dry_run: bool = False) -> bool:
    """Delete the Alive object (only the one that was read, by uid); False when already gone."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
    try:
        return api.delete(ref.path, body=body, dry_run=dry_run)
    except ApiError as exc:
        if exc.status == 409 and uid:  # replaced by a new object since it was read: that one was not asked about
            raise MachineError(f"Alive {ref.label} was replaced by a new object while being deleted; nothing was deleted") from None
        raise


def set_finalizer(api: KubeApi, ref: AliveRef, finalizer: str, present: bool, dry_run: bool = False) -> tuple[dict | None, dict | None, bool]:
    """Add or remove one finalizer on the Alive object, never touching the others.

    Returns (object before, object after, changed). Patches are guarded
    (``_alive`` builds them with ``test`` operations); when another writer got in
    between, the object is re-read and the patch rebuilt.
    """
    current = before = get(api, ref)
    landed = False  # an attempt whose answer was lost may have applied the patch
    for _attempt in range(CONFLICT_RETRIES):
        if current is None:
            if present:
                raise MachineError(f"Alive {ref.label} not found: it must exist before a component can hang finalizer {finalizer} on it")
            return before, None, landed
        meta = current["metadata"]
        if present and finalizer not in (meta.get("finalizers") or []) and meta.get("deletionTimestamp"):
            raise MachineError(
                f"Cannot add finalizer {finalizer} to Alive {ref.label}: it is being deleted (since {meta['deletionTimestamp']}), "
                "and an object being deleted accepts no new finalizers"
            )
        patch = add_finalizer_patch(current, finalizer) if present else remove_finalizer_patch(current, finalizer)
        if patch is None:
            return (before, current, True) if landed else (current, current, False)
        try:
            return before, api.patch(ref.path, patch, content_type=JSON_PATCH, dry_run=dry_run), True
        except ApiError as exc:
            # A failed "test" operation (the object changed since it was read) is
            # answered 422; a stale resourceVersion 409.
            if exc.status not in (409, 422):
                raise
            fresh = get(api, ref)
            if fresh is not None and fresh["metadata"].get("resourceVersion") == meta.get("resourceVersion"):
                raise  # the object did not change: the patch itself was refused
            landed = exc.after_ambiguous
            if not landed:
                before = fresh  # another writer's change: the diff starts from it
            current = fresh
        api.sleep(0.05)
    raise MachineError(f"Alive {ref.label} kept changing; gave up writing finalizer {finalizer} after {CONFLICT_RETRIES} conflicting updates")


def wait(api: KubeApi, ref: AliveRef, satisfied: Callable[[dict | None], bool], deadline: float, current: dict | None) -> tuple[dict | None, bool]:
    """Wait until ``satisfied(object, or None when gone)`` holds or ``deadline``
    (a ``time.monotonic()`` value) passes; returns (object, satisfied). Watches
    the object, so the wait ends the moment its last finalizer goes."""
    return wait_for_object(api, ref.path, satisfied, deadline, current=current)
