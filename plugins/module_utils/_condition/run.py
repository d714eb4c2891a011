# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""machine_condition's run: refuse bad input on every chosen Machine first,
then write the condition (and record the Event) on each."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._condition.logic import (
    ConditionRequest,
    desired_condition,
    desired_event,
    refusal,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import emit_event, select_machines, update_with_retry
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import patch_builder
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now


def manage_condition(api: KubeApi, request: ConditionRequest) -> dict:
    condition = desired_condition(request)
    event = desired_event(request)
    machines = select_machines(api, request.selection)
    # Validate every Machine before writing any, so bad input leaves nothing half-done.
    for machine in machines:
        refused = refusal(machine, request)
        if refused:
            raise MachineError(refused)

    results, before, after = [], {}, {}
    for machine in machines:
        flavour = flavour_for(machine)
        seen: dict = {}
        build = patch_builder(flavour, request.condition_type, condition, now(), seen)
        updated, patch = update_with_retry(api, machine, build, status=True, dry_run=request.check_mode)
        stored = flavour.custom_condition(updated, request.condition_type)
        recorded = None
        if event is not None:
            created = emit_event(api, updated, event["type"], event["reason"], event["message"], dry_run=request.check_mode)
            recorded = {**event, "message": event["message"][:1024], "name": created["metadata"]["name"] if created else None}
        if patch is not None:
            before[machine_label(updated)], after[machine_label(updated)] = seen["before"], stored
        results.append(
            {
                "name": updated["metadata"]["name"],
                "namespace": updated["metadata"].get("namespace"),
                "api_version": updated["apiVersion"],
                "flavour": flavour.name,
                "action": "none" if patch is None else ("set" if condition else "removed"),
                "changed": patch is not None or recorded is not None,
                "condition": stored,
                "event": recorded,
            }
        )
    result = {"changed": any(r["changed"] for r in results), "condition_type": request.condition_type, "machines": results}
    if before:
        result["diff"] = {"before": before, "after": after}
    return result
