# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Waiting for a replacement: until a new Machine of the owner has a Ready Node
(its Node read where it lives: a Cluster API Machine's in its workload cluster).

The owner and its Machines are read again every ``pause`` seconds (the Node's
readiness changes no Machine, so a watch on the Machines alone would not see
it), until the deadline, an instant on the transport's clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import is_deleting
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.api import get_node
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.logic import Owner, is_candidate, match_replacements, wanted_replacements


def node_is_ready(node: dict | None) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in ((node or {}).get("status") or {}).get("conditions") or [])


@dataclass
class Awaited:
    """Where the wait for a Machine's replacement stands: the owner as last read, the Machine that replaces it
    once one is Ready (None: none yet), and the new Machines seen so far (Ready or not), for the progress line."""

    owner: Owner
    replacement: str | None = None
    seen: tuple[str, ...] = ()


def ready_machines(owner: Owner, name: str, node_side: Callable[[dict], KubeApi]) -> tuple[list[dict], list[str]]:
    """(the owner's Machines that could replace ``name`` and have a Ready Node, the names of all that could)."""
    record = owner.record
    wanted = wanted_replacements(record, owner, _named(owner, name))
    candidates = [m for m in owner.machines if not is_deleting(m) and any(is_candidate(n, m, record, since) for n, since in wanted)]
    ready = []
    for machine in candidates:
        node_name = owner.flavour.node_name(machine)
        if node_name and node_is_ready(get_node(node_side(machine), node_name)):
            ready.append(machine)
    return ready, sorted(m["metadata"]["name"] for m in candidates)


def _named(owner: Owner, name: str) -> dict:
    return next((m for m in owner.machines if m["metadata"].get("name") == name), {"metadata": {"name": name}})


def look(owner: Owner, name: str, node_side: Callable[[dict], KubeApi]) -> Awaited:
    """The replacement of ``name`` as the owner stands now (one read of each candidate's Node)."""
    ready, seen = ready_machines(owner, name, node_side)
    machine = _named(owner, name)
    matched = match_replacements(wanted_replacements(owner.record, owner, machine), ready, owner.record)
    return Awaited(owner, matched.get(name), tuple(seen))


def wait_for_replacement(api: KubeApi, read: Callable[[], Owner], name: str, node_side: Callable[[dict], KubeApi], *, deadline: float, pause: float) -> Awaited:
    """Read the owner (``read``) and look for ``name``'s Ready replacement until one is there or ``deadline`` passes."""
    while True:
        awaited = look(read(), name, node_side)
        if awaited.replacement is not None or api.monotonic() + pause > deadline:
            return awaited
        api.sleep(pause)
