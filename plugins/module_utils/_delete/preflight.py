# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Check mode's answer for the chosen Machines together (pure; docs/stalls.md,
"Asking before starting"): what the batch does to itself.

Each Machine's drain preview judges it alone. Deleted together, the Machines
also meet one another: a PodDisruptionBudget whose Pods sit on several of them
lets only so many go at once, a Pod that nothing recreates is lost, and the
replacement of an evicted Pod needs a Node that is not itself being drained.
:func:`batch_findings` takes what the check-mode run read (each Machine's
drain preview: its Node, its Pods and what the drain decided about each; and
per workload cluster one list of the Nodes and of the budgets, and the
controllers of the Pods to evict) and returns one finding per thing the batch
does to itself, each with the Machines, the objects, the evidence and a
verdict as a blocker has one, and the largest concurrency at which no budget
shared by the Machines serialises their drains.

The rules, in docs/stalls.md:

- a Pod is *to evict* when the drain decided ``Drain``, it is not terminating
  and it still runs; a budget counts it healthy when it is Ready;
- a Pod to evict that runs and is not Ready meets its budget's
  ``unhealthyPodEvictionPolicy`` (``_drain/budgets.py`` ``eviction_answer``,
  the eviction API's own rule): under ``AlwaysAllow`` it goes whatever the
  budget allows, under ``IfHealthyBudget`` (the default) only while the budget
  has the healthy Pods it needs or allows a disruption; each such Pod's
  predicted answer is listed, and one refused is a finding that holds its
  Machine (never, when the budget needs every Pod it expects);
- it *comes back* when a controller recreates it (not a bare Pod, not the Pod
  of a DaemonSet that is gone) and some Node outside the batch can take its
  replacement: Ready, not cordoned, not being deleted, no NoSchedule /
  NoExecute taint the Pod does not tolerate, and every label of its
  ``nodeSelector``;
- and it finds room there: per group of such Nodes, the requests (cpu,
  memory, one Pod slot) of the replacements that only those Nodes can take
  must fit in what the group has free (``status.allocatable`` less the
  requests of the Pods bound there that have not ended and are not being
  deleted); when they do not, the fewest Pods that must stay Pending for the
  rest to fit (the largest askers) do not come back (``_delete/capacity.py``:
  fitting in total does not prove they fit Node by Node, the scheduler
  decides);
- a budget allowing ``A`` disruptions now, with ``k`` of its healthy Pods to
  evict in the batch of which ``u`` never come back: ``k <= A`` all go at once;
  ``u > M`` (``M``: what it allows at most, once every Pod it expects is
  healthy) can never finish (after ``M`` of them the budget never allows
  again: at most ``can_finish_at_most`` of its Machines finish, those whose
  drains use it up first, and which ones is a race when they drain side by
  side); ``u == M > 0`` with Pods that do come back finishes only if those go
  first; otherwise the drains are serialised by the budget and wait, each
  eviction for a replacement to be Ready;
- Pods that no Node outside the batch can take, or has room for: those whose budget they stop
  for good hold their Machines (never), the others only cost their workload;
- the suggested order puts first the Machines with no Pod that uses up a
  budget for good, then the others, the fewest such Pods first, and last those
  that can never finish whatever the order;
- the suggested concurrency is the largest ``c`` such that, for every budget
  with Pods on two Machines or more that some concurrency lets go (not one
  judged never), the ``c`` Machines holding most of its healthy Pods hold no
  more than it allows; 1 when no ``c`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.capacity import free_allocatable, pod_requests, shortfalls
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.budgets import (
    REFUSED,
    covering_budgets,
    eviction_answer,
    ready,
    running_unready,
    unhealthy_policy,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import WARNING_NO_CONTROLLER, WARNING_ORPHANED_DAEMONSET
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pods import controller_of, is_running, pod_key
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stalls import budget_evidence, never_allows
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import CLEARS, NEEDS_ACTION, NEVER
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.nodes import is_unschedulable

# Kinds of what the batch does to itself.
KIND_SHARED_BUDGET = "batch budget"
KIND_UNREPLICATED = "unreplicated pod"
KIND_SINGLE_REPLICA = "single replica"
KIND_WHOLE_WORKLOAD = "every replica in the batch"
KIND_NO_NODE = "no node for replacements"
KIND_NO_ROOM = "no room for replacements"
KIND_UNREADY = "unready pod"

# Taint effects that keep a Pod off a Node it does not tolerate.
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
# At most this many Pods named in a finding's object line (the evidence has them all).
_MAX_NAMED = 3


@dataclass(frozen=True)
class Finding:
    """One thing the batch does to itself. ``holds``: whether it holds a deletion (a budget
    that serialises or stops the drains), or only costs a workload (lost, or down for a while)."""

    kind: str
    machines: tuple[str, ...]
    object: str
    verdict: str
    reason: str
    holds: bool
    evidence: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "machines": list(self.machines),
            "object": self.object,
            "evidence": dict(self.evidence),
            "verdict": self.verdict,
            "reason": self.reason,
            "holds": self.holds,
        }


@dataclass
class _Pod:
    """A Pod to evict, with what the batch needs to know of it."""

    machine: str
    cluster: str
    pod: dict
    recreated: bool  # a controller recreates it
    home: bool | None = None  # a Node outside the batch can take its replacement (None: not known)
    roomless: bool = False  # home False because the Nodes that could take it have no room left

    @property
    def key(self) -> str:
        return pod_key(self.pod)

    @property
    def comes_back(self) -> bool:
        return self.recreated and self.home is not False


def _names(keys: list[str]) -> str:
    shown = ", ".join(keys[:_MAX_NAMED])
    return shown + (f" and {len(keys) - _MAX_NAMED} more" if len(keys) > _MAX_NAMED else "")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


# ---------------------------------------------------------------------------
# Nodes


def _node_ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or [])


def _tolerates(pod: dict, taint: dict) -> bool:
    """Whether one of the Pod's tolerations tolerates ``taint`` (the scheduler's rule)."""
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration.get("key") == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def why_not(node: dict, pod: dict | None = None) -> str | None:
    """Why ``node`` cannot take a new Pod (like ``pod``), None when it can."""
    if (node.get("metadata") or {}).get("deletionTimestamp"):
        return "being deleted"
    if is_unschedulable(node):
        return "cordoned"
    if not _node_ready(node):
        return "not Ready"
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in _BLOCKING_EFFECTS and (pod is None or not _tolerates(pod, taint)):
            return f"tainted {taint.get('key')}{'=' + taint['value'] if taint.get('value') else ''}:{taint.get('effect')}"
    if pod is not None:
        labels = (node.get("metadata") or {}).get("labels") or {}
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}
        missing = sorted(key for key, value in selector.items() if labels.get(key) != value)
        if missing:
            return f"not selected by its nodeSelector ({', '.join(missing)})"
    return None


def _outside(nodes: list[dict], batch_nodes: set[str]) -> list[dict]:
    return [node for node in nodes if (node.get("metadata") or {}).get("name") not in batch_nodes]


def replacement_nodes(nodes: list[dict], batch_nodes: list[str], surge: int) -> list[dict]:
    """With replacement first, the Nodes of the replacements that stand beside the batch's (``surge`` of them at a
    time): each assumed like the Node it replaces - its MachineSet's template - Ready, schedulable, its labels and
    taints and allocatable, no Pod yet; named ``<node> (replacement)``."""
    by_name = {(node.get("metadata") or {}).get("name"): node for node in nodes}
    made = []
    for name in [name for name in batch_nodes if name in by_name][: max(0, surge)]:
        node = by_name[name]
        labels = {key: value for key, value in ((node.get("metadata") or {}).get("labels") or {}).items() if key != "kubernetes.io/hostname"}
        spec = {"taints": [taint for taint in (node.get("spec") or {}).get("taints") or [] if not taint.get("key", "").startswith("node.kubernetes.io/")]}
        status = {"allocatable": dict((node.get("status") or {}).get("allocatable") or {}), "conditions": [{"type": "Ready", "status": "True"}]}
        made.append({"metadata": {"name": f"{name} (replacement)", "labels": labels}, "spec": spec, "status": status})
    return made


# ---------------------------------------------------------------------------
# The Pods to evict


def _to_evict(machine: dict) -> list[tuple[dict, dict]]:
    """(Pod, decision) of the Pods the Machine's drain would evict."""
    pods = {pod_key(pod): pod for pod in machine.get("pods") or []}
    found = []
    for decision in machine.get("decisions") or []:
        key = f"{decision.get('namespace')}/{decision.get('name')}"
        pod = pods.get(key)
        if pod is None or decision.get("behavior") != DRAIN or decision.get("terminating") or not is_running(pod):
            continue
        found.append((pod, decision))
    return found


def _recreated(pod: dict, decision: dict) -> bool:
    warnings = decision.get("warnings") or []
    return controller_of(pod) is not None and WARNING_NO_CONTROLLER not in warnings and WARNING_ORPHANED_DAEMONSET not in warnings


def _workload(pod: dict, controllers: dict) -> tuple[str, dict | None]:
    """How a Pod's workload is named (``Deployment shop/web``) and its controller as read (None: not read)."""
    ref = controller_of(pod) or {}
    known = controllers.get(ref.get("uid") or "")
    namespace = (pod.get("metadata") or {}).get("namespace")
    if known is not None and known.get("owner"):
        return f"{known['owner']['kind']} {namespace}/{known['owner']['name']}", known
    return f"{ref.get('kind')} {namespace}/{ref.get('name')}", known


# ---------------------------------------------------------------------------
# The findings


def _budget_findings(pods: list[_Pod], budgets: list[dict], concurrency: int, lost: set[str]) -> tuple[list[Finding], dict[str, list[int]]]:
    """The budgets the batch's Pods meet; and, per budget with healthy Pods on two Machines or more,
    its allowance followed by its healthy Pods per Machine, most first (for the suggested concurrency)."""
    under: dict[str, tuple[dict, list[_Pod]]] = {}
    for pod in pods:
        covering = covering_budgets(pod.pod, budgets)
        if len(covering) != 1:
            continue  # none, or two: the eviction API refuses the Pod whatever they allow (the Machine's own blocker)
        name = budget_evidence(covering[0])["budget"]
        under.setdefault(name, (covering[0], []))[1].append(pod)
    findings, shares = [], {}
    roomless = {pod.key for pod in pods if pod.roomless}
    for name, (budget, members) in sorted(under.items()):
        healthy = [pod for pod in members if ready(pod.pod)]
        per_machine: dict[str, list[str]] = {}
        for pod in healthy:
            per_machine.setdefault(pod.machine, []).append(pod.key)
        status = budget.get("status") or {}
        allowed, expected, needed = status.get("disruptionsAllowed"), status.get("expectedPods"), status.get("desiredHealthy")
        if not healthy or not all(isinstance(value, int) for value in (allowed, expected, needed)) or expected <= 0:
            continue  # nothing it counts is evicted, or not counted by the disruption controller (yet): never judged
        counts = sorted((len(keys) for keys in per_machine.values()), reverse=True)
        # What it allows at most, once every Pod it expects is healthy: the Pods that never come back can only use that up.
        most = max(allowed, expected - needed)
        # Only a budget that concurrency can help is counted for the suggested concurrency (below, once judged).
        share = [allowed, *counts] if len(per_machine) > 1 else None
        machines = tuple(sorted(per_machine))
        never_back = sorted(pod.key for pod in healthy if not pod.comes_back)
        at_once = sum(counts[: max(1, concurrency)])
        evidence = {
            **budget_evidence(budget),
            "pods_by_machine": {machine: sorted(keys) for machine, keys in sorted(per_machine.items())},
            "to_evict": len(healthy),
            "never_back": never_back,
            "allows_at_most": most,
            "concurrency": concurrency,
            "at_once": at_once,
        }
        pods_text = _names(sorted(pod.key for pod in healthy))
        subject = f"PodDisruptionBudget {name}"
        never = never_allows(budget)
        if never and len(per_machine) > 1:
            reason = f"{never}; its Pods {pods_text} sit on {_plural(len(per_machine), 'Machine')} of the batch, and none of them can go"
            findings.append(Finding(KIND_SHARED_BUDGET, machines, subject, NEVER, reason, True, evidence))
        elif never:
            continue  # one Machine: its own preview says so
        elif len(never_back) > most:
            why = _why_never_back(never_back, lost, roomless)
            evidence["can_finish_at_most"] = _finish_at_most(healthy, most)
            reason = (
                f"{_allows(allowed, most)} and {len(never_back)} of the {len(healthy)} healthy Pods the batch evicts never come back ({why}):"
                f" once {most} of them {'is' if most == 1 else 'are'} gone it never allows again,"
                f" so {_finishing(evidence['can_finish_at_most'], len(machines))}"
            )
            findings.append(Finding(KIND_SHARED_BUDGET, machines, subject, NEVER, reason, True, evidence))
        elif len(never_back) == most and most > 0 and len(healthy) > most:
            why = _why_never_back(never_back, lost, roomless)
            reason = (
                f"{_allows(allowed, most)} and {_names(never_back)} never come back ({why}): the drains finish only if the other Pods go first;"
                " delete those Machines first, or move the Pods that never come back"
            )
            findings.append(Finding(KIND_SHARED_BUDGET, machines, subject, NEEDS_ACTION, reason, True, evidence))
        elif at_once > allowed and len(per_machine) > 1:
            side = min(max(1, concurrency), len(per_machine))
            reason = (
                f"it allows {allowed} disruption{'s' if allowed != 1 else ''} now and the batch evicts {len(healthy)} of its healthy Pods from"
                f" {_plural(len(per_machine), 'Machine')} ({at_once} at once at concurrency {concurrency}, {side} Machine{'s' if side != 1 else ''}"
                " side by side): the budget serialises the drains, each eviction waiting for a replacement to be Ready"
            )
            findings.append(Finding(KIND_SHARED_BUDGET, machines, subject, CLEARS, reason, True, evidence))
        judged = findings[-1] if findings and findings[-1].object == subject else None
        if share is not None and (judged is None or judged.verdict != NEVER):
            shares[name] = share  # a budget that can never let all its Machines go is no reason to go slower
    return findings, shares


def _unready_answers(pods: list[_Pod], budgets: list[dict]) -> tuple[list[dict], list[Finding]]:
    """What the eviction API answers for each Pod to evict that runs and is not Ready, under its one budget's
    unhealthyPodEvictionPolicy (``_drain/budgets.py`` ``eviction_answer``), and a finding for each one refused."""
    answers, findings = [], []
    for pod in pods:
        covering = covering_budgets(pod.pod, budgets)
        if not running_unready(pod.pod) or len(covering) != 1:
            continue
        budget = covering[0]
        answer, why = eviction_answer(pod.pod, budget)
        evidence = {**budget_evidence(budget), "pod": pod.key, "unhealthy_pod_eviction_policy": unhealthy_policy(budget)}
        answers.append(
            {
                "pod": pod.key,
                "machine": pod.machine,
                "budget": evidence["budget"],
                "policy": evidence["unhealthy_pod_eviction_policy"],
                "answer": "refused" if answer == REFUSED else "evicted",
                "reason": why,
            }
        )
        if answer != REFUSED:
            continue
        needed, expected = evidence.get("needed_healthy"), evidence.get("expected_pods")
        never = isinstance(needed, int) and isinstance(expected, int) and expected > 0 and needed >= expected
        reason = f"budget {evidence['budget']}: {why}" + (
            "; it needs every Pod it expects healthy, this one among them: it never goes until the budget (AlwaysAllow lets it go) or the workload changes"
            if never
            else "; it goes once the budget has the healthy Pods it needs again"
        )
        findings.append(Finding(KIND_UNREADY, (pod.machine,), f"Pod {pod.key}", NEVER if never else CLEARS, reason, True, evidence))
    return answers, findings


def _finish_at_most(healthy: list[_Pod], most: int) -> int:
    """How many of the budget's Machines can finish at best, when ``most`` of its Pods that never come back
    use it up for good: every Machine whose Pods all come back (drained first, each gives back what it took),
    then as many of the others as their Pods that never come back fit in ``most``, the fewest first."""
    never_back: dict[str, int] = {}
    for pod in healthy:
        never_back[pod.machine] = never_back.get(pod.machine, 0) + (0 if pod.comes_back else 1)
    finishing, used = 0, 0
    for count in sorted(never_back.values()):
        if used + count > most:
            break
        finishing, used = finishing + 1, used + count
    return finishing


def _finishing(at_most: int, machines: int) -> str:
    if machines == 1:
        return "the Machine can never finish"
    if at_most == 0:
        return f"none of its {machines} Machines can finish"
    return (
        f"at most {at_most} of its {machines} Machines can finish, those whose drains use up what it allows first"
        " (side by side, whichever evicts first), and the others never; delete fewer of them together, or give the Pods a Node outside the batch"
    )


def _allows(allowed: int, most: int) -> str:
    text = f"it allows {allowed} disruption{'s' if allowed != 1 else ''} now"
    return text + (f" ({most} at most, once every Pod it expects is healthy)" if most > allowed else "")


def _why_never_back(keys: list[str], lost: set[str], roomless: set[str] | None = None) -> str:
    bare = [key for key in keys if key in lost]
    full = [key for key in keys if key in (roomless or set())]
    if len(bare) == len(keys):
        return "nothing recreates them"
    if not bare and len(full) == len(keys):
        return "the Nodes outside the batch that could take their replacements have no room for them"
    if not bare:
        return "no Node outside the batch can take, or has room for, their replacements" if full else "no Node outside the batch can take their replacements"
    return "nothing recreates some, no Node outside the batch can take the others' replacements"


def _unreplicated(pods: list[_Pod]) -> list[Finding]:
    by_machine: dict[str, list[str]] = {}
    for pod in pods:
        if not pod.recreated:
            by_machine.setdefault(pod.machine, []).append(pod.key)
    findings = []
    for machine, keys in sorted(by_machine.items()):
        keys.sort()
        reason = (
            f"evicted and never recreated (no controller): {'its workload is' if len(keys) == 1 else 'their workloads are'} lost with the Machine;"
            " move or back it up first if it matters"
        )
        findings.append(
            Finding(KIND_UNREPLICATED, (machine,), f"Pod{'s' if len(keys) > 1 else ''} {_names(keys)}", NEEDS_ACTION, reason, False, {"pods": keys})
        )
    return findings


def _replicas(pods: list[_Pod], budgets: list[dict], controllers: dict) -> list[Finding]:
    """Single-replica workloads, and workloads whose every replica the batch evicts with no budget to pace it."""
    by_workload: dict[str, tuple[dict | None, list[_Pod]]] = {}
    for pod in pods:
        if pod.recreated:
            name, known = _workload(pod.pod, controllers)
            by_workload.setdefault(name, (known, []))[1].append(pod)
    findings = []
    for name, (known, members) in sorted(by_workload.items()):
        replicas = (known or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 1:
            continue
        covering = [budget for pod in members for budget in covering_budgets(pod.pod, budgets)]
        machines = tuple(sorted({pod.machine for pod in members}))
        keys = sorted(pod.key for pod in members)
        evidence: dict[str, Any] = {"workload": name, "replicas": replicas, "pods": keys}
        homeless = any(pod.home is False for pod in members)
        nowhere = "no Node outside the batch has room for" if any(pod.roomless for pod in members) else "no Node outside the batch can take"
        if replicas == 1:
            never = next((never_allows(budget) for budget in covering if never_allows(budget)), None)
            if never:
                budget = next(budget for budget in covering if never_allows(budget))
                evidence.update(budget_evidence(budget))
                reason = f"its one Pod is behind budget {evidence['budget']}: {never}; scale it up or change the budget"
                findings.append(Finding(KIND_SINGLE_REPLICA, machines, name, NEVER, reason, True, evidence))
            elif homeless:
                reason = f"its one Pod is evicted and {nowhere} the replacement: the workload is down until one can"
                findings.append(Finding(KIND_SINGLE_REPLICA, machines, name, NEEDS_ACTION, reason, False, evidence))
            else:
                reason = "its one Pod is evicted: the workload is down until the replacement is Ready on another Node"
                findings.append(Finding(KIND_SINGLE_REPLICA, machines, name, CLEARS, reason, False, evidence))
        elif len(members) >= replicas and not covering:
            reason = (
                f"all {replicas} of its Pods are on Machines of the batch and no budget paces their evictions: it can be down while they are"
                f" drained (all at once when {_plural(len(machines), 'Machine')} drain side by side); a budget would make the drains wait for replacements"
            )
            if homeless:
                reason += f"; {nowhere} the replacements, so it stays down until one can"
            findings.append(Finding(KIND_WHOLE_WORKLOAD, machines, name, NEEDS_ACTION if homeless else CLEARS, reason, False, evidence))
    return findings


def _no_node(cluster: str, pods: list[_Pod], outside: list[dict], never_budgets: list[Finding]) -> list[Finding]:
    """Pods recreated that no Node outside the batch can take: one finding for those whose budget they stop for good
    (it holds their Machines), one for the others (their workloads are down, nothing holds the Machines)."""
    homeless = [pod for pod in pods if pod.recreated and pod.home is False and not pod.roomless]
    if not homeless:
        return []
    nodes = {(node.get("metadata") or {}).get("name"): why_not(node, homeless[0].pod) or "cannot take all of them" for node in outside}
    where = f"the workload cluster {cluster}" if cluster else "the cluster"
    if nodes:
        why = "; ".join(f"{name}: {reason}" for name, reason in sorted(nodes.items())[:_MAX_NAMED])
        head = f"no Node of {where} outside the batch can take their replacements ({why}{' ...' if len(nodes) > _MAX_NAMED else ''})"
    else:
        head = f"{where} has no Node outside the batch"
    return _pending_findings(KIND_NO_NODE, homeless, head, {"cluster": cluster or None, "nodes_outside_batch": nodes}, never_budgets)


def _pending_findings(kind: str, homeless: list[_Pod], head: str, evidence: dict, never_budgets: list[Finding]) -> list[Finding]:
    """Replacements that stay Pending: one finding for those whose budget they stop for good (it holds their
    Machines, never), one for the others (their workloads are down, nothing holds the Machines)."""
    stopping = {finding.evidence["budget"]: set(finding.evidence.get("never_back") or ()) for finding in never_budgets}
    stuck = [pod for pod in homeless if any(pod.key in keys for keys in stopping.values())]
    findings = []
    for members, stops in ((stuck, True), ([pod for pod in homeless if pod not in stuck], False)):
        if not members:
            continue
        machines = tuple(sorted({pod.machine for pod in members}))
        keys = sorted(pod.key for pod in members)
        found: dict[str, Any] = {**evidence, "pods": keys} if "pods" not in evidence else {**evidence, "pending": keys}
        subject = f"Pod{'s' if len(keys) > 1 else ''} {_names(keys)}"
        if stops:
            stopped = sorted(name for name, never_back in stopping.items() if never_back & set(keys))
            found["budgets"] = stopped
            named = ", ".join(f"budget {name}" for name in stopped)
            reason = f"{head}: the replacement Pods stay Pending, so {named} never allow{'s' if len(stopped) == 1 else ''} again"
            findings.append(Finding(kind, machines, subject, NEVER, reason, True, found))
        else:
            reason = f"{head}: the replacement Pods stay Pending and their workloads are down until a Node can take them"
            findings.append(Finding(kind, machines, subject, NEEDS_ACTION, reason, False, found))
    return findings


def _room(cluster: str, pods: list[_Pod], outside: list[dict], bound: list[dict] | None, controllers: dict) -> list[dict]:
    """Where the replacements of the Pods that come back cannot fit even in total in what the Nodes outside
    the batch that could take them have free (``_delete/capacity.py``); marks the fewest Pods that must stay
    Pending (``home`` False, ``roomless``). ``bound``: the cluster's Pods (None: not read, not judged)."""
    if bound is None:
        return []
    coming = [pod for pod in pods if pod.recreated and pod.home is True]
    candidates = {pod.key: frozenset((node.get("metadata") or {}).get("name") for node in outside if why_not(node, pod.pod) is None) for pod in coming}
    by_key = {pod.key: pod for pod in coming}
    found = shortfalls(candidates, {pod.key: pod_requests(pod.pod) for pod in coming}, free_allocatable(outside, bound))
    for short in found:
        short["cluster"] = cluster or None
        short["workloads"] = sorted({_workload(by_key[key].pod, controllers)[0] for key in short["pods"]})
        for key in short["pending"]:
            by_key[key].home, by_key[key].roomless = False, True
    return found


def _no_room(shorts: list[dict], pods: list[_Pod], never_budgets: list[Finding]) -> list[Finding]:
    by_key = {pod.key: pod for pod in pods}
    findings, named = [], set()
    for short in shorts:
        if set(short["pending"]) <= named:
            continue  # a wider group short only by the Pods of a smaller one already named
        named.update(short["pending"])
        lacking = "; ".join(
            f"{resource} {amounts['requested']} requested, {amounts['free']} free ({amounts['shortfall']} short)"
            for resource, amounts in short["short"].items()
        )
        nodes = _names(short["nodes"])
        head = (
            f"the replacements of {_plural(len(short['pods']), 'Pod')} ({_names(short['workloads'])}) that only {nodes} outside the batch can take"
            f" ask for more than {'it has' if len(short['nodes']) == 1 else 'those Nodes have'} free in total ({lacking}),"
            f" so at least {len(short['pending'])} stay Pending, which ones is the scheduler's choice"
            " (fitting in total would not prove they fit Node by Node either)"
        )
        pending = [by_key[key] for key in short["pending"] if key in by_key]
        findings.extend(_pending_findings(KIND_NO_ROOM, pending, head, short, never_budgets))
    return findings


def suggested_concurrency(shares: dict[str, list[int]], machines: int) -> int:
    """The largest concurrency at which no budget shared by the Machines serialises their drains
    (``shares``: budget -> [allowed, healthy Pods per Machine, most first]); 1 when none does."""
    best = max(1, machines)
    for allowed, *counts in shares.values():
        fits = 0
        while fits < len(counts) and sum(counts[: fits + 1]) <= allowed:
            fits += 1
        if fits < len(counts):  # more of its Machines side by side than that would be serialised
            best = min(best, max(1, fits))
    return max(1, best)


def suggested_order(keys: list[str], findings: list[Finding], used_up: dict[str, int]) -> list[str]:
    """The Machines (``keys``, in the task's order) in an order that lets the most of them finish at the
    suggested concurrency: first those with no Pod that uses up a budget for good (``used_up``: Machine ->
    its Pods that never come back under a budget judged never or needing someone to act), then the others,
    the fewest such Pods first, and last those a finding says can never finish whatever the order; the
    task's order otherwise."""
    hopeless = {
        key
        for finding in findings
        if finding.holds and finding.verdict == NEVER and finding.kind not in (KIND_NO_NODE, KIND_NO_ROOM) and "can_finish_at_most" not in finding.evidence
        for key in finding.machines
    }
    return sorted(keys, key=lambda key: (key in hopeless, used_up.get(key, 0)))


def batch_findings(facts: dict, concurrency: int, surge: int = 0) -> dict:
    """What the batch does to itself, from what the check-mode run read (``facts``):

    ``machines``: one entry per Machine whose drain was previewed - ``key``, ``cluster`` (where its Node
    is, "" for the task's own cluster), ``node`` (name), ``pods`` (as the preview read them) and
    ``decisions`` (what the drain decided about each, ``PodDecision.as_dict``);
    ``clusters``: per cluster, ``nodes``, ``budgets`` and ``pods`` (the Pods bound to its Nodes, for their
    free allocatable; None when they could not be listed, absent when not needed) and
    ``controllers`` (controller UID -> ``kind``, ``name``, ``replicas``, ``owner``: ``{kind, name}``).

    Returns ``findings`` (dicts: those that hold a deletion first, the gravest first), ``suggested_concurrency``,
    ``suggested_order`` (:func:`suggested_order`), ``concurrency``, ``counted`` (the Machines counted),
    ``unready_pods`` (what the eviction API answers for each Pod to evict that runs and is not Ready: ``pod``,
    ``machine``, ``budget``, ``policy``, ``answer`` - evicted or refused - and ``reason``) and ``not_counted``
    (per cluster, what could not be read)."""
    clusters = facts.get("clusters") or {}
    machines = [machine for machine in facts.get("machines") or [] if machine.get("node")]
    batch_nodes: dict[str, set[str]] = {}
    for machine in machines:
        batch_nodes.setdefault(machine.get("cluster") or "", set()).add(machine["node"])
    pods: list[_Pod] = []
    for machine in machines:
        cluster = machine.get("cluster") or ""
        for pod, decision in _to_evict(machine):
            pods.append(_Pod(machine["key"], cluster, pod, _recreated(pod, decision)))
    findings: list[Finding] = []
    shares: dict[str, list[int]] = {}
    used_up: dict[str, int] = {}
    surged: dict[str, list[str]] = {}
    unready: list[dict] = []
    for cluster in sorted({pod.cluster for pod in pods}):
        here = [pod for pod in pods if pod.cluster == cluster]
        known = clusters.get(cluster) or {}
        nodes = known.get("nodes")
        outside = _outside(nodes, batch_nodes.get(cluster, set())) if nodes is not None else []
        if nodes is not None and surge:
            order = [machine["node"] for machine in machines if (machine.get("cluster") or "") == cluster]
            added = replacement_nodes(nodes, order, surge)
            outside += added
            surged.setdefault(cluster or "the cluster", []).extend(node["metadata"]["name"] for node in added)
        shorts: list[dict] = []
        if nodes is not None:
            for pod in here:
                pod.home = any(why_not(node, pod.pod) is None for node in outside)
            shorts = _room(cluster, here, outside, known.get("pods"), known.get("controllers") or {})
        lost = {pod.key for pod in here if not pod.recreated}
        budgets = known.get("budgets") or []
        found, cluster_shares = _budget_findings(here, budgets, concurrency, lost)
        answers, unready_findings = _unready_answers(here, budgets)
        unready.extend(answers)
        findings.extend(unready_findings)
        shares.update({f"{cluster}|{name}": share for name, share in cluster_shares.items()})
        findings.extend(found)
        for finding in found:
            if finding.verdict in (NEVER, NEEDS_ACTION) and finding.evidence.get("never_back"):
                for pod in here:
                    if pod.key in finding.evidence["never_back"]:
                        used_up[pod.machine] = used_up.get(pod.machine, 0) + 1
        findings.extend(_unreplicated(here))
        findings.extend(_replicas(here, budgets, known.get("controllers") or {}))
        never_budgets = [finding for finding in found if finding.verdict == NEVER]
        findings.extend(_no_node(cluster, here, outside, never_budgets))
        findings.extend(_no_room(shorts, here, never_budgets))
    order = {NEVER: 0, NEEDS_ACTION: 1, CLEARS: 2}
    findings.sort(key=lambda finding: (not finding.holds, order[finding.verdict], finding.kind, finding.object))
    return {
        "findings": [finding.as_dict() for finding in findings],
        "concurrency": concurrency,
        "suggested_concurrency": suggested_concurrency(shares, len(machines)),
        "suggested_order": suggested_order([machine["key"] for machine in machines], findings, used_up),
        "counted": sorted(machine["key"] for machine in machines),
        **({"replacement_nodes": surged} if surge else {}),
        "unready_pods": sorted(unready, key=lambda answer: answer["pod"]),
        "not_counted": {cluster or "the cluster": list(known["errors"]) for cluster, known in sorted(clusters.items()) if known.get("errors")},
    }


def finding_line(finding: dict) -> str:
    """A finding as a preflight line (as docs/stalls.md shows a blocker)."""
    return f"{finding['verdict']}: {finding['kind']} {finding['object']}: {finding['reason']}"
