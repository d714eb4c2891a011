"""One chaos run, drawn from a seed: which Machines, workloads, hooks, faults and kills.

Pure: ``Scenario.draw(seed)`` uses only ``random.Random(seed)``, so a seed names
one run exactly (the timing of the real control plane aside) and ``--replay SEED``
runs it again.
"""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass, field

FLAVOURS = ("openshift", "v1beta1", "v1beta2")
RUN_LABEL = "chaos.lifecycle.machine.dev/run"
CLASS_LABEL = "chaos.lifecycle.machine.dev/class"  # which drain rule picks a Pod
EXPECT_LABEL = "chaos.lifecycle.machine.dev/expect"  # what the drain must do with it: drain, wait or skip
DRAIN_LABEL = "cluster.x-k8s.io/drain"  # the Pod label of docs/machine_drain.md: skip / wait-completed

# The MachineDrainRules of every run (docs/machine_drain.md): by Pod class.
RULES = {
    "early": {"behavior": "Drain", "order": -10},
    "late": {"behavior": "Drain", "order": 100},
    "wait": {"behavior": "WaitCompleted"},
    "skip": {"behavior": "Skip"},
}
OWN_OWNER = "chaos-controller"
OTHER_OWNER = "other-team/quorum-guard"
HOOK_NAMES = {"preDrain": ("backup", "migrate-app"), "preTerminate": ("flush-logs", "detach-storage")}
MAX_ATTEMPTS = 8
KILLED_ATTEMPTS = 4  # attempts after these are never killed, so every run ends


@dataclass(frozen=True)
class Workload:
    """Pods on one Machine's Node (``machine`` is its index; None: a DaemonSet on every Node of the run)."""

    kind: str  # deployment, pod, daemonset
    name: str
    machine: int | None
    expect: str  # drain, wait, skip
    replicas: int = 1
    grace: int = 1
    budget: bool = False
    labels: dict = field(default_factory=dict)
    complete_after: float = 0.0  # wait Pods: when their owner deletes them (seconds after the run starts)


@dataclass(frozen=True)
class Hook:
    machine: int
    point: str  # preDrain, preTerminate
    name: str
    owner: str
    release: str  # "time": at ``delay`` seconds after the run starts; "gate": ``delay`` seconds after the Machine reaches the gate
    delay: float


@dataclass(frozen=True)
class Kill:
    after: float  # seconds after the attempt started
    signum: int

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name


@dataclass(frozen=True)
class Scenario:
    seed: int
    flavour: str
    machines: int
    workloads: tuple[Workload, ...]
    hooks: tuple[Hook, ...]
    cluster_rules: tuple[str, ...]  # Cluster API: rule classes created as MachineDrainRule objects
    inline_rules: tuple[str, ...]  # rule classes given to the run (drain_rules)
    infra_finalizer: tuple[float | None, ...]  # per Machine: seconds the infrastructure's owner holds its deletion, None: no finalizer
    fault_rate: float
    fault_delay: float
    kills: tuple[Kill | None, ...]  # per attempt

    @property
    def run_id(self) -> str:
        return f"chaos-{self.seed:08x}"

    @property
    def namespace(self) -> str:
        return self.run_id

    def machine_name(self, index: int) -> str:
        return f"{self.run_id}-m{index}"

    def node_name(self, index: int) -> str:
        return f"{self.run_id}-n{index}"

    @property
    def spare_node(self) -> str:
        return f"{self.run_id}-spare"

    @property
    def capi(self) -> bool:
        return self.flavour != "openshift"

    def describe(self) -> str:
        hooks = ", ".join(f"m{h.machine}:{h.point}/{h.name}({'other' if h.owner == OTHER_OWNER else 'own'},{h.release}+{h.delay:.0f}s)" for h in self.hooks)
        pods = ", ".join(f"{w.name}:{w.expect}" + (f"x{w.replicas}" if w.replicas > 1 else "") + ("+pdb" if w.budget else "") for w in self.workloads)
        kills = ", ".join(f"{k.signal_name}@{k.after:.1f}s" if k else "-" for k in self.kills[:KILLED_ATTEMPTS])
        return (
            f"seed {self.seed} ({self.run_id}): {self.flavour}, {self.machines} Machine(s); faults {self.fault_rate:.0%}; "
            f"rules cluster={list(self.cluster_rules)} inline={list(self.inline_rules)}; workloads {pods}; hooks {hooks or 'none'}; kills {kills}"
        )

    @classmethod
    def draw(cls, seed: int) -> Scenario:
        rng = random.Random(seed)
        flavour = rng.choice(FLAVOURS)
        machines = rng.choice((1, 1, 2, 2, 3))
        workloads = _draw_workloads(rng, machines)
        hooks = _draw_hooks(rng, machines)
        if flavour == "openshift":
            cluster_rules: tuple[str, ...] = ()
            inline_rules = tuple(RULES)
        else:
            placed = {name: rng.choice(("cluster", "inline", "both")) for name in RULES}
            cluster_rules = tuple(name for name, where in placed.items() if where in ("cluster", "both"))
            inline_rules = tuple(name for name, where in placed.items() if where in ("inline", "both"))
        infra = tuple(round(rng.uniform(0, 4), 1) if rng.random() < 0.5 else None for _machine in range(machines))
        fault_rate = 0.0 if rng.random() < 0.15 else round(rng.uniform(0.0, 0.2), 3)
        fault_delay = round(rng.uniform(0.2, 1.0), 2)
        kills = tuple(
            Kill(round(rng.uniform(0.5, 25.0), 1), rng.choice((signal.SIGKILL, signal.SIGINT))) if attempt < KILLED_ATTEMPTS and rng.random() < 0.6 else None
            for attempt in range(MAX_ATTEMPTS)
        )
        return cls(seed, flavour, machines, workloads, hooks, cluster_rules, inline_rules, infra, fault_rate, fault_delay, kills)


def _draw_workloads(rng: random.Random, machines: int) -> tuple[Workload, ...]:
    workloads = []
    for index in range(machines):
        for number in range(rng.randint(1, 4)):
            name = f"w{index}-{number}"
            grace = rng.choice((0, 1, 1, 2, 3))
            pick = rng.choice(("deployment", "deployment", "drain-pod", "wait-pod", "skip-pod"))
            if pick == "deployment":
                replicas = rng.randint(1, 3)
                labels = _drain_class(rng)
                workloads.append(Workload("deployment", name, index, "drain", replicas, grace, rng.random() < 0.8, labels))
            elif pick == "drain-pod":
                workloads.append(Workload("pod", name, index, "drain", grace=grace, labels=_drain_class(rng)))
            elif pick == "wait-pod":
                labels = {DRAIN_LABEL: "wait-completed"} if rng.random() < 0.5 else {CLASS_LABEL: "wait"}
                workloads.append(Workload("pod", name, index, "wait", grace=grace, labels=labels, complete_after=round(rng.uniform(1, 25), 1)))
            else:
                labels = {DRAIN_LABEL: "skip"} if rng.random() < 0.5 else {CLASS_LABEL: "skip"}
                workloads.append(Workload("pod", name, index, "skip", grace=grace, labels=labels))
    if rng.random() < 0.6:
        workloads.append(Workload("daemonset", "agent", None, "skip", grace=rng.choice((0, 1))))
    return tuple(workloads)


def _drain_class(rng: random.Random) -> dict:
    choice = rng.choice((None, None, "early", "late"))
    return {CLASS_LABEL: choice} if choice else {}


def _draw_hooks(rng: random.Random, machines: int) -> tuple[Hook, ...]:
    hooks = []
    for index in range(machines):
        for point in ("preDrain", "preTerminate"):
            count = rng.choice((0, 0, 1, 1, 2))
            for name in HOOK_NAMES[point][:count]:
                owner = rng.choice((OWN_OWNER, OTHER_OWNER))
                if rng.random() < 0.5:
                    hooks.append(Hook(index, point, name, owner, "time", round(rng.uniform(0, 20), 1)))
                else:
                    hooks.append(Hook(index, point, name, owner, "gate", round(rng.uniform(0, 6), 1)))
    if hooks and rng.random() < 0.8 and not any(h.owner == OTHER_OWNER for h in hooks):
        first = hooks[0]
        hooks[0] = Hook(first.machine, first.point, first.name, OTHER_OWNER, first.release, first.delay)
    return tuple(hooks)


def run_seeds(seed: int, runs: int) -> list[int]:
    """The seed of each run of a soak started with ``seed``."""
    rng = random.Random(seed)
    return [rng.getrandbits(32) for _run in range(runs)]
