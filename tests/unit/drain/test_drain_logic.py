"""Unit tests for the pure drain logic (_drain/logic.py, docs/behaviour.md §3): the
classification one filter at a time, in their order, the batches and the progress message."""

from __future__ import annotations

import datetime as dt

import pytest
from pod_objects import NOW, PDB, PORTWORX_SPEC, STARTED, classify, labelled, one, pod, rule, served, stamp

from ansible_collections.lifecycle.machine.plugins.module_utils._drain import logic as drain
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.evictions import TERMINATING_NAMESPACE_MESSAGE
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PodDecision, plan_drain, progress_message
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN, SKIP, WAIT_COMPLETED, DrainError
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError

# ---------------------------------------------------------------------------
# Step 1: deletionTimestamp, only when the Node is unreachable


@pytest.mark.parametrize(
    ("unreachable", "seconds_ago", "behavior"),
    [
        (True, 2, SKIP),
        (True, 3600, SKIP),
        (True, 1, DRAIN),  # not older than 1 s
        (True, 0, DRAIN),
        (True, -30, DRAIN),  # graceful deletion puts the timestamp in the future
        (False, 3600, DRAIN),  # threshold is off when the Node is reachable
    ],
)
def test_deletion_timestamp_skip_threshold(unreachable, seconds_ago, behavior):
    decision = one(pod("web", deleted=stamp(seconds_ago)), unreachable=unreachable)
    assert decision.behavior == behavior
    assert decision.terminating is True


def test_deletion_timestamp_age_counts_whole_seconds_like_upstream():
    # int(1.9 s) is 1, which is not more than 1 s.
    later = NOW + dt.timedelta(milliseconds=900)
    assert one(pod("web", deleted=stamp(1)), unreachable=True, now=later).behavior == DRAIN
    assert one(pod("web", deleted=stamp(1)), unreachable=True, now=later + dt.timedelta(milliseconds=100)).behavior == SKIP


def test_deletion_timestamp_skip_comes_first():
    old = stamp(10)
    for p in (
        pod("ds", owner="DaemonSet", owner_name="gone", deleted=old),
        pod("waiter", labels={drain.DRAIN_LABEL: "wait-completed"}, deleted=old),
        pod("nowhere", ns="missing-namespace", deleted=old),
    ):
        decision = one(p, unreachable=True)
        assert (decision.behavior, decision.reason) == (SKIP, "deletionTimestamp more than 1s ago on an unreachable Node")
        assert decision.warnings == []


def test_naive_now_is_taken_as_utc():
    naive = NOW.replace(tzinfo=None)
    assert one(pod("web", deleted=stamp(5)), unreachable=True, now=naive).behavior == SKIP


# ---------------------------------------------------------------------------
# Step 2: DaemonSet Pods


def test_pod_of_an_existing_daemonset_is_skipped():
    decision = one(pod("agent", owner="DaemonSet", owner_name="agent"), daemonsets={("default", "agent")})
    assert (decision.behavior, decision.reason, decision.warnings) == (SKIP, "DaemonSet-managed Pod", [])


def test_orphaned_daemonset_pod_is_drained_with_a_warning():
    decision = one(pod("agent", owner="DaemonSet", owner_name="agent"), daemonsets={("other-namespace", "agent")})
    assert (decision.behavior, decision.order, decision.reason) == (DRAIN, 0, "default")
    assert decision.warnings == ["evicting orphaned DaemonSet-managed Pod"]


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_daemonset_pod_continues_and_is_drained(phase):
    decision = one(pod("agent", owner="DaemonSet", owner_name="agent", phase=phase), daemonsets={("default", "agent")})
    assert (decision.behavior, decision.reason, decision.warnings) == (DRAIN, "default", [])


def test_daemonset_owner_that_is_not_the_controller_does_not_count():
    decision = one(pod("agent", owner="DaemonSet", owner_name="agent", controller=False), daemonsets={("default", "agent")})
    assert decision.behavior == DRAIN
    assert decision.warnings == ["evicting Pod that has no controller"]


def test_orphaned_daemonset_pod_still_obeys_later_steps():
    orphan = {"owner": "DaemonSet", "owner_name": "gone"}
    assert one(pod("a", labels={drain.DRAIN_LABEL: "skip"}, **orphan)).behavior == SKIP
    assert one(pod("b", annotations={drain.MIRROR_ANNOTATION: "x"}, **orphan)).reason == "static Pod"
    both = one(pod("c", volumes=[{"name": "scratch", "emptyDir": {}}], **orphan))
    assert both.warnings == ["evicting orphaned DaemonSet-managed Pod", "evicting Pod with local storage"]


def test_daemonset_refs_lists_the_daemonsets_to_look_up():
    pods = [
        pod("a", owner="DaemonSet", owner_name="agent"),
        pod("b", ns="apps", owner="DaemonSet", owner_name="agent"),
        pod("c", owner="DaemonSet", owner_name="done", phase="Succeeded"),
        pod("d", owner="DaemonSet", owner_name="loose", controller=False),
        pod("e"),
    ]
    assert drain.daemonset_refs(pods) == {("default", "agent"), ("apps", "agent")}


# ---------------------------------------------------------------------------
# Step 3: static (mirror) Pods


def test_mirror_pod_is_skipped_whatever_its_label_or_rules_say():
    p = pod(
        "kube-apiserver-node1", owner="Node", owner_name="node1", annotations={drain.MIRROR_ANNOTATION: "abc"}, labels={drain.DRAIN_LABEL: "wait-completed"}
    )
    decision = one(p, rules=[rule("all", DRAIN, 5)])
    assert (decision.behavior, decision.reason, decision.warnings) == (SKIP, "static Pod", [])


# ---------------------------------------------------------------------------
# Steps 4-5: warnings for running Pods only


@pytest.mark.parametrize(
    ("kwargs", "warnings"),
    [
        ({"volumes": [{"name": "scratch", "emptyDir": {}}]}, ["evicting Pod with local storage"]),
        ({"volumes": [{"name": "scratch", "emptyDir": {"medium": "Memory"}}], "phase": "Pending"}, ["evicting Pod with local storage"]),
        ({"volumes": [{"name": "scratch", "emptyDir": {}}], "phase": "Succeeded"}, []),
        ({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}, []),
        ({"owner": None}, ["evicting Pod that has no controller"]),
        ({"owner": None, "phase": ""}, ["evicting Pod that has no controller"]),
        ({"owner": None, "phase": "Failed"}, []),
        ({"owner": None, "volumes": [{"name": "s", "emptyDir": {}}]}, ["evicting Pod with local storage", "evicting Pod that has no controller"]),
        ({}, []),
    ],
)
def test_local_storage_and_no_controller_warnings(kwargs, warnings):
    decision = one(pod("web", **kwargs))
    assert (decision.behavior, decision.order, decision.reason) == (DRAIN, 0, "default")
    assert decision.warnings == warnings


def test_completed_pods_are_evicted_not_skipped():
    for phase in ("Succeeded", "Failed"):
        assert one(pod("job", owner="Job", phase=phase)).behavior == DRAIN


# ---------------------------------------------------------------------------
# Step 6: the cluster.x-k8s.io/drain label


@pytest.mark.parametrize(
    ("value", "behavior", "reason"),
    [
        ("skip", SKIP, "label cluster.x-k8s.io/drain=skip"),
        ("SKIP", SKIP, "label cluster.x-k8s.io/drain=SKIP"),
        ("Skip", SKIP, "label cluster.x-k8s.io/drain=Skip"),
        ("wait-completed", WAIT_COMPLETED, "label cluster.x-k8s.io/drain=wait-completed"),
        ("WaitCompleted", WAIT_COMPLETED, "label cluster.x-k8s.io/drain=WaitCompleted"),
        ("waitcompleted", WAIT_COMPLETED, "label cluster.x-k8s.io/drain=waitcompleted"),
        ("Wait-Completed", WAIT_COMPLETED, "label cluster.x-k8s.io/drain=Wait-Completed"),
        ("waitcomplete-d", WAIT_COMPLETED, "label cluster.x-k8s.io/drain=waitcomplete-d"),  # one dash dropped, anywhere
        ("wait--completed", DRAIN, "default"),  # only one dash is optional
        ("wait_completed", DRAIN, "default"),
        ("drain", DRAIN, "default"),
        ("skipped", DRAIN, "default"),
        ("", DRAIN, "default"),
    ],
)
def test_drain_label_values(value, behavior, reason):
    decision = one(pod("web", labels={drain.DRAIN_LABEL: value}))
    assert (decision.behavior, decision.order, decision.reason) == (behavior, 0, reason)


def test_drain_label_wins_over_rules_and_drops_warnings():
    rules = [rule("first", DRAIN, 9)]
    skipped = one(pod("a", owner=None, labels={drain.DRAIN_LABEL: "skip"}), rules=rules)
    assert (skipped.behavior, skipped.warnings) == (SKIP, [])
    waited = one(pod("b", owner=None, labels={drain.DRAIN_LABEL: "WaitCompleted"}), rules=rules)
    assert (waited.behavior, waited.order, waited.warnings) == (WAIT_COMPLETED, 0, [])
    ignored = one(pod("c", labels={drain.DRAIN_LABEL: "later"}), rules=rules)
    assert (ignored.behavior, ignored.order, ignored.reason) == (DRAIN, 9, "MachineDrainRule first")


def test_labelled_pod_in_a_missing_namespace_is_not_an_error():
    assert one(pod("a", ns="gone", labels={drain.DRAIN_LABEL: "skip"})).behavior == SKIP


# ---------------------------------------------------------------------------
# Step 7: MachineDrainRules


def test_rule_with_absent_lists_matches_every_pod_and_machine():
    decision = one(pod("web"), rules=[rule("everything", DRAIN, 3)], machine=labelled("Machine", os="linux"))
    assert (decision.behavior, decision.order, decision.reason) == (DRAIN, 3, "MachineDrainRule everything")


def test_rule_with_empty_selectors_matches_everything():
    r = rule("empty", SKIP, machines=[{"selector": {}, "clusterSelector": {}}], pods=[{"selector": {}, "namespaceSelector": {}}, {}])
    assert one(pod("web", ns="apps"), rules=[r], machine=labelled("Machine"), cluster=labelled("Cluster")).behavior == SKIP


def test_drain_rule_without_order_uses_zero_and_keeps_warnings():
    decision = one(pod("web", owner=None), rules=[rule("plain", DRAIN)])
    assert (decision.behavior, decision.order, decision.warnings) == (DRAIN, 0, ["evicting Pod that has no controller"])


def test_wait_completed_rule_has_order_zero_and_no_warnings():
    decision = one(pod("batch", owner=None), rules=[rule("wait", WAIT_COMPLETED)])
    assert (decision.behavior, decision.order, decision.reason, decision.warnings) == (WAIT_COMPLETED, 0, "MachineDrainRule wait", [])


def test_skip_rule():
    decision = one(pod("agent"), rules=[rule("skip-agents", SKIP, pods=[{"selector": {"matchLabels": {"app": "agent"}}}])])
    assert decision.behavior == DRAIN  # no app=agent label
    decision = one(pod("agent", labels={"app": "agent"}), rules=[rule("skip-agents", SKIP, pods=[{"selector": {"matchLabels": {"app": "agent"}}}])])
    assert (decision.behavior, decision.reason) == (SKIP, "MachineDrainRule skip-agents")


@pytest.mark.parametrize(
    ("pod_ns", "pod_labels", "matches"),
    [
        ("apps", {"app": "web"}, True),  # both selectors of entry 0
        ("default", {"app": "web"}, False),  # selector only: AND fails
        ("apps", {"app": "db"}, False),  # namespaceSelector only: AND fails
        ("monitoring", {"app": "prometheus"}, True),  # entry 1 (OR)
        ("monitoring", {"app": "web"}, False),
    ],
)
def test_pod_selectors_and_within_an_entry_or_across_entries(pod_ns, pod_labels, matches):
    r = rule(
        "ordered",
        DRAIN,
        10,
        pods=[
            {"selector": {"matchLabels": {"app": "web"}}, "namespaceSelector": {"matchLabels": {"tier": "frontend"}}},
            {"selector": {"matchLabels": {"app": "prometheus"}}, "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
        ],
    )
    decision = one(pod("p", ns=pod_ns, labels=pod_labels), rules=[r])
    assert (decision.order == 10) is matches


@pytest.mark.parametrize(
    ("machine", "cluster", "matches"),
    [
        (labelled("Machine", os="linux"), labelled("Cluster", stage="production"), True),  # entry 1
        (labelled("Machine", os="linux"), labelled("Cluster", stage="dev"), False),  # selector only
        (labelled("Machine", os="windows"), labelled("Cluster", stage="production"), False),  # clusterSelector only
        (labelled("Machine", **{"cluster.x-k8s.io/control-plane": ""}), labelled("Cluster"), True),  # entry 0
        (labelled("Machine", **{"cluster.x-k8s.io/control-plane": ""}), None, True),  # entry 0 has no clusterSelector
        (None, None, False),  # a bare Node: no labels to select on
        (labelled("Machine", os="linux"), None, False),  # no Cluster: its labels count as empty
    ],
)
def test_machine_selectors_and_cluster_selector(machine, cluster, matches):
    r = rule(
        "cp-or-prod-linux",
        SKIP,
        machines=[
            {"selector": {"matchExpressions": [{"key": "cluster.x-k8s.io/control-plane", "operator": "Exists"}]}},
            {
                "selector": {"matchLabels": {"os": "linux"}},
                "clusterSelector": {"matchExpressions": [{"key": "stage", "operator": "In", "values": ["production"]}]},
            },
        ],
    )
    decision = one(pod("web"), rules=[r], machine=machine, cluster=cluster)
    assert (decision.behavior == SKIP) is matches


def test_bare_node_still_gets_rules_without_machine_selectors():
    rules = [rule("for-all", DRAIN, 4), rule("a-not-here", SKIP, machines=[{"selector": {"matchLabels": {"os": "linux"}}}])]
    assert one(pod("web"), rules=rules, machine=None, cluster=None).reason == "MachineDrainRule for-all"


def test_does_not_exist_selector_matches_a_bare_node():
    r = rule("no-gpu", SKIP, machines=[{"selector": {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}}])
    assert one(pod("web"), rules=[r], machine=None).behavior == SKIP


def test_first_matching_rule_by_byte_order_name_wins():
    rules = [rule("a-drain-late", DRAIN, 50), rule("B-skip", SKIP), rule("0-not-matching", WAIT_COMPLETED, pods=[{"selector": {"matchLabels": {"x": "y"}}}])]
    decision = one(pod("web"), rules=rules)
    assert (decision.behavior, decision.reason) == (SKIP, "MachineDrainRule B-skip")
    decision = one(pod("web"), rules=[rules[0], rules[2]])
    assert (decision.behavior, decision.order) == (DRAIN, 50)


def test_served_rules_classify_like_inline_ones():
    spec = {"drain": {"behavior": "Drain", "order": -20}, "pods": [{"namespaceSelector": {"matchLabels": {"tier": "ops"}}}]}
    decision = one(pod("prom", ns="monitoring"), rules=[served("ops-first", "capi", spec)])
    assert (decision.behavior, decision.order, decision.reason) == (DRAIN, -20, "MachineDrainRule ops-first")


def test_pod_in_a_missing_namespace_is_an_error_naming_the_pods():
    pods = [pod("b", ns="gone"), pod("a", ns="gone"), pod("ok"), pod("ds", ns="gone2", owner="DaemonSet", owner_name="ds")]
    with pytest.raises(DrainError) as excinfo:
        classify(pods, daemonsets={("gone2", "ds")})
    assert str(excinfo.value) == 'Failed to get Pods for eviction: Pods with error "Pod Namespace does not exist": gone/a, gone/b'
    assert isinstance(excinfo.value, MachineError)


def test_missing_namespace_is_an_error_even_without_rules():
    with pytest.raises(DrainError, match="gone/web"):
        classify([pod("web", ns="gone")], namespaces={})


# ---------------------------------------------------------------------------
# Step 8, output shape and helpers


def test_default_is_drain_order_zero_and_decisions_are_sorted():
    decisions = classify([pod("b", ns="apps"), pod("a", ns="default"), pod("a", ns="apps")])
    assert [d.key for d in decisions] == ["apps/a", "apps/b", "default/a"]
    assert all((d.behavior, d.order, d.reason) == (DRAIN, 0, "default") for d in decisions)


def test_decision_as_dict():
    p = pod("db", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "db-data"}}, {"name": "tmp", "emptyDir": {}}], deleted=stamp(0))
    assert one(p).as_dict() == {
        "namespace": "default",
        "name": "db",
        "behavior": DRAIN,
        "order": 0,
        "reason": "default",
        "warnings": ["evicting Pod with local storage"],
        "terminating": True,
        "phase": "Running",
        "persistent_volume_claims": ["db-data"],
    }


# ---------------------------------------------------------------------------
# Batches


def d(name: str, behavior: str = DRAIN, order: int = 0, *, terminating: bool = False, ns: str = "ns") -> PodDecision:
    return PodDecision(namespace=ns, name=name, behavior=behavior, order=order, terminating=terminating)


def keys(decisions: list[PodDecision]) -> list[str]:
    return [x.key for x in decisions]


def test_empty_or_skip_only_plan_is_completed():
    for decisions in ([], [d("agent", SKIP)]):
        plan = plan_drain(decisions)
        assert plan.completed is True
        assert plan.current_order is None
        assert plan.batches == []
        assert progress_message(STARTED, plan, {}) == ""


def test_lowest_order_goes_first_including_negative_orders():
    plan = plan_drain([d("late", order=100), d("first", order=-10), d("first2", order=-10), d("mid"), d("agent", SKIP), d("waiter", WAIT_COMPLETED)])
    assert plan.current_order == -10
    assert keys(plan.evict_now) == ["ns/first", "ns/first2"]
    assert keys(plan.evict_later) == ["ns/late", "ns/mid"]
    assert keys(plan.wait_completed_now) == []
    assert keys(plan.wait_completed_later) == ["ns/waiter"]
    assert keys(plan.skipped) == ["ns/agent"]
    assert plan.completed is False
    assert plan.batches == [
        {"order": -10, "pods": ["ns/first", "ns/first2"], "wait_completed": [], "terminating": []},
        {"order": 0, "pods": ["ns/mid", "ns/waiter"], "wait_completed": ["ns/waiter"], "terminating": []},
        {"order": 100, "pods": ["ns/late"], "wait_completed": [], "terminating": []},
    ]


def test_terminating_pod_of_a_lower_order_holds_back_higher_orders():
    plan = plan_drain([d("low", order=0, terminating=True), d("high", order=10)])
    assert plan.current_order == 0
    assert keys(plan.evict_now) == []
    assert keys(plan.terminating) == ["ns/low"]
    assert keys(plan.evict_later) == ["ns/high"]
    assert plan.batches[0] == {"order": 0, "pods": ["ns/low"], "wait_completed": [], "terminating": ["ns/low"]}


def test_terminating_pod_of_a_higher_order_is_listed_as_terminating_not_evicted_again():
    plan = plan_drain([d("low"), d("high", order=10, terminating=True)])
    assert keys(plan.evict_now) == ["ns/low"]
    assert keys(plan.terminating) == ["ns/high"]
    assert keys(plan.evict_later) == []


def test_wait_completed_holds_back_higher_orders_and_is_never_evicted():
    plan = plan_drain([d("waiter", WAIT_COMPLETED), d("later", order=5)])
    assert plan.current_order == 0
    assert keys(plan.wait_completed_now) == ["ns/waiter"]
    assert keys(plan.evict_now) == []
    assert keys(plan.evict_later) == ["ns/later"]


def test_wait_completed_pod_with_deletion_timestamp_stays_a_wait():
    # Upstream buckets WaitCompleted before looking at deletionTimestamp.
    plan = plan_drain([d("waiter", WAIT_COMPLETED, terminating=True)])
    assert keys(plan.wait_completed_now) == ["ns/waiter"]
    assert keys(plan.terminating) == []
    assert plan.batches == [{"order": 0, "pods": ["ns/waiter"], "wait_completed": ["ns/waiter"], "terminating": ["ns/waiter"]}]


def test_plan_as_dict():
    plan = plan_drain([d("a"), d("b", order=1)])
    assert plan.as_dict() == {
        "current_order": 0,
        "evict_now": ["ns/a"],
        "terminating": [],
        "wait_completed_now": [],
        "evict_later": ["ns/b"],
        "wait_completed_later": [],
        "skipped": [],
        "batches": [
            {"order": 0, "pods": ["ns/a"], "wait_completed": [], "terminating": []},
            {"order": 1, "pods": ["ns/b"], "wait_completed": [], "terminating": []},
        ],
        "completed": False,
    }


def test_plan_from_classification_end_to_end():
    pods = [
        pod("portworx-1", labels={"app": "portworx"}),
        pod("web-1", ns="apps"),
        pod("agent", owner="DaemonSet", owner_name="agent"),
        pod("batch", labels={drain.DRAIN_LABEL: "wait-completed"}),
    ]
    decisions = classify(pods, rules=[served("portworx", "capi", PORTWORX_SPEC)], daemonsets={("default", "agent")})
    plan = plan_drain(decisions)
    assert [(b["order"], b["pods"]) for b in plan.batches] == [(0, ["apps/web-1", "default/batch"]), (100, ["default/portworx-1"])]
    assert keys(plan.skipped) == ["default/agent"]


# ---------------------------------------------------------------------------
# Progress message (Cluster API's condition message)

PDB_20 = PDB + " The disruption budget pod-5-pdb needs 20 healthy pods and has 20 currently"


def test_progress_message_short():
    plan = plan_drain(
        [
            d("pod-2-deletionTimestamp-set-1", terminating=True),
            d("pod-3-to-trigger-eviction-successfully-1"),
            d("pod-5-to-trigger-eviction-pdb-violated-1"),
            d("pod-6-to-trigger-eviction-some-other-error"),
            d("pod-7-eviction-later", order=1),
            d("pod-8-eviction-later", order=1),
        ]
    )
    failures = {PDB_20: ["ns/pod-5-to-trigger-eviction-pdb-violated-1"], "some other error 1": ["ns/pod-6-to-trigger-eviction-some-other-error"]}
    assert progress_message(STARTED, plan, failures) == (
        "Drain not completed yet (started at 2024-10-09T16:13:59Z):\n"
        "* Pods ns/pod-2-deletionTimestamp-set-1, ns/pod-3-to-trigger-eviction-successfully-1: deletionTimestamp set, but still not removed from the Node\n"
        "* Pod ns/pod-5-to-trigger-eviction-pdb-violated-1: cannot evict pod as it would violate the pod's disruption budget."
        " The disruption budget pod-5-pdb needs 20 healthy pods and has 20 currently\n"
        "* Pod ns/pod-6-to-trigger-eviction-some-other-error: failed to evict Pod, some other error 1\n"
        "After above Pods have been removed from the Node, the following Pods will be evicted: ns/pod-7-eviction-later, ns/pod-8-eviction-later"
    )


def test_progress_message_long_truncates_names_and_failure_lines():
    pdb_pods = [f"pod-5-pdb-{i}" for i in range(1, 7)]
    others = [f"pod-{i}-other" for i in range(6, 11)]
    plan = plan_drain(
        [d(f"pod-2-terminating-{i}", terminating=True) for i in (1, 2, 3)]
        + [d(f"pod-3-evicted-{i}") for i in (1, 2, 3, 4)]
        + [d("pod-4-gone"), d("pod-1-ignored", SKIP)]
        + [d(name) for name in pdb_pods + others]
        + [d(f"pod-{i}-later", order=5) for i in (11, 12, 13, 14, 15)]
    )
    failures = {PDB_20: [f"ns/{name}" for name in reversed(pdb_pods)]}
    failures.update({f"some other error {i}": [f"ns/pod-{i + 5}-other"] for i in range(1, 6)})
    message = progress_message(STARTED, plan, failures, gone=["ns/pod-4-gone"])
    assert message == (
        "Drain not completed yet (started at 2024-10-09T16:13:59Z):\n"
        "* Pods ns/pod-2-terminating-1, ns/pod-2-terminating-2, ns/pod-2-terminating-3, ... (4 more):"
        " deletionTimestamp set, but still not removed from the Node\n"
        "* Pods ns/pod-5-pdb-1, ns/pod-5-pdb-2, ns/pod-5-pdb-3, ... (3 more): cannot evict pod as it would violate the pod's disruption budget."
        " The disruption budget pod-5-pdb needs 20 healthy pods and has 20 currently\n"
        "* Pod ns/pod-6-other: failed to evict Pod, some other error 1\n"
        "* Pod ns/pod-7-other: failed to evict Pod, some other error 2\n"
        "* Pod ns/pod-8-other: failed to evict Pod, some other error 3\n"
        "* Pod ns/pod-9-other: failed to evict Pod, some other error 4\n"
        "* 1 Pod with other issues\n"
        "After above Pods have been removed from the Node, the following Pods will be evicted: ns/pod-11-later, ns/pod-12-later, ns/pod-13-later, ... (2 more)"
    )


def test_progress_message_counts_pods_with_other_issues():
    failures = {f"some other error {i}": [f"ns/pod-{i}"] for i in range(1, 6)}
    failures["some other error 6"] = ["ns/pod-6c", "ns/pod-6a", "ns/pod-6b"]
    failures["some other error 7"] = ["ns/pod-7"]
    plan = plan_drain([d(key.split("/")[1]) for keys_ in failures.values() for key in keys_])
    lines = progress_message(STARTED, plan, failures).splitlines()
    assert lines[1:] == [f"* Pod ns/pod-{i}: failed to evict Pod, some other error {i}" for i in range(1, 6)] + ["* 4 Pods with other issues"]


def test_progress_message_sorts_failures_by_raw_message_and_pods_by_name():
    terminating_ns = TERMINATING_NAMESPACE_MESSAGE
    failures = {"b error": ["ns/z", "ns/y"], PDB + " budget": ["ns/p"], "a error": ["ns/a"], terminating_ns: ["ns/t"]}
    plan = plan_drain([d(n) for n in ("z", "y", "p", "a", "t")])
    assert progress_message(STARTED, plan, failures).splitlines()[1:] == [
        "* Pod ns/p: cannot evict pod as it would violate the pod's disruption budget. budget",
        "* Pod ns/t: failed to evict Pod, " + terminating_ns,
        "* Pod ns/a: failed to evict Pod, a error",
        "* Pods ns/y, ns/z: failed to evict Pod, b error",
    ]


def test_progress_message_lists_terminating_pods_before_just_evicted_ones():
    plan = plan_drain([d("a-evicted"), d("z-terminating", terminating=True)])
    assert progress_message(STARTED, plan, {}).splitlines()[1] == (
        "* Pods ns/z-terminating, ns/a-evicted: deletionTimestamp set, but still not removed from the Node"
    )


def test_progress_message_waiting_lines_and_their_order():
    plan = plan_drain([d("first", order=-1), d("waiter", WAIT_COMPLETED), d("w2", WAIT_COMPLETED), d("last", order=3)])
    assert progress_message(STARTED, plan, {}) == (
        "Drain not completed yet (started at 2024-10-09T16:13:59Z):\n"
        "* Pod ns/first: deletionTimestamp set, but still not removed from the Node\n"
        "After above Pods have been removed from the Node, the following Pods will be evicted: ns/last\n"
        "After above Pods have been removed from the Node, waiting for the following Pods to complete without eviction: ns/w2, ns/waiter"
    )
    plan = plan_drain([d("waiter", WAIT_COMPLETED), d("last", order=3)])
    assert progress_message(STARTED, plan, {}).splitlines()[1:] == [
        "* Pod ns/waiter: waiting for completion",
        "After above Pods have been removed from the Node, the following Pods will be evicted: ns/last",
    ]


def test_progress_message_is_empty_when_every_evicted_pod_was_already_gone():
    plan = plan_drain([d("a"), d("b")])
    assert plan.completed is False
    assert progress_message(STARTED, plan, {}, gone=["ns/a", "ns/b"]) == ""
    assert progress_message(STARTED, plan, {"boom": ["ns/b"]}, gone=["ns/a"]).splitlines()[1:] == ["* Pod ns/b: failed to evict Pod, boom"]


def test_progress_message_start_time_is_utc_rfc3339():
    plan = plan_drain([d("a")])
    started = dt.datetime(2024, 10, 9, 18, 13, 59, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert progress_message(started, plan, {}).startswith("Drain not completed yet (started at 2024-10-09T16:13:59Z):\n")
