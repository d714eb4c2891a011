"""Pods, Namespaces and MachineDrainRules as the API serves them, and the
classification of a few Pods and a pass over a Node, shared by the unit tests of _drain's pure files."""

from __future__ import annotations

import datetime as dt

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PodDecision, classify_pods, plan_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import DrainPass, EvictionOutcome
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN

NOW = dt.datetime(2024, 10, 9, 16, 14, 0, tzinfo=dt.UTC)
STARTED = dt.datetime(2024, 10, 9, 16, 13, 59, tzinfo=dt.UTC)
PDB = "Cannot evict pod as it would violate the pod's disruption budget."


def namespace(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}}


NAMESPACES = {
    "default": namespace("default"),
    "apps": namespace("apps", tier="frontend"),
    "monitoring": namespace("monitoring", tier="ops"),
}


def stamp(seconds_ago: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    ns: str = "default",
    *,
    labels: dict | None = None,
    annotations: dict | None = None,
    owner: str | None = "ReplicaSet",
    owner_name: str = "web-1234",
    controller: bool = True,
    phase: str = "Running",
    deleted: str | None = None,
    volumes: list | None = None,
) -> dict:
    meta: dict = {"name": name, "namespace": ns, "labels": labels or {}, "annotations": annotations or {}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": owner_name, "controller": controller}]
    if deleted:
        meta["deletionTimestamp"] = deleted
    return {"metadata": meta, "spec": {"volumes": volumes or []}, "status": {"phase": phase}}


def classify(pods, *, rules=(), machine=None, cluster=None, namespaces=None, daemonsets=(), unreachable=False, now=NOW):
    return classify_pods(
        list(pods),
        machine=machine,
        cluster=cluster,
        namespaces=NAMESPACES if namespaces is None else namespaces,
        existing_daemonsets=set(daemonsets),
        rules=list(rules),
        node_unreachable=unreachable,
        now=now,
    )


def one(p: dict, **kwargs) -> PodDecision:
    (decision,) = classify([p], **kwargs)
    return decision


def rule(name: str, behavior: str = DRAIN, order: int | None = None, *, machines=None, pods=None) -> dict:
    spec: dict = {"name": name, "drain": {"behavior": behavior}}
    if order is not None:
        spec["drain"]["order"] = order
    if machines is not None:
        spec["machines"] = machines
    if pods is not None:
        spec["pods"] = pods
    return spec


def served(name: str, ns: str, spec: dict, version: str = "v1beta2") -> dict:
    return {"apiVersion": f"cluster.x-k8s.io/{version}", "kind": "MachineDrainRule", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def labelled(kind: str, **labels: str) -> dict:
    return {"kind": kind, "metadata": {"name": kind.lower(), "namespace": "capi", "labels": labels}}


PORTWORX_SPEC = {
    "drain": {"behavior": "Drain", "order": 100},
    "machines": [{"selector": {}}],
    "pods": [{"selector": {"matchLabels": {"app": "portworx"}}}],
}


def decision(name: str, behavior: str = DRAIN, order: int = 0, terminating: bool = False) -> PodDecision:
    return PodDecision(namespace="ns", name=name, behavior=behavior, order=order, terminating=terminating)


def pass_of(decisions: list[PodDecision], outcome: EvictionOutcome | None = None, unreachable: bool = False, message: str = "x") -> DrainPass:
    """A pass over Node n that decided ``decisions`` and did ``outcome``."""
    return DrainPass(
        node={"metadata": {"name": "n"}},
        decisions=decisions,
        plan=plan_drain(decisions),
        outcome=outcome or EvictionOutcome(),
        message=message,
        unreachable=unreachable,
    )
