# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What one pass over a Node found, decided and did (pure data, with the
questions the runner asks of it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import DrainPlan, PodDecision


@dataclass
class EvictionOutcome:
    """What the evictions of one pass did. ``failures`` maps a failure message to Pod keys."""

    evicted: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    failures: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class DrainPass:
    """One pass over a Node: what was found, decided and done."""

    node: dict | None
    pods: list[dict] = field(default_factory=list)  # the Pods as this pass saw them
    budget_versions: dict = field(default_factory=dict)  # key -> resourceVersion of the budgets it decided on (watched passes)
    decisions: list[PodDecision] = field(default_factory=list)
    plan: DrainPlan | None = None
    outcome: EvictionOutcome = field(default_factory=EvictionOutcome)
    message: str = ""
    resource_version: str | None = None
    unreachable: bool = False
    cordoned: bool = False  # this pass cordoned the Node

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
