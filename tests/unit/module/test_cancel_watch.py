"""How a module tells that the Ansible run that started it is gone (``_module.py``),
on made-up process trees; the real ones are in tests/integration/test_cancel.py."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils import _module

PLAYBOOK = ["/venv/bin/python3", "/venv/bin/ansible-playbook", "-i", "inventory", "site.yml"]
SHELL = ["/bin/sh", "-c", "/venv/bin/python3 /root/.ansible/tmp/ansible-tmp-1/AnsiballZ_machine_drain.py && sleep 0"]


def tree(monkeypatch: pytest.MonkeyPatch, processes: dict[int, tuple[int, list[str]]]) -> None:
    """pid -> (parent pid, command line)."""
    monkeypatch.setattr(_module, "_parent", lambda pid: processes[pid][0] if pid in processes else None)
    monkeypatch.setattr(_module, "_argv", lambda pid: processes[pid][1] if pid in processes else None)


@pytest.mark.parametrize(
    ("argv", "cli"),
    [
        (PLAYBOOK, True),
        (["/usr/bin/ansible-playbook", "site.yml"], True),
        (["/venv/bin/python", "/venv/bin/ansible", "localhost", "-m", "ping"], True),
        (SHELL, False),
        (["/venv/bin/python", "/venv/bin/ansible-runner", "run", "/runner"], False),
        (["/usr/bin/python3", "/root/.ansible/tmp/ansible-tmp-1/AnsiballZ_async_wrapper.py", "j1", "60"], False),
    ],
)
def test_which_programs_fork_workers(argv, cli) -> None:
    assert _module.worker_of_cli(argv) is cli


def test_a_worker_whose_playbook_is_there_has_a_run(monkeypatch) -> None:
    tree(monkeypatch, {100: (50, SHELL), 50: (40, PLAYBOOK), 40: (30, PLAYBOOK), 30: (1, ["bash"])})
    assert _module.run_gone_before_start(100) is False


def test_a_worker_left_by_a_killed_playbook_has_no_run(monkeypatch) -> None:
    # Reparented to init, or to a subreaper.
    tree(monkeypatch, {100: (50, SHELL), 50: (1, PLAYBOOK), 1: (0, ["/sbin/init"])})
    assert _module.run_gone_before_start(100) is True
    tree(monkeypatch, {100: (50, SHELL), 50: (7, PLAYBOOK), 7: (1, ["/usr/lib/systemd/systemd", "--user"])})
    assert _module.run_gone_before_start(100) is True


def test_modules_not_started_by_an_ansible_program_are_left_alone(monkeypatch) -> None:
    # Run by hand from a kept AnsiballZ file, or detached by async_wrapper.
    tree(monkeypatch, {100: (30, ["bash"]), 30: (1, ["sshd"])})
    assert _module.run_gone_before_start(100) is False
    wrapper = ["/usr/bin/python3", "/root/.ansible/tmp/ansible-tmp-1/AnsiballZ_async_wrapper.py", "j1", "60"]
    tree(monkeypatch, {100: (60, wrapper), 60: (1, wrapper)})
    assert _module.run_gone_before_start(100) is False
