# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The replacement of the Machines ``machine_delete`` deletes (``replacement``:
``none`` or ``first``; docs/delete_machine.md): the task's look at every owner
before anything changes (:class:`ReplacementPlan`: the refusals, and which
Machines are already under way), then, per Machine, what comes before its
deletion request (:class:`Replacing`): the surge and the wait for the new
Machine's Ready Node, the delete annotation and the owner's replicas lowered,
and after it is gone, the owner's record tidied.

Every write of the owner is one merge patch guarded by the resourceVersion it
was built from; a conflict reads the owner again and builds it again from what
it then says (a surge already recorded for the Machine is not made twice).
Each step starts from what the owner's record and the Machine say, so a run
stopped anywhere goes on where it stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import get_machine, machine_api_versions, require_namespace
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for, is_deleting
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.api import annotate_machine, owner_recording, patch_owner, read_owner
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.logic import (
    AFTER,
    DELETE_ANNOTATION_VALUE,
    FIRST,
    NONE,
    REPLACE,
    REPLACEMENT_READY,
    SCALED_DOWN,
    SURGED,
    Entry,
    Owner,
    ReplacementRequest,
    after_message,
    controller_of,
    not_deleting_message,
    orphaned_surges,
    owner_patch,
    plan_message,
    refusal,
    rival_of,
    self_replacing,
    settled,
    with_entry,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.waits import Awaited, look, wait_for_replacement
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.api import node_api
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import WorkloadSettings

CONFLICT_RETRIES = 10


@dataclass(frozen=True)
class ReplaceSettings:
    """What the task asks of the replacements."""

    mode: str = AFTER
    timeout: int = 1800
    concurrency: int = 1
    check_mode: bool = False
    wait_sleep: int = 2
    workload: WorkloadSettings = field(default_factory=WorkloadSettings)


def key_of(machine: dict) -> str:
    meta = machine.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def owner_key(owner: Owner) -> str:
    return f"{owner.label}"


# ---------------------------------------------------------------------------
# The task's look before any change


class Slots:
    """How many Machines of the task are replaced (or removed) at a time: a Machine already under way (its owner's
    record holds it, or it is being deleted) holds its slot; the others take one in the task's order once one is
    free. A Machine waits for its slot only while a holder still runs in this call (nothing else frees one); a
    failure stops the roll: the Machines not yet started are not started."""

    def __init__(self, concurrency: int, order: list[str], started: set[str]):
        self.concurrency = max(1, concurrency)
        self.holders = set(started)
        self.queue = [key for key in order if key not in started]
        self.running: set[str] = set()
        self.stopped: str | None = None
        self._lock = threading.Condition()

    def enter(self, key: str) -> None:
        with self._lock:
            self.running.add(key)

    def leave(self, key: str) -> None:
        with self._lock:
            self.running.discard(key)
            self._lock.notify_all()

    def take(self, key: str, api: KubeApi, until: float | None) -> bool:
        """Wait for ``key``'s turn (until the instant ``until`` on the transport's clock; None: as long as a holder runs)."""
        with self._lock:
            while True:
                if key in self.holders:
                    return True
                if self.stopped is not None:
                    raise MachineError(self.waiting_message())
                ahead = self.queue[: self.queue.index(key)] if key in self.queue else []
                if not ahead and len(self.holders) < self.concurrency:
                    self.holders.add(key)
                    self.queue.remove(key)
                    self._lock.notify_all()
                    return True
                left = None if until is None else until - api.monotonic()
                if (left is not None and left <= 0) or api.cancelled or not self.running & (self.holders | set(ahead)):
                    return False
                self._lock.wait(timeout=min(left, 1.0) if left is not None else 1.0)

    def done(self, key: str) -> None:
        with self._lock:
            self.holders.discard(key)
            if key in self.queue:
                self.queue.remove(key)
            self._lock.notify_all()

    def failed(self, key: str) -> None:
        with self._lock:
            self.stopped = self.stopped or key
            if key in self.queue:
                self.queue.remove(key)
            self._lock.notify_all()

    def waiting_message(self) -> str:
        if self.stopped is not None:
            return f"not started: the roll stops at the first failure ({self.stopped} failed); fix it and run again"
        return f"queued: {len(self.holders)} of {self.concurrency} replacements under way (concurrency {self.concurrency})"


class ReplacementPlan:
    """The task's Machines and their owners, read once before any change: what each mode would do, and why it
    cannot when it cannot (every refusal of the task in one failure, nothing changed)."""

    def __init__(self, api: KubeApi, settings: ReplaceSettings, machines: list[dict]):
        self.api = api
        self.settings = settings
        self.entries = machines
        self.owners: dict[str, Owner | None] = {}
        self.machines: dict[str, dict | None] = {}
        self.slots = Slots(settings.concurrency, [f"{m['namespace']}/{m['name']}" for m in machines], set())
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def lock(self, owner: Owner) -> threading.Lock:
        """One lowering of an owner's replicas at a time in this task, each with its delete annotation and deletion request."""
        with self._guard:
            return self._locks.setdefault(owner_key(owner), threading.Lock())

    def read(self) -> None:
        """Read every Machine and its owner; fail naming each Machine that cannot be done safely."""
        by_owner = self._read_all()
        chosen = {entry["name"] for entry in self.entries}
        started, errors = set(), []
        for entry in self.entries:
            key = f"{entry['namespace']}/{entry['name']}"
            machine, owner = self.machines.get(key), self.owners.get(key)
            if machine is None:
                continue
            reason = self_replacing(machine, flavour_for(machine)) or self._refusal(machine, owner, by_owner, chosen)
            if reason:
                errors.append(reason)
            if (owner is not None and machine["metadata"]["name"] in owner.record.entries) or is_deleting(machine):
                started.add(key)
        if errors:
            heading = f"replacement: {self.settings.mode} cannot be done safely for {len(errors)} of the Machines; nothing was changed"
            raise MachineError(heading + ":\n" + "\n".join(f"- {error}" for error in errors))
        self.slots = Slots(self.settings.concurrency, [f"{m['namespace']}/{m['name']}" for m in self.entries], started)

    def _read_all(self) -> dict[str, list[str]]:
        """Each Machine and its owner (each owner read once); the task's Machines by owner."""
        by_owner: dict[str, list[str]] = {}
        owners_read: dict[tuple[str, str, str], Owner | None] = {}
        for entry in self.entries:
            key = f"{entry['namespace']}/{entry['name']}"
            machine = get_machine(self.api, entry["namespace"], entry["name"], entry.get("api_version"))
            self.machines[key] = machine
            if machine is None or self_replacing(machine, flavour_for(machine)):
                self.owners[key] = None
                continue
            ref = controller_of(machine)
            cache_key = (entry["namespace"], machine["apiVersion"], ref.name if ref is not None else "")
            if ref is None or cache_key not in owners_read:
                owners_read[cache_key] = read_owner(self.api, machine, flavour_for(machine))
            owner = self.owners[key] = owners_read[cache_key]
            if owner is not None:
                by_owner.setdefault(owner_key(owner), []).append(key)
        return by_owner

    def _refusal(self, machine: dict, owner: Owner | None, by_owner: dict[str, list[str]], chosen: set[str]) -> str | None:
        """Why this Machine's mode cannot be carried out, counting the task's other Machines of the same owner."""
        if owner is None:
            return refusal(self.settings.mode, machine, None)
        pending = sum(1 for key in by_owner.get(owner_key(owner), []) if key.partition("/")[2] not in owner.record.entries)
        reason = refusal(self.settings.mode, machine, owner, removing=pending, surging=min(self.settings.concurrency, max(1, pending)))
        if reason is None and machine["metadata"]["name"] not in owner.record.entries:
            reason = rival_of(machine, owner, chosen)
        return reason

    def started(self, key: str) -> bool:
        return key in self.slots.holders


# ---------------------------------------------------------------------------
# One Machine


@dataclass
class ReplacementState:
    """Where one Machine's replacement stands, for its outcome."""

    mode: str
    owner: str | None = None
    step: str = ""
    message: str = ""
    replacement: str | None = None
    replicas: dict = field(default_factory=dict)
    changed: bool = False

    def as_dict(self) -> dict:
        return {
            "mode": self.mode,
            "owner": self.owner,
            "step": self.step,
            "message": self.message,
            "replacement": self.replacement,
            **({"replicas": dict(self.replicas)} if self.replicas else {}),
        }


class Replacing:
    """What comes before one Machine's deletion request, and after it is gone."""

    def __init__(self, api: KubeApi, plan: ReplacementPlan, key: str, clock: dict):
        self.api = api
        self.plan = plan
        self.settings = plan.settings
        self.key = key
        self.clock = clock
        self.state = ReplacementState(plan.settings.mode)
        self.owner: Owner | None = plan.owners.get(key)
        self.name = key.partition("/")[2]

    # -- what the orchestrator calls -------------------------------------------
    def prepare(self, machine: dict, mark: Callable[[dict], dict | None], until: float | None) -> tuple[bool, dict | None]:
        """Before the Machine's deletion request: (whether the deletion goes on in this call, the Machine after -
        as ``mark`` left it when this marked it, else as read). False: this call stops here, the state says why."""
        flavour = flavour_for(machine)
        if self.settings.mode == AFTER:
            self.state.message = after_message(machine, flavour)
            return True, machine
        owner = self.owner if self.owner is not None else self._read(machine)
        self.owner = None  # the plan's read serves once: every later step reads the owner again
        if owner is None:
            self.state.step, self.state.message = "none", "it has no owner: deleting it removes it for good"
            return True, machine
        self.state.owner = owner.label
        if self.settings.check_mode:
            self.state.step, self.state.message = "planned", plan_message(self.settings.mode, owner, machine)
            self.state.replicas = {"before": owner.replicas, "after": owner.replicas - (1 if self.settings.mode == NONE else 0)}
            return True, machine
        return self._steps(owner, machine, mark, until)

    def _steps(self, owner: Owner, machine: dict, mark: Callable[[dict], dict | None], until: float | None) -> tuple[bool, dict | None]:
        """From where the owner's record and the Machine stand: the surge and the wait (``first``), the replicas lowered."""
        if self.name not in owner.record.entries and not self._slot(until):
            return False, machine
        owner = self._tidy(owner, machine, {self.name})
        if self.settings.mode == FIRST:
            replaced = self._replaced_first(owner, machine, until)
            if replaced is None:
                return False, machine
            owner = replaced
        entry = owner.record.entries.get(self.name)
        if entry is None and self.settings.mode == FIRST:
            # Its deletion started and its owner no longer counts it (OpenShift): the replacement it made was
            # waited for; the replicas were never raised, so there is nothing to bring back.
            self.state.step, self.state.message = "deleting", f"{owner.label} replaced it; its deletion goes on"
            return True, machine
        if entry is None or entry.step == SURGED:
            return self._scale_down(owner, machine, mark)
        self.state.step, self.state.replacement = "deleting", entry.replacement
        self.state.message = f"{owner.label}'s replicas were lowered for it; its deletion goes on"
        return True, machine

    def _replaced_first(self, owner: Owner, machine: dict, until: float | None) -> Owner | None:
        """The surge (unless the owner replaces the Machine by itself) and the wait for the replacement's Ready Node;
        the owner as last read once the replacement is Ready, None while it is not (the state says why)."""
        entry = owner.record.entries.get(self.name)
        if entry is None and (owner.flavour.machine_set_counts_deleting or not is_deleting(machine)):
            owner = self._surge(owner, machine)
            entry = owner.record.entries.get(self.name)
        if entry is not None and entry.step == SCALED_DOWN:
            return owner
        awaited = self._await(owner, machine, until)
        return awaited.owner if awaited.replacement is not None else None

    def gone(self) -> None:
        """The Machine is gone: the owner's record keeps what still needs keeping (docs/delete_machine.md)."""
        if self.settings.mode == AFTER or self.settings.check_mode:
            return
        self.plan.slots.done(self.key)
        machine = self.plan.machines.get(self.key) or self._stand_in()
        if machine is None:
            return
        try:
            owner = read_owner(self.api, machine, flavour_for(machine))
        except (MachineError, ApiError):
            return  # the record stays; the next run on this owner tidies it
        if owner is not None and self.name in owner.record.entries:
            with self.plan.lock(owner):
                self._tidy(owner, machine, set())

    def _stand_in(self) -> dict | None:
        """For a Machine gone before this call read it: the Machine as its owner's record names it (an owner reference to
        the MachineSet that holds it, or to one of the MachineDeployment's that does), None when no owner records it."""
        namespace, name = self.key.partition("/")[0], self.name
        entry = next((e for e in self.plan.entries if e["name"] == name and e["namespace"] == namespace), {})
        for api_version in machine_api_versions(self.api, entry.get("api_version")):
            found = owner_recording(self.api, flavour_for(api_version), namespace, name)
            if found is not None:
                return {"apiVersion": api_version, "kind": "Machine", "metadata": {"name": name, "namespace": namespace, "ownerReferences": [found]}}
        return None

    def failed(self) -> None:
        if self.settings.mode != AFTER:
            self.plan.slots.failed(self.key)

    def begin(self) -> None:
        """This call works on the Machine (its slot, when it holds one, may be freed in it)."""
        self.plan.slots.enter(self.key)

    def end(self) -> None:
        self.plan.slots.leave(self.key)

    # -- steps -------------------------------------------------------------------
    def _tidy(self, owner: Owner, machine: dict, present: set[str]) -> Owner:
        """Bring back the replicas of surges whose Machine someone else deleted (``logic.orphaned_surges``) and drop
        the entries that need no keeping (``logic.settled``), in one guarded write; ``present``: Machines to count as
        there besides the owner's (the one this call works on)."""

        def build(current: Owner) -> dict | None:
            there = {m["metadata"]["name"] for m in current.machines} | present
            record, orphans = current.record, orphaned_surges(current.record, there)
            for name in orphans:
                entry = record.entries[name]
                record = with_entry(record, name, Entry(entry.mode, SCALED_DOWN, entry.seq, entry.since, entry.replacement), current.machines)
            record = settled(record, there)
            if record == current.record:
                return None
            return owner_patch(current.obj, record, current.replicas - len(orphans) if orphans else None)

        return self._update(owner, machine, build)

    def _read(self, machine: dict) -> Owner | None:
        return read_owner(self.api, machine, flavour_for(machine))

    def _slot(self, until: float | None) -> bool:
        if self.plan.slots.take(self.key, self.api, until):
            return True
        self.state.step, self.state.message = "queued", self.plan.slots.waiting_message()
        return False

    def _update(self, owner: Owner, machine: dict, build: Callable[[Owner], dict | None]) -> Owner:
        """One guarded write of the owner, built from it as read; on a conflict it is read again and the write built again."""
        current = owner
        for _attempt in range(CONFLICT_RETRIES):
            patch = build(current)
            if patch is None:
                return current
            try:
                written = patch_owner(self.api, current, patch)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                fresh = self._read(machine)
                if fresh is None:
                    raise MachineError(f"{owner.label} is no longer the owner of Machine {self.key}") from None
                current = fresh
                self.api.sleep(0.05)
                continue
            self.state.changed = True
            machine_set = written if current.kind == "MachineSet" else current.machine_set
            return Owner(current.kind, written, machine_set, current.flavour, current.machines, current.active_sets, current.cluster)
        raise MachineError(f"{owner.label} kept changing; gave up after {CONFLICT_RETRIES} conflicting updates")

    def _surge(self, owner: Owner, machine: dict) -> Owner:
        """Raise the owner's replicas by one for this Machine, the record saying so, in one guarded write."""
        since = time.time()

        def build(current: Owner) -> dict | None:
            if self.name in current.record.entries:
                return None  # an earlier attempt's surge landed
            record = with_entry(current.record, self.name, Entry(FIRST, SURGED, current.record.next_seq(), since), current.machines)
            return owner_patch(current.obj, record, current.replicas + 1)

        before = owner.replicas
        owner = self._update(owner, machine, build)
        self.state.replicas = {"before": before, "surged": owner.replicas}
        self.clock.setdefault(self.key, {}).setdefault(REPLACE, since)
        return owner

    def _await(self, owner: Owner, machine: dict, until: float | None) -> Awaited:
        """Wait for the Machine's replacement to have a Ready Node, within this call and the phase's budget."""
        started = self.clock.setdefault(self.key, {}).setdefault(REPLACE, time.time())
        budget_end = self.api.monotonic() + max(0.0, self.settings.timeout - (time.time() - started))
        end = min(budget_end, until) if until is not None else budget_end
        flavour = flavour_for(machine)

        def read() -> Owner:
            # Each look reads the owner and its Machines only: what the refusals need was read before the surge.
            fresh = read_owner(self.api, machine, flavour, full=False)
            if fresh is None:
                raise MachineError(f"Machine {self.key} no longer has an owner to replace it")
            return fresh

        def node_side(candidate: dict):
            return node_api(self.api, candidate, self.settings.workload, flavour)

        if end <= self.api.monotonic():
            awaited = look(owner, self.name, node_side)
        else:
            awaited = wait_for_replacement(self.api, read, self.name, node_side, deadline=end, pause=self.settings.wait_sleep)
        self.state.step = "awaiting_replacement"
        if awaited.replacement is not None:
            self.state.replacement = awaited.replacement
            self.clock[self.key].setdefault(REPLACEMENT_READY, time.time())
            return awaited
        seen = f"new Machines {', '.join(awaited.seen)}, none with a Ready Node yet" if awaited.seen else "no new Machine yet"
        self.state.message = f"waiting for the replacement: {awaited.owner.label} has {awaited.owner.replicas} replicas, {seen}"
        if until is None or budget_end <= until:  # this call waited to the end of the budget, not of a progress round
            raise MachineError(
                f"Timed out after {self.settings.timeout} s waiting for the replacement of Machine {self.key}: {awaited.owner.label},"
                f" {seen}; the surge stays (the owner's record holds it): run again to go on waiting, or see docs/stalls.md"
            )
        return awaited

    def _scale_down(self, owner: Owner, machine: dict, mark: Callable[[dict], dict | None]) -> tuple[bool, dict | None]:
        """The delete annotation on the Machine, the owner's replicas lowered by one for it (the record saying so),
        and its deletion request, one owner at a time: the owner's delete policy picks exactly this Machine."""
        with self.plan.lock(owner):
            fresh = self._read(machine) or owner
            rival = rival_of(machine, fresh, {entry["name"] for entry in self.plan.entries})
            if rival is not None:
                raise MachineError(rival + ("; the surge stays (the owner's record holds it)" if self.name in fresh.record.entries else ""))
            if not is_deleting(machine):
                machine = annotate_machine(self.api, machine, fresh.flavour.delete_machine_annotation, DELETE_ANNOTATION_VALUE)
                self.state.changed = True
            since = (fresh.record.entries.get(self.name) or Entry(NONE, SCALED_DOWN, 0)).since

            def build(current: Owner) -> dict | None:
                entry = current.record.entries.get(self.name)
                if entry is not None and entry.step == SCALED_DOWN:
                    return None
                mode = FIRST if entry is not None else NONE
                seq = entry.seq if entry else current.record.next_seq()
                done = Entry(mode, SCALED_DOWN, seq, since, self.state.replacement)
                record = with_entry(current.record, self.name, done, current.machines)
                return owner_patch(current.obj, record, current.replicas - 1)

            before = fresh.replicas
            after = self._update(fresh, machine, build)
            self.state.replicas = {**self.state.replicas, "lowered_from": before, "to": after.replicas}
            self.state.step = "deleting"
            self.state.message = f"{after.label}'s replicas lowered {before} -> {after.replicas} with {fresh.flavour.delete_machine_annotation} on it"
            return True, mark(machine)


def ensure_replacement(api: KubeApi, request: ReplacementRequest) -> dict:
    """machine_replacement: a Machine whose deletion started gets a Ready replacement before its drain - the replacement
    its owner makes at once (OpenShift, which no longer counts it), or one the owner is surged for and then brought back
    from (Cluster API, which would replace it only once it is gone; the Machine being deleted is the one it then
    removes). The module result; MachineError when it cannot be done safely or the wait timed out."""
    api = api.fork(deadline=None if request.check_mode else api.monotonic() + request.wait_timeout + 30)
    machine = get_machine(api, request.namespace, request.machine, request.api_version)
    entry = {"name": request.machine, "namespace": request.namespace, "api_version": request.api_version}
    if machine is None:
        require_namespace(api, request.namespace)
        return {"changed": False, "machine": {**entry, "exists": False}, "replacement": None, "message": "the Machine is gone"}
    if not is_deleting(machine):
        raise MachineError(not_deleting_message(machine))
    settings = ReplaceSettings(FIRST, request.wait_timeout, 1, request.check_mode, request.wait_sleep, request.workload)
    plan = ReplacementPlan(api, settings, [{**entry, "api_version": machine["apiVersion"]}])
    plan.read()
    key = f"{request.namespace}/{request.machine}"
    replacing = Replacing(api, plan, key, {})
    began = api.monotonic()
    replacing.begin()
    try:
        go_on, _machine = replacing.prepare(machine, lambda current: current, api.monotonic() + request.wait_timeout)
    finally:
        replacing.end()
    state = replacing.state.as_dict()
    if not go_on:
        raise MachineError(
            f"Timed out after {request.wait_timeout} s waiting for the replacement of Machine {key}: {replacing.state.message}", replacement=state
        )
    return {
        "changed": replacing.state.changed,
        "machine": {**entry, "api_version": machine["apiVersion"], "exists": True},
        "replacement": state,
        "waited": round(api.monotonic() - began, 1),
    }
