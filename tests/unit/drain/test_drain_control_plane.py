"""OpenShift's control-plane Nodes drained one at a time (docs/behaviour.md row O3): the pure
rule (``_drain/gates.py``), its blockers (``_drain/stalls.py``), the read and the turn
(``_drain/waits.py``) and the drain's wait before its first pass (``_drain/run.py``) against the fake transport."""

from __future__ import annotations

from drain_run_helpers import NODE, NODE_PATH, NS, OPENSHIFT_V, add_node, machine_path, openshift_machine, pods_go_away_while_watched, shop
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.gates import (
    CONTROL_PLANE_RETRY_SECONDS,
    control_plane_refusal_message,
    cordoned_control_plane_nodes,
    is_control_plane_node,
    node_machine,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.request import DrainRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.run import run_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stalls import KIND_CONTROL_PLANE_CORDONED, control_plane_blockers
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.waits import read_control_plane_gate
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import CLEARS, NEEDS_ACTION
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for

CP = "node-role.kubernetes.io/control-plane"
MASTER = "node-role.kubernetes.io/master"
EVENTS = f"/api/v1/namespaces/{NS}/events"
REFUSED_EVENTS = [
    ("Normal", "DrainProceeds", "Node drain proceeds"),
    ("Normal", "DrainRequeued", "Node drain requeued: drain not permitted: requeue in: 20s"),
]
OTHER_MACHINE = "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machines/master-2"


def node(name: str, *, labels: dict | None = None, cordoned: bool = False, annotations: dict | None = None, deleting: bool = False) -> dict:
    meta: dict = {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {"unschedulable": True} if cordoned else {}}


def names(nodes: list[dict]) -> list[str]:
    return [n["metadata"]["name"] for n in nodes]


# -- the pure rule -------------------------------------------------------------------


def test_a_control_plane_node_carries_either_label_whatever_its_value() -> None:
    assert is_control_plane_node(node("a", labels={CP: ""}))
    assert is_control_plane_node(node("a", labels={MASTER: "false"}))
    assert not is_control_plane_node(node("a", labels={"node-role.kubernetes.io/worker": ""}))
    assert not is_control_plane_node({"metadata": {"name": "a"}})


def test_only_cordoned_control_plane_nodes_other_than_itself_hold_a_control_plane_node() -> None:
    mine = node("cp-0", labels={CP: ""})
    others = [
        mine,
        node("cp-1", labels={MASTER: ""}, cordoned=True),
        node("cp-2", labels={CP: ""}),
        node("worker-0", cordoned=True),
        node("cp-3", labels={CP: ""}, cordoned=True),
    ]
    assert names(cordoned_control_plane_nodes(mine, others)) == ["cp-1", "cp-3"]
    # Already cordoned (an earlier attempt goes on), a worker, or gone: never held.
    assert cordoned_control_plane_nodes(node("cp-0", labels={CP: ""}, cordoned=True), others) == []
    assert cordoned_control_plane_nodes(node("worker-1"), others) == []
    assert cordoned_control_plane_nodes(None, others) == []


def test_the_nodelink_annotation_names_the_node_s_machine() -> None:
    assert node_machine(node("a", annotations={"machine.openshift.io/machine": "ns/m"})) == "ns/m"
    assert node_machine(node("a", annotations={"machine.openshift.io/machine": "m"})) is None
    assert node_machine(node("a")) is None


def test_the_refusal_names_the_cordoned_nodes_and_the_next_look() -> None:
    message = control_plane_refusal_message("cp-0", [node("cp-1")])
    assert message.startswith("Node cp-0 is a control-plane Node and control-plane Node cp-1 is cordoned")
    assert message.endswith(f"until that Node is uncordoned or gone; looking again in {CONTROL_PLANE_RETRY_SECONDS} s")
    assert "those Nodes are" in control_plane_refusal_message("cp-0", [node("cp-1"), node("cp-2")])


def test_only_openshift_drains_control_plane_nodes_one_at_a_time() -> None:
    assert list(flavour_for({"apiVersion": OPENSHIFT_V}).control_plane_drain_refused_events) == REFUSED_EVENTS
    assert flavour_for({"apiVersion": "cluster.x-k8s.io/v1beta2"}).control_plane_drain_refused_events == ()


# -- the verdicts ---------------------------------------------------------------------


def test_a_node_whose_deletion_goes_on_clears_by_itself_one_cordoned_otherwise_needs_someone() -> None:
    annotated = {"machine.openshift.io/machine": "openshift-machine-api/master-2"}
    by_hand, of_deleting, deleting = node("cp-1", cordoned=True), node("cp-2", cordoned=True, annotations=annotated), node("cp-3", deleting=True)
    blockers = control_plane_blockers([by_hand, of_deleting, deleting], {"openshift-machine-api/master-2"})
    assert [(b.kind, b.object, b.verdict) for b in blockers] == [
        (KIND_CONTROL_PLANE_CORDONED, "Node cp-1", NEEDS_ACTION),
        (KIND_CONTROL_PLANE_CORDONED, "Node cp-2", CLEARS),
        (KIND_CONTROL_PLANE_CORDONED, "Node cp-3", CLEARS),
    ]
    assert "someone uncordons it" in blockers[0].reason
    assert blockers[1].evidence == {"node": "cp-2", "machine": "openshift-machine-api/master-2", "machine_deleting": True}
    assert blockers[2].since == "2026-01-01T00:00:00Z"
    # The same Node, its Machine not being deleted: someone must act.
    assert control_plane_blockers([of_deleting], set())[0].verdict == NEEDS_ACTION


# -- the read -------------------------------------------------------------------------


def test_the_read_lists_the_nodes_only_for_a_control_plane_node_not_cordoned_yet() -> None:
    fake = FakeKube()
    fake.put(NODE_PATH, node(NODE))
    assert read_control_plane_gate(fake, NODE, OPENSHIFT_V)[1:] == ([], set())
    assert fake.requests == [("GET", NODE_PATH)]
    fake = FakeKube()
    fake.put(NODE_PATH, node(NODE, labels={CP: ""}))
    fake.put("/api/v1/nodes/cp-1", node("cp-1", labels={CP: ""}, cordoned=True, annotations={"machine.openshift.io/machine": "openshift-machine-api/master-2"}))
    fake.put(OTHER_MACHINE, {"apiVersion": OPENSHIFT_V, "kind": "Machine", "metadata": {"name": "master-2", "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    found, others, deleting = read_control_plane_gate(fake, NODE, OPENSHIFT_V)
    assert found["metadata"]["name"] == NODE and names(others) == ["cp-1"] and deleting == {"openshift-machine-api/master-2"}


# -- the drain ------------------------------------------------------------------------


def control_plane_shop(fake: FakeKube) -> None:
    """The shop's Node n1 as a control-plane Node, and control-plane Node cp-1 cordoned by hand."""
    shop(fake, ("web-0", "web"))
    fake.objects[NODE_PATH]["metadata"]["labels"] = {MASTER: ""}
    add_node(fake, "cp-1", unschedulable=True)
    fake.objects["/api/v1/nodes/cp-1"]["metadata"]["labels"] = {CP: ""}


def request(**options) -> DrainRequest:
    return DrainRequest(**{"machine": "m1", "namespace": NS, "api_version": OPENSHIFT_V, **options})


def events(fake: FakeKube) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for path, e in sorted(fake.objects.items()) if path.startswith(EVENTS + "/")]


def evictions(fake: FakeKube) -> list[str]:
    return [path for method, path in fake.requests if method == "POST" and path.endswith("/eviction")]


def test_an_openshift_control_plane_node_is_not_touched_while_another_is_cordoned() -> None:
    fake = FakeKube()
    control_plane_shop(fake)
    openshift_machine(fake)
    result = run_drain(fake, request(wait=False))
    assert result["completed"] is False and result["passes"] == 0
    assert result["message"] == control_plane_refusal_message(NODE, [fake.objects["/api/v1/nodes/cp-1"]])
    assert [(b["kind"], b["object"], b["verdict"]) for b in result["blockers"]] == [(KIND_CONTROL_PLANE_CORDONED, "Node cp-1", NEEDS_ACTION)]
    assert not fake.objects[NODE_PATH].get("spec", {}).get("unschedulable") and evictions(fake) == []
    # The controller's Events; no Drained condition (the controller returns before its status patch).
    assert events(fake) == REFUSED_EVENTS
    conditions = fake.objects[machine_path()]["status"].get("conditions") or []
    assert not any(c["type"] == "Drained" for c in conditions)


def test_the_drain_looks_again_every_20_s_and_goes_on_once_the_other_node_is_uncordoned() -> None:
    fake = FakeKube()
    control_plane_shop(fake)
    openshift_machine(fake)
    pods_go_away_while_watched(fake)
    started = fake.monotonic()
    looks: list[float] = []
    watch_hook = fake.on_request

    def on_request(method: str, path: str) -> None:
        watch_hook(method, path)
        if (method, path) == ("GET", "/api/v1/nodes"):
            looks.append(fake.monotonic() - started)
            if len(looks) == 3:  # uncordoned just before the third look
                fake.objects["/api/v1/nodes/cp-1"]["spec"] = {}

    fake.on_request = on_request
    result = run_drain(fake, request(wait_timeout=300))
    assert result["completed"] is True and result["evicted"] == ["shop/web-0"]
    assert looks == [0, 20, 40]
    assert fake.objects[NODE_PATH]["spec"]["unschedulable"] is True
    # The Events once per task, then the drain's own.
    assert sorted(events(fake)) == sorted([*REFUSED_EVENTS, ("Normal", "SuccessfulDrainNode", f'success draining Machine\'s node "{NODE}"')])


def test_the_wait_ends_with_the_task_s_time() -> None:
    fake = FakeKube()
    control_plane_shop(fake)
    openshift_machine(fake)
    try:
        run_drain(fake, request(wait_timeout=50))
    except MachineError as exc:
        assert exc.msg.startswith(f"Timed out after 50 s draining Node {NODE}. Node {NODE} is a control-plane Node")
        assert exc.result["timed_out"] is True and exc.result["blockers"][0]["kind"] == KIND_CONTROL_PLANE_CORDONED
    else:
        raise AssertionError("no timeout")
    assert not fake.objects[NODE_PATH].get("spec", {}).get("unschedulable")


def test_a_bare_node_is_drained_whatever_the_other_control_plane_nodes() -> None:
    # The rule is OpenShift's drain controller's, for Machines; a Cluster API Machine's flavour has no such Events (above).
    fake = FakeKube()
    control_plane_shop(fake)
    pods_go_away_while_watched(fake)
    result = run_drain(fake, DrainRequest(node=NODE))
    assert result["completed"] is True and fake.objects[NODE_PATH]["spec"]["unschedulable"] is True
    assert ("GET", "/api/v1/nodes") not in fake.requests
