"""A task's deadline reaches the transport one way: given where the task's
KubeApi is made (``KubeApi.fork(deadline=...)``), never written into a
transport afterwards. Read from the source with ast (nothing is imported),
plus the transport itself refusing the assignment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

REPO = Path(__file__).resolve().parents[3]
TRANSPORT = REPO / "plugins" / "module_utils" / "_k8s"
# Everything that runs a task: plugins (modules, module_utils, inventory, action) and the event source.
SOURCES = (REPO / "plugins", REPO / "extensions")
NAMES = ("deadline", "_deadline")


def deadline_assignments(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, text) of every assignment of a ``deadline`` (or ``_deadline``) attribute of anything
    but ``self`` - ``api.deadline = ...``, ``self.api.deadline += ...``, ``setattr(api, "deadline", ...)``.
    An object's own ``self.deadline`` (a drain's, a gate's) is its own business."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and name.value in NAMES:
                found.append((node.lineno, ast.unparse(node)))
            continue
        flat: list[ast.expr] = []
        while targets:
            target = targets.pop()
            if isinstance(target, (ast.Tuple, ast.List)):
                targets.extend(target.elts)
            else:
                flat.append(target)
        for target in flat:
            if isinstance(target, ast.Attribute) and target.attr in NAMES and not (isinstance(target.value, ast.Name) and target.value.id == "self"):
                found.append((node.lineno, ast.unparse(target)))
    return found


def python_files() -> list[Path]:
    return sorted(path for root in SOURCES for path in root.rglob("*.py") if TRANSPORT not in path.parents)


def test_nothing_outside_the_transport_assigns_a_transports_deadline() -> None:
    offences = [f"{path.relative_to(REPO)}:{line}: {text} = ..." for path in python_files() for line, text in deadline_assignments(path.read_text(), str(path))]
    assert not offences, (
        "A task's deadline is given to the transport where the task's KubeApi is made - "
        "api.fork(deadline=...) - and passed down as an absolute deadline, never assigned afterwards:\n" + "\n".join(offences)
    )


def test_the_rule_finds_each_way_of_writing_the_assignment() -> None:
    source = (
        "api.deadline = 1\n"
        "self.api.deadline = 2\n"
        "task.deadline += 3\n"
        "a, b.deadline = 4, 5\n"
        "x._deadline: float = 6\n"
        "setattr(api, 'deadline', 7)\n"
        "self.deadline = 8\n"  # an object's own deadline
        "deadline = 9\n"
        "api = api.fork(deadline=10)\n"
    )
    assert [line for line, _text in deadline_assignments(source)] == [1, 2, 3, 4, 5, 6]


def test_the_files_checked_include_the_runners_and_not_the_transport() -> None:
    files = {path.relative_to(REPO).as_posix() for path in python_files()}
    assert "plugins/module_utils/_drain/run.py" in files
    assert "plugins/inventory/machines.py" in files
    assert "extensions/eda/plugins/event_source/machine_gates.py" in files
    assert not [name for name in files if name.startswith("plugins/module_utils/_k8s/")]


def test_a_transports_deadline_cannot_be_assigned() -> None:
    api = KubeApi(None)
    with pytest.raises(AttributeError):
        api.deadline = 5.0  # type: ignore[misc]
    assert api.deadline is None
    task = api.fork(deadline=api.monotonic() + 30)
    assert task.deadline is not None and api.deadline is None, "the task's fork has the deadline, its parent does not"
    assert task.fork().deadline is None and task.fork(deadline_from=task).deadline == task.deadline
