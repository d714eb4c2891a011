"""Check mode's answer for the chosen Machines together: room for the replacements on the Nodes outside
the batch, as far as it can be judged without a scheduler (pure)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

import pytest
from test_preflight import NEEDS, NEVER, budget, decision, facts, machine, node, pod

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.capacity import free_allocatable, parse_quantity, pod_requests, shortfalls
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.logic import preflight
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.preflight import KIND_NO_NODE, KIND_NO_ROOM, KIND_SHARED_BUDGET, batch_findings


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Decimal("0.1")),
        ("2", Decimal(2)),
        ("1Gi", Decimal(2**30)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1.5", Decimal("1.5")),
        ("512Mi", Decimal(512 * 2**20)),
        ("1k", Decimal(1000)),
        ("1M", Decimal(10**6)),
        ("1E", Decimal(10**18)),
        ("250000u", Decimal("0.25")),
        (".5", Decimal("0.5")),
        (3, Decimal(3)),
    ],
)
def test_quantities_are_read_as_kubernetes_writes_them(text, value) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1Zi", "1 Gi", None, True, "1.2.3"])
def test_what_is_not_a_quantity_is_none(text) -> None:
    assert parse_quantity(text) is None


# The parser this module had before it used the kubernetes client's (kept to prove the two read every
# quantity alike): the suffixes as powers of 1000 and 1024, an exponent read by Decimal.
_PREVIOUS_SUFFIXES = {
    **{suffix: Decimal(1000) ** power for power, suffix in enumerate(("n", "u", "m", "", "k", "M", "G", "T", "P", "E"), start=-3)},
    **{suffix: Decimal(1024) ** power for power, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), start=1)},
}
_PREVIOUS = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")


def _previous_parse_quantity(value) -> Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _PREVIOUS.match(str(value).strip())
    if not match:
        return None
    number, exponent, suffix = match.groups()
    try:
        return Decimal(number + exponent) if exponent else Decimal(number) * _PREVIOUS_SUFFIXES[suffix or ""]
    except InvalidOperation:
        return None


_NUMBERS = ["0", "1", "2", "7", "10", "100", "250", "999", "1024", "1.5", "0.25", ".5", "5.", "+3", "-2", "-0.5", "123456789", "0.000001"]
_ENDINGS = ["", *_PREVIOUS_SUFFIXES, "e3", "E3", "e-2", "E+6", "e0", "i", "K", "ki", "mi", "Zi", "ii", " ", "x", "e", "E3i"]
_ODD = ["", " ", "abc", "1 Gi", " 2Gi ", "1.2.3", "1_000", "NaN", "nan", "Infinity", "-inf", "0x10", "1e", "--1", "1Ki1", "Gi", "m"]
_ODD += [3, 0, -4, 2.5, 0.1, None, True, False]


@pytest.mark.parametrize("value", [number + ending for number in _NUMBERS for ending in _ENDINGS] + _ODD)
def test_the_kubernetes_clients_parser_reads_every_quantity_as_the_previous_one_did(value) -> None:
    assert parse_quantity(value) == _previous_parse_quantity(value)


def container(cpu: str | None = None, memory: str | None = None, **extra) -> dict:
    requests = {key: value for key, value in (("cpu", cpu), ("memory", memory)) if value}
    return {"name": "c", "resources": {"requests": requests}, **extra}


def asking(name: str, cpu: str | None = None, memory: str | None = None, **extra) -> dict:
    p = pod(name, **extra)
    p["spec"] = {"containers": [container(cpu, memory)], **p["spec"]}
    return p


def sized(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110", labels: dict | None = None, **flags) -> dict:
    n = node(name, labels=labels, **flags)
    n["status"]["allocatable"] = {"cpu": cpu, "memory": memory, "pods": pods}
    return n


def test_a_pod_asks_for_its_containers_its_largest_init_container_and_its_overhead() -> None:
    spec = {
        "containers": [container("100m", "64Mi"), container("200m")],
        "initContainers": [container("1", "16Mi"), container("50m", "32Mi", restartPolicy="Always")],
        "overhead": {"cpu": "10m"},
    }
    asked = pod_requests({"spec": spec})
    # Running: 100m + 200m + the 50m sidecar = 350m < the 1 cpu init container; memory 64 + 32 Mi > 16 Mi.
    assert asked == {"cpu": Decimal("1.010"), "memory": Decimal(96 * 2**20), "pods": Decimal(1)}


def test_free_allocatable_leaves_out_the_pods_that_ended_or_are_being_deleted() -> None:
    def bound(name: str, cpu: str, phase: str = "Running", deleting: bool = False) -> dict:
        p = {"metadata": {"name": name}, "spec": {"nodeName": "spare", "containers": [container(cpu)]}, "status": {"phase": phase}}
        if deleting:
            p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return p

    pods = [bound("a", "1"), bound("b", "1", "Succeeded"), bound("c", "1", "Failed"), bound("d", "1", deleting=True), bound("e", "500m")]
    free = free_allocatable([sized("spare", cpu="4", pods="10"), node("bare")], pods)
    assert free["spare"] == {"cpu": Decimal("2.5"), "memory": Decimal(8 * 2**30), "pods": Decimal(8)}
    assert free["bare"] == {"cpu": None, "memory": None, "pods": None}  # says nothing: not judged


def test_a_group_is_short_when_its_pods_ask_for_more_than_it_has_free_and_the_largest_stay_pending() -> None:
    requests = {key: {"cpu": Decimal(cpu), "memory": Decimal(0), "pods": Decimal(1)} for key, cpu in (("p1", "1"), ("p2", "2"), ("p3", "0.5"))}
    free = {"x": {"cpu": Decimal("1.5"), "memory": Decimal(10), "pods": Decimal(10)}, "y": {"cpu": Decimal(1), "memory": None, "pods": Decimal(1)}}
    short, wider = shortfalls({"p1": frozenset({"x"}), "p2": frozenset({"x"}), "p3": frozenset({"x", "y"})}, requests, free)
    # {x} alone: 3 cpu asked, 1.5 free (1.5 short). {x, y}: all three, 3.5 asked, 2.5 free; its memory is not judged (y does not say).
    assert short["nodes"] == ["x"] and short["pods"] == ["p1", "p2"]
    assert (wider["nodes"], wider["pods"], wider["short"]["cpu"]["shortfall"], wider["pending"]) == (["x", "y"], ["p1", "p2", "p3"], "1000m", ["p2"])
    assert short["short"] == {"cpu": {"requested": "3000m", "free": "1500m", "shortfall": "1500m"}} and short["pending"] == ["p2"]
    both = shortfalls({"p1": frozenset({"x", "y"}), "p2": frozenset({"x", "y"}), "p3": frozenset({"x", "y"})}, requests, free)
    assert [(s["nodes"], sorted(s["short"]), s["pending"]) for s in both] == [(["x", "y"], ["cpu"], ["p2"])]
    assert shortfalls({"p1": frozenset({"x"})}, requests, free) == []


def three(cpu: str = "1") -> list[dict]:
    return [machine(name, [asking(f"web-{index}", cpu)]) for index, name in enumerate(("a", "b", "c"))]


def with_pods(f: dict, pods: list[dict] | None = None) -> dict:
    f["clusters"][""]["pods"] = pods or []
    return f


def test_replacements_that_do_not_fit_in_total_are_named_with_the_resource_and_the_shortfall() -> None:
    # Three Pods of 1 cpu come back; the one Node outside the batch has 2 cpu free: at least one stays Pending.
    f = with_pods(facts(three(), nodes=[sized("spare", cpu="2")]))
    answer = batch_findings(f, concurrency=3)
    [room] = [x for x in answer["findings"] if x["kind"] == KIND_NO_ROOM]
    assert (room["verdict"], room["holds"], room["evidence"]["nodes"], room["evidence"]["pods"]) == (
        NEEDS,
        False,
        ["spare"],
        ["shop/web-0", "shop/web-1", "shop/web-2"],
    )
    assert room["evidence"]["short"] == {"cpu": {"requested": "3000m", "free": "2000m", "shortfall": "1000m"}}
    assert room["evidence"]["workloads"] == ["ReplicaSet shop/web-7d9"] and len(room["evidence"]["pending"]) == 1
    assert "cpu 3000m requested, 2000m free (1000m short)" in room["reason"] and "Node by Node" in room["reason"]
    assert "scheduler" in room["reason"]
    # Room enough in total: no finding (which the scheduler could still refuse Node by Node).
    assert not [x for x in batch_findings(with_pods(facts(three(), nodes=[sized("spare", cpu="3")])), 3)["findings"] if x["kind"] == KIND_NO_ROOM]


def test_the_pods_already_on_the_node_and_its_pod_slots_count() -> None:
    there = {"metadata": {"name": "big", "namespace": "other"}, "spec": {"nodeName": "spare", "containers": [container("3")]}, "status": {"phase": "Running"}}
    answer = batch_findings(with_pods(facts(three(), nodes=[sized("spare", cpu="5")]), [there]), 3)
    [room] = [x for x in answer["findings"] if x["kind"] == KIND_NO_ROOM]
    assert room["evidence"]["short"]["cpu"]["free"] == "2000m"
    slots = batch_findings(with_pods(facts(three("0"), nodes=[sized("spare", pods="2")])), 3)
    [room] = [x for x in slots["findings"] if x["kind"] == KIND_NO_ROOM]
    assert room["evidence"]["short"] == {"pods": {"requested": "3", "free": "2", "shortfall": "1"}}


def test_only_the_nodes_a_pod_can_go_to_count_for_it() -> None:
    # The cordoned Node and the one outside the selector have room, but the Pods cannot go there.
    selected = [machine(name, [asking(f"db-{index}", "1", app="db", spec={"nodeSelector": {"pool": "db"}})]) for index, name in enumerate("ab")]
    nodes = [sized("db-spare", cpu="1", labels={"pool": "db"}), sized("db-cordoned", cpu="8", labels={"pool": "db"}, cordoned=True), sized("web", cpu="8")]
    answer = batch_findings(with_pods(facts(selected, nodes=nodes)), 2)
    [room] = [x for x in answer["findings"] if x["kind"] == KIND_NO_ROOM]
    assert room["evidence"]["nodes"] == ["db-spare"] and room["evidence"]["short"]["cpu"]["shortfall"] == "1000m"


def test_a_wider_group_short_only_by_a_smaller_ones_pods_is_not_named_twice() -> None:
    # db Pods only fit on db-spare (1 cpu free, 2 asked); web Pods fit anywhere: both Nodes together are short as well, by the same db Pod.
    db = [machine(name, [asking(f"db-{index}", "1", app="db", spec={"nodeSelector": {"pool": "db"}})]) for index, name in enumerate("ab")]
    web = [machine("c", [asking("web-0", "100m")])]
    nodes = [sized("db-spare", cpu="1", labels={"pool": "db"}), sized("any", cpu="1")]
    [room] = [x for x in batch_findings(with_pods(facts(db + web, nodes=nodes)), 3)["findings"] if x["kind"] == KIND_NO_ROOM]
    assert room["evidence"]["nodes"] == ["db-spare"] and len(room["evidence"]["pending"]) == 1


def test_replacements_without_room_count_against_their_budget_as_never_coming_back() -> None:
    # Budget allows 1 (at most 1); 3 Pods come back to a Node with room for 1: 2 stay Pending, using it up for good.
    f = with_pods(facts(three(), nodes=[sized("spare", cpu="1")], budgets=[budget(allowed=1)]))
    answer = preflight([], f, concurrency=3)
    findings = {(x["kind"], x["verdict"]): x for x in answer["batch"]["findings"]}
    shared = findings[(KIND_SHARED_BUDGET, NEVER)]
    assert len(shared["evidence"]["never_back"]) == 2 and "have no room for them" in shared["reason"]
    room = findings[(KIND_NO_ROOM, NEVER)]
    assert room["holds"] and room["evidence"]["budgets"] == ["shop/web"] and len(room["evidence"]["pending"]) == 2
    assert not any(kind == KIND_NO_NODE for kind, _verdict in findings)
    # Room for 2 of the 3: one stays Pending, and the budget allowing 1 finishes only if the others go first.
    f = with_pods(facts(three(), nodes=[sized("spare", cpu="2")], budgets=[budget(allowed=1)]))
    answer = preflight([], f, concurrency=3)
    kinds = {(x["kind"], x["verdict"], x["holds"]) for x in answer["batch"]["findings"]}
    assert (KIND_SHARED_BUDGET, NEEDS, True) in kinds and (KIND_NO_ROOM, NEEDS, False) in kinds


def test_room_is_not_judged_without_the_pods_or_the_allocatable() -> None:
    unread = facts(three(), nodes=[sized("spare", cpu="1")])  # the Pods were not listed
    assert [x["kind"] for x in batch_findings(unread, 3)["findings"]] == []
    silent = with_pods(facts(three(), nodes=[node("spare")]))  # the Node does not say its allocatable
    assert [x["kind"] for x in batch_findings(silent, 3)["findings"]] == []
    # A bare Pod never comes back: it asks for no room.
    bare = machine("a", [asking("solo", "8", owner=None)])
    assert decision(bare["pods"][0])["warnings"]
    assert {x["kind"] for x in batch_findings(with_pods(facts([bare], nodes=[sized("spare", cpu="1")])), 1)["findings"]} == {"unreplicated pod"}


def test_with_replacement_first_the_replacements_nodes_make_room() -> None:
    # No Node outside the batch has room; replaced first, one at a time, each Machine's replacement stands beside
    # it (a Node like the one it replaces): the Pods of the Machine being drained go there.
    f = with_pods(facts(three(), nodes=[sized("spare", cpu="0")]))
    f["clusters"][""]["nodes"] = [sized(n["metadata"]["name"], cpu="4") if n["metadata"]["name"] != "spare" else n for n in f["clusters"][""]["nodes"]]
    assert [x["kind"] for x in batch_findings(f, concurrency=1)["findings"] if x["kind"] == KIND_NO_ROOM]
    surged = batch_findings(f, concurrency=1, surge=1)
    assert not [x for x in surged["findings"] if x["kind"] in (KIND_NO_ROOM, KIND_NO_NODE)], surged["findings"]
    assert list(surged["replacement_nodes"].values()) == [[f"{f['machines'][0]['node']} (replacement)"]]
