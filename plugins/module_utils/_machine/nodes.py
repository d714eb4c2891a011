# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What every feature reads of a Machine's Node (pure): whether its kubelet
still answers and whether it is cordoned."""

from __future__ import annotations


def is_node_unreachable(node: dict | None) -> bool:
    """True when the Node's Ready condition is ``Unknown`` (``False`` is reachable but not ready)."""
    for condition in ((node or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "Unknown"
    return False


def is_unschedulable(node: dict | None) -> bool:
    """Whether the Node is cordoned (``spec.unschedulable``)."""
    return bool(((node or {}).get("spec") or {}).get("unschedulable"))
