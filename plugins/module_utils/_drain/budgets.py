# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""PodDisruptionBudgets as the drain sees them (pure): which budgets cover a
Pod, how the Pods of one pass are grouped for eviction, and what a dry run
can predict of a budget's refusals."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.evictions import eviction_failure_message
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PDB_MESSAGE
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pods import pod_key
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.selectors import match_label_selector


def ready(pod: dict) -> bool:
    """Whether the Pod's Ready condition is True (what a budget counts as healthy)."""
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def budget_groups(pods: list[dict], budgets: list[dict]) -> list[list[dict]]:
    """Pods grouped by the PodDisruptionBudgets that cover them, for eviction.

    Every eviction under one budget updates the budget's status, and the API
    server retries conflicting updates with half-second pauses, so concurrency
    within a budget buys nothing (measured: the same throughput with 1, 4 or 16
    at once) but conflicts and refusals. Pods under one budget are therefore
    evicted one after the other, stopping at the first refusal, while different
    groups go concurrently. A Pod no
    budget covers is a group of its own. Within a group, Pods that are not
    Ready come first: the API may evict those whatever the budget allows.
    (A policy/v1 budget's empty selector covers every Pod of its namespace;
    a null one covers none.)
    """
    groups: dict[tuple, list[dict]] = {}
    for pod in pods:
        covering = sorted((budget.get("metadata") or {}).get("name") for budget in covering_budgets(pod, budgets))
        key = ((pod.get("metadata") or {}).get("namespace"), tuple(covering)) if covering else ("", pod_key(pod))
        groups.setdefault(key, []).append(pod)
    return [sorted(group, key=lambda pod: (ready(pod), pod_key(pod))) for _key, group in sorted(groups.items())]


def covering_budgets(pod: dict, budgets: list[dict]) -> list[dict]:
    """The PodDisruptionBudgets whose selector matches the Pod, in its namespace."""
    meta = pod.get("metadata") or {}
    covering = []
    for budget in budgets:
        selector = (budget.get("spec") or {}).get("selector")
        if (budget.get("metadata") or {}).get("namespace") != meta.get("namespace") or selector is None:
            continue
        try:
            matches = match_label_selector(selector, meta.get("labels") or {})
        except ValueError:
            matches = False
        if matches:
            covering.append(budget)
    return covering


def dry_run_allowance(group: list[dict], budgets: list[dict]) -> tuple[int, str] | None:
    """For a dry run: how many Ready Pods of a budget group the server would let go
    now, and its refusal once they have; None when not predictable.

    A dry-run eviction does not count against the budget, so the server accepts
    every one while ``status.disruptionsAllowed`` is above zero. A real drain
    would be refused after that many, with the API server's text for the
    budget's status once the disruption controller has counted the evicted
    Pods out of ``currentHealthy``."""
    covering = covering_budgets(group[0], budgets) if group else []
    if len(covering) != 1:
        return None
    budget = covering[0]
    status = budget.get("status") or {}
    if not isinstance(status.get("disruptionsAllowed"), int):
        return None
    name = (budget.get("metadata") or {}).get("name")
    allowed = status["disruptionsAllowed"]
    healthy = max(0, (status.get("currentHealthy") or 0) - allowed)
    cause = f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods and has {healthy} currently"
    return allowed, eviction_failure_message(429, PDB_MESSAGE, [{"type": "DisruptionBudget", "message": cause}])


class BudgetChain:
    """One budget group's evictions in a pass, sent one after the other (see :func:`budget_groups`): which
    Pod is asked and which is refused without asking, from what the budgets' status says (pure).

    Once the server refuses one Pod of a group, its other Ready Pods are refused with the same message
    for the rest of the pass. With ``predict`` (a real drain whose budgets were read for this pass, from
    a LIST or a watch) the chain stops where the budget's ``status.disruptionsAllowed`` runs out: the
    Ready Pods beyond it are refused with the server's text without being asked, and the drain's budget
    watch wakes the next pass when the budget allows again. This bounds a pass by what the budgets allow
    now: a chain asking on while the budget regains room as the evicted Pods go (each eviction under a
    busy budget can take half a second: the server retries its conflicting status updates) held every
    other group's retry until it ended. In a dry run (``dry_run``) every Pod is asked (a dry-run eviction
    counts against nothing) and those beyond the allowance are turned into the refusal the server would
    give. Pods that are not Ready are always asked: the API may evict those whatever the budget allows."""

    def __init__(self, group: list[dict], budgets: list[dict], *, predict: bool = False, dry_run: bool = False):
        known = (dry_run or predict) and (len(group) > 1 or predict)
        self.allowance = dry_run_allowance(group, budgets) if known else None
        self.predict = predict
        self.several = len(group) > 1
        self.refusal: str | None = None

    def refused(self, pod: dict) -> str | None:
        """The refusal to record for ``pod`` without asking the server, or None: ask."""
        if self.refusal is not None and ready(pod):
            return self.refusal
        if self.predict and self.allowance is not None and self.allowance[0] <= 0 and ready(pod):
            self.refusal = self.allowance[1]
            return self.refusal
        return None

    def answered(self, pod: dict, failure: str | None, status: int) -> str | None:
        """Note the server's answer to ``pod``'s eviction (``failure``, HTTP ``status``); the failure to record."""
        if self.allowance is not None and status == 200 and ready(pod):
            allowed, budget_refusal = self.allowance
            if allowed > 0:
                self.allowance = (allowed - 1, budget_refusal)
            else:  # a dry run past the allowance: a real eviction would have been refused
                failure, status = budget_refusal, 429
        if status == 429 and self.several:
            self.refusal = failure
        return failure
