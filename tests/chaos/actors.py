"""The other components of the cluster, acting while the run deletes the Machines.

One thread (``Actors``) plays every owner the deletion waits for:

- the hook-implementing controllers: each hook of the scenario is removed by its
  owner at its time (``release="time"``: seconds after the run started) or a
  while after its Machine reached the hook's gate (``release="gate"``: the
  deletion started, for preDrain; the Node drained, for preTerminate). Every
  removal goes straight to the API server (never through the fault proxy) with a
  User-Agent naming the hook, ``lm-chaos-hooks/<machine>/<point>/<hook>``, so the
  audit log shows it, and its resourceVersion is kept: a hook may disappear from
  a Machine only in a write the controller made (invariant I4);
- the infrastructure provider: an object holding ``INFRA_FINALIZER`` loses it a
  few seconds after its deletion started;
- the owners of WaitCompleted Pods: such a Pod "completes" (is deleted, with
  the User-Agent ``lm-chaos``) at its time.

Hooks are released by ``HOOK_DEADLINE`` seconds at the latest, whatever the run
did, so every run can end.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any

from scenario import EXPECT_LABEL, Hook, Scenario
from world import BOOTSTRAP, HOOK_PREFIX, INFRA, INFRA_FINALIZER, World, hooks_of

HOOK_DEADLINE = 60.0
TICK = 0.2


@dataclass(frozen=True)
class Removal:
    """A hook removed by its owner: the Machine's resourceVersion after the write, and the audit User-Agent."""

    machine: str
    point: str
    name: str
    owner: str
    rv: int
    user_agent: str
    at: float  # time.monotonic() after the answer


class Actors(threading.Thread):
    def __init__(self, world: World, api: Any, make_api, started: float):
        super().__init__(name=f"chaos-actors-{world.s.run_id}", daemon=True)
        self.world = world
        self.s: Scenario = world.s
        self.api = api  # straight to the API server, User-Agent lm-chaos
        self.make_api = make_api  # user_agent -> KubeApi, one per hook removal
        self.started = started
        self.removals: list[Removal] = []
        self.completed: set[str] = set()  # WaitCompleted Pods whose owner deleted them
        self.errors: list[str] = []
        self._pending = list(self.s.hooks)
        self._gates: dict[tuple[int, str], float] = {}  # (machine, point) -> when the gate was reached
        self._infra_deleting: dict[str, float] = {}
        self._halted = threading.Event()

    def halt(self) -> None:
        self._halted.set()

    def run(self) -> None:
        failures = 0
        while not self._halted.wait(TICK):
            try:
                self._tick()
                failures = 0
            except Exception as exc:  # the API is straight, not faulted: report it, keep going a while
                failures += 1
                self.errors.append(f"{type(exc).__name__}: {exc}")
                if failures > 25:
                    return

    def _tick(self) -> None:
        now = time.monotonic()
        elapsed = now - self.started
        machines = {i: self.api.get(self.world.machine_path(i)) for i in range(self.s.machines)} if self._pending else {}
        pods = self.api.list(self.world.pods_path) if self._pending or self._waiting_pods(elapsed) else []
        for index, machine in machines.items():
            self._note_gates(index, machine, pods, now)
        for hook in list(self._pending):
            if self._due(hook, elapsed, now):
                self._remove(hook, machines.get(hook.machine))
                self._pending.remove(hook)
        self._complete_pods(pods, elapsed)
        self._release_infra(now)

    def _waiting_pods(self, elapsed: float) -> bool:
        return any(w.expect == "wait" and w.name not in self.completed and elapsed >= w.complete_after for w in self.s.workloads)

    def _note_gates(self, index: int, machine: dict | None, pods: list[dict], now: float) -> None:
        if machine is None or not (machine.get("metadata") or {}).get("deletionTimestamp"):
            return
        self._gates.setdefault((index, "preDrain"), now)
        node = self.s.node_name(index)
        drained = not any(
            p["spec"].get("nodeName") == node and (p["metadata"].get("labels") or {}).get(EXPECT_LABEL) in ("drain", "wait") for p in pods
        ) and not any(point == "preDrain" for point, _n, _o in hooks_of(self.s.flavour, machine))
        if drained:
            self._gates.setdefault((index, "preTerminate"), now)

    def _due(self, hook: Hook, elapsed: float, now: float) -> bool:
        if elapsed >= HOOK_DEADLINE:
            return True
        if hook.release == "time":
            return elapsed >= hook.delay
        reached = self._gates.get((hook.machine, hook.point))
        return reached is not None and now - reached >= hook.delay

    def _remove(self, hook: Hook, machine: dict | None) -> None:
        if machine is None:
            return
        name = self.s.machine_name(hook.machine)
        user_agent = f"lm-chaos-hooks/{name}/{hook.point}/{hook.name}"
        api = self.make_api(user_agent)
        path = self.world.machine_path(hook.machine)
        for _attempt in range(20):
            current = api.get(path)
            if current is None or (hook.point, hook.name, hook.owner) not in hooks_of(self.s.flavour, current):
                return
            try:
                written = api.patch(path, self._removal_patch(hook, current))
            except Exception as exc:  # a conflict with the run's own writes: read again
                if getattr(exc, "status", None) != 409:
                    raise
                continue
            self.removals.append(Removal(name, hook.point, hook.name, hook.owner, int(written["metadata"]["resourceVersion"]), user_agent, time.monotonic()))
            return
        self.errors.append(f"could not remove {hook.point} hook {hook.name} from {name}: conflicts")

    def _removal_patch(self, hook: Hook, machine: dict) -> dict:
        if self.s.capi:
            return {"metadata": {"annotations": {f"{HOOK_PREFIX[hook.point]}/{hook.name}": None}}}
        # OpenShift keeps hooks in a list: write it whole, guarded by the resourceVersion.
        kept = [h for h in machine["spec"]["lifecycleHooks"].get(hook.point) or [] if h.get("name") != hook.name]
        return {"metadata": {"resourceVersion": machine["metadata"]["resourceVersion"]}, "spec": {"lifecycleHooks": {hook.point: kept or None}}}

    def _complete_pods(self, pods: list[dict], elapsed: float) -> None:
        due = {w.name for w in self.s.workloads if w.expect == "wait" and w.name not in self.completed and elapsed >= w.complete_after}
        for pod in pods:
            name = pod["metadata"]["name"]
            if name in due:
                self.api.delete(f"{self.world.pods_path}/{name}", {"gracePeriodSeconds": 0})
                self.completed.add(name)
        self.completed |= due  # already gone: nothing to complete

    def _release_infra(self, now: float) -> None:
        paths = []
        for index, delay in enumerate(self.s.infra_finalizer):
            if delay is None:
                continue
            name = self.s.machine_name(index)
            if self.s.capi:
                paths += [(self.world.fake_path(INFRA, name), delay), (self.world.fake_path(BOOTSTRAP, name), delay)]
            else:
                paths.append((f"{self.world.configmaps_path}/instance-{name}", delay))
        for path, delay in paths:
            if path in self._infra_deleting and self._infra_deleting[path] < 0:
                continue  # released
            obj = self.api.get(path)
            if obj is None or not obj["metadata"].get("deletionTimestamp"):
                continue
            first = self._infra_deleting.setdefault(path, now)
            if now - first >= delay:
                kept = [f for f in obj["metadata"].get("finalizers") or [] if f != INFRA_FINALIZER]
                with contextlib.suppress(Exception):
                    self.api.patch(path, {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"], "finalizers": kept or None}})
                    self._infra_deleting[path] = -1.0

    @property
    def hooks_left(self) -> list[Hook]:
        return list(self._pending)
