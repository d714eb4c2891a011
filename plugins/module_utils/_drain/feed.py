# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The pause between two passes of a drain: the drain's view of its Node (``view.DrainView``) kept
current by informers (``_k8s/informer.py``) of the Node, its Pods and the PodDisruptionBudgets, so
that later passes read nothing and the pause ends the moment the drain can move on; without them
(before the first pass has listed, no permission to watch), a watch of the Node's Pods.

The informers start from what the first pass read (its LIST of the Node's Pods: no LIST of their
own) and end at the task's deadline. In a ``machine_delete`` task the budgets come from the run's
cache of the cluster's budgets (``_k8s/cache.py``), which tells every drain's view of each change,
instead of a list and a watch of every budget per drain. Either way the view is as fresh as a
watch: the eviction API stays the authority on what a budget allows (``_k8s/cache.py`` rule 4).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.budgets import covering_budgets
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PDB_MESSAGE
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import DrainPass, PodWait
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pods import pod_key
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.view import DrainView, budget_key
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.informer import FAILED, RELISTED, Informer, Listener
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import BUDGETS, NODES, PODS
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.watch import watch_until

# How often a pause looks whether the run was cancelled.
CANCEL_CHECK_SECONDS = 0.25
# How long a pass's budget chains may go on waiting for their budgets' room (PassChains): after that the pass
# ends at the next wait, so that its progress is reported and new Pods are classified at least this often.
GO_ON_SECONDS = 5.0


class NodeWatch:
    """Keeps a :class:`DrainView` current from three informers (the Node, its Pods, every
    PodDisruptionBudget) and lets the drain sleep until the view says to wake.

    Started after the first pass, from what that pass listed. When an informer cannot run (no
    permission to watch, say), ``failed`` is set and the drain falls back to listing on every pass.
    """

    def __init__(self, api: KubeApi, node_name: str, view: DrainView, *, deadline: float):
        self.api = api
        self.node_name = node_name
        self.view = view
        self.deadline = deadline
        self._cond = threading.Condition()
        self._informers: list[Informer] = []
        self._budgets: Informer | None = None  # the run's cache of the cluster's budgets this view listens to, if any
        view = self.view  # made once: the listeners note changes in it
        self._pod_change = self._listener(view.replace_pods, view.pod_event)
        self._node_change = self._listener(lambda nodes: view.node_event("MODIFIED", nodes[0]) if nodes else view.node_event("DELETED", {}), view.node_event)
        self._budget_change = self._listener(view.replace_budgets, view.budget_event)

    @classmethod
    def start(cls, api: KubeApi, drain: DrainPass, node_name: str, *, deadline: float) -> NodeWatch | None:
        """Watch from what ``drain`` (a pass that listed) saw; None when the budgets cannot be listed."""
        if drain.node is None or drain.resource_version is None:
            return None
        cached = api.cached_reader().informer(BUDGETS)
        watch = cls(api, node_name, DrainView(drain.node, drain.pods, []), deadline=deadline)
        budgets, budgets_version = [], None
        # The view starts from the cache's budgets (told first, as a relist), then hears each change.
        if cached is not None and cached.listen(watch._budget_change):
            watch._budgets = cached
        else:
            try:
                budgets, budgets_version = api.list_with_version(BUDGETS)
            except ApiError:
                return None
            watch.view.replace_budgets(budgets)
        # resourceVersions are the store's revisions, shared by every resource: the Node is watched from the Pods' list.
        version = drain.resource_version
        pods = Informer(api, PODS, "v1", "Pod", every_namespace=True, field_selector=f"spec.nodeName={node_name}", until=deadline)
        watch._follow(pods, drain.pods, version, watch._pod_change)
        node = Informer(api, NODES, "v1", "Node", field_selector=f"metadata.name={node_name}", until=deadline)
        watch._follow(node, [drain.node], version, watch._node_change)
        if budgets_version:
            own = Informer(api, BUDGETS, "policy/v1", "PodDisruptionBudget", every_namespace=True, until=deadline)
            watch._follow(own, budgets, budgets_version, watch._budget_change)
        return watch

    def _follow(self, informer: Informer, items: list[dict], version: str, listener: Listener) -> None:
        self._informers.append(informer)
        if informer.start_from(items, version):
            informer.listen(listener)

    @property
    def failed(self) -> bool:
        """An informer of its own, or the run's cache of budgets it listens to, stopped answering."""
        return any(informer.failed for informer in self._informers) or (self._budgets is not None and self._budgets.failed)

    def _listener(self, relisted: Callable[[list[dict]], str | None], changed: Callable[[str, dict], str | None]) -> Listener:
        """What an informer tells, noted in the view (in the informer's thread): a pause the change ends, or a failure, wakes."""

        def heard(kind: str, obj: Any) -> None:
            with self._cond:
                if kind == RELISTED:
                    relisted(obj)
                elif kind != FAILED:
                    changed(kind, obj)
                # Every change: a pause wakes when the view gives it a reason, a chain of a pass when its budget has room.
                self._cond.notify_all()

        return heard

    def snapshot(self) -> tuple[dict | None, list[dict], list[dict]]:
        """(Node, its Pods, the budgets) as the informers last reported them."""
        with self._cond:
            return self.view.snapshot()

    def wait(self, drain: DrainPass, retry_budgets: set[str], end: float) -> str:
        """Sleep until the view says to wake (``gone``, ``added``, ``budget``, ``node``) after
        ``drain``, an informer fails (``resync``) or ``end`` (an instant of the transport's clock) passes (``timeout``)."""
        clock = self.api.monotonic
        # A pass that listed (the first) saw budgets older than the informers': any allowance now is news.
        seen_budgets = drain.budget_versions or dict.fromkeys(retry_budgets, "")
        with self._cond:
            self.view.expect(drain.waiting_for(), retry_budgets, seen_pods={pod_key(pod) for pod in drain.pods}, seen_budgets=seen_budgets)
            # In short slices, so that a cancelled run (signal handler) is noticed at once.
            while self.view.reason is None and not self.failed and not self.api.cancelled and clock() < end:
                self._cond.wait(timeout=min(CANCEL_CHECK_SECONDS, max(0.0, end - clock())))
            if self.view.reason is not None:
                return self.view.reason
            return "resync" if self.failed or self.api.cancelled else "timeout"

    def chains(self, count: int) -> PassChains:
        """The ``count`` budget chains of a pass that starts now (:class:`PassChains`)."""
        return PassChains(self, count, min(self.deadline, self.api.monotonic() + GO_ON_SECONDS))

    def stop(self) -> None:
        """Let the informers end (each at its next event or within their watch's length), and stop listening to the run's cache."""
        for informer in self._informers:
            informer.stop()
        if self._budgets is not None:
            self._budgets.unlisten(self._budget_change)


class PassChains:
    """The budget chains of one pass (``api.evict_pods``: one per budget, each sending its Pods' evictions one
    after the other), which go on while the pass lasts.

    A chain that has used up what its budget allowed does not end the pass's part for its budget at once: while
    another chain of the pass still sends, it waits for its budget to have room again (``DrainView.room``: a
    version of the budget that counts the chain's own evictions) and goes on. Once no chain sends, or
    ``end`` passes, every waiting chain ends, the pass ends and the pause between passes takes over (it wakes
    on the same budgets). A budget's room is never guessed: the eviction API still decides every eviction."""

    def __init__(self, watch: NodeWatch, count: int, end: float):
        self.watch, self.sending, self.end = watch, count, end

    def done(self) -> None:
        """A chain that was sending has ended."""
        with self.watch._cond:
            self.sending -= 1
            self.watch._cond.notify_all()

    def room(self, key: str, evicted: set[str], after: int | None) -> dict | None:
        """Wait, not sending, for budget ``key`` (``namespace/name``) to have room for the chain that evicted the
        Pods of UIDs ``evicted`` and last saw the budget at revision ``after``: the budget as read, the chain
        sending again; None when the chain is over (no other chain sends, the watch failed, the run was
        cancelled, or ``end`` passed): it is then no longer counted as sending."""
        watch = self.watch
        clock = watch.api.monotonic
        with watch._cond:
            self.sending -= 1
            watch._cond.notify_all()
            while True:
                budget = watch.view.room(key, evicted, after)
                if budget is not None:
                    self.sending += 1
                    return budget
                if self.sending <= 0 or watch.failed or watch.api.cancelled or clock() >= self.end:
                    return None
                watch._cond.wait(timeout=min(CANCEL_CHECK_SECONDS, max(0.0, self.end - clock())))


def refused_budgets(drain: DrainPass, budgets: list[dict]) -> set[str]:
    """``namespace/name`` of the budgets covering the Pods whose eviction a budget refused in this pass."""
    refused = {key for message, keys in drain.outcome.failures.items() if message.startswith(PDB_MESSAGE) for key in keys}
    pods = [pod for pod in drain.pods if pod_key(pod) in refused]
    return {budget_key(budget) for pod in pods for budget in covering_budgets(pod, budgets)}


def wait_for_pods(api: KubeApi, node_name: str, resource_version: str | None, waiting_for: set[str], deadline: float) -> str:
    """The pause without a watch-fed view: wait, with a watch on the Node's Pods, until every Pod of
    ``waiting_for`` is gone or a new Pod is bound to the Node, or ``deadline`` (an instant of the
    transport's clock, ``api.monotonic()``) passes.

    Returns why it stopped: ``"gone"``, ``"added"``, ``"timeout"`` or
    ``"resync"`` (the watch could not continue; the next pass re-lists).
    """
    if resource_version is None:
        api.sleep(min(deadline - api.monotonic(), 1.0))
        return "resync"
    wait = PodWait(waiting_for)
    stopped: list[str] = []

    def see(event: dict) -> bool:
        reason = wait.see(event)
        if reason:
            stopped.append(reason)
        return reason is not None

    try:
        outcome = watch_until(api, PODS, on_event=see, deadline=deadline, resource_version=resource_version, field_selector=f"spec.nodeName={node_name}")
    except ApiError:
        # No permission to watch (RBAC can allow LIST alone): the passes still work, just polled.
        api.sleep(max(0.0, deadline - api.monotonic()))
        return "resync"
    return stopped[0] if stopped else outcome
