# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The cluster deletion signal (docs/behaviour.md §5): pure logic on plain dicts.

One ``Alive`` object, conventionally ``openshift-config/cluster``, that
in-cluster components hang finalizers on. Deprovisioning deletes it and waits
for the finalizers to clear. This module knows how to read an Alive object,
tell who holds each finalizer from its name, write the messages, and build the
JSON patches that add or remove one finalizer without touching the others.
It never talks to the API server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import check_options, empty_names, invalid_names, seconds

# The enhancement names no API group; this collection serves Alive from its own
# (the CRD in docs/cluster_deletion.md). Modules take api_version to use another.
ALIVE_API_VERSION = "lifecycle.machine.dev/v1alpha1"
ALIVE_KIND = "Alive"
ALIVE_NAME = "cluster"
ALIVE_NAMESPACE = "openshift-config"
# wait_timeout 0 deletes and looks once, without waiting.
BOUNDS = seconds("wait_timeout")

# Finalizers Kubernetes itself defines, which carry no domain.
BUILTIN_HOLDERS = {
    "foregroundDeletion": "kubernetes garbage collector",
    "orphan": "kubernetes garbage collector",
    "kubernetes": "kubernetes namespace controller",
}

_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def finalizer_holder(finalizer: str) -> dict:
    """Who holds a finalizer, as far as its name tells.

    By convention a finalizer is ``<domain>/<purpose>``, and the domain names
    the component that owns it, often as ``<component>.<domain>`` (for example
    ``ingress.operator.openshift.io/lb-cleanup``). ``holder`` is that qualifying
    prefix; ``component`` its first DNS label when the prefix has more than two
    labels (the ``<component>.<domain>`` form); ``purpose`` the part after the
    slash. Unqualified names Kubernetes defines get a descriptive holder; any
    other unqualified name has no known holder (``None``).
    """
    prefix, slash, purpose = finalizer.partition("/")
    if not slash:
        return {"name": finalizer, "holder": BUILTIN_HOLDERS.get(finalizer), "component": None, "purpose": finalizer}
    labels = prefix.split(".")
    component = labels[0] if len(labels) > 2 and labels[0] else None
    return {"name": finalizer, "holder": prefix or None, "component": component, "purpose": purpose}


def finalizer_errors(finalizer: str) -> list[str]:
    """Why a finalizer name is unfit for a component to hang on Alive.

    The API server's rule (a qualified name: an optional DNS subdomain prefix and
    ``/``, then at most 63 alphanumerics, ``-``, ``_`` or ``.``), plus the
    convention this feature relies on to name holders: the prefix is required.
    """
    errors: list[str] = []
    prefix, slash, purpose = finalizer.partition("/")
    if not slash:
        return [f"finalizer {finalizer!r} must be domain-qualified, as <domain>/<purpose> (the domain names the component that holds it)"]
    if not prefix or len(prefix) > 253 or not all(_DNS_LABEL.match(label) for label in prefix.split(".")):
        errors.append(f"prefix {prefix!r} of finalizer {finalizer!r} must be a DNS subdomain (lower case alphanumerics, '-' and '.', at most 253 characters)")
    if not purpose or len(purpose) > 63 or not _NAME_PART.match(purpose):
        errors.append(
            f"name part {purpose!r} of finalizer {finalizer!r} must be at most 63 characters: alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return errors


def alive_label(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def alive_summary(obj: dict | None, *, name: str, namespace: str | None, api_version: str) -> dict:
    """The Alive object as modules report it; ``exists`` False when it is gone."""
    if obj is None:
        return {
            "exists": False,
            "name": name,
            "namespace": namespace,
            "api_version": api_version,
            "uid": None,
            "creation_timestamp": None,
            "deletion_timestamp": None,
            "deleting": False,
            "finalizers": [],
        }
    meta = obj.get("metadata") or {}
    return {
        "exists": True,
        "name": meta.get("name", name),
        "namespace": meta.get("namespace", namespace),
        "api_version": api_version,
        "uid": meta.get("uid"),
        "creation_timestamp": meta.get("creationTimestamp"),
        "deletion_timestamp": meta.get("deletionTimestamp"),
        "deleting": bool(meta.get("deletionTimestamp")),
        "finalizers": [finalizer_holder(f) for f in meta.get("finalizers") or []],
    }


def diff_view(summary: dict) -> dict:
    """What ``--diff`` shows of an Alive object: whether it exists, is being deleted, and its finalizers."""
    if not summary["exists"]:
        return {}
    return {
        "name": summary["name"],
        "namespace": summary["namespace"],
        "deletion_timestamp": summary["deletion_timestamp"],
        "finalizers": [f["name"] for f in summary["finalizers"]],
    }


def describe_finalizers(finalizers: list[dict]) -> str:
    """``a.example.com/x (holder: a.example.com), orphan (holder: kubernetes garbage collector)``."""
    parts = []
    for entry in finalizers:
        holder = entry.get("holder")
        parts.append(f"{entry['name']} (holder: {holder})" if holder else f"{entry['name']} (holder unknown)")
    return ", ".join(parts)


def timeout_message(label: str, timeout: int, finalizers: list[dict], proceed: bool) -> str:
    """The message of a deprovision wait that ran out of time."""
    count = len(finalizers)
    noun = "finalizer was" if count == 1 else "finalizers were"
    head = f"Alive {label} was not deleted within {timeout}s: {count} {noun} not released: {describe_finalizers(finalizers)}."
    if proceed:
        return (
            f"{head} Proceeding anyway (on_timeout=proceed): the components holding them have not confirmed that their "
            "external resources are cleaned up, so those resources may be left behind."
        )
    return (
        f"{head} The components holding them have not finished cleaning up their external resources; investigate them "
        "and run again, or use on_timeout=proceed to continue the teardown anyway (their resources may be left behind)."
    )


def released(before: list[dict], after: list[dict]) -> list[str]:
    """Finalizer names present before and gone after (in their original order)."""
    remaining = {f["name"] for f in after}
    return [f["name"] for f in before if f["name"] not in remaining]


def add_finalizer_patch(obj: dict, finalizer: str) -> list[dict] | None:
    """JSON patch adding ``finalizer``, or None when it is already there.

    Guarded by the object's resourceVersion: if any other writer changed the
    object since it was read, the server rejects the patch and the caller
    re-reads, so a concurrent writer's finalizer is never lost and ours is
    never added twice.
    """
    meta = obj.get("metadata") or {}
    finalizers = meta.get("finalizers")
    if finalizer in (finalizers or []):
        return None
    guard = {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")}
    if finalizers is None:
        return [guard, {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}]
    return [guard, {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}]


def remove_finalizer_patch(obj: dict, finalizer: str) -> list[dict] | None:
    """JSON patch removing every occurrence of ``finalizer`` (and nothing else), or None.

    Each removal is guarded by a ``test`` of the entry at that index, so the
    patch fails rather than removing another component's finalizer if the list
    changed since it was read. Indexes go from last to first so earlier
    removals do not shift later ones.
    """
    finalizers = (obj.get("metadata") or {}).get("finalizers") or []
    indexes = [i for i, name in enumerate(finalizers) if name == finalizer]
    if not indexes:
        return None
    ops: list[dict] = []
    for index in reversed(indexes):
        ops.append({"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer})
        ops.append({"op": "remove", "path": f"/metadata/finalizers/{index}"})
    return ops


def alive_argument_spec() -> dict:
    """Options that locate the Alive object (doc fragment ``lifecycle.machine.alive``)."""
    return {
        "name": {"type": "str", "default": ALIVE_NAME},
        "namespace": {"type": "str", "default": ALIVE_NAMESPACE},
        "api_version": {"type": "str", "default": ALIVE_API_VERSION},
    }


@dataclass(frozen=True)
class AliveRequest:
    """The options of the cluster_alive modules: where the Alive object is, and what to do with it."""

    name: str = ALIVE_NAME
    namespace: str | None = ALIVE_NAMESPACE
    api_version: str = ALIVE_API_VERSION
    state: str = "present"
    create_namespace: bool = False
    wait: bool = True
    wait_timeout: int = 600
    on_timeout: str = "fail"
    finalizer: str = ""

    @classmethod
    def from_params(cls, params: dict, module: str = "cluster_alive") -> AliveRequest:
        """The request of a task of ``module``; MachineError naming every option out of range."""
        check_options(module, params, BOUNDS, errors=empty_names(params, ("name",)) + invalid_names(params, ("name",), ("namespace",)))
        return cls(**{key: params[key] for key in cls.__dataclass_fields__ if key in params})
