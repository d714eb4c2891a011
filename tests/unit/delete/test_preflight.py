"""Check mode's answer for the chosen Machines together: what the batch does to itself (pure)."""

from __future__ import annotations

from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.api import read_batch
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.logic import Outcome, preflight, preflight_warnings
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.preflight import (
    KIND_NO_NODE,
    KIND_SHARED_BUDGET,
    KIND_SINGLE_REPLICA,
    KIND_UNREPLICATED,
    KIND_WHOLE_WORKLOAD,
    batch_findings,
    suggested_concurrency,
    why_not,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import WARNING_NO_CONTROLLER
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import WorkloadSettings

NEVER = "can never clear as things stand"
NEEDS = "needs someone to act"
CLEARS = "clears by itself"
RS_UID = "rs-uid"


def node(name: str, *, ready: bool = True, cordoned: bool = False, taints: list | None = None, labels: dict | None = None) -> dict:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"unschedulable": cordoned, "taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod(name: str, *, app: str = "web", owner: str | None = "ReplicaSet", uid: str = RS_UID, ready: bool = True, spec: dict | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "shop", "labels": {"app": app}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{app}-7d9", "uid": uid, "controller": True}]
    return {"metadata": meta, "spec": spec or {}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}}


def decision(p: dict) -> dict:
    warnings = [] if p["metadata"].get("ownerReferences") else [WARNING_NO_CONTROLLER]
    return {"namespace": "shop", "name": p["metadata"]["name"], "behavior": "Drain", "order": 0, "terminating": False, "warnings": warnings}


def machine(name: str, pods: list[dict], cluster: str = "") -> dict:
    return {"key": f"shop/{name}", "cluster": cluster, "node": f"n-{name}", "pods": pods, "decisions": [decision(p) for p in pods]}


def budget(name: str = "web", *, allowed: int, expected: int = 3, healthy: int = 3, desired: int = 2, spec: dict | None = None, app: str = "web") -> dict:
    return {
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": app}}, **(spec or {"minAvailable": desired})},
        "status": {"disruptionsAllowed": allowed, "expectedPods": expected, "currentHealthy": healthy, "desiredHealthy": desired},
    }


def facts(machines: list[dict], *, nodes: list[dict] | None = None, budgets: list[dict] | None = None, controllers: dict | None = None) -> dict:
    batch_nodes = [node(m["node"]) for m in machines]
    spare = [node("spare")] if nodes is None else nodes
    return {"machines": machines, "clusters": {"": {"nodes": batch_nodes + spare, "budgets": budgets or [], "controllers": controllers or {}, "errors": []}}}


def three_machines(**extra) -> list[dict]:
    return [machine(name, [pod(f"web-{index}", **extra)]) for index, name in enumerate(("a", "b", "c"))]


def kinds(answer: dict) -> list[tuple[str, str]]:
    return [(f["kind"], f["verdict"]) for f in answer["findings"]]


def test_a_budget_allowing_one_with_pods_on_three_machines_serialises_the_drains() -> None:
    answer = batch_findings(facts(three_machines(), budgets=[budget(allowed=1)]), concurrency=10)

    [finding] = answer["findings"]
    assert (finding["kind"], finding["verdict"], finding["holds"]) == (KIND_SHARED_BUDGET, CLEARS, True)
    assert finding["machines"] == ["shop/a", "shop/b", "shop/c"] and finding["object"] == "PodDisruptionBudget shop/web"
    assert finding["evidence"]["pods_by_machine"] == {"shop/a": ["shop/web-0"], "shop/b": ["shop/web-1"], "shop/c": ["shop/web-2"]}
    assert (finding["evidence"]["disruptions_allowed"], finding["evidence"]["at_once"], finding["evidence"]["never_back"]) == (1, 3, [])
    assert "serialises the drains" in finding["reason"]
    assert answer["suggested_concurrency"] == 1 and answer["counted"] == ["shop/a", "shop/b", "shop/c"]


def test_the_suggested_concurrency_is_the_largest_the_shared_budgets_allow() -> None:
    machines = three_machines()
    assert batch_findings(facts(machines, budgets=[budget(allowed=3, desired=0)]), concurrency=10) == {
        "findings": [],
        "concurrency": 10,
        "suggested_concurrency": 3,
        "suggested_order": ["shop/a", "shop/b", "shop/c"],
        "counted": ["shop/a", "shop/b", "shop/c"],
        "unready_pods": [],
        "not_counted": {},
    }
    at_ten = batch_findings(facts(machines, budgets=[budget(allowed=2, desired=1)]), concurrency=10)
    assert kinds(at_ten) == [(KIND_SHARED_BUDGET, CLEARS)] and at_ten["suggested_concurrency"] == 2
    # At the suggested concurrency the budget lets every Machine's Pods go at once: nothing serialises them.
    assert batch_findings(facts(machines, budgets=[budget(allowed=2, desired=1)]), concurrency=2)["findings"] == []
    assert suggested_concurrency({"b": [1, 2, 1]}, 5) == 1  # one Machine alone holds more than it allows
    assert suggested_concurrency({"b": [4, 2, 1, 1]}, 5) == 5  # all of its Machines at once fit
    assert suggested_concurrency({"b": [3, 1, 1, 1, 1], "c": [5, 2, 2, 2]}, 6) == 2


def test_a_budget_that_allows_nothing_across_machines_can_never_finish() -> None:
    stuck = budget(allowed=0, expected=3, healthy=3, desired=3, spec={"maxUnavailable": 0})
    [finding] = batch_findings(facts(three_machines(), budgets=[stuck]), concurrency=3)["findings"]
    assert (finding["kind"], finding["verdict"]) == (KIND_SHARED_BUDGET, NEVER)
    assert finding["reason"].startswith("its maxUnavailable is 0") and "3 Machines" in finding["reason"]


def test_pods_that_never_come_back_use_up_the_budget_for_good() -> None:
    # Two bare Pods of one budget allowing 1 on one Machine: the first goes, the second never can.
    bare = [pod("web-0", owner=None), pod("web-1", owner=None)]
    answer = batch_findings(facts([machine("a", bare)], budgets=[budget(allowed=1, expected=2, healthy=2, desired=1)]), concurrency=1)
    budget_finding = next(f for f in answer["findings"] if f["kind"] == KIND_SHARED_BUDGET)
    assert budget_finding["verdict"] == NEVER and budget_finding["evidence"]["never_back"] == ["shop/web-0", "shop/web-1"]
    assert "nothing recreates them" in budget_finding["reason"] and "the Machine can never finish" in budget_finding["reason"]
    assert budget_finding["evidence"]["can_finish_at_most"] == 0
    # As many as it allows never come back, the others do: it finishes only in the right order.
    mixed = [machine("a", [pod("web-0", owner=None)]), machine("b", [pod("web-1")])]
    [order] = [f for f in batch_findings(facts(mixed, budgets=[budget(allowed=1, expected=2, healthy=2, desired=1)]), 2)["findings"] if f["holds"]]
    assert (order["verdict"], order["machines"]) == (NEEDS, ["shop/a", "shop/b"]) and "other Pods go first" in order["reason"]


def test_pods_that_never_come_back_are_judged_against_what_the_budget_allows_at_most() -> None:
    # It allows 0 now (one Pod it expects is not healthy), 1 once every Pod it expects is healthy.
    waiting = budget(allowed=0, expected=3, healthy=2, desired=2)
    bare = [machine("a", [pod("web-0", owner=None)]), machine("b", [pod("web-1", owner=None)])]
    [never] = [f for f in batch_findings(facts(bare, budgets=[waiting]), 2)["findings"] if f["holds"]]
    assert never["verdict"] == NEVER and never["evidence"]["allows_at_most"] == 1
    assert never["reason"].startswith("it allows 0 disruptions now (1 at most, once every Pod it expects is healthy) and 2 of the 2")
    mixed = [machine("a", [pod("web-0", owner=None)]), machine("b", [pod("web-1")])]
    [order] = [f for f in batch_findings(facts(mixed, budgets=[waiting]), 2)["findings"] if f["holds"]]
    assert order["verdict"] == NEEDS
    replicated = [machine("a", [pod("web-0")]), machine("b", [pod("web-1")])]
    [serialised] = batch_findings(facts(replicated, budgets=[waiting]), 2)["findings"]
    assert (serialised["verdict"], serialised["holds"]) == (CLEARS, True)


def test_how_many_machines_can_finish_when_pods_that_never_come_back_use_up_the_budget() -> None:
    # Seen on a fleet: two Machines each with one db Pod no Node outside the batch can take, behind a budget allowing 1.
    # The one whose drain evicts first finishes; the other never does: the answer says at most one, not which.
    homeless = [machine("a", [pod("db-0", app="db")]), machine("b", [pod("db-1", app="db")])]
    guard = budget("db", allowed=1, expected=2, healthy=2, desired=1, app="db")
    [never, no_node] = [f for f in batch_findings(facts(homeless, nodes=[], budgets=[guard]), 10)["findings"] if f["holds"]]
    assert (never["verdict"], never["machines"], never["evidence"]["can_finish_at_most"]) == (NEVER, ["shop/a", "shop/b"], 1)
    assert "at most 1 of its 2 Machines can finish, those whose drains use up what it allows first" in never["reason"]
    assert (no_node["kind"], no_node["verdict"]) == (KIND_NO_NODE, NEVER)
    # A Machine whose Pods all come back goes first and gives back what it took: it counts as one that can finish.
    mixed = [*homeless, machine("c", [pod("db-2", app="db")])]
    back = facts(mixed, nodes=[], budgets=[budget("db", allowed=1, expected=3, healthy=3, desired=2, app="db")])
    back["clusters"][""]["nodes"].append(node("spare", labels={"pool": "db"}))
    for entry in mixed[:2]:
        entry["pods"][0]["spec"] = {"nodeSelector": {"pool": "elsewhere"}}
    [stuck] = [f for f in batch_findings(back, 10)["findings"] if f["kind"] == KIND_SHARED_BUDGET]
    assert (stuck["verdict"], stuck["evidence"]["never_back"], stuck["evidence"]["can_finish_at_most"]) == (NEVER, ["shop/db-0", "shop/db-1"], 2)


def test_a_budget_no_concurrency_helps_does_not_lower_the_suggested_concurrency() -> None:
    # Seen on a fleet: a maxUnavailable 0 budget across two Machines, and one whose Pods never come back, made the
    # suggestion 1 although no concurrency lets those Machines finish; the web budget alone allows 2 side by side.
    web = [machine(name, [pod(f"web-{index}")]) for index, name in enumerate(("a", "b", "c"))]
    quiet = [machine(name, [pod(f"q-{index}", app="q", uid="q-uid")]) for index, name in enumerate(("d", "e"))]
    budgets = [budget(allowed=2, desired=1), budget("q", allowed=0, expected=2, healthy=2, desired=2, spec={"maxUnavailable": 0}, app="q")]
    answer = batch_findings(facts(web + quiet, budgets=budgets), concurrency=10)
    assert [(f["object"], f["verdict"]) for f in answer["findings"] if f["kind"] == KIND_SHARED_BUDGET] == [
        ("PodDisruptionBudget shop/q", NEVER),
        ("PodDisruptionBudget shop/web", CLEARS),
    ]
    assert answer["suggested_concurrency"] == 2


def test_pods_without_a_home_hold_only_the_machines_whose_budget_they_stop() -> None:
    # Seen on a fleet: Pods selecting only the batch's Nodes (no budget) shared one finding with db Pods whose budget
    # they stop for good, so their Machines were called 'never' although their drains finish.
    edge = [machine(name, [pod(f"edge-{index}", app="edge", uid="e-uid")]) for index, name in enumerate(("a", "b"))]
    db = [machine(name, [pod(f"db-{index}", app="db")]) for index, name in enumerate(("c", "d"))]
    guard = budget("db", allowed=1, expected=2, healthy=2, desired=1, app="db")
    answer = preflight([], facts(edge + db, nodes=[], budgets=[guard]), concurrency=4)
    homeless = {f["verdict"]: f for f in answer["batch"]["findings"] if f["kind"] == KIND_NO_NODE}
    assert (homeless[NEVER]["machines"], homeless[NEVER]["holds"], homeless[NEVER]["evidence"]["budgets"]) == (["shop/c", "shop/d"], True, ["shop/db"])
    lost = homeless[NEEDS]
    assert (lost["machines"], lost["holds"], lost["evidence"]["pods"]) == (["shop/a", "shop/b"], False, ["shop/edge-0", "shop/edge-1"])
    assert list(answer["can_never_finish"]) == ["shop/c", "shop/d"] and list(answer["would_lose"]) == ["shop/a", "shop/b"]


def test_the_suggested_order_lets_pods_that_come_back_go_first_and_the_hopeless_last() -> None:
    # A budget allowing 1 over a bare Pod (on a) and a recreated one (on b): only b first lets both finish.
    controllers = {"s-uid": {"kind": "ReplicaSet", "name": "s-7d9", "replicas": 1, "owner": {"kind": "Deployment", "name": "s"}}}
    machines = [
        machine("a", [pod("web-0", owner=None)]),
        machine("b", [pod("web-1")]),
        machine("c", [pod("s-0", app="s", uid="s-uid")]),
        machine("d", [pod("other-0", app="other", uid="o-uid")]),
    ]
    budgets = [budget(allowed=1, expected=2, healthy=2, desired=1), budget("s", allowed=0, expected=1, healthy=1, desired=1, app="s")]
    answer = batch_findings(facts(machines, budgets=budgets, controllers=controllers), concurrency=4)
    assert [(f["kind"], f["verdict"]) for f in answer["findings"] if f["holds"]] == [(KIND_SINGLE_REPLICA, NEVER), (KIND_SHARED_BUDGET, NEEDS)]
    # b and d first (in the task's order), then a, whose Pod uses the budget up; c can never finish: last.
    assert answer["suggested_order"] == ["shop/b", "shop/d", "shop/a", "shop/c"] and answer["suggested_concurrency"] == 1


def test_a_bare_pod_is_said_to_be_lost_and_does_not_hold_the_deletion() -> None:
    answer = batch_findings(facts([machine("a", [pod("solo", owner=None, app="solo")])]), concurrency=1)
    [finding] = answer["findings"]
    assert (finding["kind"], finding["verdict"], finding["holds"], finding["machines"]) == (KIND_UNREPLICATED, NEEDS, False, ["shop/a"])
    assert finding["object"] == "Pod shop/solo" and "lost with the Machine" in finding["reason"]


def test_a_single_replica_deployment_behind_min_available_one_can_never_finish() -> None:
    controllers = {RS_UID: {"kind": "ReplicaSet", "name": "db-7d9", "replicas": 1, "owner": {"kind": "Deployment", "name": "db"}}}
    guard = budget("db", allowed=0, expected=1, healthy=1, desired=1, spec={"minAvailable": 1}, app="db")
    answer = batch_findings(facts([machine("a", [pod("db-0", app="db")])], budgets=[guard], controllers=controllers), concurrency=1)
    [finding] = answer["findings"]
    assert (finding["kind"], finding["verdict"], finding["object"], finding["holds"]) == (KIND_SINGLE_REPLICA, NEVER, "Deployment shop/db", True)
    assert finding["evidence"]["replicas"] == 1 and finding["evidence"]["budget"] == "shop/db"
    # Without a budget it goes, and the workload is down until its replacement is Ready.
    [alone] = batch_findings(facts([machine("a", [pod("db-0", app="db")])], controllers=controllers), concurrency=1)["findings"]
    assert (alone["kind"], alone["verdict"], alone["holds"]) == (KIND_SINGLE_REPLICA, CLEARS, False)


def test_every_replica_in_the_batch_without_a_budget_is_said() -> None:
    controllers = {RS_UID: {"kind": "ReplicaSet", "name": "web-7d9", "replicas": 3, "owner": {"kind": "Deployment", "name": "web"}}}
    [finding] = batch_findings(facts(three_machines(), controllers=controllers), concurrency=3)["findings"]
    assert (finding["kind"], finding["verdict"], finding["holds"], finding["object"]) == (KIND_WHOLE_WORKLOAD, CLEARS, False, "Deployment shop/web")


def test_no_schedulable_node_outside_the_batch_leaves_replacements_pending() -> None:
    outside = [node("cordoned", cordoned=True), node("tainted", taints=[{"key": "gpu", "effect": "NoSchedule"}]), node("down", ready=False)]
    answer = batch_findings(facts(three_machines(), nodes=outside), concurrency=3)
    [finding] = answer["findings"]
    assert (finding["kind"], finding["verdict"], finding["holds"]) == (KIND_NO_NODE, NEEDS, False)
    assert finding["evidence"]["nodes_outside_batch"] == {"cordoned": "cordoned", "tainted": "tainted gpu:NoSchedule", "down": "not Ready"}
    # With a budget: the replacements never become healthy, so the budget never allows again.
    held = batch_findings(facts(three_machines(), nodes=outside, budgets=[budget(allowed=1)]), concurrency=3)
    assert kinds(held)[:2] == [(KIND_SHARED_BUDGET, NEVER), (KIND_NO_NODE, NEVER)]
    assert held["findings"][1]["evidence"]["budgets"] == ["shop/web"] and "never allows again" in held["findings"][1]["reason"]
    # No Node outside the batch at all.
    [none] = batch_findings(facts(three_machines(), nodes=[]), concurrency=3)["findings"]
    assert "has no Node outside the batch" in none["reason"] and none["evidence"]["nodes_outside_batch"] == {}


def test_a_node_counts_for_a_pod_that_tolerates_its_taint_and_matches_its_selector() -> None:
    taint = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}
    tolerant = pod("w", spec={"tolerations": [{"key": "gpu", "operator": "Exists"}]})
    assert why_not(node("n", taints=[taint]), tolerant) is None
    assert why_not(node("n", taints=[taint]), pod("w")) == "tainted gpu=yes:NoSchedule"
    assert why_not(node("n", taints=[{"key": "x", "effect": "PreferNoSchedule"}]), pod("w")) is None
    picky = pod("w", spec={"nodeSelector": {"pool": "db"}})
    assert why_not(node("n"), picky) == "not selected by its nodeSelector (pool)"
    assert why_not(node("n", labels={"pool": "db"}), picky) is None
    assert why_not({**node("n"), "metadata": {"name": "n", "deletionTimestamp": "2026-01-01T00:00:00Z"}}) == "being deleted"


def test_a_budget_not_counted_yet_and_pods_not_to_evict_are_never_judged() -> None:
    uncounted = {**budget(allowed=0), "status": {}}
    assert batch_findings(facts(three_machines(), budgets=[uncounted]), concurrency=3)["findings"] == []
    skipped = machine("a", [pod("web-0")])
    skipped["decisions"][0]["behavior"] = "Skip"
    assert batch_findings(facts([skipped], nodes=[]), concurrency=1)["findings"] == []
    # A cluster whose Nodes could not be listed: nothing is said of homes, and the answer says what was not read.
    unread = facts(three_machines())
    unread["clusters"][""].update(nodes=None, errors=["cannot list Nodes: forbidden"])
    answer = batch_findings(unread, concurrency=3)
    assert answer["findings"] == [] and answer["not_counted"] == {"the cluster": ["cannot list Nodes: forbidden"]}


def test_the_clusters_are_counted_apart() -> None:
    machines = [machine("a", [pod("web-0")], cluster="shop/one"), machine("b", [pod("web-1")], cluster="shop/two")]
    clusters = {
        "shop/one": {"nodes": [node("n-a")], "budgets": [budget(allowed=1)], "controllers": {}},
        "shop/two": {"nodes": [node("n-b"), node("spare")], "budgets": [budget(allowed=1)], "controllers": {}},
    }
    answer = batch_findings({"machines": machines, "clusters": clusters}, concurrency=2)
    [finding] = answer["findings"]
    assert (finding["kind"], finding["machines"], finding["evidence"]["cluster"]) == (KIND_NO_NODE, ["shop/a"], "shop/one")
    assert "the workload cluster shop/one has no Node outside the batch" in finding["reason"]


def test_the_preflight_moves_each_machine_by_what_the_batch_does() -> None:
    def planned(name: str) -> Outcome:
        outcome = Outcome(machine={"name": name, "namespace": "shop"}, status="planned", step="drain")
        outcome.drain = {"blockers": []}
        return outcome

    machines = [*three_machines(), machine("d", [pod("solo", owner=None, app="solo")])]
    answer = preflight([planned(name) for name in "abcd"], facts(machines, budgets=[budget(allowed=1)]), concurrency=4)
    assert answer["would_finish"] == ["shop/d"]
    assert list(answer["would_wait"]) == ["shop/a", "shop/b", "shop/c"] and answer["can_never_finish"] == {}
    assert answer["would_wait"]["shop/a"][0].startswith("clears by itself: batch budget PodDisruptionBudget shop/web: it allows 1 disruption now")
    assert list(answer["would_lose"]) == ["shop/d"] and "unreplicated pod Pod shop/solo" in answer["would_lose"]["shop/d"][0]
    assert answer["batch"]["suggested_concurrency"] == 1
    stuck = preflight([planned(name) for name in "abc"], facts(three_machines(), nodes=[], budgets=[budget(allowed=1)]), concurrency=3)
    assert stuck["would_finish"] == [] and stuck["would_wait"] == {} and list(stuck["can_never_finish"]) == ["shop/a", "shop/b", "shop/c"]


def test_read_batch_lists_nodes_and_budgets_once_and_reads_each_controller_once() -> None:
    kube = FakeKube()
    for name in ("n-a", "n-b", "spare"):
        kube.put(f"/api/v1/nodes/{name}", node(name))
    kube.put("/apis/policy/v1/namespaces/shop/poddisruptionbudgets/web", budget(allowed=1))
    owner = [{"kind": "Deployment", "name": "web", "uid": "d-1", "controller": True}]
    rs = kube.put(
        "/apis/apps/v1/namespaces/shop/replicasets/web-7d9",
        {"metadata": {"name": "web-7d9", "namespace": "shop", "ownerReferences": owner}, "spec": {"replicas": 3}},
    )
    uid = rs["metadata"]["uid"]

    def openshift(name: str) -> dict:
        return {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "metadata": {"name": name, "namespace": "shop"}}

    def preview(name: str, pods: list[dict]) -> dict:
        return {"node": node(name), "pods": pods, "decisions": [decision(p) for p in pods]}

    previews = [
        ("shop/a", openshift("a"), preview("n-a", [pod("web-0", uid=uid)])),
        ("shop/b", openshift("b"), preview("n-b", [pod("web-1", uid=uid), pod("solo", owner=None, app="solo")])),
        ("shop/c", openshift("c"), None),  # no preview (its controller deletes it, or its preview failed): not counted
    ]
    facts = read_batch(kube, WorkloadSettings(), previews)

    assert [(m["key"], m["cluster"], m["node"]) for m in facts["machines"]] == [("shop/a", "", "n-a"), ("shop/b", "", "n-b")]
    cluster = facts["clusters"][""]
    assert sorted(n["metadata"]["name"] for n in cluster["nodes"]) == ["n-a", "n-b", "spare"] and len(cluster["budgets"]) == 1
    assert cluster["controllers"] == {uid: {"kind": "ReplicaSet", "name": "web-7d9", "replicas": 3, "owner": {"kind": "Deployment", "name": "web"}}}
    reads = [path for method, path in kube.requests if method in ("GET", "LIST")]
    # The Pods once (the room the replacements need): web-0 and web-1 come back.
    listed = ["/api/v1/nodes", "/apis/policy/v1/poddisruptionbudgets", "/apis/apps/v1/namespaces/shop/replicasets/web-7d9", "/api/v1/pods"]
    assert sorted(reads) == sorted(listed), kube.requests
    assert cluster["pods"] == []
    answer = batch_findings(facts, concurrency=2)
    assert [f["kind"] for f in answer["findings"]] == [KIND_SHARED_BUDGET, KIND_UNREPLICATED] and answer["counted"] == ["shop/a", "shop/b"]

    # A list RBAC refuses leaves its part uncounted, and the answer says so.
    kube.fail("GET", "/apis/policy/v1/poddisruptionbudgets", kube.error(403, "poddisruptionbudgets is forbidden"))
    refused = read_batch(kube, WorkloadSettings(), previews)
    assert refused["clusters"][""]["budgets"] is None and refused["clusters"][""]["errors"][0].startswith("cannot list PodDisruptionBudgets:")
    assert batch_findings(refused, concurrency=2)["not_counted"] == {"the cluster": refused["clusters"][""]["errors"]}


def test_a_controller_kind_the_identity_may_not_read_is_said_once_and_warned_about() -> None:
    """A 403 on a ReplicaSet (the role granted no get on it) leaves the replicas unjudged: said once for the kind, the other
    Pods' ReplicaSets not asked again, and check mode warns instead of passing it over."""
    kube = FakeKube()
    kube.put("/api/v1/nodes/n-a", node("n-a"))
    previews = [("shop/a", {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "metadata": {"name": "a", "namespace": "shop"}}, None)]
    pods = [pod(f"web-{index}", uid=f"rs-{index}") for index in range(3)]
    for index, one in enumerate(pods):
        one["metadata"]["ownerReferences"][0]["name"] = f"web-{index}"
        kube.fail("GET", f"/apis/apps/v1/namespaces/shop/replicasets/web-{index}", kube.error(403, f'replicasets.apps "web-{index}" is forbidden'))
    previews = [("shop/a", previews[0][1], {"node": node("n-a"), "pods": pods, "decisions": [decision(p) for p in pods]})]
    facts = read_batch(kube, WorkloadSettings(), previews)
    errors = facts["clusters"][""]["errors"]
    assert len(errors) == 1 and errors[0].startswith("cannot read ReplicaSets (get replicasets, API group apps): "), errors
    assert sum(1 for _method, path in kube.requests if "/replicasets/" in path) == 1
    answer = preflight([], facts, 1)
    (warning,) = preflight_warnings(answer)
    assert warning.startswith("The preflight could not read everything in the cluster, so that part of what the batch does to itself is not judged: ")
    assert "cannot read ReplicaSets" in warning


def test_the_eviction_apis_answer_for_each_unready_pod_under_each_policy() -> None:
    """A Pod that runs and is not Ready meets its budget's unhealthyPodEvictionPolicy: AlwaysAllow lets it go,
    IfHealthyBudget only while the budget has the healthy Pods it needs (never when it needs every Pod)."""
    machines = [machine("a", [pod("web-0", ready=False)]), machine("b", [pod("db-0", app="db", ready=False)])]
    for policy, db_answer, verdict in (("AlwaysAllow", "evicted", None), ("IfHealthyBudget", "refused", NEVER)):
        budgets = [
            budget("web", allowed=0, expected=3, healthy=2, desired=2, spec={"minAvailable": 2}),
            budget("db", allowed=0, expected=2, healthy=1, desired=2, app="db", spec={"maxUnavailable": 0, "unhealthyPodEvictionPolicy": policy}),
        ]
        answer = batch_findings(facts(machines, budgets=budgets), concurrency=10)
        got = {entry["pod"]: (entry["policy"], entry["answer"]) for entry in answer["unready_pods"]}
        assert got == {"shop/web-0": ("IfHealthyBudget", "evicted"), "shop/db-0": (policy, db_answer)}
        unready = [f for f in answer["findings"] if f["kind"] == "unready pod"]
        assert [(f["object"], f["verdict"], f["holds"]) for f in unready] == ([] if verdict is None else [("Pod shop/db-0", verdict, True)])
