# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What machine_hook does to one Machine (pure): the action a hook write
means, why it may not be made, and whether the server kept it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import hook_condition_type
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour, flavour_for, hooks_summary, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.migration import hook_refusal
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection, selection_errors
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import check_options

ADDED, REOWNED, REMOVED, NONE = "added", "reowned", "removed", "none"
# What a hook-implementing controller records when its work succeeded (docs/behaviour.md §6).
SUCCEEDED_REASON = "HookSucceeded"


@dataclass(frozen=True)
class HookRequest:
    """machine_hook's options: which Machines, and the hook to add (owner given) or remove."""

    point: str
    name: str
    owner: str | None
    present: bool = True
    selection: MachineSelection = field(default_factory=MachineSelection)
    check_mode: bool = False
    released: bool = False
    msg: str | None = None

    @classmethod
    def from_params(cls, params: dict, check_mode: bool) -> HookRequest:
        """The request of a task; MachineError when the options would choose every Machine."""
        misplaced = ["msg is only used with state=released"] if params.get("msg") is not None and params["state"] != "released" else []
        check_options("machine_hook", params, (), errors=[*selection_errors(params, writes=True), *misplaced])
        return cls(
            point=params["point"],
            name=params["name"],
            owner=params["owner"],
            present=params["state"] == "present",
            selection=MachineSelection.from_params(params),
            check_mode=check_mode,
            released=params["state"] == "released",
            msg=params.get("msg"),
        )

    @property
    def written_owner(self) -> str | None:
        """The owner to write: None removes the hook."""
        return self.owner if self.present else None

    @property
    def verb(self) -> str:
        return "add" if self.present else "remove"

    @property
    def condition_type(self) -> str:
        """``<Point><HookName>Succeeded``, which a release sets to True."""
        return hook_condition_type(self.point, self.name)


def success_condition(request: HookRequest, machine: dict) -> dict:
    """The condition a release records: the hook's work succeeded (its owner named from the Machine when it still has the hook)."""
    found = flavour_for(machine).find_hook(machine, request.point, request.name)
    owner = found.owner if found else request.owner
    message = request.msg or (f"{request.point} hook {request.name} of {owner} succeeded" if owner else f"{request.point} hook {request.name} succeeded")
    return {"type": request.condition_type, "status": "True", "reason": SUCCEEDED_REASON, "message": message}


def hook_action(machine: dict, request: HookRequest) -> str:
    """``added``, ``reowned``, ``removed`` or ``none``."""
    existing = flavour_for(machine).find_hook(machine, request.point, request.name)
    if not request.present:
        return REMOVED if existing else NONE
    if existing is None:
        return ADDED
    return NONE if existing.owner == request.owner else REOWNED


def refusal(machine: dict, request: HookRequest, mirrored: dict | None = None) -> str | None:
    """The message refusing the write on this Machine, or None when it may go ahead. ``mirrored``: the Machine
    API Machine a Cluster API Machine mirrors in OpenShift's move to Cluster API (its authority decides
    where the admission policy lets hooks go; ``_machine/migration.py``)."""
    flavour = flavour_for(machine)
    errors = flavour.hook_write_errors(machine, request.point, request.name, request.written_owner)
    elsewhere = hook_refusal(machine, flavour, request.point, request.name, mirrored)
    if elsewhere and not errors:
        errors = [elsewhere]
    if request.released and not errors:
        errors = flavour.condition_errors(request.condition_type, SUCCEEDED_REASON, success_condition(request, machine)["message"])
    if not errors:
        return None
    return f"Cannot {request.verb} {request.point} hook {request.name} on Machine {machine_label(machine)}: {'; '.join(errors)}"


def stored(flavour: Flavour, machine: dict, request: HookRequest) -> bool:
    """Whether the Machine as the server returned it holds the result asked for."""
    found = flavour.find_hook(machine, request.point, request.name)
    if request.present:
        return found is not None and found.owner == request.owner
    return found is None


class HookChange:
    """Builds the patch for one hook from the freshest Machine, remembering what
    it found (the action and the hooks before). Raises when the Machine changed
    under us so that the write is no longer allowed (say, it is now being deleted)."""

    def __init__(self, flavour: Flavour, request: HookRequest, error: type[Exception]):
        self.flavour = flavour
        self.request = request
        self.error = error
        self.action = NONE
        self.before: dict = {}

    def patch(self, current: dict) -> dict | None:
        refused = refusal(current, self.request)
        if refused:
            raise self.error(refused)
        self.action = hook_action(current, self.request)
        self.before = hooks_summary(self.flavour.hooks(current))
        if self.action == NONE:
            return None
        return self.flavour.hook_patch(current, self.request.point, self.request.name, self.request.written_owner)
