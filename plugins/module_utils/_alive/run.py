# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The runs of the cluster_alive modules: create the Alive object or
deprovision it (delete, wait for its finalizers, then fail or proceed), read
it, and hang or release one component's finalizer on it."""

from __future__ import annotations

from collections.abc import Callable

from ansible_collections.lifecycle.machine.plugins.module_utils._alive import api as alive_api
from ansible_collections.lifecycle.machine.plugins.module_utils._alive.api import AliveRef
from ansible_collections.lifecycle.machine.plugins.module_utils._alive.logic import (
    AliveRequest,
    alive_summary,
    describe_finalizers,
    diff_view,
    finalizer_errors,
    released,
    timeout_message,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, ran_out_of_time
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import namespace_missing


def _summary(ref: AliveRef, obj: dict | None) -> dict:
    return alive_summary(obj, name=ref.name, namespace=ref.namespace, api_version=ref.api_version)


def _result(ref, before, after, *, changed, deleted=False, timed_out=False, released_names=(), waited=0.0, namespace_created=False):
    result = {
        "changed": changed,
        "alive": after,
        "finalizers": after["finalizers"],
        "deleted": deleted,
        "timed_out": timed_out,
        "released": list(released_names),
        "waited": round(waited, 1),
        "namespace_created": namespace_created,
    }
    if changed:
        result["diff"] = {"before": diff_view(before), "after": diff_view(after)}
    return result


def ensure_present(api: KubeApi, ref: AliveRef, request: AliveRequest, check_mode: bool) -> dict:
    current = alive_api.get(api, ref)
    if current is not None:
        summary = _summary(ref, current)
        if summary["deleting"]:
            raise MachineError(
                f"Alive {ref.label} is being deleted (since {summary['deletion_timestamp']}) and waits for finalizers "
                f"{describe_finalizers(summary['finalizers']) or '(none left)'}; it can be created again only once it is gone",
                alive=summary,
            )
        return _result(ref, summary, summary, changed=False)
    namespace_created = False
    if ref.namespace and not alive_api.namespace_exists(api, ref.namespace):
        if not request.create_namespace:
            raise MachineError(f"Namespace {ref.namespace} not found: create it, or set create_namespace=true; Alive {ref.label} was not created")
        alive_api.create_namespace(api, ref.namespace, dry_run=check_mode)
        namespace_created = True
    if check_mode and namespace_created:
        # A dry-run create in a namespace that does not exist yet would be refused; predict it.
        created = {"metadata": {"name": ref.name, "namespace": ref.namespace}}
    else:
        try:
            created = alive_api.create(api, ref, dry_run=check_mode)
        except ApiError as exc:
            if exc.status != 409:
                raise
            # Created by someone else since it was read: present, and not by us.
            summary = _summary(ref, alive_api.get(api, ref))
            return _result(ref, summary, summary, changed=False, namespace_created=namespace_created)
    return _result(ref, _summary(ref, None), _summary(ref, created), changed=True, namespace_created=namespace_created)


def _require_namespace(api: KubeApi, ref: AliveRef) -> None:
    """An Alive object that is not there because its namespace is not: a typo, never "already gone"
    (a teardown would go on at once, without waiting for anyone's cleanup)."""
    if ref.namespace and namespace_missing(api, ref.namespace):
        raise MachineError(f"Namespace {ref.namespace} not found, so Alive {ref.label} cannot be in it: check the namespace; nothing was changed")


def ensure_absent(api: KubeApi, ref: AliveRef, request: AliveRequest, check_mode: bool, warn: Callable[[str], None]) -> dict:
    current = alive_api.get(api, ref)
    if current is None:
        _require_namespace(api, ref)
    before = _summary(ref, current)
    changed = False
    if current is not None and not before["deleting"]:
        changed = alive_api.delete(api, ref, before["uid"], dry_run=check_mode)
    if check_mode:
        # Nothing was deleted, so nothing is waited for; report who would have to release it.
        result = _result(ref, before, before, changed=changed, deleted=current is None)
        if changed:
            predicted = {**diff_view(before), "deletion_timestamp": "(set by the deletion)"} if before["finalizers"] else {}
            result["diff"]["after"] = predicted
        return result
    after_delete = alive_api.get(api, ref) if current is not None else None
    started = api.monotonic()
    final, gone = after_delete, after_delete is None
    if request.wait and not gone:
        final, gone = alive_api.wait(api, ref, lambda obj: obj is None, api.deadline, after_delete)
    after = _summary(ref, final)
    result = _result(
        ref,
        before,
        after,
        changed=changed,
        deleted=gone,
        timed_out=request.wait and not gone,
        released_names=released(before["finalizers"], after["finalizers"]),
        waited=api.monotonic() - started,
    )
    if result["timed_out"]:
        proceed = request.on_timeout == "proceed"
        message = timeout_message(ref.label, request.wait_timeout, after["finalizers"], proceed)
        if not proceed:
            raise MachineError(message, **result)
        warn(message)
    return result


def manage_alive(api: KubeApi, request: AliveRequest, check_mode: bool, warn: Callable[[str], None]) -> dict:
    """cluster_alive's task. A deprovision that waits has one deadline, wait_timeout from its
    start, which is its transport's too: an API that stops answering ends the task then, not
    when the retries of one request give up (a timed out result, or a failure naming the request)."""
    waits = request.state == "absent" and request.wait and not check_mode
    api = api.fork(deadline=api.monotonic() + request.wait_timeout if waits else None)
    try:
        ref = alive_api.resolve(api, request.api_version, request.name, request.namespace)
        if request.state == "present":
            return ensure_present(api, ref, request, check_mode)
        return ensure_absent(api, ref, request, check_mode, warn)
    except ApiError as exc:
        if not exc.out_of_time:
            raise
        raise MachineError(f"Kubernetes API error: {exc.describe()}", status=exc.status, **ran_out_of_time(exc)) from None


def read_alive(api: KubeApi, request: AliveRequest) -> dict:
    ref = alive_api.resolve(api, request.api_version, request.name, request.namespace)
    current = alive_api.get(api, ref)
    if current is None:
        _require_namespace(api, ref)
    summary = alive_summary(current, name=ref.name, namespace=ref.namespace, api_version=ref.api_version)
    return {"changed": False, "alive": summary}


def _finalizer_summary(ref: AliveRef, obj: dict | None) -> dict:
    meta = (obj or {}).get("metadata") or {}
    if meta.get("deletionTimestamp") and not meta.get("finalizers"):
        obj = None  # the last finalizer of an object being deleted is gone, and so is the object
    return alive_summary(obj, name=ref.name, namespace=ref.namespace, api_version=ref.api_version)


def manage_finalizer(api: KubeApi, request: AliveRequest, check_mode: bool) -> dict:
    finalizer, present = request.finalizer, request.state == "present"
    errors = finalizer_errors(finalizer) if present else []  # any finalizer already there may be released
    if errors:
        raise MachineError(f"Invalid finalizer {finalizer}: {'; '.join(errors)}")
    ref = alive_api.resolve(api, request.api_version, request.name, request.namespace)
    before, after, changed = alive_api.set_finalizer(api, ref, finalizer, present, dry_run=check_mode)
    if before is None:
        _require_namespace(api, ref)  # a finalizer "released" from a mistyped namespace still holds the real Alive object
    result = {"changed": changed, "operation": ("added" if present else "removed") if changed else "none", "alive": _finalizer_summary(ref, after)}
    if changed:
        result["diff"] = {"before": diff_view(_finalizer_summary(ref, before)), "after": diff_view(result["alive"])}
    return result
