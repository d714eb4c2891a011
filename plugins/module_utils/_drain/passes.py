# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What one pass over a Node found, decided and did (pure data, with the
questions the runner asks of it), what the passes of one task remember of
their own evictions, and which watch event ends the wait between two passes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PDB_MESSAGE, DrainPlan, PodDecision
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pods import pod_key


@dataclass
class EvictionOutcome:
    """What the evictions of one pass did. ``failures`` maps a failure message to Pod keys."""

    evicted: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    failures: dict[str, list[str]] = field(default_factory=dict)
    # failure message -> the budget refusal it is (_drain/evictions.budget_cause), where a budget refused it.
    causes: dict[str, str] = field(default_factory=dict)


@dataclass
class DrainPass:
    """One pass over a Node: what was found, decided and done."""

    node: dict | None
    pods: list[dict] = field(default_factory=list)  # the Pods as this pass saw them
    budget_versions: dict = field(default_factory=dict)  # key -> resourceVersion of the budgets it decided on (watched passes)
    budgets: list[dict] = field(default_factory=list)  # the PodDisruptionBudgets as the pass saw them (read when one refused)
    decisions: list[PodDecision] = field(default_factory=list)
    plan: DrainPlan | None = None
    outcome: EvictionOutcome = field(default_factory=EvictionOutcome)
    message: str = ""
    resource_version: str | None = None
    unreachable: bool = False
    cordoned: bool = False  # this pass cordoned the Node
    # Pods this pass deleted instead of evicting, as an escalation the user asked for: (key, Escalation).
    escalated: list = field(default_factory=list)

    @property
    def completed(self) -> bool:
        """Nothing left to evict or wait for (Cluster API's DrainCompleted)."""
        return self.node is None or (self.plan is not None and not self.message)

    def waiting_for(self) -> set[str]:
        """Pods whose removal lets the drain move on: the current batch."""
        if self.plan is None:
            return set()
        # Terminating Pods of higher orders do not hold back the next batch.
        current = [decision for decision in self.plan.terminating if decision.order == self.plan.current_order]
        keys = {decision.key for decision in current + self.plan.wait_completed_now}
        return keys | set(self.outcome.evicted)

    @property
    def needs_retry(self) -> bool:
        """Something only a later pass can find out (refused evictions, an unreachable Node)."""
        return bool(self.outcome.failures) or self.unreachable


# How long a Pod whose eviction failed for another reason than a budget's refusal
# (say, two budgets select it: the server answers 500) waits before it is asked
# again: the interval at which Cluster API's machine controller drains again.
FAILED_EVICTION_RETRY_SECONDS = 20


def pod_uid(pod: dict) -> str | None:
    return (pod.get("metadata") or {}).get("uid") or None


class EvictionMemory:
    """The Pods this task evicted (or deleted), and those an eviction found gone, by UID.

    After the first pass the Pods come from a watch, which can be older than the
    task's own evictions: the Pod watch may not have reported a deletionTimestamp
    yet (or not even be open) when another watch, a budget allowing again, wakes
    the next pass. The API server accepts an eviction of a terminating Pod (it
    deletes the Pod again, whatever the budget says), so a pass that trusted such
    a view would evict the same Pod twice. Every pass therefore consults this
    memory before it decides what to evict:

    - a Pod evicted with success counts as terminating (never evicted again,
      waited for like any terminating Pod) until the API shows it terminating
      or deleted, which is then what the Pod says anyway;
    - a Pod whose eviction found it gone (404, or the UID precondition failed)
      counts as gone.

    Only successes and "gone" are remembered: a refused eviction (a budget's
    429, any other failure) is asked again. A Pod recreated under the same
    name has a new UID and is evicted like any other. Each module call starts
    with an empty memory: its first pass lists the Pods, and the API's
    deletionTimestamp is authoritative.
    """

    def __init__(self) -> None:
        self.evicted: set[str] = set()
        self.gone: set[str] = set()
        # UID -> (when the Pod may be asked again, on the transport's clock; the failure)
        self.failed: dict[str, tuple[float, str]] = {}

    def remember(self, pods: list[dict], outcome: EvictionOutcome, now: float | None = None) -> None:
        """What the evictions of ``pods`` (the Pods a pass sent them for) did, at ``now``
        (the transport's clock; None: failures are not held back)."""
        uids = {pod_key(pod): pod_uid(pod) for pod in pods}
        self.evicted.update(uid for key in outcome.evicted if (uid := uids.get(key)))
        self.gone.update(uid for key in outcome.gone if (uid := uids.get(key)))
        if now is None:
            return
        for message, keys in outcome.failures.items():
            if message.startswith(PDB_MESSAGE):
                continue  # a budget's refusal: the budget watch says when to ask again
            for key in keys:
                if uid := uids.get(key):
                    self.failed[uid] = (now + FAILED_EVICTION_RETRY_SECONDS, message)

    def held_back(self, pods: list[dict], now: float) -> dict[str, str]:
        """Pod key -> failure, for the Pods of ``pods`` whose eviction failed (not by a
        budget) less than ``FAILED_EVICTION_RETRY_SECONDS`` ago: not asked again yet."""
        held = {}
        for pod in pods:
            until, message = self.failed.get(pod_uid(pod) or "", (0.0, ""))
            if now < until:
                held[pod_key(pod)] = message
        return held

    def present(self, pods: list[dict]) -> list[dict]:
        """``pods`` without those an eviction of this task found gone."""
        return [pod for pod in pods if pod_uid(pod) not in self.gone]

    def terminating(self, pods: list[dict]) -> set[str]:
        """Keys of the Pods of ``pods`` this task evicted, whether or not they show a deletionTimestamp yet."""
        return {pod_key(pod) for pod in pods if pod_uid(pod) in self.evicted}

    def apply(self, pods: list[dict], decisions: list[PodDecision]) -> None:
        """Mark the decisions about Pods this task evicted as terminating: they are never evicted again."""
        evicted = self.terminating(pods)
        for decision in decisions:
            if decision.key in evicted:
                decision.terminating = True


class PodWait:
    """Which watch event ends the wait between two passes: the last Pod waited
    for gone (``"gone"``), or a new Pod bound to the Node (``"added"``: it must
    be classified). Without Pods to wait for only an addition ends it."""

    def __init__(self, waiting_for: Iterable[str]):
        self.pending = set(waiting_for)
        self.waiting = bool(self.pending)

    def see(self, event: dict) -> str | None:
        kind = event.get("type")
        if kind == "ADDED":
            return "added"
        if kind == "DELETED":
            self.pending.discard(pod_key(event.get("object") or {}))
            if self.waiting and not self.pending:
                return "gone"
        return None
