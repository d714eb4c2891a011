"""The five invariants, checked after each run from the API server's own records.

Two independent sources, each read only for the run's namespace, Nodes and time
window:

- the timeline (timeline.py): every change of the run's Machines, Pods, Nodes
  and infrastructure objects, ordered by etcd revision (resourceVersion), from
  watches straight to the API server;
- the audit log (hack/cluster.py's policy): eviction creates, Pod and Node
  deletions and every Machine request, with the server's timestamps and the
  client's User-Agent.

I1  no eviction while a preDrain hook was on the Machine: no Pod of a Machine's
    Node starts terminating (outside its owner's own deletion) at a revision
    where the Machine still has a preDrain hook; and no eviction reaches the
    server before the request that removed the Machine's last preDrain hook.
I2  no infrastructure, bootstrap (OpenShift: instance) or Node deletion while a
    hook was on the Machine or the drain was unfinished: at the revision where
    such an object starts going, the Machine has no hook left and every Pod of
    its Node that the drain evicts or waits for is gone; and no Node DELETE
    reaches the server before the last hook removal of its Machine.
I3  no Pod evicted twice (successful evictions per Pod), and no Pod deleted
    without an eviction unless its owner asked (the WaitCompleted owners of
    actors.py, the garbage collector, kwok ending a deletion).
I4  no hook lost: a hook disappears from a Machine only in a write of its owner
    (the resourceVersion its owner's removal returned), never in a write of the
    run nor with a Machine released while a hook is on it.
I5  every Machine gone, with its Node and infrastructure / bootstrap objects
    (OpenShift: instance); nothing left running; the namespace cleans up. A
    killed run leaves nothing behind either: no process of it outlives it
    (runner.py), and the collection's modules send no write once it is killed
    (docs/delete_machine.md "Cancelling"), from ``KILL_GRACE`` after the kill
    until the next attempt starts.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from actors import Removal
from scenario import EXPECT_LABEL, Scenario
from timeline import Event
from world import hooks_of

INVARIANTS = {
    "I1": "no eviction while a preDrain hook was on the Machine",
    "I2": "no infrastructure, bootstrap or Node deletion while a hook was present or the drain unfinished",
    "I3": "no Pod evicted twice, none deleted without an eviction unless asked",
    "I4": "no hook of another owner lost (only its owner removes it)",
    "I5": "every Machine finally gone, nothing left behind",
}
OWNED = ("nodes", "infra", "bootstrap", "instances")
# Who may delete a Pod without evicting it: the owners in actors.py, kwok ending a deletion
# that already started, the garbage collector and the namespace controller.
ASKED_AGENTS = ("lm-chaos", "kwok/", "kube-controller-manager/")
MODULE_AGENT = "lifecycle.machine"  # the User-Agent of the collection's transport
WRITES = ("create", "update", "patch", "delete", "deletecollection")
KILL_GRACE = 1.0  # seconds: the modules' watchdog looks every 0.5 s; a request already on its way may land


@dataclass(frozen=True)
class Violation:
    invariant: str
    key: str  # one finding, however many sources show it
    message: str


def audit_events(path: Path, offset: int) -> tuple[list[dict], int]:
    """The audit events written since ``offset``, and the offset after them."""
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read()
    end = data.rfind(b"\n") + 1  # a line still being written is read next time
    return [json.loads(line) for line in data[:end].splitlines() if line.strip()], offset + end


def _stamp(event: dict, field: str = "requestReceivedTimestamp") -> dt.datetime:
    return dt.datetime.fromisoformat(event[field].replace("Z", "+00:00"))


class Checker:
    def __init__(
        self,
        scenario: Scenario,
        events: list[Event],
        audit: list[dict],
        removals: list[Removal],
        completed: set[str],
        *,
        quiet: list[tuple[dt.datetime, float, dt.datetime]] = (),
    ):
        self.s = scenario
        self.quiet = list(quiet)  # (killed at, extra grace in seconds, next attempt started at)
        self.events = events
        self.audit = [e for e in audit if self._ours(e)]
        self.removals = removals
        self.completed = completed
        self.machine_of_node = {scenario.node_name(i): scenario.machine_name(i) for i in range(scenario.machines)}
        self.found: dict[str, Violation] = {}

    def _ours(self, event: dict) -> bool:
        ref = event.get("objectRef") or {}
        if ref.get("resource") == "nodes":
            return ref.get("name") in {self.s.node_name(i) for i in range(self.s.machines)}
        return ref.get("namespace") == self.s.namespace

    def add(self, invariant: str, key: str, message: str) -> None:
        self.found.setdefault(f"{invariant}:{key}", Violation(invariant, key, message))

    # -- the timeline, in etcd order ---------------------------------------------------------

    def sweep(self) -> None:
        hooks: dict[str, set] = defaultdict(set)
        pods: dict[str, dict] = {}  # live Pods: name -> {"node", "expect", "deleting"}
        going: set[tuple[str, str]] = set()
        owner_writes = {(r.machine, r.point, r.name, r.owner): r.rv for r in self.removals}
        for event in self.events:
            if event.collection == "machines":
                self._machine_event(event, hooks, owner_writes)
            elif event.collection == "pods":
                self._pod_event(event, hooks, pods)
            elif event.collection in OWNED and event.deleting and (event.collection, event.name) not in going:
                going.add((event.collection, event.name))
                self._owned_going(event, hooks, pods)

    def _machine_event(self, event: Event, hooks: dict, owner_writes: dict) -> None:
        name = event.name
        now = set() if event.type == "DELETED" else hooks_of(self.s.flavour, event.obj)
        for point, hook, owner in sorted(hooks[name] - now):
            if event.type == "DELETED":
                self.add("I4", f"{name}/{point}/{hook}", f"Machine {name} was released (rv {event.rv}) while its {point} hook {hook} (owner {owner}) was on it")
            elif owner_writes.get((name, point, hook, owner)) != event.rv:
                self.add(
                    "I4",
                    f"{name}/{point}/{hook}",
                    f"the {point} hook {hook} (owner {owner}) of Machine {name} went in a write its owner did not make (rv {event.rv})",
                )
        hooks[name] = now

    def _pod_event(self, event: Event, hooks: dict, pods: dict) -> None:
        meta, spec = event.obj.get("metadata") or {}, event.obj.get("spec") or {}
        known = pods.get(event.name)
        if known is None:
            if event.type == "DELETED":
                return
            known = pods[event.name] = {"node": spec.get("nodeName"), "expect": (meta.get("labels") or {}).get(EXPECT_LABEL), "deleting": False}
        known["node"] = spec.get("nodeName") or known["node"]
        if event.deleting and not known["deleting"]:
            known["deleting"] = True
            machine = self.machine_of_node.get(known["node"] or "")
            blocking = sorted(h for p, h, _o in hooks.get(machine, set()) if p == "preDrain")
            if machine and blocking and event.name not in self.completed:
                self.add(
                    "I1",
                    event.name,
                    f"Pod {event.name} on {known['node']} started terminating (rv {event.rv}) while Machine {machine} had preDrain hooks {blocking}",
                )
        if event.type == "DELETED":
            pods.pop(event.name, None)

    def _owned_going(self, event: Event, hooks: dict, pods: dict) -> None:
        index = self._machine_index(event)
        if index is None:
            return
        machine, node = self.s.machine_name(index), self.s.node_name(index)
        what = f"{event.collection} object {event.name}"
        held = sorted(f"{p}/{h}" for p, h, _o in hooks.get(machine, set()))
        if held:
            self.add("I2", f"{event.collection}/{event.name}", f"{what} started going (rv {event.rv}) while Machine {machine} had hooks {held}")
        undrained = sorted(name for name, pod in pods.items() if pod["node"] == node and pod["expect"] in ("drain", "wait"))
        if undrained:
            self.add(
                "I2", f"{event.collection}/{event.name}", f"{what} started going (rv {event.rv}) before the drain of {node} finished: {undrained} still there"
            )

    def _machine_index(self, event: Event) -> int | None:
        for index in range(self.s.machines):
            if event.name in (self.s.node_name(index), self.s.machine_name(index), f"instance-{self.s.machine_name(index)}"):
                return index
        return None

    # -- the audit log ------------------------------------------------------------------------

    def audit_checks(self, pod_nodes: dict[str, str]) -> None:
        evictions = [
            e
            for e in self.audit
            if e.get("verb") == "create" and (e.get("objectRef") or {}).get("subresource") == "eviction" and "dryRun" not in e.get("requestURI", "")
        ]
        granted = [e for e in evictions if (e.get("responseStatus") or {}).get("code") in (200, 201)]
        for pod, count in Counter(e["objectRef"]["name"] for e in granted).items():
            if count > 1:
                self.add("I3", f"twice/{pod}", f"Pod {pod} was evicted {count} times (successful evictions in the audit log)")
        evicted = {e["objectRef"]["name"] for e in granted}
        for event in self.audit:
            ref = event.get("objectRef") or {}
            if event.get("verb") != "delete" or ref.get("resource") != "pods" or ref.get("subresource"):
                continue
            code = (event.get("responseStatus") or {}).get("code")
            agent = event.get("userAgent") or ""
            if code in (200, 202) and ref.get("name") not in evicted and not agent.startswith(ASKED_AGENTS):
                self.add("I3", f"deleted/{ref.get('name')}", f"Pod {ref.get('name')} was deleted without an eviction by {agent!r}")
        self._gate_timestamps(granted, pod_nodes)

    def _gate_timestamps(self, granted: list[dict], pod_nodes: dict[str, str]) -> None:
        opened: dict[tuple[str, str], dt.datetime] = {}
        for event in self.audit:
            agent = event.get("userAgent") or ""
            if agent.startswith("lm-chaos-hooks/") and event.get("verb") == "patch" and (event.get("responseStatus") or {}).get("code") == 200:
                _prefix, machine, point, _hook = agent.split(" ")[0].split("/", 3)
                stamp = _stamp(event)
                opened[(machine, point)] = max(stamp, opened.get((machine, point), stamp))
        for event in granted:
            pod = event["objectRef"]["name"]
            machine = self.machine_of_node.get(pod_nodes.get(pod, ""))
            gate = opened.get((machine, "preDrain"))
            if gate is not None and _stamp(event) < gate:
                self.add(
                    "I1",
                    pod,
                    f"the eviction of Pod {pod} reached the server at {event['requestReceivedTimestamp']}, before {machine}'s last preDrain hook went",
                )
        for event in self.audit:
            ref = event.get("objectRef") or {}
            if ref.get("resource") == "nodes" and event.get("verb") == "delete":
                machine = self.machine_of_node.get(ref.get("name"))
                gates = [opened[(machine, point)] for point in ("preDrain", "preTerminate") if (machine, point) in opened]
                if gates and _stamp(event) < max(gates):
                    self.add(
                        "I2",
                        f"nodes/{ref.get('name')}",
                        f"the DELETE of Node {ref.get('name')} reached the server at {event['requestReceivedTimestamp']}, before {machine}'s last hook went",
                    )

    def pod_nodes(self) -> dict[str, str]:
        nodes = {}
        for event in self.events:
            if event.collection == "pods" and (event.obj.get("spec") or {}).get("nodeName"):
                nodes[event.name] = event.obj["spec"]["nodeName"]
        return nodes

    def undeclared_deletions(self, evicted: set[str]) -> None:
        """Pods that started terminating without a successful eviction or an owner's deletion (I3)."""
        asked = {
            e["objectRef"]["name"]
            for e in self.audit
            if e.get("verb") == "delete" and (e.get("objectRef") or {}).get("resource") == "pods" and (e.get("userAgent") or "").startswith(ASKED_AGENTS)
        }
        seen: set[str] = set()
        for event in self.events:
            if event.collection != "pods" or not event.deleting or event.name in seen:
                continue
            seen.add(event.name)
            node = (event.obj.get("spec") or {}).get("nodeName")
            if node in self.machine_of_node and event.name not in evicted | asked | self.completed:
                self.add(
                    "I3", f"deleted/{event.name}", f"Pod {event.name} on {node} started terminating (rv {event.rv}) without an eviction or its owner asking"
                )

    def check(self) -> list[Violation]:
        self.sweep()
        nodes = self.pod_nodes()
        self.audit_checks(nodes)
        evicted = {
            e["objectRef"]["name"]
            for e in self.audit
            if (e.get("objectRef") or {}).get("subresource") == "eviction" and (e.get("responseStatus") or {}).get("code") in (200, 201)
        }
        self.undeclared_deletions(evicted)
        self.after_kill()
        return list(self.found.values())

    def after_kill(self) -> None:
        """Writes of the collection's modules that reached the server while the run was killed (I5)."""
        for event in self.audit:
            if not (event.get("userAgent") or "").startswith(MODULE_AGENT) or event.get("verb") not in WRITES:
                continue
            stamp = _stamp(event)
            for start, grace, end in self.quiet:
                if start + dt.timedelta(seconds=KILL_GRACE + grace) < stamp < end:
                    ref = event.get("objectRef") or {}
                    what = "/".join(part for part in (ref.get("resource"), ref.get("name"), ref.get("subresource")) if part)
                    late = (stamp - start).total_seconds()
                    message = f"{event['verb']} {what} reached the server {late:.1f}s after the run was killed ({event['requestReceivedTimestamp']})"
                    self.add("I5", f"after-kill/{event.get('auditID')}", message)
