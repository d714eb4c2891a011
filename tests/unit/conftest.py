"""Make the collection importable as ``ansible_collections.lifecycle.machine``."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))

import cluster as cluster_tool

sys.path.insert(0, str(cluster_tool.collections_root()))

import pytest
import rbac
from fake_kube import FakeKube

FAKE_KUBE = str(REPO / "tests" / "unit" / "fake_kube.py")
COLLECTION_CODE = f"{Path('ansible_collections', 'lifecycle', 'machine', 'plugins')}/"


def sent_by_the_collection() -> bool:
    """Whether the request being made comes from the collection's code (the first caller outside fake_kube.py is a
    file of plugins/), not from the test setting the world up or reading it."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == FAKE_KUBE:
        frame = frame.f_back
    return frame is not None and COLLECTION_CODE in frame.f_code.co_filename


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "any_request: the test sends requests of its own through FakeKube, not the collection's")


@pytest.fixture(autouse=True)
def requests_are_granted(request: pytest.FixtureRequest):
    """Every request the collection's code sends through the in-memory transport (FakeKube) in any unit test is one
    extensions/awx/rbac.yml grants: a new request without its rule fails the test that makes the code send it.
    (What the test itself sends to set the world up or look at it is not the collection's.)"""
    if request.node.get_closest_marker("any_request"):
        yield
        return
    refused: list[str] = []

    def check(method: str, path: str) -> None:
        if not sent_by_the_collection():
            return
        reason = rbac.why_not(method, path)
        if reason is not None:
            refused.append(reason)

    FakeKube.permission_check = check
    try:
        yield
    finally:
        FakeKube.permission_check = None
    assert not refused, "requests the shipped RBAC does not grant:\n" + "\n".join(sorted(set(refused)))
