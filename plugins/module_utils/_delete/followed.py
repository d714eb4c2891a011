# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The budget refusals a live controller reports, judged as the collection's own drain judges
them (pure; docs/stalls.md): a drain the task only follows is not the task's, but the budgets
that refuse it are in the workload cluster for anyone to read. For each Pod the controller's
report names as refused by a budget, the budgets that select it (as last read) give the verdict
and the evidence the drain gives (``_drain/stalls.py`` ``budget_blocker``; ``_drain/budgets.py``
``covering_budgets``); when they could not be
read, the refusal stays "clears by itself" and says so.

What the task does about a followed deletion that can never finish as things stand is the stall
policy's (``_drain/stall_policy.py`` ``StallPolicy.stop_following``)."""

from __future__ import annotations

from dataclasses import replace

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.budgets import covering_budgets
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stalls import budget_blocker
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import KIND_BUDGET, Blocker


def _judged(blocker: Blocker, key: str, pods: dict[str, dict | None], budgets: list[dict]) -> list[Blocker]:
    pod = pods[key]
    if pod is None:
        evidence = {**blocker.evidence, "pod_gone": True}
        return [replace(blocker, reason=f"{blocker.reason}; the Pod is gone now", evidence=evidence)]
    covering = covering_budgets(pod, budgets)
    if not covering:
        return [replace(blocker, reason=f"{blocker.reason}; no budget selects it now", evidence={**blocker.evidence, "budgets": []})]
    found = []
    for budget in covering:
        judged = budget_blocker(key, budget, pods)
        evidence = {**blocker.evidence, **judged.evidence}
        found.append(replace(blocker, verdict=judged.verdict, reason=judged.reason, since=judged.since or blocker.since, evidence=evidence))
    return found


def judge_reported_budgets(blockers: list[Blocker], pods: dict[str, dict | None], budgets: list[dict] | None, unread: str | None = None) -> list[Blocker]:
    """``blockers`` (``_machine.blockers.controller_blockers``) with each budget refusal the controller
    reported judged by the budgets that select its Pod: ``pods`` (``namespace/name`` -> the Pod, None when
    gone: the Node's Pods and each Pod the report names) and ``budgets`` (every budget of the Pods' namespaces) as read on the workload side. ``unread``:
    why they could not be read (then the refusals stay "clears by itself", saying so)."""
    judged: list[Blocker] = []
    for blocker in blockers:
        if blocker.kind != KIND_BUDGET or "reported_by" not in blocker.evidence:
            judged.append(blocker)
            continue
        key = blocker.object.removeprefix("Pod ")
        if unread is not None or budgets is None or key not in pods:
            why = unread or "not read"
            evidence = {**blocker.evidence, "budget_unread": why}
            judged.append(replace(blocker, reason=f"{blocker.reason}; its budget could not be read: {why}", evidence=evidence))
            continue
        judged.extend(_judged(blocker, key, pods, budgets))
    return judged
