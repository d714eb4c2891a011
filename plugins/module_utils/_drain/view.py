# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The drain's view of its Node between passes (pure).

After the first pass has listed them, watches keep the Node, its Pods and the
PodDisruptionBudgets current, so later passes need no LIST and the drain wakes
the moment something it waits for happens:

- ``gone``: every Pod of the current batch it waits for has left the Node;
- ``added``: a Pod it has not classified yet was bound to the Node;
- ``budget``: a budget that refused an eviction allows one again (its
  ``status.disruptionsAllowed`` rose above zero after the refusal): retry now,
  not on a fixed pass;
- ``node``: the Node was deleted.

While a pass sends its evictions, the view also says when a budget whose
allowance a chain of that pass used up has room again (:meth:`DrainView.room`),
so that the chain goes on instead of waiting for the next pass.

This class only keeps state and decides; the API side feeds it events.
"""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pods import pod_key

GONE, ADDED, BUDGET, NODE = "gone", "added", "budget", "node"


def budget_key(budget: dict) -> str:
    meta = budget.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def disruptions_allowed(budget: dict | None) -> int:
    return ((budget or {}).get("status") or {}).get("disruptionsAllowed") or 0


def revision(obj: dict | None) -> int | None:
    """The object's resourceVersion as the store's revision (an integer), None when it is not one."""
    version = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return int(version) if isinstance(version, str) and version.isdigit() else None


class DrainView:
    """The Node, its Pods and the budgets as last reported, and the reason to wake, if any."""

    def __init__(self, node: dict | None, pods: list[dict], budgets: list[dict]):
        self.node = node
        self.pods = {pod_key(pod): pod for pod in pods}
        self.budgets = {budget_key(budget): budget for budget in budgets}
        self.waiting_for: set[str] = set()
        self.retry_budgets: set[str] = set()
        self.known: set[str] = set(self.pods)
        self.reason: str | None = None
        # Pod UID -> the revision at which the view first saw it terminating or gone.
        self.ended_at: dict[str, int] = {}

    # -- what a pause waits for ---------------------------------------------------
    def expect(self, waiting_for: set[str], retry_budgets: set[str], *, seen_pods: set[str] | None = None, seen_budgets: dict | None = None) -> None:
        """Start a pause: wake when ``waiting_for`` is gone, on an unknown Pod, or when
        one of ``retry_budgets`` (keys ``namespace/name``) allows a disruption again.

        ``seen_pods`` and ``seen_budgets`` (key -> resourceVersion) are what the
        pass decided on: what changed since then, while the pass was sending its
        evictions, wakes the drain at once instead of being lost."""
        self.known = set(self.pods) if seen_pods is None else set(seen_pods)
        self.waiting_for = set(waiting_for) & set(self.pods)
        self.retry_budgets = set(retry_budgets)
        self.reason = None
        if waiting_for and not self.waiting_for:
            self.reason = GONE  # already gone before the pause began
        elif set(self.pods) - self.known:
            self.reason = ADDED
        elif any(self._allows_again(key, (seen_budgets or {}).get(key)) for key in self.retry_budgets):
            self.reason = BUDGET

    def _allows_again(self, key: str, seen_version: str | None) -> bool:
        budget = self.budgets.get(key)
        if budget is None:
            return seen_version is not None  # deleted since the pass
        version = (budget.get("metadata") or {}).get("resourceVersion")
        return seen_version is not None and version != seen_version and disruptions_allowed(budget) > 0

    def room(self, key: str, evicted: set[str], after: int | None) -> dict | None:
        """Budget ``key`` when it has room again for a chain that evicted ``evicted`` (Pod UIDs) under it, last
        saw it at revision ``after``, and used up what it allowed; None while it has none, or may not show it.

        The eviction API takes one of the budget's disruptions before it deletes the Pod, so a version of the
        budget written after each evicted Pod was seen terminating (a later revision of the store, which orders
        every write) counts that eviction: only such a version's ``disruptionsAllowed`` is the room left. An
        older one may still show what the chain has used up. Without integer revisions, never."""
        budget = self.budgets.get(key)
        version = revision(budget)
        if budget is None or version is None or after is None or version <= after or disruptions_allowed(budget) <= 0:
            return None
        if any(pod not in self.ended_at for pod in evicted):
            return None
        return budget if all(version > self.ended_at[pod] for pod in evicted) else None

    def budget_versions(self) -> dict[str, str | None]:
        """key -> resourceVersion of every budget, as a pass saw them."""
        return {key: (budget.get("metadata") or {}).get("resourceVersion") for key, budget in self.budgets.items()}

    def snapshot(self) -> tuple[dict | None, list[dict], list[dict]]:
        """(Node, its Pods, the budgets) for the next pass."""
        return self.node, list(self.pods.values()), list(self.budgets.values())

    # -- events ---------------------------------------------------------------------
    def pod_event(self, kind: str, pod: dict) -> str | None:
        key = pod_key(pod)
        meta = pod.get("metadata") or {}
        version = revision(pod)
        if version is not None and meta.get("uid") and (kind == "DELETED" or meta.get("deletionTimestamp")):
            self.ended_at.setdefault(meta["uid"], version)
        if kind == "DELETED":
            self.pods.pop(key, None)
            if key in self.waiting_for:
                self.waiting_for.discard(key)
                if not self.waiting_for:
                    self._wake(GONE)
        else:
            self.pods[key] = pod
            if key not in self.known:
                self._wake(ADDED)
        return self.reason

    def budget_event(self, kind: str, budget: dict) -> str | None:
        key = budget_key(budget)
        if kind == "DELETED":
            self.budgets.pop(key, None)
            if key in self.retry_budgets:
                self._wake(BUDGET)  # nothing holds those Pods any more
            return self.reason
        self.budgets[key] = budget
        if key in self.retry_budgets and disruptions_allowed(budget) > 0:
            self._wake(BUDGET)
        return self.reason

    def node_event(self, kind: str, node: dict) -> str | None:
        if kind == "DELETED":
            self.node = None
            self._wake(NODE)
        else:
            self.node = node
        return self.reason

    def replace_pods(self, pods: list[dict]) -> str | None:
        """A fresh LIST after the watch's resourceVersion expired."""
        fresh = {pod_key(pod): pod for pod in pods}
        for key in list(self.pods):
            if key not in fresh:
                self.pod_event("DELETED", self.pods[key])
        for pod in pods:
            self.pod_event("MODIFIED", pod)
        return self.reason

    def replace_budgets(self, budgets: list[dict]) -> str | None:
        fresh = {budget_key(budget): budget for budget in budgets}
        for key in list(self.budgets):
            if key not in fresh:
                self.budget_event("DELETED", self.budgets[key])
        for budget in budgets:
            self.budget_event("MODIFIED", budget)
        return self.reason

    def _wake(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
