"""Plain helpers for integration tests (import as ``from khelpers import ...``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def fake_node(name: str, labels: dict | None = None, ready: bool = True) -> dict:
    """A Node that kwok manages (annotation ``kwok.x-k8s.io/node: fake``)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok", **(labels or {})},
        },
        "spec": {"taints": []},
    }


def node_ready(node: dict | None) -> bool:
    for condition in ((node or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def wait_for(predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.2, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns a truthy value; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
