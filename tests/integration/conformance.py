"""Differential conformance: the same Node, Pods, budgets and rules drained by a
real machine controller and by the collection, side by side, then compared.

Each scenario builds two identical Machines in the same control planes: the
*real* one, which the real controller deletes, and its *twin*, which the
collection's ``machine_delete`` module deletes. For Cluster API the twin lives
under a Cluster without the watch-filter label, so the manager never touches it
(docs/controllers.md, "Known traps"); for OpenShift it lives in a namespace the
controller does not watch. Both sides are followed by a watch on the Machines
(the status subresource is not audited) and by polling their Nodes, and read back
from the audit logs (evictions, Node deletions) and the Events, then reduced to an
*observation* with times, names and namespaces normalised, so the two observations
compare key by key.

The tests in test_conformance.py declare, per scenario, the keys on which the two
sides differ on purpose (``expected``) or may differ with timing (``tolerated``),
each with the reason (docs/behaviour.md, "Side by side with the real controllers");
any other difference, or an expected one that went away, fails.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import controllers
import realctl
from conftest import read_audit_log, run_module_with
from khelpers import fake_node, node_ready, pod_is_ready, wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

SCENARIO_LABEL = "conformance.lifecycle.machine.dev/scenario"
REAL_CLUSTER, TWIN_CLUSTER = "real", "twin"
CAPI_AGENT = "cluster-api-controller-manager"
MAPI_AGENT = "mapi-controller"
POLL = 0.25
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
# Deleting reasons a deletion stays in for a while; the others (NotDeleting,
# WaitingForInfrastructureDeletion, DeletionCompleted) last one status write and
# are seen or missed by chance.
HELD_REASONS = ("WaitingForPreDrainHook", "DrainingNode", "WaitingForVolumeDetach", "WaitingForPreTerminateHook", "DeletingNode")


def normalise(text: str, side: Side) -> str:
    """``text`` with times, and the side's own names, replaced by placeholders."""
    text = RFC3339.sub("<time>", text or "")
    for value, placeholder in ((side.pod_namespace, "<ns>"), (side.node, "<node>"), (side.machine, "<machine>")):
        text = re.sub(rf"\b{re.escape(value)}\b", placeholder, text)
    return text


@dataclass
class Side:
    """One of the two Machines of a scenario and what was seen of it."""

    scenario: str
    role: str  # "real" or "twin"
    namespace: str  # of the Machine
    machine: str
    node: str
    pod_namespace: str
    deleting: list[tuple[str, str]] = field(default_factory=list)
    conditions: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    cordoned: bool = False
    node_deleted: bool = False
    machine_gone: float | None = None
    started: float = 0.0
    acted: set[str] = field(default_factory=set)
    before: set = field(default_factory=set)  # conditions and Events from before the deletion
    audit: Path | None = None  # of the API server that holds the Node and Pods
    seen_at: float = 0.0  # when a scenario action first saw what it waits for
    notes: dict[str, float] = field(default_factory=dict)  # when a scenario action first saw each thing it waits for
    deletion_fields: set[str] = field(default_factory=set)  # the status.deletion times the Machine was seen with
    ready: list[tuple[str, str, str]] = field(default_factory=list)  # v1beta2 Ready while deleting: status, reason, its Deleting line
    ready_messages: list[str] = field(default_factory=list)  # the whole messages, for the report
    infrastructure_v1beta2: list[tuple[str, str, str]] = field(default_factory=list)  # v1beta2 InfrastructureReady while deleting
    cluster: str = ""  # the Cluster API Cluster of the Machine
    error: str = ""

    @property
    def took(self) -> float | None:
        return None if self.machine_gone is None else self.machine_gone - self.started


@dataclass
class Scenario:
    """What both Machines of a scenario get, and what the test does while they are deleted.

    ``pods``: ``{name: {"labels", "annotations", "owners", "deleted"}}`` (``deleted``:
    deleted with that grace period before the Machine, so it is terminating);
    ``rules``: MachineDrainRule specs (with ``name``), created in the Machines'
    namespace and limited to the scenario's Machines; ``setup(kube, workload, side)``
    and ``act(kube, workload, side)`` (called on every poll while the Machine exists)
    add what is special; ``expected``: ``{observation key: why the sides differ}``."""

    name: str
    pods: dict[str, dict] = field(default_factory=dict)
    rules: list[dict] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    hooks: dict[str, list[dict]] = field(default_factory=dict)  # OpenShift spec.lifecycleHooks
    unreachable: bool = False
    setup: Callable[[KubeApi, KubeApi, Side], None] | None = None
    act: Callable[[KubeApi, KubeApi, Side], None] | None = None
    groups: dict[str, str] = field(default_factory=dict)  # Pod name -> batch label
    expected: dict[str, str] = field(default_factory=dict)
    tolerated: dict[str, str] = field(default_factory=dict)  # may differ (timing), with the reason
    node_deletion_timeout: int = 10
    # ``provisioned`` (Cluster API): False leaves the InfraMachine unprovisioned, so no
    # controller ever sets the Machine's spec.providerID or status.nodeRef (the twin gets no
    # nodeRef either); ``node_matches_infra``: False gives the Node another providerID than
    # the InfraMachine's (OpenShift: the Machine's, so nodelink sets no nodeRef and the twin
    # gets none); Cluster API only: ``before_delete(kube, workload, side)``: once both Machines are
    # set up and just before they are deleted (the twin then starts again from the
    # conditions the manager recorded); ``measure(evictions)``: extra observation keys
    # from a side's eviction requests (audit events, oldest first).
    provisioned: bool = True
    node_matches_infra: bool = True
    before_delete: Callable[[KubeApi, KubeApi, Side], None] | None = None
    measure: Callable[[list[dict]], dict] | None = None
    # OpenShift only: ``node_labels``: labels of both sides' Nodes (a control-plane role, row O3);
    # ``observe(side, events)``: extra observation keys from what was noted of a side and its Events.
    node_labels: dict[str, str] = field(default_factory=dict)
    observe: Callable[[Side, list[tuple[str, str, str]]], dict] | None = None
    # Compare which status.deletion times (Cluster API) each side recorded, not their values.
    deletion_status: bool = False
    # Compare the v1beta2 Ready condition while deleting: its status, reason and Deleting line (row 29).
    ready_v1beta2: bool = False
    # Cluster API: each side's Machine in a Cluster of its own (``<scenario>-<role>-cluster``, with one
    # control-plane Machine), for what is decided from the Cluster: ``control_plane`` "object" gives
    # it a spec.controlPlaneRef to a FakeControlPlane ``<cluster>-cp`` (held by a finalizer once
    # deleted), "external" one whose status says externalManagedControlPlane and no control-plane
    # Machine; ``at_delete(kube, workload, side)``: for both sides, just before the real Machine's
    # deletion (the collection starts right after).
    own_cluster: bool = False
    control_plane: str = ""
    at_delete: Callable[[KubeApi, KubeApi, Side], None] | None = None


# ---------------------------------------------------------------------------
# Building blocks shared by both flavours

# A comma-separated list of scenario names: a run builds and compares only those (while working on one).
ONLY = "LIFECYCLE_MACHINE_SCENARIOS"


def chosen(scenarios: list[Scenario]) -> list[Scenario]:
    """``scenarios``, less those ``$LIFECYCLE_MACHINE_SCENARIOS`` (when set) does not name."""
    names = {name.strip() for name in os.environ.get(ONLY, "").split(",") if name.strip()}
    return [scenario for scenario in scenarios if not names or scenario.name in names]


def pod_body(name: str, namespace: str, node: str, spec: dict) -> dict:
    body = realctl.bare_pod(name, namespace, node)
    body["metadata"]["labels"].update(spec.get("labels") or {})
    if spec.get("annotations"):
        body["metadata"]["annotations"] = dict(spec["annotations"])
    if spec.get("owners"):
        body["metadata"]["ownerReferences"] = spec["owners"]
    return body


def make_node(workload: KubeApi, name: str, provider_id: str, *, unreachable: bool, labels: dict | None = None) -> None:
    """A kwok Node, or one no kubelet manages whose Ready condition is Unknown."""
    if not unreachable:
        node = fake_node(name, labels)
        node["spec"]["providerID"] = provider_id
        workload.create("/api/v1/nodes", node)
        wait_for(lambda: node_ready(workload.get(f"/api/v1/nodes/{name}")), timeout=60, what=f"Node {name} Ready")
        return
    meta = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    workload.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {"providerID": provider_id}})
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}
    condition.update(lastHeartbeatTime=stamp, lastTransitionTime=stamp)
    workload.patch(f"/api/v1/nodes/{name}", {"status": {"conditions": [condition]}}, subresource_status=True)


def make_pods(workload: KubeApi, side: Side, scenario: Scenario) -> None:
    realctl.create_namespace(workload, side.pod_namespace)
    node_uid = workload.get(f"/api/v1/nodes/{side.node}")["metadata"]["uid"]
    for name, given in scenario.pods.items():
        spec = dict(given)
        if spec.get("owners") == "node":
            spec["owners"] = [{"apiVersion": "v1", "kind": "Node", "name": side.node, "uid": node_uid, "controller": True}]
        workload.create(f"/api/v1/namespaces/{side.pod_namespace}/pods", pod_body(name, side.pod_namespace, side.node, spec))
    if not scenario.unreachable:
        for name in scenario.pods:
            wait_for(lambda name=name: pod_is_ready(workload.get(f"/api/v1/namespaces/{side.pod_namespace}/pods/{name}") or {}), what=f"Pod {name} Ready")
    for name, spec in scenario.pods.items():
        if "deleted" in spec:
            workload.request("DELETE", f"/api/v1/namespaces/{side.pod_namespace}/pods/{name}", query={"gracePeriodSeconds": spec["deleted"]})


def record(side: Side, machine: dict, conditions_of: Callable[[dict], list[dict]], deleting_of: Callable[[dict], dict | None]) -> None:
    """Note the Deleting condition and the conditions of one version of the Machine."""
    side.deletion_fields.update(key for key, value in (((machine.get("status") or {}).get("deletion")) or {}).items() if value)
    deleting = deleting_of(machine)
    if deleting:
        entry = (deleting.get("reason", ""), normalise(deleting.get("message", ""), side))
        if entry not in side.deleting:
            side.deleting.append(entry)
        ready = realctl.v1beta2_condition(machine, "Ready")
        line = next((text.removeprefix("* Deleting:").strip() for text in (ready.get("message") or "").splitlines() if text.startswith("* Deleting:")), "")
        ready_entry = (ready.get("status", ""), ready.get("reason", ""), line)
        if ready and ready_entry not in side.ready:
            side.ready.append(ready_entry)
        message = normalise(ready.get("message") or "", side)
        if ready and message not in side.ready_messages:
            side.ready_messages.append(message)
        infrastructure = realctl.v1beta2_condition(machine, "InfrastructureReady")
        infrastructure_entry = (infrastructure.get("status", ""), infrastructure.get("reason", ""), normalise(infrastructure.get("message", ""), side))
        # The deletion's first event still shows what was written before it: v1.14.2 writes "... while the
        # Machine still exists" only for a Machine not being deleted (the twin may have copied it or not).
        leftover = infrastructure_entry[2].endswith("while the Machine still exists")
        if infrastructure and machine["metadata"].get("deletionTimestamp") and not leftover and infrastructure_entry not in side.infrastructure_v1beta2:
            side.infrastructure_v1beta2.append(infrastructure_entry)
    for condition in conditions_of(machine):
        entry = (
            condition.get("type", ""),
            condition.get("status", ""),
            condition.get("reason", ""),
            condition.get("severity", ""),
            normalise(condition.get("message", ""), side),
        )
        if entry not in side.conditions:
            side.conditions.append(entry)


class MachineWatch(threading.Thread):
    """Every version of the Machines of a collection path, handed to ``record`` by
    name (status writes are not audited, and many last less than a poll)."""

    def __init__(self, kubeconfig: Path, path: str, sides: dict[str, Side], conditions_of, deleting_of):
        super().__init__(daemon=True)
        from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig  # noqa: PLC0415

        self.kube = api_from_kubeconfig(str(kubeconfig))
        self.path, self.sides, self.conditions_of, self.deleting_of = path, sides, conditions_of, deleting_of
        self.stopped = threading.Event()
        _items, self.version = self.kube.list_with_version(path)

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                for event in self.kube.watch(self.path, resource_version=self.version, timeout=5):
                    machine = event.get("object") or {}
                    self.version = machine.get("metadata", {}).get("resourceVersion") or self.version
                    side = self.sides.get(machine.get("metadata", {}).get("name", ""))
                    if side is None or event.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
                        continue
                    record(side, machine, self.conditions_of, self.deleting_of)
                    if event["type"] == "DELETED" and side.machine_gone is None:
                        side.machine_gone = time.monotonic()
                    if self.stopped.is_set():
                        return
            except Exception as exc:
                for side in self.sides.values():
                    side.error = str(exc)


def follow(side: Side, workload: KubeApi, act: Callable[[Side], None] | None, timeout: float = 600) -> None:
    """Poll the side's Node (cordon, deletion) and run the scenario's action until the Machine is gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and side.machine_gone is None:
        try:
            node = workload.get(f"/api/v1/nodes/{side.node}")
            if node is None or node["metadata"].get("deletionTimestamp"):
                side.node_deleted = True
            elif (node.get("spec") or {}).get("unschedulable"):
                side.cordoned = True
            if act is not None:
                act(side)
        except Exception as exc:
            side.error = str(exc)
        time.sleep(POLL)
    if side.machine_gone is None:
        side.error = f"the Machine was not gone within {timeout:.0f} s"
    elif workload.get(f"/api/v1/nodes/{side.node}") is None:
        side.node_deleted = True


def evictions(audit: Path, side: Side) -> list[dict]:
    return sorted(read_audit_log(audit, namespace=side.pod_namespace, subresource="eviction", verb="create"), key=lambda e: e["requestReceivedTimestamp"])


def batch_sequence(events: list[dict], groups: dict[str, str]) -> list[str]:
    """The batch labels of the successfully evicted Pods in eviction order, each run collapsed."""
    sequence: list[str] = []
    for event in events:
        if (event.get("responseStatus") or {}).get("code") != 201:
            continue
        label = groups.get(event["objectRef"]["name"], "?")
        if not sequence or sequence[-1] != label:
            sequence.append(label)
    return sequence


def machine_events(kube: KubeApi, side: Side) -> list[tuple[str, str, str]]:
    events = kube.list(f"/api/v1/namespaces/{side.namespace}/events", field_selector=f"involvedObject.name={side.machine}")
    found = set()
    for event in events:
        message = normalise(event.get("message", ""), side)
        if event.get("reason") == "FailedDeleteNode":
            # The error itself is the API server's (the controller reports its last retry's).
            message = re.sub(r"(error deleting node <node>: ).*", r"\1<error>", message, flags=re.DOTALL)
        found.add((event.get("type", ""), event.get("reason", ""), message))
    return sorted(found)


def observation(side: Side, scenario: Scenario, audit: Path, events: list[tuple[str, str, str]]) -> dict:
    """What a side did, normalised, by key."""
    evicted = evictions(audit, side)
    codes: dict[str, set[int]] = {}
    for event in evicted:
        codes.setdefault(event["objectRef"]["name"], set()).add((event.get("responseStatus") or {}).get("code", 0))
    return {
        "evicted": sorted(name for name, seen in codes.items() if 201 in seen),
        "refused (429)": sorted(name for name, seen in codes.items() if 429 in seen),
        "never evicted": sorted(set(scenario.pods) - set(codes)),
        "batches": batch_sequence(evicted, scenario.groups) if scenario.groups else [],
        "cordoned": side.cordoned,
        "Node deleted": side.node_deleted,
        "Deleting": sorted({entry for entry in side.deleting if entry[0] in HELD_REASONS}),
        "conditions": sorted(set(side.conditions) - side.before),
        "Events": sorted(set(events) - side.before),
        # Cluster API's fallback (Deleting, "Deletion started"): v1.14.2 replaces it before every status write (row 30).
        "Deleting fallback written": any(reason == "Deleting" for reason, _message in side.deleting),
        "_deleting": [reason for reason, _message in side.deleting],
        **(scenario.measure(evicted) if scenario.measure else {}),
        **(scenario.observe(side, events) if scenario.observe else {}),
        **({"status.deletion": sorted(side.deletion_fields)} if scenario.deletion_status else {}),
        # Row 32: the v1beta2 InfrastructureReady the Machine shows while it is deleted (v1.14 scenarios).
        **({"InfrastructureReady (v1beta2)": sorted(set(side.infrastructure_v1beta2))} if scenario.deletion_status else {}),
        # Row 29: the Deleting line of the v1beta2 Ready summary in each held stage (the stages that last one write are seen by chance).
        **({"Ready (v1beta2)": sorted({entry for entry in side.ready if _held_stage(entry[2])})} if scenario.ready_v1beta2 else {}),
        **({"_ready messages": list(side.ready_messages)} if scenario.ready_v1beta2 else {}),
    }


def _held_stage(line: str) -> bool:
    return any(line.endswith(f"stage: {reason}") or f"stage: {reason}," in line for reason in HELD_REASONS)


# Entries of the set-valued keys that differ on purpose whatever the scenario (docs/behaviour.md,
# "Side by side with the real controllers"), each with the reason.
DRAIN_START = "Draining the node before deletion"
ONLY_REAL = {
    ("conditions", ("DrainingSucceeded", "False", "Draining", "Info", DRAIN_START)): "first drain write",
    ("conditions", ("Ready", "False", "Draining", "Info", DRAIN_START)): "first drain write",
}
SET_KEYS = ("Deleting", "conditions", "Events", "Ready (v1beta2)", "InfrastructureReady (v1beta2)")


def passing_state(key: str, entry: tuple) -> bool:
    """An intermediate state the collection may show and the controller skip: the
    collection looks again as soon as Pods go (the controller every 20 s), and writes
    each step on its own (the controller several in one reconcile)."""
    if key == "Deleting":
        return entry[0] == "DrainingNode" and entry[1].startswith("Drain not completed yet")
    if key == "conditions":
        progress = entry[0] in ("DrainingSucceeded", "Ready") and entry[2] == "Draining" and entry[4].startswith("Drain not completed yet")
        return progress or entry[:3] == ("NodeHealthy", "False", "Deleting")
    return False


def differences(real: dict, twin: dict) -> dict[str, tuple]:
    """Per key, (real, twin) where the two differ. For the set-valued keys only what
    one side has and the other lacks counts, less the entries of ONLY_REAL (real only)
    and the collection's passing states (twin only)."""
    found = {}
    for key, mine in real.items():
        theirs = twin[key]
        if key.startswith("_") or mine == theirs:
            continue
        if key in SET_KEYS:
            real_only = [e for e in mine if e not in theirs and (key, e) not in ONLY_REAL]
            twin_only = [e for e in theirs if e not in mine and not passing_state(key, e)]
            if real_only or twin_only:
                found[key] = (real_only, twin_only)
            continue
        found[key] = (mine, theirs)
    return found


def describe(name: str, real: dict, twin: dict, diff: dict, took: tuple) -> str:
    lines = [f"== {name}: real {took[0]} s, collection {took[1]} s"]
    lines.append(f"  Deleting reasons seen: real {real['_deleting']}\n                        collection {twin['_deleting']}")
    if "_ready messages" in real:
        lines.append(f"  v1beta2 Ready messages: real {real['_ready messages']}\n                          collection {twin['_ready messages']}")
    for key, mine in real.items():
        if key.startswith("_"):
            continue
        if key not in diff:
            lines.append(f"  {key} [same]: {mine}")
        elif key in SET_KEYS:
            lines.append(f"  {key} [DIFFERS]\n    only real: {diff[key][0]}\n    only collection: {diff[key][1]}")
        else:
            lines.append(f"  {key} [DIFFERS]\n    real: {diff[key][0]}\n    collection: {diff[key][1]}")
    return "\n".join(lines)


def check(name: str, real: dict, twin: dict, scenario: Scenario, took: tuple) -> str:
    """The report of one scenario; fails on a difference the scenario does not
    declare (``expected`` or ``tolerated``), or on an expected one that went away."""
    diff = differences(real, twin)
    report = describe(name, real, twin, diff, took)
    undeclared = sorted(set(diff) - set(scenario.expected) - set(scenario.tolerated))
    gone = sorted(set(scenario.expected) - set(diff))
    assert not undeclared and not gone, f"{report}\nundeclared differences: {undeclared}; expected but not seen: {gone}"
    return report


Pair = tuple[Scenario, Side, Side]


def condition_entry(condition: dict, side: Side) -> tuple[str, str, str, str, str]:
    keys = ("type", "status", "reason", "severity")
    return (*(condition.get(key, "") for key in keys), normalise(condition.get("message", ""), side))  # type: ignore[return-value]


def drive(
    pairs: list[Pair],
    *,
    kube: KubeApi,
    workload: KubeApi,
    watches: list[MachineWatch],
    read_machine: Callable[[Side], dict | None],
    conditions_of: Callable[[dict], list[dict]],
    delete_real: Callable[[Side], None],
    collection: Callable[[], None],
) -> None:
    """Note what each side had before, then delete every real Machine and start the
    collection on the twins at the same moment; follow all of them until gone."""
    threads = []
    for scenario, real, twin in pairs:
        for side in (real, twin):
            side.before = {*(condition_entry(c, side) for c in conditions_of(read_machine(side) or {})), *machine_events(kube, side)}
            act = (lambda side, scenario=scenario: scenario.act(kube, workload, side)) if scenario.act else None
            threads.append(threading.Thread(target=follow, args=(side, workload, act), daemon=True))
    started = time.monotonic()
    for _scenario, real, twin in pairs:
        real.started = twin.started = started
    for watch in watches:
        watch.start()
    for thread in threads:
        thread.start()
    for _scenario, real, _twin in pairs:
        delete_real(real)
    runner = threading.Thread(target=collection, daemon=True)
    runner.start()
    runner.join(900)
    for thread in threads:
        thread.join(660)
    for watch in watches:
        watch.stopped.set()


def compare(pairs: list[Pair], *, kube: KubeApi, machine_audit: Path, agent: str) -> list[str]:
    """Prove the two sides never raced (audit logs), then compare them; the reports."""
    reports, failures = [], []
    for scenario, real, twin in pairs:
        node_audit = real.audit or machine_audit
        twin_writes = [e for e in read_audit_log(machine_audit, namespace=twin.namespace, resource="machines") if e["objectRef"].get("name") == twin.machine]
        assert [e["verb"] for e in twin_writes if agent in e.get("userAgent", "")] == [], f"the controller touched {twin.machine}"
        assert all(agent in e.get("userAgent", "") for e in evictions(node_audit, real)), f"{real.machine}: an eviction not by the controller"
        assert not any(agent in e.get("userAgent", "") for e in evictions(node_audit, twin)), f"{twin.machine}: the controller evicted a twin's Pod"
        took = tuple(None if side.took is None else round(side.took, 1) for side in (real, twin))
        real_obs = observation(real, scenario, node_audit, machine_events(kube, real))
        twin_obs = observation(twin, scenario, node_audit, machine_events(kube, twin))
        try:
            reports.append(check(scenario.name, real_obs, twin_obs, scenario, took))
        except AssertionError as exc:
            failures.append(str(exc))
    print("\n".join(reports))
    assert not failures, "\n\n".join(failures)
    return reports


# ---------------------------------------------------------------------------
# Cluster API


@dataclass
class CapiBed:
    kube: KubeApi
    workload: KubeApi
    kubeconfig: Path  # management
    workload_kubeconfig: Path
    namespace: str
    workload_text: str = ""  # the workload kubeconfig inline, for the <cluster>-kubeconfig Secrets

    @property
    def machines(self) -> str:
        return f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{self.namespace}/machines"

    @property
    def clusters(self) -> str:
        return f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{self.namespace}/clusters"

    @property
    def control_planes(self) -> str:
        return f"/apis/{FAKE_CONTROL_PLANE_GROUP}/v1beta1/namespaces/{self.namespace}/fakecontrolplanes"


def capi_bed(plane: dict, namespace: str = "conformance") -> CapiBed:
    """The management namespace with two Clusters on the same workload plane: ``real``
    (watched by the manager) and ``twin`` (no watch-filter label: the manager never
    connects to it), each with an active control-plane Machine."""
    from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig  # noqa: PLC0415

    state_dir = Path(plane["state_dir"])
    bed = CapiBed(
        api_from_kubeconfig(str(state_dir / "kubeconfig")),
        api_from_kubeconfig(plane["workload_kubeconfig"]),
        state_dir / "kubeconfig",
        Path(plane["workload_kubeconfig"]),
        namespace,
    )
    realctl.create_namespace(bed.kube, namespace)
    text = bed.workload_text = controllers.cluster_tool.inline_kubeconfig(bed.workload_kubeconfig)
    fake_machines = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/fakemachines"
    for cluster, watch_filter in ((REAL_CLUSTER, controllers.DEFAULT_WATCH_FILTER), (TWIN_CLUSTER, "")):
        for body in controllers.capi_cluster_objects(cluster, namespace, text, watch_filter=watch_filter):
            realctl.create(bed.kube, body)
        bed.kube.patch(f"{fake_machines}/{cluster}-control-plane-0", controllers.FAKE_MACHINE_PROVISIONED, subresource_status=True)
    return bed


FAKE_CONTROL_PLANE_GROUP = "controlplane.cluster.x-k8s.io"
# Holds an object the test deletes, so that it stays "being deleted".
HOLD_FINALIZER = "conformance.lifecycle.machine.dev/hold"


def fake_control_plane_crd(kube: KubeApi) -> None:
    """A stand-in control-plane kind (no provider behind it), with the contract labels Cluster API
    resolves a spec.controlPlaneRef by; created once, when a scenario needs one."""
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    name = f"fakecontrolplanes.{FAKE_CONTROL_PLANE_GROUP}"
    if kube.get(f"{crds}/{name}") is None:
        open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        schema = {"type": "object", "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}}}
        schema["properties"].update(spec=open_object, status=open_object)
        version = {"name": "v1beta1", "served": True, "storage": True, "subresources": {"status": {}}, "schema": {"openAPIV3Schema": schema}}
        names = {"kind": "FakeControlPlane", "listKind": "FakeControlPlaneList", "plural": "fakecontrolplanes", "singular": "fakecontrolplane"}
        body = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta1"}},
            "spec": {"group": FAKE_CONTROL_PLANE_GROUP, "scope": "Namespaced", "names": names, "versions": [version]},
        }
        kube.create(crds, body)

    def established() -> bool:
        conditions = ((kube.get(f"{crds}/{name}") or {}).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    wait_for(established, timeout=30, what=f"CRD {name} established")


def own_cluster(bed: CapiBed, scenario: Scenario, role: str, name: str) -> str:
    """A Cluster of the side's own (see ``Scenario.own_cluster``); its name."""
    watch_filter = controllers.DEFAULT_WATCH_FILTER if role == "real" else ""
    objects = controllers.capi_cluster_objects(name, bed.namespace, bed.workload_text, watch_filter=watch_filter)
    if scenario.control_plane:
        fake_control_plane_crd(bed.kube)
        body = {"apiVersion": f"{FAKE_CONTROL_PLANE_GROUP}/v1beta1", "kind": "FakeControlPlane"}
        body["metadata"] = {"name": f"{name}-cp", "namespace": bed.namespace, "finalizers": [HOLD_FINALIZER]}
        realctl.create(bed.kube, {**body, "spec": {}})
        if scenario.control_plane == "external":
            # Never reported initialized: the manager would then watch the Nodes of the workload
            # plane the twins share, and map a twin's Node to the twin (nodeToMachine ignores the watch filter).
            status = {"status": {"externalManagedControlPlane": True}}
            bed.kube.patch(f"{bed.control_planes}/{name}-cp", status, subresource_status=True)
            objects = objects[:2]  # a managed service runs the control plane: no control-plane Machine
        objects[1]["spec"]["controlPlaneRef"] = {"apiGroup": FAKE_CONTROL_PLANE_GROUP, "kind": "FakeControlPlane", "name": f"{name}-cp"}
    for body in objects:
        realctl.create(bed.kube, body)
    if len(objects) > 2:
        fake_machines = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{bed.namespace}/fakemachines"
        bed.kube.patch(f"{fake_machines}/{name}-control-plane-0", controllers.FAKE_MACHINE_PROVISIONED, subresource_status=True)
    return name


def capi_rule(scenario: str, namespace: str, rule: dict) -> dict:
    """A MachineDrainRule object of ``rule`` (a spec with its ``name``), limited to the scenario's Machines."""
    spec = {key: value for key, value in rule.items() if key != "name"}
    spec["machines"] = [{"selector": {"matchLabels": {SCENARIO_LABEL: scenario}}}]
    metadata = {"name": f"{scenario}-{rule['name']}", "namespace": namespace}
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDrainRule", "metadata": metadata, "spec": spec}


def capi_side(bed: CapiBed, scenario: Scenario, role: str) -> Side:
    name = f"{scenario.name}-{role}"
    side = Side(scenario.name, role, bed.namespace, name, f"{name}-node", f"{name}-pods")
    cluster = REAL_CLUSTER if role == "real" else TWIN_CLUSTER
    if scenario.own_cluster:
        # Not the Machine's name: the Cluster's Events would read as the Machine's.
        cluster = own_cluster(bed, scenario, role, f"{name}-cluster")
    side.cluster = cluster
    provider_id = f"fake://{bed.namespace}/{name}"
    objects = controllers.capi_machine_objects(
        name,
        bed.namespace,
        cluster,
        controllers.DEFAULT_WATCH_FILTER if role == "real" else "",
        provider_id=provider_id,
        annotations=scenario.annotations,
        node_deletion_timeout=scenario.node_deletion_timeout,
    )
    objects[1]["metadata"]["labels"][SCENARIO_LABEL] = scenario.name
    for body in objects:
        realctl.create(bed.kube, body)
    if scenario.provisioned:
        bed.kube.patch(
            f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{bed.namespace}/fakemachines/{name}",
            controllers.FAKE_MACHINE_PROVISIONED,
            subresource_status=True,
        )
    node_provider_id = provider_id if scenario.node_matches_infra else f"{provider_id}-elsewhere"
    make_node(bed.workload, side.node, node_provider_id, unreachable=scenario.unreachable)
    make_pods(bed.workload, side, scenario)
    if scenario.setup:
        scenario.setup(bed.kube, bed.workload, side)
    if role == "twin" and scenario.provisioned:
        # What the manager would have recorded; the collection needs the nodeRef.
        bed.kube.patch(f"{bed.machines}/{name}", {"status": {"nodeRef": {"name": side.node}}}, subresource_status=True)
    return side


def capi_v1beta1_conditions(machine: dict) -> list[dict]:
    return ((((machine.get("status") or {}).get("deprecated") or {}).get("v1beta1") or {}).get("conditions")) or []


def recorded_by_manager(real: dict) -> dict:
    """The status a twin starts from: what the manager recorded on the real Machine before its
    deletion - the v1beta1 conditions, whether the InfraMachine was provisioned, and the v1beta2
    InfrastructureReady (the deletion's first event still shows it)."""
    status = real.get("status") or {}
    recorded: dict = {"deprecated": {"v1beta1": {"conditions": capi_v1beta1_conditions(real)}}}
    if status.get("initialization"):
        recorded["initialization"] = status["initialization"]
    infrastructure = realctl.v1beta2_condition(real, "InfrastructureReady")
    if infrastructure:
        recorded["conditions"] = [infrastructure]
    return recorded


def run_capi(plane: dict, scenarios: list[Scenario]) -> list[str]:
    """Build every scenario, delete all real Machines and, with one machine_delete
    task, all twins at once; follow them all; compare. The reports, one per scenario."""
    scenarios = chosen(scenarios)
    if not scenarios:
        return []
    bed = capi_bed(plane)
    for scenario in scenarios:
        for rule in scenario.rules:
            realctl.create(bed.kube, capi_rule(scenario.name, bed.namespace, rule))
    pairs = [(scenario, capi_side(bed, scenario, "real"), capi_side(bed, scenario, "twin")) for scenario in scenarios]
    for _scenario, real, twin in pairs:
        wait_for(
            lambda real=real: any(c.get("type") == "NodeHealthy" for c in capi_v1beta1_conditions(bed.kube.get(f"{bed.machines}/{real.machine}") or {})),
            timeout=120,
            what=f"the conditions of {real.machine} set by Cluster API",
        )
        # The twin starts from what the manager recorded on the real Machine before its deletion.
        bed.kube.patch(
            f"{bed.machines}/{twin.machine}", {"status": recorded_by_manager(bed.kube.get(f"{bed.machines}/{real.machine}"))}, subresource_status=True
        )
    prepared = [(scenario, real, twin) for scenario, real, twin in pairs if scenario.before_delete]
    for scenario, real, twin in prepared:
        for side in (real, twin):
            scenario.before_delete(bed.kube, bed.workload, side)  # type: ignore[misc]
    if prepared:
        time.sleep(3)  # what the manager records about the change, before the twin copies it
    for _scenario, real, twin in prepared:
        bed.kube.patch(
            f"{bed.machines}/{twin.machine}", {"status": recorded_by_manager(bed.kube.get(f"{bed.machines}/{real.machine}"))}, subresource_status=True
        )
    sides = {side.machine: side for _scenario, real, twin in pairs for side in (real, twin)}
    for side in sides.values():
        side.audit = bed.workload_kubeconfig.parent / "audit.log"
    watch = MachineWatch(bed.kubeconfig, bed.machines, sides, capi_v1beta1_conditions, lambda machine: realctl.v1beta2_condition(machine, "Deleting"))
    result: dict = {}

    twins = {real.machine: (scenario, twin) for scenario, real, twin in pairs}

    def delete_real(side: Side) -> None:
        scenario, twin = twins[side.machine]
        if scenario.at_delete is not None:
            for each in (side, twin):
                scenario.at_delete(bed.kube, bed.workload, each)
        bed.kube.delete(f"{bed.machines}/{side.machine}")

    def collection() -> None:
        params = {
            "machines": [{"name": twin.machine, "namespace": bed.namespace} for _s, _r, twin in pairs],
            "drain_timeout": 600,
            "terminate_timeout": 600,
            "machine_controller": "absent",  # the manager does not watch the twins
        }
        result.update(run_module_with(str(bed.kubeconfig), "machine_delete", params, timeout=900))

    drive(
        pairs,
        kube=bed.kube,
        workload=bed.workload,
        watches=[watch],
        read_machine=lambda side: bed.kube.get(f"{bed.machines}/{side.machine}"),
        conditions_of=capi_v1beta1_conditions,
        delete_real=delete_real,
        collection=collection,
    )
    failed = None if result and not result.get("failed") else (result.get("msg") or result)
    try:
        reports = compare(pairs, kube=bed.kube, machine_audit=bed.kubeconfig.parent / "audit.log", agent=CAPI_AGENT)
    except AssertionError as exc:
        # The comparison shows where the collection stood when it failed.
        raise AssertionError(f"{exc}\n\nmachine_delete failed: {failed}" if failed else str(exc)) from None
    assert not failed, failed
    return reports


# ---------------------------------------------------------------------------
# OpenShift

MAPI_REAL_NAMESPACE, MAPI_TWIN_NAMESPACE = "conformance-real", "conformance-twin"


def mapi_machines(namespace: str) -> str:
    return f"/apis/machine.openshift.io/v1beta1/namespaces/{namespace}/machines"


def mapi_side(kube: KubeApi, scenario: Scenario, role: str) -> Side:
    """The real Machine is created for the controller to "create" (its fake actuator
    sets the providerID, nodelink the nodeRef); its twin, in a namespace the
    controller does not watch, gets by hand what those would have written."""
    namespace = MAPI_REAL_NAMESPACE if role == "real" else MAPI_TWIN_NAMESPACE
    name = f"{scenario.name}-{role}"
    side = Side(scenario.name, role, namespace, name, f"{name}-node", f"{name}-pods")
    provider_id = f"fake://{namespace}/{name}"
    body = controllers.mapi_machine(name, namespace, provider_id=provider_id, hooks=scenario.hooks or None)
    body["metadata"]["annotations"] = dict(scenario.annotations)
    realctl.create(kube, body)
    if role == "twin":
        kube.patch(f"{mapi_machines(namespace)}/{name}", {"spec": {"providerID": provider_id}})
        instance = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-fake-instance", "namespace": namespace}}
        kube.create(f"/api/v1/namespaces/{namespace}/configmaps", instance)
    node_provider_id = provider_id if scenario.node_matches_infra else f"{provider_id}-elsewhere"
    make_node(kube, side.node, node_provider_id, unreachable=scenario.unreachable, labels=scenario.node_labels)
    make_pods(kube, side, scenario)
    if scenario.setup:
        scenario.setup(kube, kube, side)
    if role == "twin" and not scenario.node_matches_infra:
        kube.patch(f"{mapi_machines(namespace)}/{name}", {"status": {"phase": "Provisioned"}}, subresource_status=True)
    elif role == "twin":
        node_uid = kube.get(f"/api/v1/nodes/{side.node}")["metadata"]["uid"]
        status = {"status": {"nodeRef": {"kind": "Node", "name": side.node, "uid": node_uid}, "phase": "Running"}}
        kube.patch(f"{mapi_machines(namespace)}/{name}", status, subresource_status=True)
    return side


def run_mapi(plane: dict, scenarios: list[Scenario]) -> list[str]:
    """As ``run_capi``, with the OpenShift machine controller watching only
    MAPI_REAL_NAMESPACE. The collection's twins stop at awaiting_instance_termination;
    the test then deletes each fake instance, as provider tasks would, and runs
    machine_delete again with ``instance_terminated``."""
    from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig  # noqa: PLC0415

    scenarios = chosen(scenarios)
    if not scenarios:
        return []
    kubeconfig = Path(plane["state_dir"]) / "kubeconfig"
    kube = api_from_kubeconfig(str(kubeconfig))
    for namespace in (MAPI_REAL_NAMESPACE, MAPI_TWIN_NAMESPACE):
        realctl.create_namespace(kube, namespace)
    pairs = [(scenario, mapi_side(kube, scenario, "real"), mapi_side(kube, scenario, "twin")) for scenario in scenarios]
    for scenario, real, twin in pairs:
        phase = "Running" if scenario.node_matches_infra else "Provisioned"  # without a Node, no nodeRef
        wait_for(
            lambda real=real, phase=phase: ((kube.get(f"{mapi_machines(real.namespace)}/{real.machine}") or {}).get("status") or {}).get("phase") == phase,
            timeout=120,
            what=f"{real.machine} {phase}",
        )
        # The twin starts from the conditions the controller recorded on the real Machine.
        recorded = (kube.get(f"{mapi_machines(real.namespace)}/{real.machine}").get("status") or {}).get("conditions") or []
        kube.patch(f"{mapi_machines(twin.namespace)}/{twin.machine}", {"status": {"conditions": recorded}}, subresource_status=True)

    def conditions_of(machine: dict) -> list[dict]:
        return (machine.get("status") or {}).get("conditions") or []

    def no_deleting(_machine: dict) -> None:
        return None

    watches = [
        MachineWatch(
            kubeconfig, mapi_machines(namespace), {s.machine: s for _sc, r, t in pairs for s in (r, t) if s.namespace == namespace}, conditions_of, no_deleting
        )
        for namespace in (MAPI_REAL_NAMESPACE, MAPI_TWIN_NAMESPACE)
    ]
    results: list[dict] = []

    def collection() -> None:
        machines = [{"name": twin.machine, "namespace": twin.namespace} for _s, _r, twin in pairs]
        params = {"machines": machines, "drain_timeout": 600, "terminate_timeout": 600, "machine_controller": "absent"}  # not watched
        first = run_module_with(str(kubeconfig), "machine_delete", params, timeout=900)
        results.append(first)
        if first.get("failed"):
            return
        for _s, _r, twin in pairs:  # the provider tasks
            kube.delete(f"/api/v1/namespaces/{twin.namespace}/configmaps/{twin.machine}-fake-instance")
        params["instance_terminated"] = [f"{twin.namespace}/{twin.machine}" for _s, _r, twin in pairs]
        results.append(run_module_with(str(kubeconfig), "machine_delete", params, timeout=900))

    audit = kubeconfig.parent / "audit.log"
    for _scenario, real, twin in pairs:
        real.audit = twin.audit = audit
    drive(
        pairs,
        kube=kube,
        workload=kube,
        watches=watches,
        read_machine=lambda side: kube.get(f"{mapi_machines(side.namespace)}/{side.machine}"),
        conditions_of=conditions_of,
        delete_real=lambda side: kube.delete(f"{mapi_machines(side.namespace)}/{side.machine}"),
        collection=collection,
    )
    assert results and not any(result.get("failed") for result in results), results
    assert [m["status"] for m in results[0]["machines"]] == ["awaiting_instance_termination"] * len(pairs), results[0]
    return compare(pairs, kube=kube, machine_audit=audit, agent=MAPI_AGENT)
