# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""PodDisruptionBudgets as the drain sees them (pure): which budgets cover a
Pod, how the Pods of one pass are grouped for eviction, and what a dry run
can predict of a budget's refusals.

What the eviction API answers is its own rule (Kubernetes' eviction
subresource, as the API server the collection is tested against runs it):

- a Pod that is Pending, Succeeded or Failed, or already being deleted, is
  deleted without asking any budget;
- a Pod more than one budget selects is refused (500), whatever they allow;
- a Pod that is Running but not Ready is let go without using up the budget
  when the budget's ``spec.unhealthyPodEvictionPolicy`` is ``AlwaysAllow``,
  or when it is ``IfHealthyBudget`` (the default, also when unset) and the
  budget has the healthy Pods it needs (``status.currentHealthy`` at least
  ``status.desiredHealthy``, which is above 0); otherwise it is judged as a
  Ready Pod is;
- a Ready Pod (and such an unready one) needs the budget counted at its
  generation (else 429, "still being processed"), ``disruptionsAllowed`` not
  negative and at most 2000 evictions not yet confirmed in
  ``status.disruptedPods`` (else 403), and ``disruptionsAllowed`` above 0
  (else 429), which it then takes one of.
"""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.evictions import BUDGET_CAUSE, eviction_failure_message
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PDB_MESSAGE
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pods import pod_key
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.selectors import match_label_selector

# spec.unhealthyPodEvictionPolicy (policy/v1; GA since Kubernetes 1.31). Unset means IfHealthyBudget.
IF_HEALTHY_BUDGET, ALWAYS_ALLOW = "IfHealthyBudget", "AlwaysAllow"
# The phases whose Pods the eviction API deletes without asking a budget (with Pods being deleted).
BUDGET_NOT_ASKED_PHASES = ("Pending", "Succeeded", "Failed")
# What the eviction API answers for one Pod under one budget.
LET_GO = "evicted without using up the budget"
CHARGED = "evicted, using up one of the disruptions the budget allows"
REFUSED = "refused"


def ready(pod: dict) -> bool:
    """Whether the Pod's Ready condition is True (what a budget counts as healthy)."""
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def unhealthy_policy(budget: dict) -> str:
    """The budget's ``spec.unhealthyPodEvictionPolicy``; ``IfHealthyBudget`` when unset."""
    return str((budget.get("spec") or {}).get("unhealthyPodEvictionPolicy") or IF_HEALTHY_BUDGET)


def asks_budget(pod: dict) -> bool:
    """Whether the eviction API asks a budget about this Pod at all (not Pending, Succeeded, Failed, nor being deleted)."""
    return ((pod.get("status") or {}).get("phase") or "") not in BUDGET_NOT_ASKED_PHASES and not (pod.get("metadata") or {}).get("deletionTimestamp")


def running_unready(pod: dict) -> bool:
    """Whether the Pod runs (phase ``Running``, or ``Unknown``) and is not Ready: what unhealthyPodEvictionPolicy is about."""
    return ((pod.get("status") or {}).get("phase") or "") in ("Running", "Unknown") and asks_budget(pod) and not ready(pod)


def unready_let_go(pod: dict, budget: dict) -> bool:
    """Whether the eviction API lets this Pod go under ``budget`` without using up the budget: a Pod it asks the
    budget about that is not Ready, under ``AlwaysAllow``, or under ``IfHealthyBudget`` while the budget has the
    healthy Pods it needs (``currentHealthy >= desiredHealthy > 0``)."""
    if not asks_budget(pod) or ready(pod):
        return False
    if unhealthy_policy(budget) == ALWAYS_ALLOW:
        return True
    status = budget.get("status") or {}
    healthy, needed = status.get("currentHealthy"), status.get("desiredHealthy")
    return isinstance(healthy, int) and isinstance(needed, int) and needed > 0 and healthy >= needed


def charges(pod: dict, budget: dict | None) -> bool:
    """Whether evicting ``pod`` uses up one of the disruptions ``budget`` allows (and so is refused when it allows
    none); without a budget, whether the Pod is Ready (what a budget counts)."""
    if budget is None:
        return ready(pod)
    return asks_budget(pod) and not unready_let_go(pod, budget)


def eviction_answer(pod: dict, budget: dict) -> tuple[str, str]:
    """What the eviction API answers now for ``pod`` under its one budget ``budget`` (from the budget as last read):
    (``LET_GO``, ``CHARGED`` or ``REFUSED``, why, in words a preflight line can carry)."""
    policy = unhealthy_policy(budget)
    status = budget.get("status") or {}
    healthy, needed, allowed = status.get("currentHealthy"), status.get("desiredHealthy"), status.get("disruptionsAllowed")
    if not asks_budget(pod):
        return LET_GO, "it is not running (or already being deleted): the eviction API deletes it without asking the budget"
    if unready_let_go(pod, budget):
        if policy == ALWAYS_ALLOW:
            return LET_GO, "it is not Ready and the budget's unhealthyPodEvictionPolicy is AlwaysAllow: it goes whatever the budget allows"
        return LET_GO, (
            f"it is not Ready and the budget has the healthy Pods it needs ({healthy} of {needed}): under unhealthyPodEvictionPolicy "
            f"{policy} it goes without using up the budget"
        )
    if isinstance(allowed, int) and allowed > 0:
        return CHARGED, f"the budget allows {allowed} disruption{'s' if allowed != 1 else ''} now"
    if ready(pod):
        return REFUSED, f"the budget allows no disruption now ({healthy} healthy of the {needed} it needs)"
    return REFUSED, (
        f"it is not Ready, and under unhealthyPodEvictionPolicy {policy} the budget lets a Pod that is not Ready go only while it has "
        f"the healthy Pods it needs ({healthy} of {needed}) or allows a disruption (it allows {allowed})"
    )


def budget_groups(pods: list[dict], budgets: list[dict]) -> list[list[dict]]:
    """Pods grouped by the PodDisruptionBudgets that cover them, for eviction.

    Every eviction under one budget updates the budget's status, and the API
    server retries conflicting updates with half-second pauses, so concurrency
    within a budget buys nothing (measured: the same throughput with 1, 4 or 16
    at once) but conflicts and refusals. Pods under one budget are therefore
    evicted one after the other, stopping at the first refusal, while different
    groups go concurrently; only an eviction slow to answer (most likely waiting
    out one of those pauses) gets the next beside it (``api._Chain``). A Pod no
    budget covers is a group of its own. Within a group, Pods that are not
    Ready come first: the eviction API lets them go without using up the
    budget under ``AlwaysAllow``, and under ``IfHealthyBudget`` while the
    budget has the healthy Pods it needs - which evicting a Ready Pod first
    could take away.
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


def single_budget(group: list[dict], budgets: list[dict]) -> dict | None:
    """The one budget that covers a budget group's Pods; None when none, or more than one, does."""
    covering = covering_budgets(group[0], budgets) if group else []
    return covering[0] if len(covering) == 1 else None


def dry_run_allowance(group: list[dict], budgets: list[dict]) -> tuple[int, str] | None:
    """For a dry run: how many Pods of a budget group that use up the budget (:func:`charges`) the server
    would let go now, and its refusal once they have; None when not predictable.

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

    Once the server refuses one Pod of a group, its other Pods that would use up the budget
    (:func:`charges`) are refused with the same message for the rest of the pass. With ``predict`` (a
    real drain whose budgets were read for this pass, from a LIST or a watch) the chain stops where the
    budget's ``status.disruptionsAllowed`` runs out: the Pods beyond it are refused with the server's
    text without being asked, and the drain's budget watch wakes the next pass when the budget allows
    again. This bounds a pass by what the budgets allow now: a chain asking on while the budget regains
    room as the evicted Pods go (each eviction under a busy budget can take half a second: the server
    retries its conflicting status updates) held every other group's retry until it ended. In a dry run
    (``dry_run``) every Pod is asked (a dry-run eviction counts against nothing) and those beyond the
    allowance are turned into the refusal the server would give. A Pod the eviction API lets go without
    using up the budget is always asked."""

    def __init__(self, group: list[dict], budgets: list[dict], *, predict: bool = False, dry_run: bool = False):
        known = (dry_run or predict) and (len(group) > 1 or predict)
        self.group = group
        self.allowance = dry_run_allowance(group, budgets) if known else None
        self.budget = single_budget(group, budgets)
        self.predict = predict
        self.several = len(group) > 1
        self.refusal: str | None = None
        self.pending = 0  # evictions sent and not answered yet that use up the allowance (:meth:`sending`)

    def refill(self, budget: dict) -> None:
        """Go on under ``budget``, the group's one budget read again with room (``_drain/feed.PassChains``): what it
        allows now is the allowance, and no earlier refusal stands."""
        self.budget = budget
        self.allowance = dry_run_allowance(self.group, [budget])
        self.refusal = None

    def refused(self, pod: dict) -> str | None:
        """The refusal to record for ``pod`` without asking the server (a budget's), or None: ask. While evictions
        sent are not answered yet (``pending``) the allowance they hold is not free, but a refusal is not final
        either: one of them may fail and give its share back."""
        if self.refusal is not None and charges(pod, self.budget):
            return self.refusal
        if self.predict and self.allowance is not None and self.allowance[0] - self.pending <= 0 and charges(pod, self.budget):
            if self.pending:
                return self.allowance[1]
            self.refusal = self.allowance[1]
            return self.refusal
        return None

    def sending(self, pod: dict) -> bool:
        """``pod``'s eviction is about to be sent while others may be under way: whether it holds one of the
        predicted allowance until it is answered (a Pod that uses up the budget, in a real drain that predicts)."""
        if self.predict and self.allowance is not None and charges(pod, self.budget):
            self.pending += 1
            return True
        return False

    def answered(self, pod: dict, failure: str | None, status: int, cause: str | None = None, *, held: bool = False) -> tuple[str | None, str | None]:
        """Note the server's answer to ``pod``'s eviction (``failure``, HTTP ``status``, ``cause``; ``held``: what
        :meth:`sending` said); the failure and cause to record."""
        if held:
            self.pending -= 1
        if self.allowance is not None and status == 200 and charges(pod, self.budget):
            allowed, budget_refusal = self.allowance
            if allowed > 0:
                self.allowance = (allowed - 1, budget_refusal)
            else:  # a dry run past the allowance: a real eviction would have been refused
                failure, status, cause = budget_refusal, 429, BUDGET_CAUSE
        if status == 429 and self.several:
            self.refusal = failure
        return failure, cause
