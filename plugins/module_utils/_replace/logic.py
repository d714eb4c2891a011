# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What becomes of a Machine's place in its pool when it is deleted (pure;
docs/delete_machine.md, "The replacement").

A MachineSet keeps its replicas: whatever removes one of its Machines, it
creates another. ``replacement`` says what the deletion does about it:

- ``after`` (the default): the deletion as it always was; the owner creates the
  replacement (Cluster API's MachineSet once the Machine is gone - it counts a
  Machine being deleted - OpenShift's as soon as the deletion starts);
- ``none``: the Machine is removed for good - the owner's delete annotation on
  it, then the owner's replicas lowered by one, so that its delete policy
  picks exactly this Machine;
- ``first``: the replacement comes first - the owner's replicas raised by one,
  the new Machine waited for until its Node is Ready, then the replicas brought
  back with the delete annotation on the old Machine, which is then deleted
  through its gates.

The owner whose replicas change is the Machine's MachineSet, or the
MachineDeployment over it. Every change of its replicas carries the
resourceVersion it was computed from, and records on the owner itself what it
did for which Machine (:class:`Record`, the annotation ``RECORD_ANNOTATION``),
in the same write: a run killed at any point leaves a state the next run reads
and completes, never a pool one larger or smaller for good.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour, is_deleting, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import check_options, invalid_names, seconds
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import WorkloadSettings, workload_settings

AFTER, NONE, FIRST = "after", "none", "first"
MODES = (AFTER, NONE, FIRST)
DEFAULT_MODE = AFTER

# The owner's record of what the collection did to its replicas, for which Machine (JSON).
RECORD_ANNOTATION = "lifecycle.machine.dev/replacements"
# Cluster API's switch that stops a MachineSet from creating Machines.
DISABLE_CREATE_ANNOTATION = "cluster.x-k8s.io/disable-machine-create"
# The value written in the owner's delete annotation (OpenShift's MachineSet ignores an empty one).
DELETE_ANNOTATION_VALUE = "lifecycle.machine"

# The phase of a Machine's clock the wait for its replacement is budgeted in (when the wait began), and when
# the replacement was first seen Ready (epoch seconds, carried across calls like the other phases).
REPLACE, REPLACEMENT_READY = "replace", "replacement_ready"

# A record entry's steps: the owner was surged for the Machine (replacement: first), or its replicas were
# lowered for it (both modes; the Machine is then deleted, by the owner or the collection).
SURGED, SCALED_DOWN = "surged", "scaled-down"

# Controller-owner kinds that replace their Machines themselves, and what to tell the user about each.
MACHINE_POOL = "MachinePool"
_SELF_REPLACING = {
    "KubeadmControlPlane": (
        "the KubeadmControlPlane controller replaces its control-plane Machines itself, one at a time and surge first, in a"
        " rollout (change its spec, for example spec.rollout.after); delete it with replacement: after to let it create the"
        " replacement"
    ),
    "ControlPlaneMachineSet": (
        "the ControlPlaneMachineSet controller replaces its control-plane Machines itself: a deleted one gets its replacement"
        " first, and its etcd quorum preDrain hook holds the old Machine's drain until the new etcd member is ready; delete it"
        " with replacement: after"
    ),
    MACHINE_POOL: (
        "a MachinePool's Machines follow the instances of its infrastructure (the provider's scaling group), so neither which one"
        " goes nor when a new one comes is the collection's to choose; scale the MachinePool itself"
    ),
}


@dataclass(frozen=True)
class Ref:
    """An owner reference: kind, apiVersion, name (and uid)."""

    kind: str
    api_version: str
    name: str
    uid: str = ""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


def controller_of(obj: dict) -> Ref | None:
    """The object's controller owner reference (None: it has none)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return Ref(str(ref.get("kind") or ""), str(ref.get("apiVersion") or ""), str(ref.get("name") or ""), str(ref.get("uid") or ""))
    return None


def _meta(obj: dict | None) -> dict:
    return (obj or {}).get("metadata") or {}


def annotations_of(obj: dict | None) -> dict:
    return _meta(obj).get("annotations") or {}


def object_label(kind: str, obj: dict) -> str:
    """``MachineSet ns/name``."""
    return f"{kind} {_meta(obj).get('namespace')}/{_meta(obj).get('name')}"


def replicas_of(obj: dict) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def selector_query(selector: dict | None) -> str | None:
    """A ``spec.selector`` (matchLabels, matchExpressions) as a label-selector query; None when it selects nothing."""
    selector = selector or {}
    parts = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), ",".join(expression.get("values") or [])
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": f"{key}", "DoesNotExist": f"!{key}"}.get(operator, ""))
    parts = [part for part in parts if part]
    return ",".join(parts) or None


# ---------------------------------------------------------------------------
# The record on the owner


@dataclass
class Entry:
    """What the collection did to the owner's replicas for one Machine."""

    mode: str
    step: str
    seq: int
    # When the surge was made (epoch seconds, the collection's clock), for the figures.
    since: float | None = None
    # The Machine whose Ready Node replaced it (replacement: first), once the replicas were brought back.
    replacement: str | None = None

    def as_dict(self) -> dict:
        found = {"since": round(self.since, 1) if self.since is not None else None, "replacement": self.replacement}
        return {"mode": self.mode, "step": self.step, "seq": self.seq, **{key: value for key, value in found.items() if value is not None}}


@dataclass
class Record:
    """The owner's record (``RECORD_ANNOTATION``): per Machine its entry, and the Machines the owner had
    when the first surge of this record was made (``before``): any other Machine of the owner is new, a
    candidate to replace a surged-for Machine. Kept until every entry's Machine is gone."""

    entries: dict[str, Entry] = field(default_factory=dict)
    before: tuple[str, ...] = ()

    @classmethod
    def parse(cls, owner: dict) -> Record:
        """The record of an owner as read (an empty one when there is none or it is not ours to read)."""
        text = annotations_of(owner).get(RECORD_ANNOTATION)
        if not text:
            return cls()
        try:
            data = json.loads(text)
        except ValueError:
            return cls()
        entries = {}
        for name, value in (data.get("machines") or {}).items() if isinstance(data, dict) else ():
            if isinstance(value, dict) and value.get("mode") in (NONE, FIRST) and value.get("step") in (SURGED, SCALED_DOWN):
                since, replacement = value.get("since"), value.get("replacement")
                entries[str(name)] = Entry(
                    value["mode"],
                    value["step"],
                    int(value.get("seq") or 0),
                    float(since) if isinstance(since, (int, float)) else None,
                    str(replacement) if replacement else None,
                )
        before = tuple(str(name) for name in data.get("before") or ()) if isinstance(data, dict) else ()
        return cls(entries, before)

    def text(self) -> str | None:
        """The annotation's value (None: the annotation goes)."""
        if not self.entries:
            return None
        data: dict[str, Any] = {"machines": {name: entry.as_dict() for name, entry in sorted(self.entries.items())}}
        if self.before:
            data["before"] = sorted(self.before)
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    def next_seq(self) -> int:
        return max((entry.seq for entry in self.entries.values()), default=0) + 1

    def surged(self) -> list[str]:
        return sorted((name for name, entry in self.entries.items() if entry.step == SURGED), key=lambda name: self.entries[name].seq)


def owner_patch(owner: dict, record: Record, replicas: int | None = None) -> dict:
    """A merge patch of the owner setting its record (and its replicas), guarded by the resourceVersion it was read at."""
    patch: dict[str, Any] = {"metadata": {"resourceVersion": _meta(owner).get("resourceVersion"), "annotations": {RECORD_ANNOTATION: record.text()}}}
    if replicas is not None:
        patch["spec"] = {"replicas": replicas}
    return patch


def with_entry(record: Record, name: str, entry: Entry | None, machines: list[dict]) -> Record:
    """``record`` with ``name``'s entry set (``entry`` None: removed). A first surge (no other surge recorded)
    notes the owner's Machines as they are (``machines``) as ``before``."""
    entries = dict(record.entries)
    if entry is None:
        entries.pop(name, None)
    else:
        entries[name] = entry
    before = record.before
    if entry is not None and entry.step == SURGED and not any(other.mode == FIRST for key, other in record.entries.items() if key != name):
        before = tuple(sorted(_meta(machine).get("name") for machine in machines))
    if not any(other.mode == FIRST for other in entries.values()):
        before = ()
    return Record(entries, before)


def orphaned_surges(record: Record, present: set[str]) -> list[str]:
    """The surges of the record whose Machine is gone without its replicas brought back (someone else deleted it):
    each leaves the owner one Machine larger until it is lowered again."""
    return [name for name in record.surged() if name not in present]


def settled(record: Record, present: set[str]) -> Record:
    """The record once the entries that need no keeping are dropped: a removal's (``none``) whose Machine is
    gone; and, once every surge of the record is behind its Machine (scaled down, the Machine gone), all of them."""
    entries = {name: entry for name, entry in record.entries.items() if not (entry.mode == NONE and entry.step == SCALED_DOWN and name not in present)}
    first = {name: entry for name, entry in entries.items() if entry.mode == FIRST}
    if first and all(entry.step == SCALED_DOWN and name not in present for name, entry in first.items()):
        entries = {name: entry for name, entry in entries.items() if entry.mode != FIRST}
    return Record(entries, record.before if any(entry.mode == FIRST for entry in entries.values()) else ())


# ---------------------------------------------------------------------------
# The owner, as read


@dataclass
class Owner:
    """The owner whose replicas change for a Machine, as one read found it: the scaled object (the MachineSet,
    or the MachineDeployment over it), the MachineSet holding the Machine, their Machines and what limits them."""

    kind: str
    obj: dict
    machine_set: dict
    flavour: Flavour
    # The Machines the owner holds (the MachineDeployment's: those of its MachineSets).
    machines: list[dict] = field(default_factory=list)
    # A MachineDeployment's MachineSets with replicas (more than one: a rollout under way).
    active_sets: list[str] = field(default_factory=list)
    cluster: dict | None = None

    @property
    def label(self) -> str:
        return object_label(self.kind, self.obj)

    @property
    def replicas(self) -> int:
        return replicas_of(self.obj)

    @property
    def record(self) -> Record:
        return Record.parse(self.obj)

    def bound(self, which: str) -> int | None:
        """The cluster autoscaler's ``min`` or ``max`` size annotation (None: not set, or not a number)."""
        value = annotations_of(self.obj).get(self.flavour.autoscaler_annotation(which))
        try:
            return int(str(value).strip()) if value is not None else None
        except ValueError:
            return None

    def paused(self) -> str | None:
        for kind, obj in ((self.kind, self.obj), ("MachineSet", self.machine_set)):
            reason = self.flavour.owner_paused(obj, self.cluster)
            if reason:
                return f"{object_label(kind, obj)} is paused: {reason}"
        return None


def owner_kinds(machine: dict, flavour: Flavour, machine_set: dict | None = None) -> tuple[Ref | None, Ref | None]:
    """(the Machine's MachineSet, the MachineDeployment over it) by their owner references; each None when absent."""
    ref = controller_of(machine)
    if ref is None or flavour.scalable_owner_level(ref.kind, ref.group) != 0:
        return None, None
    above = controller_of(machine_set) if machine_set is not None else None
    if above is not None and (flavour.scalable_owner_level(above.kind, above.group) or 0) >= 1:
        return ref, above
    return ref, None


def after_message(machine: dict, flavour: Flavour) -> str:
    """What ``replacement: after`` means for this Machine, from its owner references only (nothing read)."""
    ref = controller_of(machine)
    if ref is None:
        return "it has no owner: nothing replaces it"
    set_ref = owner_kinds(machine, flavour)[0]
    if set_ref is None:
        return f"{ref.kind} {ref.name} owns it and decides its replacement"
    deployment = (_meta(machine).get("labels") or {}).get("cluster.x-k8s.io/deployment-name")
    owner = f"MachineSet {ref.name}" + (f" (MachineDeployment {deployment})" if deployment else "")
    if flavour.machine_set_counts_deleting:
        return f"{owner} will create a replacement once it is gone (it counts a Machine until it is gone)"
    return f"{owner} creates a replacement as soon as its deletion starts (it no longer counts a Machine being deleted)"


def self_replacing(machine: dict, flavour: Flavour) -> str | None:
    """Why the Machine's replacement is not the collection's to change: a control-plane Machine, a MachinePool's,
    or one owned by another kind than a MachineSet; None when it is a MachineSet's (or has no owner)."""
    ref = controller_of(machine)
    label = machine_label(machine)
    if ref is not None and ref.kind in _SELF_REPLACING:
        what = "a control-plane Machine" if ref.kind != MACHINE_POOL else "a Machine of a MachinePool"
        return f"Machine {label} is {what} (owned by {ref.kind} {ref.name}): {_SELF_REPLACING[ref.kind]}"
    if flavour.is_control_plane(machine):
        owner = f" (owned by {ref.kind} {ref.name})" if ref is not None else ""
        return (
            f"Machine {label} is a control-plane Machine{owner}: its control plane's own controller replaces control-plane Machines"
            " (Cluster API's KubeadmControlPlane, OpenShift's ControlPlaneMachineSet); delete it with replacement: after"
        )
    if ref is not None and flavour.scalable_owner_level(ref.kind, ref.group) != 0:
        return (
            f"Machine {label} is owned by {ref.kind} {ref.name}, not by a MachineSet: the collection changes the replicas of MachineSets"
            " and MachineDeployments only"
        )
    return None


def refusal(mode: str, machine: dict, owner: Owner | None, *, removing: int = 1, surging: int = 1) -> str | None:
    """Why ``mode`` cannot be carried out safely for this Machine, before any change (None: it can; the other
    Machines its owner's delete policy ranks as high are :func:`rival_of`'s to say).

    ``owner``: its owner as read (None: it has none). ``removing``: how many Machines of the task the
    owner loses for good (``none``); ``surging``: how many Machines the owner is surged for at once (``first``).
    A Machine the owner's record already holds an entry for is past these checks: its run is completed."""
    if mode == AFTER:
        return None
    if owner is None:
        if mode == FIRST:
            return f"Machine {machine_label(machine)} has no owner (no MachineSet): nothing would create its replacement; use replacement: after or none"
        return None
    if _meta(machine).get("name") in owner.record.entries:
        return None
    return owner_refusal(owner) or (removal_refusal(machine, owner, removing) if mode == NONE else surge_refusal(owner, surging))


def owner_refusal(owner: Owner) -> str | None:
    """Why the owner's replicas cannot be changed now: it is being deleted, paused, or rolling out."""
    if _meta(owner.obj).get("deletionTimestamp"):
        return f"{owner.label} is being deleted (since {_meta(owner.obj)['deletionTimestamp']}): its Machines go with it; nothing to replace or remove"
    paused = owner.paused()
    if paused:
        return f"{paused}: its controller would not act on a change of its replicas; unpause it first"
    if len(owner.active_sets) > 1:
        return (
            f"{owner.label} is rolling out (MachineSets {', '.join(owner.active_sets)} have replicas): a change of its replicas now goes to the"
            " rollout, not to this Machine's MachineSet; wait until the rollout ends"
        )
    return None


def removal_refusal(machine: dict, owner: Owner, removing: int) -> str | None:
    """Why the Machine cannot be removed for good: its owner replaced it already, or the autoscaler's minimum."""
    if is_deleting(machine) and not owner.flavour.machine_set_counts_deleting:
        return (
            f"Machine {machine_label(machine)} is already being deleted and {owner.label} has already created its replacement (it no longer"
            " counts a Machine being deleted): too late to remove it for good; lower the replicas yourself if the pool should shrink"
        )
    low = owner.bound("min")
    if low is not None and owner.replicas - removing < low:
        return (
            f"{owner.label} has {owner.replicas} replicas and the cluster autoscaler's minimum ({owner.flavour.autoscaler_annotation('min')})"
            f" is {low}: removing {removing} Machine{'s' if removing != 1 else ''} for good would take it below; lower the minimum first,"
            " or use replacement: first or after"
        )
    return None


def surge_refusal(owner: Owner, surging: int) -> str | None:
    """Why the owner cannot be surged: the autoscaler's maximum, or a MachineSet that creates no Machine."""
    high = owner.bound("max")
    if high is not None and owner.replicas + surging > high:
        return (
            f"{owner.label} has {owner.replicas} replicas and the cluster autoscaler's maximum ({owner.flavour.autoscaler_annotation('max')})"
            f" is {high}: a surge of {surging} would take it above, which the collection does not do behind the autoscaler's back; raise"
            f" the maximum by {surging} for the replacement, or use replacement: after"
        )
    if annotations_of(owner.machine_set).get(DISABLE_CREATE_ANNOTATION) == "true":
        return f"{object_label('MachineSet', owner.machine_set)} has {DISABLE_CREATE_ANNOTATION}: true: it creates no Machine, so no replacement would come"
    return None


def rival_of(machine: dict, owner: Owner, chosen: set[str] | frozenset[str] = frozenset()) -> str | None:
    """A Machine of the owner's MachineSet, not being deleted and not among ``chosen`` (the task's), that its
    delete policy ranks as high as an annotated one (it carries the delete annotation itself; on OpenShift,
    a Machine that failed ranks so too): lowering the replicas could remove it instead. None when none does."""
    name = _meta(machine).get("name")
    annotation = owner.flavour.delete_machine_annotation
    set_uid = _meta(owner.machine_set).get("uid")
    for other in owner.machines:
        other_name = _meta(other).get("name")
        if other_name == name or other_name in chosen or is_deleting(other):
            continue
        ref = controller_of(other)
        if set_uid and (ref is None or ref.uid != set_uid):
            continue
        status = other.get("status") or {}
        failure = status.get("errorReason") or status.get("errorMessage")
        if annotation in annotations_of(other):
            why = f"it carries {annotation} too"
        elif failure and not owner.flavour.machine_set_counts_deleting:
            why = f"it failed ({failure})"
        else:
            continue
        return (
            f"{object_label('MachineSet', owner.machine_set)}'s delete policy ranks Machine {_meta(other).get('namespace')}/{other_name} as high as"
            f" {name} ({why}): lowering its replicas could remove that one instead; deal with it first"
        )
    return None


# ---------------------------------------------------------------------------
# The replacements


def is_candidate(entry_name: str, machine: dict, record: Record, since: str | None = None) -> bool:
    """Whether ``machine`` could be the replacement of ``entry_name``'s Machine: another Machine of the owner,
    not being deleted, not one the record holds an entry for, and new - not among the Machines the owner had at the
    record's first surge (``since``: created at or after that time instead, for a Machine the owner replaced by itself)."""
    name = _meta(machine).get("name")
    if name == entry_name or name in record.entries or is_deleting(machine):
        return False
    if since is not None:
        return (_meta(machine).get("creationTimestamp") or "") >= since
    return name not in record.before


def match_replacements(wanted: list[tuple[str, str | None]], ready: list[dict], record: Record) -> dict[str, str | None]:
    """Which Ready Machine replaces which: ``wanted`` lists (Machine name, since) in the order they were asked
    for; each gets a distinct Ready candidate (:func:`is_candidate`), the earlier ones first (a maximum
    matching, so a later one never takes the only replacement an earlier one could have). None: none yet."""
    names = [_meta(machine).get("name") for machine in ready]
    options = {name: [_meta(m).get("name") for m in ready if is_candidate(name, m, record, since)] for name, since in wanted}
    taken: dict[str, str] = {}

    def assign(name: str, seen: set[str]) -> bool:
        for candidate in options[name]:
            if candidate in seen:
                continue
            seen.add(candidate)
            holder = taken.get(candidate)
            if holder is None or assign(holder, seen):
                taken[candidate] = name
                return True
        return False

    for name, _since in wanted:
        assign(name, set())
    by_entry = {holder: candidate for candidate, holder in taken.items() if candidate in names}
    return {name: by_entry.get(name) for name, _since in wanted}


def wanted_replacements(record: Record, owner: Owner, machine: dict) -> list[tuple[str, str | None]]:
    """The Machines of the owner whose replacement is awaited, in order: each surge of the record (done ones
    too: their replacements stay theirs), and the Machine itself when the owner replaces it by itself (its
    deletion started, an owner that no longer counts it): since its deletion."""
    wanted: list[tuple[str, str | None]] = [(name, None) for name, entry in sorted(record.entries.items(), key=lambda item: item[1].seq) if entry.mode == FIRST]
    name = _meta(machine).get("name")
    if name not in record.entries and is_deleting(machine) and not owner.flavour.machine_set_counts_deleting:
        wanted.append((name, _meta(machine).get("deletionTimestamp")))
    return wanted


# ---------------------------------------------------------------------------
# Messages and figures


def plan_message(mode: str, owner: Owner | None, machine: dict) -> str:
    """What the mode would do, as check mode says it (nothing read beyond the owner, nothing waited for)."""
    if owner is None:
        return "it has no owner: deleting it removes it for good"
    replicas = owner.replicas
    if mode == NONE:
        return (
            f"would put {owner.flavour.delete_machine_annotation} on it and lower {owner.label}'s replicas {replicas} -> {replicas - 1},"
            " so that its delete policy removes exactly this Machine for good"
        )
    if mode == FIRST:
        return (
            f"would raise {owner.label}'s replicas {replicas} -> {replicas + 1}, wait until the new Machine's Node is Ready, then put"
            f" {owner.flavour.delete_machine_annotation} on it and bring the replicas back to {replicas} before its drain"
        )
    return after_message(machine, owner.flavour)


def short_seconds(mode: str, ready_at: float | None, drain_at: float | None) -> float | None:
    """How long the pool ran short of a Machine because of this deletion: 0 when the replacement was Ready
    before the drain began (``first``) or the pool shrinks on purpose (``none``); None when not followed (``after``:
    the replacement comes after the Machine, beyond the task)."""
    if mode == NONE:
        return 0.0
    if mode == FIRST and ready_at is not None:
        return round(max(0.0, ready_at - drain_at), 1) if drain_at is not None else 0.0
    return None


def replacement_figures(mode: str, phases: dict) -> dict:
    """The replacement's figures from a Machine's clock: seconds from the surge to the replacement's Ready Node,
    and how long the pool ran short (:func:`short_seconds`)."""
    surged, ready = phases.get(REPLACE), phases.get(REPLACEMENT_READY)
    return {
        "replacement_ready_seconds": round(ready - surged, 1) if mode == FIRST and surged is not None and ready is not None else None,
        "pool_short_seconds": short_seconds(mode, ready, phases.get("drain")),
    }


# ---------------------------------------------------------------------------
# machine_replacement: a Machine being deleted gets its Ready replacement (a preDrain hook's work)

REPLACEMENT_BOUNDS = (*seconds("wait_timeout", least=1), *seconds("wait_sleep", least=1))


@dataclass(frozen=True)
class ReplacementRequest:
    """machine_replacement's options."""

    machine: str
    namespace: str
    api_version: str | None = None
    wait_timeout: int = 1800
    wait_sleep: int = 2
    check_mode: bool = False
    workload: WorkloadSettings = field(default_factory=WorkloadSettings)

    @classmethod
    def from_params(cls, params: dict, check_mode: bool) -> ReplacementRequest:
        errors = invalid_names({"machine": params.get("machine"), "namespace": params.get("namespace")}, ("machine",), ("namespace",))
        workload = workload_settings(params.get("workload_cluster"), errors)
        check_options("machine_replacement", params, REPLACEMENT_BOUNDS, errors=errors)
        return cls(
            machine=params["machine"],
            namespace=params["namespace"],
            api_version=params.get("api_version") or None,
            wait_timeout=params["wait_timeout"],
            wait_sleep=params["wait_sleep"],
            check_mode=check_mode,
            workload=workload,
        )


def not_deleting_message(machine: dict) -> str:
    return (
        f"Machine {machine_label(machine)} is not being deleted: machine_replacement gives a Machine whose deletion started its"
        " replacement (a preDrain hook's work); to replace one first and then delete it, use machine_delete with replacement: first"
    )
