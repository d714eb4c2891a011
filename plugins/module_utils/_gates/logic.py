# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Which Machines stand at a hook's gate, and which of them to announce (pure).

The event source ``lifecycle.machine.machine_gates`` watches Machines and asks
:class:`GateTracker` what each change means: a Machine that carries a chosen
hook and has reached that hook's gate is announced once; it is announced
again only after a resync (the source's start, a watch that had to be read
again, the periodic resync), so a gate whose work failed is offered again
later, and a gate reached while the source was down is served when it starts.

The gate rules are the hook_controller role's: a preDrain hook's gate is
reached when the Machine's deletion started; a preTerminate hook's gate when,
besides, its conditions record the drain as finished (or, with
``gate: deleting``, as soon as the deletion started).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_DRAIN, PRE_TERMINATE, flavour_for, is_deleting
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.view import describe
from ansible_collections.lifecycle.machine.plugins.module_utils._options.connection import CONNECTION_OPTIONS, connection_options
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import duration_seconds, namespace_error

POINTS = (PRE_DRAIN, PRE_TERMINATE)
GATES = ("auto", "deleting", "drained")
EVENT_KEY = "machine_gate"
DEFAULT_RESYNC_INTERVAL = 300


def _strings(value: object, option: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) and item for item in value):
        raise MachineError(f"{option} must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def _text(args: dict, option: str) -> str | None:
    value = args.get(option)
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise MachineError(f"{option} must be a string, got {value!r}")
    return value


@dataclass(frozen=True)
class GateSourceRequest:
    """The source plugin's arguments, checked: which hooks, which Machines, how to watch."""

    points: tuple[str, ...] = POINTS
    hook_name: str | None = None
    hook_owner: str | None = None
    gate: str = "auto"
    namespace: str | None = None
    label_selectors: tuple[str, ...] = ()
    api_version: str | None = None
    resync_interval: int = DEFAULT_RESYNC_INTERVAL
    connection: dict = field(default_factory=dict)

    # Every argument the source accepts: its own, then the connection options (``_options.connection``).
    SOURCE_OPTIONS = ("point", "hook_name", "hook_owner", "gate", "namespace", "label_selectors", "api_version", "resync_interval")

    @classmethod
    def from_args(cls, args: dict) -> GateSourceRequest:
        known = {*cls.SOURCE_OPTIONS, *CONNECTION_OPTIONS}
        unknown = sorted(set(args) - known)
        if unknown:
            raise MachineError(f"Unknown argument(s) of lifecycle.machine.machine_gates: {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        points = _strings(args.get("point"), "point") or POINTS
        bad = [p for p in points if p not in POINTS]
        if bad:
            raise MachineError(f"point must be one of {', '.join(POINTS)}, got {', '.join(bad)}")
        hook_name, hook_owner = _text(args, "hook_name"), _text(args, "hook_owner")
        if not hook_name and not hook_owner:
            raise MachineError("Give hook_name, hook_owner or both: the source serves the hooks it is told about, never every hook")
        gate = args.get("gate") or "auto"
        if gate not in GATES:
            raise MachineError(f"gate must be one of {', '.join(GATES)}, got {gate!r}")
        if gate == "drained" and PRE_DRAIN in points:
            raise MachineError("A preDrain hook cannot wait for the drain, which waits for the preDrain hooks: use gate auto or deleting")
        name_error = namespace_error("namespace", args.get("namespace"))
        if name_error:
            raise MachineError(name_error)
        try:
            resync = duration_seconds("resync_interval", args.get("resync_interval", DEFAULT_RESYNC_INTERVAL))
        except ValueError as exc:
            raise MachineError(str(exc)) from None
        if resync is None or resync < 0:
            raise MachineError(f"resync_interval must be 0 (only on start and after a lost watch) or more seconds, got {resync!r}")
        return cls(
            points=tuple(dict.fromkeys(points)),
            hook_name=hook_name,
            hook_owner=hook_owner,
            gate=gate,
            namespace=_text(args, "namespace"),
            label_selectors=_strings(args.get("label_selectors"), "label_selectors"),
            api_version=_text(args, "api_version"),
            resync_interval=resync,
            connection=connection_options(args),
        )

    @property
    def label_selector(self) -> str | None:
        return ",".join(self.label_selectors) or None

    def gate_for(self, point: str) -> str:
        """The state that opens a hook's gate: ``deleting`` or ``drained``."""
        if self.gate != "auto":
            return self.gate
        return "deleting" if point == PRE_DRAIN else "drained"


@dataclass(frozen=True)
class GateReached:
    """One chosen hook on one Machine that stands at the hook's gate."""

    uid: str
    point: str
    hook_name: str
    hook_owner: str
    gate: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.uid, self.point, self.hook_name)


def gates_reached(request: GateSourceRequest, machine: dict) -> list[GateReached]:
    """The chosen hooks of ``machine`` whose gate it has reached (in point order)."""
    if not is_deleting(machine):
        return []
    flavour = flavour_for(machine)
    hooks = flavour.hooks(machine)
    uid = machine["metadata"].get("uid") or ""
    found = []
    for point in request.points:
        gate = request.gate_for(point)
        if gate == "drained" and not flavour.drained(machine):
            continue
        for hook in hooks.get(point) or []:
            if request.hook_name and hook.name != request.hook_name:
                continue
            if request.hook_owner and hook.owner != request.hook_owner:
                continue
            found.append(GateReached(uid, point, hook.name, hook.owner, gate))
    return found


def gate_event(machine: dict, reached: GateReached, *, reason: str) -> dict:
    """The event announcing one gate: the Machine in machine_info's shape, and the hook.

    ``reason``: ``resync`` (found when the Machines were read) or ``watch`` (a change seen as it happened).
    """
    return {
        EVENT_KEY: {
            "point": reached.point,
            "hook": {"name": reached.hook_name, "owner": reached.hook_owner},
            "gate": reached.gate,
            "reason": reason,
            "machine": describe(machine),
        }
    }


class GateTracker:
    """What has been announced: each (Machine, point, hook) at most once between resyncs.

    Kept per Machine API, since each API's Machines are listed and watched on
    their own. Not thread-safe by itself; the source holds a lock around it.
    """

    def __init__(self, request: GateSourceRequest):
        self.request = request
        self._announced: dict[str, dict[str, set[tuple[str, str, str]]]] = {}

    def seen(self, machine: dict, *, reason: str = "watch") -> list[dict]:
        """Events for the gates ``machine`` has newly reached; forgets the ones it left."""
        announced = self._announced.setdefault(machine.get("apiVersion") or "", {})
        uid = machine["metadata"].get("uid") or ""
        reached = gates_reached(self.request, machine)
        before = announced.get(uid, set())
        now = {gate.key for gate in reached}
        if now:
            announced[uid] = now
        else:
            announced.pop(uid, None)
        return [gate_event(machine, gate, reason=reason) for gate in reached if gate.key not in before]

    def gone(self, machine: dict) -> None:
        """The Machine was deleted: nothing of it is remembered."""
        self._announced.get(machine.get("apiVersion") or "", {}).pop(machine["metadata"].get("uid") or "", None)

    def resync(self, api_version: str, machines: list[dict]) -> list[dict]:
        """The Machines of one API as just listed: every gate among them is announced again."""
        self._announced[api_version] = {}
        events = []
        for machine in machines:
            events.extend(self.seen(machine, reason="resync"))
        return events

    def pending(self) -> int:
        """How many gates are announced and not left yet (for the source's log)."""
        return sum(len(keys) for per_api in self._announced.values() for keys in per_api.values())
