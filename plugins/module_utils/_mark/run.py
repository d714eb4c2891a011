# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""machine_mark_for_deletion's run: make sure the flavour's finalizer holds
each chosen Machine, then mark it for deletion."""

from __future__ import annotations

from collections.abc import Callable

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import (
    get_machine,
    machine_path,
    read_hands_off,
    record_pause_override,
    refresh,
    require_namespace,
    select_machines,
    update_with_retry,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection
from ansible_collections.lifecycle.machine.plugins.module_utils._mark.logic import deletion_state, with_finalizer


def mark(api: KubeApi, machine: dict, check_mode: bool, vet: Callable[[dict], None] | None = None) -> tuple[dict, tuple[dict, dict] | None, dict | None]:
    """Ensure the finalizer, then delete the Machine (only the one read, by UID).
    ``vet(machine)``, when given, is asked first about a Machine that is not being
    deleted yet; it raises to leave the Machine as it is. Returns the entry, the
    diff, and the Machine as it is after (None when it is gone)."""
    flavour = flavour_for(machine)
    entry = {"name": machine["metadata"]["name"], "namespace": machine["metadata"]["namespace"], "api_version": machine["apiVersion"], "flavour": flavour.name}
    if flavour.split_clusters:
        entry["cluster"] = flavour.cluster_name(machine)  # the workload cluster its Node is in
    before = deletion_state(machine, flavour)
    if before["deleting"]:
        return {**entry, "action": "already_deleting", "finalizer_added": False, "held": before["held"], "changed": False}, None, machine
    if vet is not None:
        vet(machine)
    updated, patch = update_with_retry(api, machine, with_finalizer(flavour), dry_run=check_mode)
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": machine["metadata"]["uid"]}}
    answer = api.delete_object(machine_path(machine), body=body, dry_run=check_mode)
    if answer is None:
        return {**entry, "action": "absent", "finalizer_added": False, "held": False, "changed": patch is not None}, None, None
    after = {"deleting": True, "finalizers": list(updated["metadata"].get("finalizers") or []), "held": True}
    # The answer is the Machine as marked (its finalizer holds it): nothing needs reading again.
    # A dry run changed nothing: the Machine is as read.
    current = machine if check_mode else marked_from(answer, machine) or refresh(api, machine)
    timestamp = ((current or {}).get("metadata") or {}).get("deletionTimestamp")
    result = {**entry, "action": "marked", "finalizer_added": patch is not None, "held": True, "changed": True, "deletion_timestamp": timestamp}
    return result, (before, after), current


def marked_from(answer: dict, machine: dict) -> dict | None:
    """The Machine as the deletion request's answer shows it, when that answer is the Machine itself,
    marked and held by a finalizer; None for anything else (a Status, a lost answer)."""
    meta = answer.get("metadata") or {}
    if answer.get("kind") != machine.get("kind") or meta.get("uid") != machine["metadata"].get("uid"):
        return None
    if not meta.get("deletionTimestamp") or not meta.get("finalizers"):
        return None
    return {**answer, "apiVersion": machine["apiVersion"]}


def hands_off_first(api: KubeApi, machines: list[dict], override: str | None, check_mode: bool) -> None:
    """Before any Machine is marked: each chosen Machine not being deleted yet that its controllers leave alone
    (paused, another API authoritative; ``_machine/pause.py``) fails the task, changing nothing - unless
    ``override`` (``override_pause``) names who asked to act on a paused one, which is then recorded on it."""
    held = []
    for machine in machines:
        found = None if machine["metadata"].get("deletionTimestamp") else read_hands_off(api, machine, flavour_for(machine))
        if found is not None:
            held.append((machine, found))
    refused = [found for _machine, found in held if not (found.overridable and override)]
    if refused:
        raise MachineError("; ".join(found.message for found in refused), blockers=[found.blocker.as_dict() for found in refused])
    for machine, found in held:
        record_pause_override(api, machine, found, override or "", dry_run=check_mode)


def mark_for_deletion(
    api: KubeApi, selection: MachineSelection, check_mode: bool, vet: Callable[[dict], None] | None = None, *, override_pause: str | None = None
) -> dict:
    if selection.machine and selection.namespace and get_machine(api, selection.namespace, selection.machine, selection.api_version) is None:
        # Already gone: deleting it again is done (a re-run after the Machine went) - unless no Machine can be there.
        require_namespace(api, selection.namespace)
        absent = {"name": selection.machine, "namespace": selection.namespace, "api_version": selection.api_version, "action": "absent"}
        return {"changed": False, "machines": [{**absent, "finalizer_added": False, "held": False}]}
    machines = select_machines(api, selection)
    hands_off_first(api, machines, override_pause, check_mode)
    results, before, after = [], {}, {}
    for machine in machines:
        entry, diff, _current = mark(api, machine, check_mode, vet)
        results.append(entry)
        if diff:
            key = f"{entry['namespace']}/{entry['name']}"
            before[key], after[key] = diff
    changes = [r.pop("changed") for r in results]
    result = {"changed": any(changes), "machines": results}
    if before:
        result["diff"] = {"before": before, "after": after}
    return result
