"""A task's deadline reaches the transport one way: given where the task's
KubeApi is made (``KubeApi.fork(deadline=...)``); the transport refuses an
assignment (tests/unit/test_layout.py's rule (g) finds one in the source)."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi


def test_a_transports_deadline_cannot_be_assigned() -> None:
    api = KubeApi(None)
    with pytest.raises(AttributeError):
        api.deadline = 5.0  # type: ignore[misc]
    assert api.deadline is None
    task = api.fork(deadline=api.monotonic() + 30)
    assert task.deadline is not None and api.deadline is None, "the task's fork has the deadline, its parent does not"
    assert task.fork().deadline is None and task.fork(deadline_from=task).deadline == task.deadline
