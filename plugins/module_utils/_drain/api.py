# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The API side of a drain: cordon, one pass over a Node's Pods, evictions. Thin on purpose: every decision is made by the
pure functions of ``_drain``; this file only fetches what they need and
carries out what they decided.

Costs, per pass: one LIST of the Node's Pods (a field selector on
``spec.nodeName``), one GET of the Node, and one eviction per Pod of the
current batch (sent concurrently). Namespaces are listed once per run (again
only when a Pod of an unknown Namespace appears); each DaemonSet a Pod refers
to is read once per run. After the first pass the Node, its Pods and the
budgets are watched (``feed.py``): later passes read nothing.

In a ``machine_delete`` task the Namespaces, the PodDisruptionBudgets and the
MachineDrainRules come from the run's cache instead (``_k8s/cache.py``:
one LIST and one watch per cluster for all its Machines); read directly when
there are none or they cannot answer.

Functions take a ``KubeApi`` and plain values, never the module object.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.budgets import BudgetChain, budget_groups
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.escalations import (
    Escalation,
    check_rule_names,
    escalation_for,
    permission_message,
    permissions_needed,
    rule_names_wanted,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.evictions import BUDGET_CAUSE, budget_cause, eviction_failure_message
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.feed import NodeWatch, PassChains
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import (
    UNREACHABLE_GRACE_PERIOD_SECONDS,
    classify_pods,
    daemonset_refs,
    plan_drain,
    progress_message,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import DrainPass, EvictionMemory, EvictionOutcome
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pods import pod_key
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import SKIP, merge_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.view import DrainView, budget_key, revision
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import BUDGETS, NAMESPACES, Permission, resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import node_path
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.nodes import is_node_unreachable, is_unschedulable

CAPI_GROUP = "cluster.x-k8s.io"
DRAIN_RULES_PLURAL = "machinedrainrules"
# Evictions of one batch run concurrently, at most this many at once
# (KubeApi's connection pool holds as many connections).
EVICTION_WORKERS = 16
# An eviction under a budget not answered after this long is most likely waiting out the API server's half-second
# pause between conflicting writes of the budget's status: the next one goes beside it (_Chain), at most
# CHAIN_LANES of one budget under way at once.
HEDGE_SECONDS = 0.25
CHAIN_LANES = 3


def check_permissions(api: KubeApi, escalations: Sequence[Escalation], *, disable_eviction: bool = False) -> None:
    """Before anything is changed: fail (MachineError naming the permission, where, and the option that needs it)
    when ``api``'s identity - where the Pods are: the Machine's workload cluster, or the task's own - may not do
    what ``escalations`` or ``disable_eviction`` need (plain Pod deletion), as a SelfSubjectAccessReview answers.
    In check mode too (a review changes nothing). A review the server cannot answer is no refusal."""
    cluster = api.label or (f"the cluster ({api.server})" if api.server else "the cluster")
    for (verb, group, resource), namespace, option in permissions_needed(escalations, disable_eviction=disable_eviction):
        permission = Permission(verb, resource, group, namespace)
        if api.access.allows(permission) is False:
            raise MachineError(permission_message(option, permission.describe(), cluster))


def set_unschedulable(api: KubeApi, node: dict, unschedulable: bool) -> tuple[dict, bool]:
    """Cordon (True) or uncordon (False) a Node; (Node, changed)."""
    if is_unschedulable(node) == unschedulable:
        return node, False
    # null removes the field, as kubectl uncordon leaves it.
    patched = api.patch(node_path(node["metadata"]["name"]), {"spec": {"unschedulable": True if unschedulable else None}})
    return patched, True


def list_node_pods(api: KubeApi, node_name: str) -> tuple[list[dict], str | None]:
    """Every Pod bound to the Node (all pages) and the list's resourceVersion, to watch from."""
    return api.list_with_version(resource_path("v1", "pods"), field_selector=f"spec.nodeName={node_name}")


def served_drain_rules(api: KubeApi, namespace: str) -> list[dict]:
    """MachineDrainRule objects of a namespace, from the preferred served version
    of ``cluster.x-k8s.io`` that has them; ``[]`` when the cluster serves none."""
    for version in api.served_versions(CAPI_GROUP):
        if api.discovery.resource(f"{CAPI_GROUP}/{version}", plural=DRAIN_RULES_PLURAL) is not None:
            path = resource_path(f"{CAPI_GROUP}/{version}", DRAIN_RULES_PLURAL, namespace)
            # The task's Machines of one namespace share one list and watch of its rules (machine_delete: the run's cache).
            return api.cached_reader().list(path, "MachineDrainRule")
    return []


def load_drain_rules(api: KubeApi, namespace: str | None, inline: Sequence[dict] | None, use_cluster_rules: bool) -> list[dict]:
    """The MachineDrainRules that decide a drain, validated and sorted by name:
    the task's own (``inline``) merged with the ones the cluster serves in the
    Machine's ``namespace`` (none without ``use_cluster_rules`` or a namespace,
    as for a bare Node); an inline rule replaces a served one of the same name.
    machine_drain and machine_terminate both load them here, so both count the
    same Pods as skipped. Raises DrainRuleError naming an invalid rule."""
    served = served_drain_rules(api, namespace) if use_cluster_rules and namespace else []
    return merge_rules(inline or (), served, namespace)  # inline rules validated once, by the request


def rules_for_escalations(
    api: KubeApi, escalations: Sequence[Escalation], inline: Sequence[dict], use_cluster_rules: bool, namespace: str | None
) -> list[dict] | None:
    """The MachineDrainRules a drain in ``namespace`` takes, read once before anything is touched and checked
    against the escalations naming rules (``escalations.check_rule_names``: MachineError when one names none of
    them); None (nothing read) when no escalation names a rule."""
    if not rule_names_wanted(escalations):
        return None
    rules = load_drain_rules(api, namespace, inline, use_cluster_rules)
    check_rule_names(escalations, rules, use_cluster_rules=use_cluster_rules, namespace=namespace)
    return rules


class PodContext:
    """Namespaces and DaemonSets the classification needs, read as rarely as possible.

    Namespaces are listed on first use and again only when a Pod of a
    Namespace not seen yet turns up; each DaemonSet is read once.
    """

    def __init__(self, api: KubeApi):
        self._api = api
        self._namespaces: dict[str, dict] | None = None
        self._daemonsets: dict[tuple[str, str], bool] = {}

    def namespaces(self, pods: list[dict]) -> dict[str, dict]:
        wanted = {(pod.get("metadata") or {}).get("namespace", "") for pod in pods}
        cached = self._api.cached_reader().items(NAMESPACES)
        if cached is not None:
            found = {ns["metadata"]["name"]: ns for ns in cached}
            if wanted <= set(found):
                return found
            # A Namespace the run's cache has not seen yet (just made): listed, as without the cache.
        if self._namespaces is None or not wanted <= set(self._namespaces):
            listed = self._api.list(NAMESPACES)
            self._namespaces = {ns["metadata"]["name"]: ns for ns in listed}
        return self._namespaces

    def existing_daemonsets(self, pods: list[dict]) -> set[tuple[str, str]]:
        for namespace, name in daemonset_refs(pods):
            if (namespace, name) not in self._daemonsets:
                path = resource_path("apps/v1", "daemonsets", namespace, name)
                self._daemonsets[(namespace, name)] = self._api.get(path) is not None
        return {ref for ref, exists in self._daemonsets.items() if exists}


def _failure(exc: ApiError) -> tuple[str | None, bool, str | None]:
    """(failure message or None, gone, the budget refusal it is or None) for a refused eviction or delete."""
    if exc.status == 409 and "precondition" in exc.message.lower():
        # The Pod we classified (by UID) no longer exists; another one took its name.
        return None, True, None
    details = exc.body.get("details")
    causes = (details.get("causes") or []) if isinstance(details, dict) else None
    message = eviction_failure_message(exc.status, exc.message, causes)
    return message, message is None, budget_cause(exc.status, exc.message, causes) if message is not None else None


def _evict(api: KubeApi, pod: dict, *, grace_period: int | None, disable_eviction: bool, dry_run: bool) -> tuple[str | None, bool, int, str | None]:
    """Evict (or delete) one Pod: (failure message or None, gone, HTTP status, the budget refusal it is or None)."""
    meta = pod["metadata"]
    options: dict = {"preconditions": {"uid": meta.get("uid")}} if meta.get("uid") else {}
    if grace_period is not None:
        options["gracePeriodSeconds"] = grace_period
    pod_path = resource_path("v1", "pods", meta["namespace"], meta["name"])
    try:
        if disable_eviction:
            body = {"apiVersion": "v1", "kind": "DeleteOptions", **options}
            if not api.delete(pod_path, body=body, dry_run=dry_run):
                return None, True, 404, None
            return None, False, 200, None
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "deleteOptions": options,
        }
        # A 429 is a PodDisruptionBudget's refusal: the drain retries it on its next pass.
        # An eviction whose answer was lost is not sent again before the Pod is read:
        # if it is terminating (or gone), that eviction took effect.
        api.create(
            pod_path + "/eviction",
            body,
            dry_run=dry_run,
            retry=True if dry_run else None,
            throttle=False,
            verify=None if dry_run else _eviction_landed(api, pod),
        )
    except ApiError as exc:
        failure, gone, cause = _failure(exc)
        return failure, gone, exc.status, cause
    # An eviction whose answer was lost but which the Pod shows (terminating, or
    # already gone: a Pod with no grace period left goes at once) took effect:
    # it is this task's eviction, and the report counts it as evicted.
    return None, False, 200, None


_LANDED = "lifecycle.machine/eviction"


def _eviction_landed(api: KubeApi, pod: dict):
    """For the transport: has an eviction of ``pod`` whose answer was lost taken effect?"""
    meta = pod["metadata"]
    path = resource_path("v1", "pods", meta["namespace"], meta["name"])

    def check() -> dict | None:
        current = api.get(path)
        if current is None or (meta.get("uid") and current["metadata"].get("uid") != meta.get("uid")):
            return {_LANDED: "gone"}
        if current["metadata"].get("deletionTimestamp"):
            return {_LANDED: "terminating"}
        return None

    return check


def list_budgets(api: KubeApi) -> list[dict]:
    """Every PodDisruptionBudget (the run's cache's, when it keeps one: a stale budget may only cost an
    eviction the API server refuses, ``_k8s/cache.py`` rule 4); ``[]`` when they cannot be listed (the
    grouping is an optimisation)."""
    cached = api.cached_reader().items(BUDGETS)
    if cached is not None:
        return cached
    try:
        return api.list(BUDGETS)
    except ApiError:
        return []


class _Chain:
    """One budget group's evictions in a pass (:func:`evict_pods`), one after the other, as ``budget``
    (:class:`BudgetChain`) lets them go, with two ways on in a real drain that predicts:

    - ``lanes``: an eviction not answered after ``HEDGE_SECONDS`` is most likely waiting out the API server's
      half-second pause after a conflicting write of the budget's status (the disruption controller's); the
      next Pod's eviction goes beside it, up to ``lanes`` under way, each holding one of what the budget
      allows until it is answered - so never more than the budget allows are asked;
    - ``chains`` (``feed.PassChains``): once the allowance is used up, the chain waits, while another chain of
      the pass still sends, for its budget to have room again, and goes on."""

    def __init__(self, evict: Callable[[dict], tuple[str | None, bool, int, str | None]], budget: BudgetChain, chains: PassChains | None, lanes: int):
        self.evict, self.budget, self.chains, self.lanes = evict, budget, chains, lanes  # evict: _evict of one Pod
        self.results: list[tuple[str, str | None, bool, str | None]] = []
        self.evicted: set[str] = set()  # the UIDs of the Pods this chain evicted, which its budget's room must count
        self.sending = chains is not None  # counted among the pass's chains that send
        self.under_way: dict[Future, tuple[dict, bool, float]] = {}  # eviction -> (Pod, held, sent at)

    def run(self) -> list[tuple[str, str | None, bool, str | None]]:
        # One lane needs no thread of its own: each eviction is sent and answered here, as ever before.
        pool = ThreadPoolExecutor(max_workers=self.lanes) if self.lanes > 1 else None
        try:
            for pod in self.budget.group:
                refusal = self.turn(pod)
                if refusal is not None:
                    self.results.append((pod_key(pod), refusal, False, BUDGET_CAUSE))
                    continue
                held = self.budget.sending(pod)
                self.under_way[self.send(pool, pod)] = (pod, held, time.monotonic())
            self.settle(list(self.under_way))
        finally:
            if pool is not None:
                pool.shutdown(wait=True)
            if self.sending and self.chains is not None:
                self.chains.done()
        return self.results

    def send(self, pool: ThreadPoolExecutor | None, pod: dict) -> Future:
        """``pod``'s eviction, under way in a lane of ``pool``, or (no pool) already answered."""
        if pool is not None:
            return pool.submit(self.evict, pod)
        answered: Future = Future()
        answered.set_result(self.evict(pod))
        return answered

    def turn(self, pod: dict) -> str | None:
        """Wait for ``pod``'s turn: None when its eviction may go now, else the budget's refusal."""
        while True:
            refusal = self.budget.refused(pod)
            if self.under_way and (refusal is not None or not self.lane_free()):
                # Answers to come may refuse, or give back what they held: a refusal waits for one at least.
                self.settle(self.answered(at_least_one=refusal is not None or len(self.under_way) >= self.lanes))
                continue
            if refusal is not None and self.sending and self.chains is not None and self.budget.budget is not None:
                fresh = self.chains.room(budget_key(self.budget.budget), self.evicted, revision(self.budget.budget))
                self.sending = fresh is not None
                if fresh is not None:
                    self.budget.refill(fresh)
                    continue
            return refusal

    def hedge_at(self) -> float:
        """When another eviction may go beside those under way: once the latest sent has waited ``HEDGE_SECONDS``."""
        return max(sent for _pod, _held, sent in self.under_way.values()) + HEDGE_SECONDS

    def lane_free(self) -> bool:
        """Whether another eviction may go beside those under way: a lane is free and the latest sent waits too long."""
        return len(self.under_way) < self.lanes and time.monotonic() >= self.hedge_at()

    def answered(self, *, at_least_one: bool) -> list[Future]:
        """The evictions under way answered by the time the latest sent has waited ``HEDGE_SECONDS``, or
        (``at_least_one``) by the time one is."""
        timeout = None if at_least_one else max(0.0, self.hedge_at() - time.monotonic())
        done, _pending = wait(list(self.under_way), timeout=timeout, return_when=FIRST_COMPLETED)
        return list(done)

    def settle(self, done: list[Future]) -> None:
        """Record the answers of the evictions ``done`` (waiting for them)."""
        for future in done:
            pod, held, _sent = self.under_way.pop(future)
            failure, gone, status, cause = future.result()
            if failure is None and not gone:
                self.evicted.add((pod.get("metadata") or {}).get("uid") or pod_key(pod))
            failure, cause = self.budget.answered(pod, failure, status, cause, held=held)
            self.results.append((pod_key(pod), failure, gone, cause))


def evict_pods(
    api: KubeApi,
    pods: list[dict],
    *,
    grace_period: int | None,
    disable_eviction: bool = False,
    dry_run: bool = False,
    budgets: list[dict] | None = None,
    predict: bool = False,
    observed: NodeWatch | None = None,
) -> EvictionOutcome:
    """Evict Pods: concurrently, except that Pods under one PodDisruptionBudget
    go one after the other (see :func:`budget_groups`).

    A refusal (429 from a PodDisruptionBudget, or any other error) is recorded
    for the progress message, never raised: the next pass retries it. Once a
    budget refuses, its remaining Ready Pods are recorded as refused with the
    same message without asking again in this pass. In a dry run, Ready Pods
    beyond what a budget allows now are refused as the server would refuse them
    (see :func:`dry_run_allowance`). With ``predict`` (``budgets`` read for this
    pass or kept current by a watch) a real drain does the same instead of
    sending evictions the budget is known to refuse: the watch wakes the drain
    when it allows more (:class:`BudgetChain`). With ``observed`` as well (the budgets watched), a group whose
    budget's allowance ran out waits for its room again while another group still sends, and goes on
    (``feed.PassChains``).
    """
    outcome = EvictionOutcome()
    if not pods:
        return outcome
    groups = budget_groups(pods, budgets or [])
    real = predict and not dry_run and not disable_eviction

    def evict(pod: dict) -> tuple[str | None, bool, int, str | None]:
        return _evict(api, pod, grace_period=grace_period, disable_eviction=disable_eviction, dry_run=dry_run)

    chains = observed.chains(len(groups)) if observed is not None and real and 1 < len(groups) <= EVICTION_WORKERS else None

    def chain(group: list[dict]) -> list[tuple[str, str | None, bool, str | None]]:
        budget = BudgetChain(group, budgets or [], predict=predict and not disable_eviction, dry_run=dry_run and not disable_eviction)
        lanes = min(CHAIN_LANES, len(group)) if real and budget.allowance is not None else 1
        return _Chain(evict, budget, chains, lanes).run()

    with ThreadPoolExecutor(max_workers=min(EVICTION_WORKERS, len(groups))) as pool:
        results = [item for chained in pool.map(chain, groups) for item in chained]
    for key, failure, gone, cause in sorted(results, key=lambda result: result[0]):
        if gone:
            outcome.gone.append(key)
        elif failure is not None:
            outcome.failures.setdefault(failure, []).append(key)
            if cause is not None:
                outcome.causes[failure] = cause
        else:
            outcome.evicted.append(key)
    return outcome


def _evict_batch(
    api: KubeApi,
    result: DrainPass,
    to_evict: list[dict],
    *,
    grace_period: int | None,
    disable_eviction: bool,
    act: bool,
    watched_budgets: list[dict] | None,
    memory: EvictionMemory | None,
    escalations: Sequence[Escalation] = (),
    elapsed: float = 0.0,
    observed: NodeWatch | None = None,
) -> None:
    """Evict the current batch of a pass into ``result.outcome`` (see :func:`drain_pass`); the Pods
    an escalation the user asked for applies to (``elapsed`` seconds into the drain; the rule that
    decided each Pod as ``result.decisions`` say) are deleted instead."""
    # A Pod whose eviction failed other than by a budget's refusal is asked again only
    # after Cluster API's drain retry interval, never in a tight loop.
    held = memory.held_back(to_evict, api.monotonic()) if act and memory is not None else {}
    to_evict = [pod for pod in to_evict if pod_key(pod) not in held]
    decided_by = {decision.key: decision.rule for decision in result.decisions} if escalations else {}
    escalated = {pod_key(pod): found for pod in to_evict if (found := escalation_for(pod, escalations, elapsed, decided_by.get(pod_key(pod)))) is not None}
    evicted = [pod for pod in to_evict if pod_key(pod) not in escalated]
    budgets = watched_budgets
    if budgets is None:
        budgets = list_budgets(api) if len(evicted) > 1 and not disable_eviction else []
    result.outcome = evict_pods(
        api,
        evicted,
        grace_period=grace_period,
        disable_eviction=disable_eviction,
        dry_run=not act,
        budgets=budgets,
        # Budgets kept current by a watch, or read for this very pass (the first, listed): a real drain stops each
        # group where its budget's allowance runs out, so that no group's long chain holds the others' retries.
        predict=watched_budgets is not None or (act and bool(budgets)),
        observed=observed,
    )
    if escalated:
        deleted = evict_pods(api, [pod for pod in to_evict if pod_key(pod) in escalated], grace_period=grace_period, disable_eviction=True, dry_run=not act)
        result.outcome.evicted.extend(deleted.evicted)
        result.outcome.gone.extend(deleted.gone)
        for message, keys in deleted.failures.items():
            result.outcome.failures.setdefault(message, []).extend(keys)
        result.escalated = [(key, escalated[key]) for key in deleted.evicted]
    if act and memory is not None:
        memory.remember(to_evict, result.outcome, now=api.monotonic())
    for key, message in sorted(held.items()):
        result.outcome.failures.setdefault(message, []).append(key)
    if result.outcome.failures and watched_budgets is None and not budgets and not disable_eviction:
        budgets = list_budgets(api)  # what the refusing budgets need and have: the result says why the drain waits
    result.budgets = list(budgets)


def drain_pass(
    api: KubeApi,
    node_name: str,
    *,
    context: PodContext,
    rules: list[dict],
    machine: dict | None,
    cluster: dict | None,
    started_at: _dt.datetime,
    now: _dt.datetime,
    act: bool = True,
    grace_period: int | None = None,
    disable_eviction: bool = False,
    observed: NodeWatch | None = None,
    memory: EvictionMemory | None = None,
    escalations: Sequence[Escalation] = (),
) -> DrainPass:
    """Cordon the Node, classify its Pods and evict the current batch.

    With ``act`` False (check mode) nothing is written: the Node is not
    cordoned, and the current batch's evictions are sent as server-side dry
    runs, so the result shows which ones would be refused right now.
    A missing Node gives a completed pass with ``node`` None.

    With ``observed`` (the Node, its Pods and the budgets kept current by
    :class:`NodeWatch`) nothing is read: the pass classifies and evicts.
    ``memory`` (the task's earlier evictions, by Pod UID) is consulted before
    anything is evicted, since a watched Pod may not show this task's own
    eviction yet; a pass that acts adds its evictions to it.
    """
    if observed is not None:
        node, pods, watched_budgets = observed.snapshot()
        budget_versions = DrainView(None, [], watched_budgets).budget_versions()
    else:
        # Live, never the run's cache of Nodes: the cordon below is an unguarded merge
        # patch decided from this read, so it takes the server's word, not a watch's copy.
        node, pods, watched_budgets = api.live_reader().get(node_path(node_name)), None, None
    if node is None:
        return DrainPass(node=None)
    result = DrainPass(node=node, unreachable=is_node_unreachable(node))
    if act:
        result.node, result.cordoned = set_unschedulable(api, node, True)
    if pods is None:
        pods, result.resource_version = list_node_pods(api, node_name)
    result.pods = pods
    if observed is not None:
        result.budget_versions = budget_versions
    if memory is not None:
        pods = memory.present(pods)
    result.decisions = classify_pods(
        pods,
        machine=machine,
        cluster=cluster,
        namespaces=context.namespaces(pods) if pods else {},
        existing_daemonsets=context.existing_daemonsets(pods),
        rules=rules,
        node_unreachable=result.unreachable,
        now=now,
    )
    if memory is not None:
        memory.apply(pods, result.decisions)
    result.plan = plan_drain(result.decisions)
    by_key = {pod_key(pod): pod for pod in pods}
    to_evict = [by_key[decision.key] for decision in result.plan.evict_now]
    if result.unreachable and grace_period is None:
        # Its kubelet will never confirm: don't wait for the Pods' own grace periods.
        grace_period = UNREACHABLE_GRACE_PERIOD_SECONDS
    _evict_batch(
        api,
        result,
        to_evict,
        grace_period=grace_period,
        disable_eviction=disable_eviction,
        act=act,
        watched_budgets=watched_budgets,
        memory=memory,
        escalations=escalations,
        elapsed=(now - started_at).total_seconds(),
        observed=observed,
    )
    result.message = progress_message(started_at, result.plan, result.outcome.failures, result.outcome.gone)
    return result


class SkippedPods:
    """Which of a Node's Pods the drain skips (DaemonSet, static, skip label or
    rule), as machine_terminate's volume wait asks: their claims stay attached
    until the Node goes. What the Pods' Namespaces and DaemonSets look like is
    read as rarely as possible (:class:`PodContext`)."""

    def __init__(self, node_api: KubeApi):
        self.node_api = node_api
        self.context = PodContext(node_api)

    def pods(self, node: dict) -> list[dict]:
        """Every Pod bound to the Node, read now."""
        pods, _version = list_node_pods(self.node_api, node["metadata"]["name"])
        return pods

    def among(self, pods: list[dict], node: dict, *, machine: dict, cluster: dict | None, rules: list[dict], now: _dt.datetime) -> list[dict]:
        """The ``pods`` the drain would skip, decided as machine_drain decides (:func:`load_drain_rules` gives ``rules``)."""
        decisions = classify_pods(
            pods,
            machine=machine,
            cluster=cluster,
            namespaces=self.context.namespaces(pods),
            existing_daemonsets=self.context.existing_daemonsets(pods),
            rules=rules,
            node_unreachable=is_node_unreachable(node),
            now=now,
        )
        skipped = {decision.key for decision in decisions if decision.behavior == SKIP}
        return [pod for pod in pods if pod_key(pod) in skipped]
