# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What holds a drain after a pass, and whether it can ever clear (pure;
docs/stalls.md): refused evictions with the refusing budget's numbers, Pods
two budgets select, Pods terminating (past their grace, held by finalizers),
Pods waited for to complete, an unreachable Node.

A budget's refusal is also explained when the budget still counts Pods as being
evicted (``status.disruptedPods``): an eviction it granted whose Pod was never
deleted - the request was cut between the budget's update and the deletion, as
when a run is killed in the middle of one - holds the budget's allowance until
the disruption controller gives up on it, two minutes after the grant. That
clears by itself, and the reason says when.

"Never" is said only when the cluster's state proves it: a budget that allows
no disruption while every Pod it expects is healthy (its selected Pods can only
go if someone changes the budget or the workload), or one whose spec allows
none at all (``maxUnavailable: 0``, ``minAvailable: 100%``); a Pod two budgets
select, which the eviction API refuses whatever the budgets allow.

Before the first pass, an OpenShift control-plane Node waits while another
control-plane Node is cordoned (``gates.cordoned_control_plane_nodes``). That
clears by itself when the cordoned Node is being deleted or its Machine is
(the deletion removes it); a Node cordoned otherwise waits for someone to
uncordon it.

What the task does about them - wait, fail, escalate, give up after
``stall_timeout`` - is the stall policy's (``stall_policy.py``).
"""

from __future__ import annotations

import datetime as _dt

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.budgets import ALWAYS_ALLOW, covering_budgets, running_unready, unhealthy_policy
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.evictions import (
    BUDGET_CAUSE,
    NEGATIVE_ALLOWED_CAUSE,
    TERMINATING_NAMESPACE_MESSAGE,
    TOO_MANY_DISRUPTED_CAUSE,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.gates import node_machine
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PDB_MESSAGE, UNREACHABLE_SKIP_DELETED_SECONDS
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import DrainPass
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pods import pod_key
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import (
    CLEARS,
    KIND_BUDGET,
    KIND_EVICTION_ERROR,
    KIND_FINALIZER,
    KIND_NAMESPACE_TERMINATING,
    KIND_TERMINATING,
    KIND_TERMINATING_PAST_GRACE,
    KIND_TWO_BUDGETS,
    KIND_UNREACHABLE_NODE,
    KIND_WAIT_COMPLETED,
    NEEDS_ACTION,
    NEVER,
    PHASE_DRAIN,
    Blocker,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import parse_time, rfc3339

# Another control-plane Node cordoned: OpenShift's drain controller drains control-plane Nodes one at a time (row O3).
KIND_CONTROL_PLANE_CORDONED = "another control-plane Node cordoned"

# The eviction API's answer (500) for a Pod more than one budget selects.
TWO_BUDGETS_WORDS = "more than one PodDisruptionBudget"
# How long the disruption controller counts a Pod a budget let be evicted as gone
# while it is not deleted (its DeletionTimeout): then it is counted again.
DISRUPTED_POD_TIMEOUT = _dt.timedelta(minutes=2)


def budget_evidence(budget: dict) -> dict:
    """What a budget says of itself: what it needs, what it has, what it allows."""
    spec, status = budget.get("spec") or {}, budget.get("status") or {}
    meta = budget.get("metadata") or {}
    evidence = {
        "budget": f"{meta.get('namespace')}/{meta.get('name')}",
        "needed_healthy": status.get("desiredHealthy"),
        "healthy": status.get("currentHealthy"),
        "expected_pods": status.get("expectedPods"),
        "disruptions_allowed": status.get("disruptionsAllowed"),
    }
    for key, name in (
        ("minAvailable", "min_available"),
        ("maxUnavailable", "max_unavailable"),
        ("unhealthyPodEvictionPolicy", "unhealthy_pod_eviction_policy"),
    ):
        if key in spec:
            evidence[name] = spec[key]
    return evidence


def never_allows(budget: dict) -> str | None:
    """Why ``budget`` can never allow an eviction as things stand; None when it may."""
    spec, status = budget.get("spec") or {}, budget.get("status") or {}
    if str(spec.get("maxUnavailable")) in ("0", "0%"):
        return "its maxUnavailable is 0: it allows no eviction at all"
    if str(spec.get("minAvailable")) == "100%":
        return "its minAvailable is 100%: it allows no eviction at all"
    expected, healthy, needed = (status.get(key) for key in ("expectedPods", "currentHealthy", "desiredHealthy"))
    counted = all(isinstance(value, int) for value in (expected, healthy, needed)) and expected > 0
    if counted and not status.get("disruptionsAllowed") and needed >= expected and healthy >= expected:
        return f"it needs all {expected} of its Pods healthy and all are: no eviction is allowed until the budget or the workload changes"
    return None


def unfinished_evictions(budget: dict, pods: dict[str, dict]) -> dict[str, _dt.datetime]:
    """Pod name -> when ``budget`` granted its eviction, for the Pods it still counts as
    being evicted (``status.disruptedPods``) that ``pods`` (key -> Pod, the Node's) show
    neither terminating nor gone, nor created after the grant (another Pod of that name):
    evictions whose deletion never happened."""
    namespace = (budget.get("metadata") or {}).get("namespace")
    found = {}
    for name, granted in sorted(((budget.get("status") or {}).get("disruptedPods") or {}).items()):
        meta = (pods.get(f"{namespace}/{name}") or {}).get("metadata")
        at = parse_time(granted) if isinstance(granted, str) else None
        created = parse_time(meta.get("creationTimestamp")) if meta else None
        if meta is None or at is None or meta.get("deletionTimestamp") or (created is not None and created > at):
            continue
        found[name] = at
    return found


def unready_refusal(key: str, budget: dict, evidence: dict) -> Blocker:
    """A refused Pod that is Running but not Ready, by the budget's ``unhealthyPodEvictionPolicy`` (the eviction
    API's own rule, ``_drain/budgets.py``): under ``AlwaysAllow`` the policy lets it go, so the refusal is a
    budget not counted yet and clears; under ``IfHealthyBudget`` it goes once the budget has the healthy Pods
    it needs - never, when it needs every Pod it expects (this one is among them, and not healthy)."""
    policy = unhealthy_policy(budget)
    evidence.update(unhealthy_pod_eviction_policy=policy, pod_ready=False)
    name = evidence["budget"]
    if policy == ALWAYS_ALLOW:
        reason = (
            f"budget {name} lets a Pod that is not Ready go whatever it allows (unhealthyPodEvictionPolicy AlwaysAllow): "
            "its refusal clears once the disruption controller has counted the budget"
        )
        return Blocker(PHASE_DRAIN, KIND_BUDGET, f"Pod {key}", CLEARS, reason, evidence=evidence)
    needed, expected, healthy = evidence.get("needed_healthy"), evidence.get("expected_pods"), evidence.get("healthy")
    if all(isinstance(value, int) for value in (needed, expected)) and expected > 0 and needed >= expected:
        reason = (
            f"budget {name}: the Pod is not Ready, and under unhealthyPodEvictionPolicy {policy} a Pod that is not Ready goes only while the budget "
            f"has the {needed} healthy Pods it needs - all {expected} it expects, this one among them - and once Ready it would need every Pod "
            "healthy to allow one: no eviction is allowed until the budget (unhealthyPodEvictionPolicy: AlwaysAllow lets it go) or the workload changes"
        )
        return Blocker(PHASE_DRAIN, KIND_BUDGET, f"Pod {key}", NEVER, reason, evidence=evidence)
    reason = (
        f"budget {name}: the Pod is not Ready, and under unhealthyPodEvictionPolicy {policy} it goes once the budget has the healthy Pods it needs "
        f"again ({healthy} of {needed})"
    )
    return Blocker(PHASE_DRAIN, KIND_BUDGET, f"Pod {key}", CLEARS, reason, evidence=evidence)


def budget_blocker(key: str, budget: dict, pods: dict[str, dict | None]) -> Blocker:
    """What ``budget``, one of the budgets that select the Pod ``key``, makes of its refused eviction: never
    (it allows no eviction at all), clearing when the disruption controller counts again a Pod it still
    counts as being evicted (``pods``: the Node's Pods by key), or clearing once enough of its Pods are
    healthy again. A Pod that is Running but not Ready is judged by the budget's unhealthyPodEvictionPolicy
    (:func:`unready_refusal`). The collection's own drain and a followed controller's report are judged by it alike."""
    evidence = {"pod": key, **budget_evidence(budget)}
    pod = pods.get(key)
    if pod is not None and running_unready(pod):
        return unready_refusal(key, budget, evidence)
    never = never_allows(budget)
    unfinished = unfinished_evictions(budget, pods)
    if never:
        return Blocker(PHASE_DRAIN, KIND_BUDGET, f"Pod {key}", NEVER, f"budget {evidence['budget']}: {never}", evidence=evidence)
    if unfinished:
        granted = min(unfinished.values())
        until = rfc3339(granted + DISRUPTED_POD_TIMEOUT)
        evidence["unfinished_evictions"] = {name: rfc3339(at) for name, at in unfinished.items()}
        evidence["counted_again_at"] = until
        names = ", ".join(f"{evidence['budget'].split('/')[0]}/{name}" for name in unfinished)
        pods_text, them = (f"Pod {names}", "it") if len(unfinished) == 1 else (f"Pods {names}", "them")
        reason = (
            f"budget {evidence['budget']} still counts {pods_text} as being evicted: it granted an eviction that never deleted {them}"
            f" (the request was cut, as when a run is killed in the middle of one); the disruption controller counts {them} again"
            f" from {until}, and the drain retries then"
        )
        return Blocker(PHASE_DRAIN, KIND_BUDGET, f"Pod {key}", CLEARS, reason, rfc3339(granted), evidence)
    reason = f"budget {evidence['budget']} allows another eviction once enough of its Pods are healthy again"
    return Blocker(PHASE_DRAIN, KIND_BUDGET, f"Pod {key}", CLEARS, reason, evidence=evidence)


def _budget_blockers(key: str, pod: dict | None, budgets: list[dict], message: str, pods: dict[str, dict]) -> list[Blocker]:
    covering = covering_budgets(pod, budgets) if pod is not None else []
    if not covering:
        return [Blocker(PHASE_DRAIN, KIND_BUDGET, f"Pod {key}", CLEARS, f"a budget refuses its eviction for now: {message}")]
    return [budget_blocker(key, budget, pods) for budget in covering]


# A budget's refusal the eviction API answers with 403 (its cause, _drain/evictions.budget_cause): verdict and reason.
_FORBIDDEN_BY_BUDGET = {
    NEGATIVE_ALLOWED_CAUSE: (
        NEEDS_ACTION,
        "its budget's status.disruptionsAllowed is negative, which the eviction API refuses outright; the disruption controller never writes"
        " that: whoever wrote the budget's status must correct it",
    ),
    TOO_MANY_DISRUPTED_CAUSE: (
        CLEARS,
        "its budget holds more than 2000 evictions it granted and the disruption controller has not confirmed yet (status.disruptedPods);"
        " the controller confirms or drops each within 2 minutes, and the drain asks again",
    ),
}


def _failure_blockers(drain: DrainPass, budgets: list[dict]) -> list[Blocker]:
    pods = {pod_key(pod): pod for pod in drain.pods}
    blockers: list[Blocker] = []
    for message, keys in sorted(drain.outcome.failures.items()):
        cause = drain.outcome.causes.get(message)
        for key in sorted(keys):
            if cause in _FORBIDDEN_BY_BUDGET:
                verdict, reason = _FORBIDDEN_BY_BUDGET[cause]
                covering = [budget_evidence(budget)["budget"] for budget in covering_budgets(pods[key], budgets)] if key in pods else []
                blockers.append(
                    Blocker(PHASE_DRAIN, KIND_BUDGET, f"Pod {key}", verdict, reason, evidence={"budgets": covering, "cause": cause, "answer": message})
                )
            elif cause == BUDGET_CAUSE or message.startswith(PDB_MESSAGE):
                blockers.extend(_budget_blockers(key, pods.get(key), budgets, message, pods))
            elif TWO_BUDGETS_WORDS in message:
                covering = [budget_evidence(budget)["budget"] for budget in covering_budgets(pods[key], budgets)] if key in pods else []
                reason = "the eviction API refuses a Pod more than one budget selects, whatever they allow: change the budgets so one selects it"
                blockers.append(Blocker(PHASE_DRAIN, KIND_TWO_BUDGETS, f"Pod {key}", NEVER, reason, evidence={"budgets": covering, "answer": message}))
            elif message == TERMINATING_NAMESPACE_MESSAGE:
                reason = "its namespace is being deleted; the namespace controller deletes the Pod"
                blockers.append(Blocker(PHASE_DRAIN, KIND_NAMESPACE_TERMINATING, f"Pod {key}", CLEARS, reason))
            else:
                reason = f"the API server refuses its eviction: {message}"
                blockers.append(Blocker(PHASE_DRAIN, KIND_EVICTION_ERROR, f"Pod {key}", NEEDS_ACTION, reason, evidence={"answer": message}))
    return blockers


def _terminating_blocker(key: str, pod: dict, *, unreachable: bool, now: _dt.datetime) -> Blocker:
    meta = pod.get("metadata") or {}
    due = parse_time(meta.get("deletionTimestamp"))  # the API server sets it to the deletion's time plus the grace period
    finalizers = list(meta.get("finalizers") or [])
    since = rfc3339(due) if due is not None else None
    if unreachable and due is not None:
        # Its kubelet will never confirm; the drain stops waiting for it once its deletionTimestamp (the end of
        # its grace) is more than UNREACHABLE_SKIP_DELETED_SECONDS old, finalizers or not.
        let_go = due + _dt.timedelta(seconds=UNREACHABLE_SKIP_DELETED_SECONDS)
        reason = (
            f"its Node is unreachable, so its kubelet cannot confirm it gone; the drain lets it go at {rfc3339(let_go)}, "
            f"{UNREACHABLE_SKIP_DELETED_SECONDS} s after its grace ends; if its instance is gone, out_of_service releases it"
        )
        evidence = {"grace_left_seconds": max(0, round((due - now).total_seconds())), "let_go_at": rfc3339(let_go)}
        return Blocker(PHASE_DRAIN, KIND_UNREACHABLE_NODE, f"Pod {key}", CLEARS, reason, since if now >= due else None, evidence)
    if due is None or now < due:
        grace_left = round((due - now).total_seconds()) if due is not None else None
        return Blocker(PHASE_DRAIN, KIND_TERMINATING, f"Pod {key}", CLEARS, "it is within its grace period", evidence={"grace_left_seconds": grace_left})
    past = round((now - due).total_seconds())
    if finalizers:
        reason = f"finalizers {', '.join(finalizers)} keep it {past} s past its grace; their controller, or someone, must remove them"
        return Blocker(PHASE_DRAIN, KIND_FINALIZER, f"Pod {key}", NEEDS_ACTION, reason, since, {"finalizers": finalizers, "past_grace_seconds": past})
    reason = f"its kubelet has not confirmed it gone {past} s past its grace"
    return Blocker(PHASE_DRAIN, KIND_TERMINATING_PAST_GRACE, f"Pod {key}", CLEARS, reason, since, {"past_grace_seconds": past})


def drain_blockers(drain: DrainPass, budgets: list[dict], now: _dt.datetime) -> list[Blocker]:
    """What holds the drain after ``drain`` (none once it completed): its refused
    evictions, with the budgets (``budgets``: the PodDisruptionBudgets as last seen)
    that refused them, the Pods of its current batch still terminating, and those
    waited for to complete."""
    if drain.completed or drain.plan is None:
        return []
    blockers = _failure_blockers(drain, budgets)
    pods = {pod_key(pod): pod for pod in drain.pods}
    plan = drain.plan
    for decision in plan.terminating:
        if decision.order == plan.current_order and decision.key in pods:
            blockers.append(_terminating_blocker(decision.key, pods[decision.key], unreachable=drain.unreachable, now=now))
    for decision in plan.wait_completed_now:
        reason = "the drain waits for it to complete, without evicting it"
        blockers.append(Blocker(PHASE_DRAIN, KIND_WAIT_COMPLETED, f"Pod {decision.key}", CLEARS, reason, evidence={"phase": decision.phase}))
    return blockers


def control_plane_blockers(others: list[dict], deleting_machines: set[str]) -> list[Blocker]:
    """What holds a control-plane Node's drain before it starts: each cordoned control-plane Node
    of ``others`` (``gates.cordoned_control_plane_nodes``). ``deleting_machines``: the Machines
    (``<namespace>/<name>``) the Nodes' nodelink annotation names that are being deleted."""
    blockers = []
    for other in others:
        meta = other.get("metadata") or {}
        machine = node_machine(other)
        evidence = {"node": meta.get("name"), "machine": machine, "machine_deleting": machine in deleting_machines}
        since = None
        if meta.get("deletionTimestamp"):
            verdict, reason, since = CLEARS, "it is cordoned and being deleted; the drain starts once it is gone", meta["deletionTimestamp"]
        elif machine in deleting_machines:
            verdict = CLEARS
            reason = f"it is cordoned and its Machine {machine} is being deleted (its drain goes first); the drain starts once that Node is gone"
        else:
            verdict = NEEDS_ACTION
            whose = f"its Machine {machine} is not being deleted" if machine else "no Machine being deleted is known to own it"
            reason = (
                f"it is cordoned and {whose}: control-plane Nodes are drained one at a time, "
                "so the drain starts once someone uncordons it (or deletes its Machine)"
            )
        blockers.append(Blocker(PHASE_DRAIN, KIND_CONTROL_PLANE_CORDONED, f"Node {meta.get('name')}", verdict, reason, since, evidence))
    return blockers
