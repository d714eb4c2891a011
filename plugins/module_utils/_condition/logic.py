# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What machine_condition writes (pure): the condition and the Event asked
for, why a Machine's flavour refuses them, and the status patch."""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import hook_condition_type
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection, selection_errors
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import check_options


@dataclass(frozen=True)
class ConditionRequest:
    """machine_condition's options. ``condition_type`` is the one given, or the
    one named after the hook (``<Point><HookName>Succeeded``)."""

    condition_type: str
    present: bool = True
    status: str = "True"
    reason: str = ""
    msg: str = ""
    severity: str | None = None
    event: dict | None = None
    selection: MachineSelection = field(default_factory=MachineSelection)
    check_mode: bool = False

    @classmethod
    def from_params(cls, params: dict, check_mode: bool) -> ConditionRequest:
        """The request of a task; MachineError when the options would choose every Machine."""
        check_options("machine_condition", params, (), errors=selection_errors(params, writes=True))
        hook = params.get("hook")
        return cls(
            condition_type=hook_condition_type(hook["point"], hook["name"]) if hook else params["type"],
            present=params["state"] == "present",
            status=params["status"],
            reason=params["reason"] or "",
            msg=params["msg"] or "",
            severity=params["severity"],
            event=params["event"],
            selection=MachineSelection.from_params(params),
            check_mode=check_mode,
        )

    @property
    def verb(self) -> str:
        return "set" if self.present else "remove"


def desired_condition(request: ConditionRequest) -> dict | None:
    """The condition to set (None to remove it)."""
    if not request.present:
        return None
    if not request.reason:
        raise MachineError(f"reason is required to set condition {request.condition_type}")
    condition = {"type": request.condition_type, "status": request.status, "reason": request.reason, "message": request.msg}
    if request.status != "True":
        condition["severity"] = request.severity or ("Warning" if request.status == "False" else "")
    return condition


def desired_event(request: ConditionRequest) -> dict | None:
    """The Event to record with the change (None: none asked for); its type,
    reason and message default to the condition's."""
    event = request.event
    if event is None:
        return None
    result = {
        "type": event["type"] or ("Warning" if request.status == "False" and request.present else "Normal"),
        "reason": event["reason"] or (request.reason if request.present else None),
        "message": event["msg"] if event["msg"] is not None else (request.msg if request.present else None),
    }
    if not result["reason"] or result["message"] is None:
        raise MachineError("event.reason and event.msg are required to record an Event when removing a condition")
    return result


def refusal(machine: dict, request: ConditionRequest) -> str | None:
    """The message refusing the condition on this Machine's flavour, or None."""
    flavour = flavour_for(machine)
    if request.present:
        errors = flavour.condition_errors(request.condition_type, request.reason, request.msg)
    else:
        errors = flavour.condition_errors(request.condition_type)
    if not errors:
        return None
    return f"Cannot {request.verb} condition {request.condition_type} on Machine {machine_label(machine)}: {'; '.join(errors)}"
