# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The first step of a deletion (pure): the finalizer that holds the Machine
while it is deleted, and what the step reports."""

from __future__ import annotations

from collections.abc import Callable

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour, is_deleting
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.pause import override_errors
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection, selection_errors
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import check_options


def mark_selection(params: dict) -> MachineSelection:
    """The Machines a task marks; MachineError when the options would choose every Machine."""
    errors = [*selection_errors(params, writes=True), *override_errors(params.get("override_pause"))]
    check_options("machine_mark_for_deletion", params, (), errors=errors)
    return MachineSelection.from_params(params)


def with_finalizer(flavour: Flavour) -> Callable[[dict], dict | None]:
    """build(current) for update_with_retry: add the flavour's finalizer, guarded
    by the resourceVersion; nothing once the Machine is being deleted (the API
    server accepts no new finalizer then) or when it is there."""

    def build(current: dict) -> dict | None:
        finalizers = list(current["metadata"].get("finalizers") or [])
        if flavour.finalizer in finalizers or is_deleting(current):
            return None
        return {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"], "finalizers": [*finalizers, flavour.finalizer]}}

    return build


def deletion_state(machine: dict, flavour: Flavour) -> dict:
    """What ``--diff`` shows of a Machine: deleting, its finalizers, and whether ours holds it."""
    meta = machine["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    return {"deleting": is_deleting(machine), "finalizers": finalizers, "held": flavour.finalizer in finalizers}
