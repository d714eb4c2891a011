"""The chaos soak (tests/chaos/, ``make chaos``), short and with a fixed seed.

Three randomized delete_machine runs (one per flavour: Cluster API v1beta2,
OpenShift, Cluster API served as v1beta1 only) through the fault proxy, with
kills and re-runs and the owners of hooks, infrastructure and WaitCompleted Pods
acting concurrently; every safety invariant must hold. Before that, the checks
themselves are shown to catch each kind of violation on a made-up history, so
that a soak with no finding means something.
"""

from __future__ import annotations

import datetime as dt
import sys
import threading
from pathlib import Path

import pytest

CHAOS = Path(__file__).resolve().parents[1] / "chaos"
if str(CHAOS) not in sys.path:
    sys.path.insert(0, str(CHAOS))

from actors import Removal
from invariants import Checker
from scenario import EXPECT_LABEL, OTHER_OWNER, Scenario, run_seeds
from soak import Soak
from timeline import Event
from world import HOOK_PREFIX

SEED = 3470  # OpenShift (SIGKILL), Cluster API v1beta2 (SIGINT), Cluster API v1beta1 (3 Machines): see scenario.py
RUNS = 3


def made_up_scenario() -> Scenario:
    return Scenario(1, "v1beta2", 1, (), (), (), (), (None,), 0.0, 0.2, ())


def machine(s: Scenario, rv: int, hooks: dict[str, str], kind: str = "MODIFIED") -> Event:
    annotations = {f"{HOOK_PREFIX[point]}/{name}": owner for name, (point, owner) in hooks.items()}
    return Event(rv, "machines", kind, s.machine_name(0), {"metadata": {"name": s.machine_name(0), "annotations": annotations}})


def pod(s: Scenario, rv: int, name: str, *, kind: str = "MODIFIED", deleting: bool = False, expect: str = "drain") -> Event:
    meta = {"name": name, "labels": {EXPECT_LABEL: expect}, **({"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {})}
    return Event(rv, "pods", kind, name, {"metadata": meta, "spec": {"nodeName": s.node_name(0)}})


def audit(verb: str, name: str, code: int, agent: str, at: str, *, subresource: str = "", resource: str = "pods", namespace: str | None = None) -> dict:
    ref = {"resource": resource, "name": name, "namespace": namespace, **({"subresource": subresource} if subresource else {})}
    return {"verb": verb, "objectRef": ref, "responseStatus": {"code": code}, "userAgent": agent, "requestReceivedTimestamp": at, "requestURI": "/"}


def at(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2026-01-01T{clock}+00:00")


def test_the_checks_catch_each_invariant() -> None:
    s = made_up_scenario()
    m, node = s.machine_name(0), s.node_name(0)
    hooks = {"backup": ("preDrain", "chaos-controller"), "quorum": ("preTerminate", OTHER_OWNER)}
    events = [
        machine(s, 10, hooks, "LISTED"),
        pod(s, 11, "web", kind="LISTED"),
        pod(s, 12, "web", deleting=True),  # I1: evicted while the preDrain hook is there
        machine(s, 13, {"quorum": hooks["quorum"]}),  # the owner removes backup (rv 13 below)
        machine(s, 14, {}),  # I4: quorum goes in a write its owner did not make
        Event(15, "nodes", "DELETED", node, {"metadata": {"name": node}}),  # I2: web is still on the Node
    ]
    removals = [Removal(m, "preDrain", "backup", "chaos-controller", 13, f"lm-chaos-hooks/{m}/preDrain/backup", 0.0)]
    log = [
        audit("create", "web", 201, "lifecycle.machine", "2026-01-01T00:00:01Z", subresource="eviction", namespace=s.namespace),
        audit("create", "web", 201, "lifecycle.machine", "2026-01-01T00:00:02Z", subresource="eviction", namespace=s.namespace),  # I3: twice
        audit("delete", "db", 200, "lifecycle.machine", "2026-01-01T00:00:02Z", namespace=s.namespace),  # I3: no eviction
        audit("patch", m, 200, f"lm-chaos-hooks/{m}/preDrain/backup", "2026-01-01T00:00:03Z", resource="machines", namespace=s.namespace),
        audit("delete", m, 200, "lifecycle.machine", "2026-01-01T00:00:06Z", resource="machines", namespace=s.namespace),  # I5: 2 s after a kill
    ]
    killed = [(at("00:00:04"), 0.5, at("00:00:09"))]
    found = Checker(s, events, log, removals, set(), quiet=killed).check()
    assert sorted({v.invariant for v in found}) == ["I1", "I2", "I3", "I4", "I5"], found
    assert sum(v.invariant == "I3" for v in found) == 2, found

    # The same story told right: nothing found.
    events = [
        machine(s, 10, hooks, "LISTED"),
        pod(s, 11, "web", kind="LISTED"),
        machine(s, 13, {"quorum": hooks["quorum"]}),
        pod(s, 16, "web", deleting=True),
        pod(s, 17, "web", kind="DELETED", deleting=True),
        machine(s, 18, {}),
        Event(19, "nodes", "DELETED", node, {"metadata": {"name": node}}),
        machine(s, 20, {}, "DELETED"),
    ]
    removals.append(Removal(m, "preTerminate", "quorum", OTHER_OWNER, 18, f"lm-chaos-hooks/{m}/preTerminate/quorum", 0.0))
    log = [
        audit("patch", m, 200, f"lm-chaos-hooks/{m}/preDrain/backup", "2026-01-01T00:00:01Z", resource="machines", namespace=s.namespace),
        audit("create", "web", 201, "lifecycle.machine", "2026-01-01T00:00:02Z", subresource="eviction", namespace=s.namespace),
        audit("delete", "web", 200, "kwok/ (linux/amd64)", "2026-01-01T00:00:03Z", namespace=s.namespace),
        audit("patch", m, 200, f"lm-chaos-hooks/{m}/preTerminate/quorum", "2026-01-01T00:00:04Z", resource="machines", namespace=s.namespace),
        audit("delete", node, 200, "lifecycle.machine", "2026-01-01T00:00:05Z", resource="nodes"),  # 1 s after the kill: still on its way
    ]
    assert Checker(s, events, log, removals, set(), quiet=killed).check() == []


def test_chaos_soak_short(kubeconfig, capi_generation, tmp_path) -> None:
    if not (Path(kubeconfig).parent / "audit.log").exists():
        pytest.skip("this control plane keeps no audit log")
    lines: list[str] = []
    soak = Soak(kubeconfig, tmp_path / "runs", capi_generation.use, log=lines.append)
    try:
        summary = soak.run_many(run_seeds(SEED, RUNS))
    finally:
        soak.stop()
    report = "\n".join(lines) + summary.report()
    print(report)
    left = [t.name for t in threading.enumerate() if t.name.startswith(("chaos-", "faultproxy-"))]
    assert left == [], f"threads still running: {left}"
    assert len(summary.results) == RUNS
    assert sum(summary.violations.values()) == 0, report
    assert summary.failing == [], report
    assert sum(len(r.attempts) for r in summary.results) > RUNS, "no run was killed and run again"
