"""Unit tests for plugin_utils/_action.py: the progress-round loop of the action
plugins (the module runs are stand-ins; whatever they do to a cluster is proven
in tests/integration), and how a kubeconfig argument is resolved."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
from ansible.errors import AnsibleError

from ansible_collections.lifecycle.machine.plugins.action.machine_drain import ActionModule as DrainAction
from ansible_collections.lifecycle.machine.plugins.plugin_utils import _action
from ansible_collections.lifecycle.machine.plugins.plugin_utils._action import MachineAction, progress_text


def stack_depth() -> int:
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


class ScriptedDrain(DrainAction):
    """machine_drain's action with the module runs replaced by a script: ``rounds`` rounds, the last completed."""

    def __init__(self, rounds: int, *, async_val: int = 0) -> None:
        self._task = SimpleNamespace(async_val=async_val, check_mode=False, get_name=lambda: "Drain worker-1", action="lifecycle.machine.machine_drain")
        self.left = rounds
        self.sent: list[dict] = []
        self.depths: set[int] = set()

    def call(self, args: dict, task_vars: dict) -> dict:
        self.sent.append(args)
        self.depths.add(stack_depth())
        self.left -= 1
        done = self.left <= 0
        return {"changed": True, "completed": done, "message": "Node worker-1 drained" if done else "Drain not completed yet", "evicted": [], "pods": []}


@pytest.fixture
def printed(monkeypatch) -> list[str]:
    lines: list[str] = []
    monkeypatch.setattr(_action.display, "display", lambda text, **_kw: lines.append(text))
    return lines


def test_thousands_of_rounds_run_in_a_loop_of_constant_depth(printed) -> None:
    action = ScriptedDrain(5000)
    result = action.execute({"node": "worker-1", "progress_interval": 1, "wait_timeout": 31536000}, {})
    assert result["completed"] is True
    assert result["rounds"] == 5000 == len(action.sent)
    assert len(action.depths) == 1, "every round runs at the same stack depth: nothing grows per round"
    assert len(printed) == 4999, "where the drain stands is printed after every round but the last"
    assert printed[0] == "Drain worker-1 (round 1):\n    Drain not completed yet"


def test_an_async_task_runs_the_module_once_to_the_end(printed) -> None:
    action = ScriptedDrain(1, async_val=3600)
    action.execute({"node": "worker-1", "progress_interval": 20}, {})
    assert action.sent == [{"node": "worker-1", "progress_interval": 0}]
    assert printed == []


def test_progress_text_indents_each_line() -> None:
    assert progress_text("Delete", 3, ["a", "  * b"]) == "Delete (round 3):\n    a\n      * b"


class Resolving(MachineAction):
    def __init__(self, args: dict, transport: str = "local") -> None:
        self._task = SimpleNamespace(args=args)
        self._connection = SimpleNamespace(transport=transport)
        self.looked_up: list[str] = []

    def local_file(self, path: str) -> str:
        self.looked_up.append(path)
        return f"/decrypted{path}"


def test_each_local_kubeconfig_path_is_found_and_decrypted() -> None:
    action = Resolving({"kubeconfig": "/a/config:/b/config", "context": "c"})
    assert action.module_args() == {"kubeconfig": "/decrypted/a/config:/decrypted/b/config", "context": "c"}


@pytest.mark.parametrize("args", [{}, {"kubeconfig": None}, {"kubeconfig": {"clusters": []}}])
def test_no_kubeconfig_or_a_dict_passes_as_it_is(args) -> None:
    action = Resolving(args)
    assert action.module_args() == args
    assert action.looked_up == []


def test_a_remote_hosts_kubeconfig_is_left_alone() -> None:
    action = Resolving({"kubeconfig": "/etc/kube/config"}, transport="ssh")
    assert action.module_args() == {"kubeconfig": "/etc/kube/config"}


def test_a_kubeconfig_of_another_type_is_refused() -> None:
    with pytest.raises(AnsibleError, match="kubeconfig must be a path or a dict, not list"):
        Resolving({"kubeconfig": ["/a"]}).module_args()
