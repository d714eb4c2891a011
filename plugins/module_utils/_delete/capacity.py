# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Room for the replacements, as far as it can be judged without a scheduler (pure;
docs/stalls.md, "Asking before starting").

The Pods the batch evicts that come back elsewhere need cpu, memory and a Pod
slot on the Nodes outside the batch that could take them. :func:`shortfalls`
sums their requests per group of such Nodes and compares the sums with those
Nodes' free allocatable: ``status.allocatable`` less the requests of the Pods
already bound there (not those that have ended, Succeeded or Failed, nor those
being deleted). Fitting in total does not prove they fit Node by Node: only
the scheduler decides that; not fitting in total proves some stay Pending.
"""

from __future__ import annotations

import re
from decimal import Decimal

try:
    from kubernetes.utils.quantity import parse_quantity as _library_quantity
except ImportError:  # pragma: no cover - the modules that read quantities need the client for their transport anyway
    _library_quantity = None

# The resources counted, and a Pod's own slot.
CPU, MEMORY, PODS = "cpu", "memory", "pods"
RESOURCES = (CPU, MEMORY, PODS)

# What the API server writes as a quantity: a decimal number, then an exponent (e3, E-2) or one of the suffixes
# n u m k M G T P E (powers of 1000) and Ki Mi Gi Ti Pi Ei (powers of 1024). The kubernetes client's parser reads
# more than that (1K, 1_000, NaN, Infinity, which no quantity is), so what it is given is checked here first.
_QUANTITY = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")


def parse_quantity(value) -> Decimal | None:
    """A Kubernetes quantity (``100m``, ``1Gi``, ``1e3``, ``2``, or a number) as a Decimal
    in the resource's base unit (cores, bytes, Pods), read by the kubernetes client's
    ``parse_quantity``; None when it is not one."""
    if isinstance(value, bool) or value is None or _library_quantity is None:
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))  # as written, not a float's binary expansion
    text = str(value).strip()
    if not _QUANTITY.match(text):
        return None
    try:
        return _library_quantity(text)
    except ValueError:
        return None


def show(resource: str, amount: Decimal) -> str:
    """An amount as an operator reads it: cpu in millicores, memory in Mi, Pods as a count."""
    if resource == CPU:
        return f"{int((amount * 1000).to_integral_value(rounding='ROUND_CEILING'))}m"
    if resource == MEMORY:
        mebibytes = amount / (Decimal(2) ** 20)
        return f"{mebibytes.quantize(Decimal('0.1')).normalize():f}Mi"
    return f"{int(amount)}"


def _add(total: dict[str, Decimal], requests: dict | None) -> None:
    for resource in (CPU, MEMORY):
        amount = parse_quantity((requests or {}).get(resource))
        if amount is not None:
            total[resource] = total.get(resource, Decimal(0)) + amount


def pod_requests(pod: dict) -> dict[str, Decimal]:
    """What a Pod asks the scheduler for: its containers' requests (with its sidecars, init containers
    that keep running), or the largest of its other init containers' when that is more, plus its
    overhead; and one Pod slot."""
    spec = pod.get("spec") or {}
    running: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        _add(running, (container.get("resources") or {}).get("requests"))
    largest_init: dict[str, Decimal] = {}
    for container in spec.get("initContainers") or []:
        requests = (container.get("resources") or {}).get("requests")
        if container.get("restartPolicy") == "Always":
            _add(running, requests)
            continue
        one: dict[str, Decimal] = {}
        _add(one, requests)
        for resource, amount in one.items():
            largest_init[resource] = max(largest_init.get(resource, Decimal(0)), amount)
    total = {resource: max(running.get(resource, Decimal(0)), largest_init.get(resource, Decimal(0))) for resource in (CPU, MEMORY)}
    _add(total, spec.get("overhead"))
    total[PODS] = Decimal(1)
    return total


def _holds_room(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not (pod.get("metadata") or {}).get("deletionTimestamp")


def free_allocatable(nodes: list[dict], pods: list[dict]) -> dict[str, dict[str, Decimal | None]]:
    """Node name -> resource -> what is free of its allocatable (None: the Node does not say)."""
    used: dict[str, dict[str, Decimal]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or not _holds_room(pod):
            continue
        into = used.setdefault(node, {})
        for resource, amount in pod_requests(pod).items():
            into[resource] = into.get(resource, Decimal(0)) + amount
    free: dict[str, dict[str, Decimal | None]] = {}
    for node in nodes:
        name = (node.get("metadata") or {}).get("name")
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        free[name] = {}
        for resource in RESOURCES:
            amount = parse_quantity(allocatable.get(resource))
            free[name][resource] = None if amount is None else amount - used.get(name, {}).get(resource, Decimal(0))
    return free


def shortfalls(candidates: dict[str, frozenset[str]], requests: dict[str, dict[str, Decimal]], free: dict[str, dict]) -> list[dict]:
    """Where the replacements cannot fit even in total. ``candidates``: Pod key -> the Nodes outside the
    batch that could take its replacement (none: not counted here); ``requests``: Pod key -> what it asks.

    For each distinct group of Nodes, the Pods whose every candidate is in it must fit in what the group
    has free; one entry per group where some resource does not: ``nodes``, ``pods`` (those counted),
    ``short`` (resource -> requested, free, shortfall) and ``pending`` (the fewest Pods that must stay
    Pending for the rest to fit in total: the largest askers of the scarcest resource)."""
    found = []
    for group in sorted({nodes for nodes in candidates.values() if nodes}, key=lambda nodes: (len(nodes), sorted(nodes))):
        members = sorted(key for key, nodes in candidates.items() if nodes and nodes <= group)
        short: dict[str, dict[str, str]] = {}
        pending: list[str] = []
        for resource in RESOURCES:
            frees = [free.get(name, {}).get(resource) for name in group]
            if any(amount is None for amount in frees):
                continue  # a Node that does not say what it has: not judged
            room = sum((max(amount, Decimal(0)) for amount in frees), Decimal(0))
            asked = sum((requests[key].get(resource, Decimal(0)) for key in members), Decimal(0))
            if asked <= room:
                continue
            short[resource] = {"requested": show(resource, asked), "free": show(resource, room), "shortfall": show(resource, asked - room)}
            dropped, covered = [], Decimal(0)
            for key in sorted(members, key=lambda key: (-requests[key].get(resource, Decimal(0)), key)):
                if covered >= asked - room:
                    break
                dropped.append(key)
                covered += requests[key].get(resource, Decimal(0))
            if len(dropped) > len(pending):
                pending = dropped
        if short:
            found.append({"nodes": sorted(group), "pods": members, "short": short, "pending": sorted(pending)})
    return found
