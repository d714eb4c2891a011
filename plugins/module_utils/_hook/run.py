# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""machine_hook's run: choose the Machines, refuse bad input before any write,
then write the hook to each with optimistic concurrency."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._hook.logic import SUCCEEDED_REASON, HookChange, HookRequest, refusal, stored, success_condition
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import emit_event, read_mirror_authority, select_machines, update_with_retry
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import patch_builder
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for, hooks_summary, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now


def manage_hook(api: KubeApi, request: HookRequest) -> dict:
    """Add, re-own or remove the hook on every chosen Machine; the module result."""
    if request.present and not request.owner:
        raise MachineError(f"owner is required to add hook {request.name}")
    machines = select_machines(api, request.selection)
    # Validate every Machine before writing any, so bad input leaves nothing half-done.
    for machine in machines:
        refused = refusal(machine, request, read_mirror_authority(api, machine, flavour_for(machine)))
        if refused:
            raise MachineError(refused)

    results, before, after = [], {}, {}
    for machine in machines:
        recorded = _record_success(api, machine, request) if request.released else None
        entry, diff = _write(api, machine, request)
        if recorded is not None:
            entry.update(recorded)
            entry["changed"] = entry["changed"] or recorded["condition_changed"]
        results.append(entry)
        if diff:
            before[machine_label(machine)], after[machine_label(machine)] = diff
    result = {"changed": any(r["changed"] for r in results), "machines": results}
    if before:
        result["diff"] = {"before": before, "after": after}
    return result


def _write(api: KubeApi, machine: dict, request: HookRequest) -> tuple[dict, tuple[dict, dict] | None]:
    flavour = flavour_for(machine)
    change = HookChange(flavour, request, MachineError)
    # A schema without the field prunes an OpenShift hook silently, and even
    # that no-op write would touch the Machine: try it as a dry run first.
    rehearse = flavour.hooks_may_be_pruned and request.present and not request.check_mode
    for dry_run in (True, False) if rehearse else (request.check_mode,):
        updated, patch = update_with_retry(api, machine, change.patch, dry_run=dry_run)
        if patch is not None and not stored(flavour, updated, request):
            raise MachineError(
                f"The API server dropped {request.point} hook {request.name} on Machine {machine_label(machine)}: the Machine schema of this cluster "
                f"has no spec.lifecycleHooks.{request.point}; nothing was changed"
            )
    hooks = hooks_summary(flavour.hooks(updated))
    entry = {
        "name": updated["metadata"]["name"],
        "namespace": updated["metadata"].get("namespace"),
        "api_version": updated["apiVersion"],
        "flavour": flavour.name,
        "action": change.action,
        "changed": patch is not None,
        "hooks": hooks,
    }
    return entry, ((change.before, hooks) if patch is not None else None)


def _record_success(api: KubeApi, machine: dict, request: HookRequest) -> dict:
    """A release's first write: ``<Point><HookName>Succeeded=True`` with a HookSucceeded Event,
    before the hook goes, so that a run stopped in between finds the work recorded as done."""
    flavour = flavour_for(machine)
    condition = success_condition(request, machine)
    seen: dict = {}
    build = patch_builder(flavour, condition["type"], condition, now(), seen)

    def unless_recorded(current: dict) -> dict | None:
        # Success already recorded (a release run again, whatever its message said): leave it.
        found = flavour.custom_condition(current, condition["type"]) or {}
        return None if (found.get("status"), found.get("reason")) == ("True", SUCCEEDED_REASON) else build(current)

    updated, patch = update_with_retry(api, machine, unless_recorded, status=True, dry_run=request.check_mode)
    if patch is not None:
        emit_event(api, updated, "Normal", SUCCEEDED_REASON, condition["message"], dry_run=request.check_mode)
    return {"condition": flavour.custom_condition(updated, condition["type"]) or condition, "condition_changed": patch is not None}
