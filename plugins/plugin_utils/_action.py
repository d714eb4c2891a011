# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of every module of the collection (its action plugins).

Two things happen here that a module cannot do on its own:

- **Connection settings as kubernetes.core has them.** A ``kubeconfig`` given as
  a path (or several, joined by ``:``) is looked up like kubernetes.core's
  action plugins look it up (relative to the role's or playbook's ``files/``
  first) and, when it is encrypted with Ansible Vault, handed to the module
  decrypted (a temporary file the run removes). A kubeconfig given as a dict
  passes as it is. On a remote connection the path is the remote host's and is
  left alone.
- **Progress rounds that can run for days.** ``machine_delete`` and
  ``machine_drain`` return to the controller every ``progress_interval``
  seconds; :class:`RoundsAction` prints where things stand and calls the module
  again, in a loop that keeps no state per round (see ``_rounds``), until the
  work is done, fails or needs the playbook (an OpenShift Machine waiting for
  its provider tasks).
"""

from __future__ import annotations

import time
from typing import Any

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

# kubernetes.core joins several kubeconfig paths with the OS's path separator, as KUBECONFIG does.
KUBECONFIG_SEPARATOR = ":"


class MachineAction(ActionBase):
    """Run the task's module once, with its kubeconfig resolved (and decrypted)."""

    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp: Any = None, task_vars: dict | None = None) -> dict:
        result = super().run(tmp, task_vars or {})
        try:
            args = self.module_args()
        except AnsibleError as exc:
            return {**result, "failed": True, "msg": f"{self._task.action}: {to_text(exc)}; nothing was changed"}
        result.update(self.execute(args, task_vars or {}))
        return result

    def module_args(self) -> dict:
        """The task's arguments, with a local kubeconfig path found and decrypted."""
        args = dict(self._task.args)
        kubeconfig = args.get("kubeconfig")
        if kubeconfig is None or isinstance(kubeconfig, dict):
            return args
        if not isinstance(kubeconfig, str):
            raise AnsibleError(f"kubeconfig must be a path or a dict, not {type(kubeconfig).__name__}")
        if self._connection.transport == "local":
            args["kubeconfig"] = KUBECONFIG_SEPARATOR.join(self.local_file(path) for path in kubeconfig.split(KUBECONFIG_SEPARATOR) if path)
        return args

    def local_file(self, path: str) -> str:
        """A kubeconfig on the controller: where it is, decrypted when it is vaulted."""
        found = self._find_needle("files", path)
        return self._loader.get_real_file(found, decrypt=True)

    def execute(self, args: dict, task_vars: dict) -> dict:
        """What the task returns: one run of its module."""
        return self.call(args, task_vars)

    def call(self, args: dict, task_vars: dict) -> dict:
        """One run of the task's module (an async job when the task is async)."""
        wrap_async = bool(self._task.async_val) and not self._connection.has_native_async
        result = self._execute_module(module_name=self._task.action, module_args=args, task_vars=task_vars, wrap_async=wrap_async)
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result


class RoundsAction(MachineAction):
    """A module that returns every ``progress_interval`` seconds, called again until its work is done.

    Subclasses say how a round's result is folded into the task's (``rounds``,
    a :class:`~ansible_collections.lifecycle.machine.plugins.plugin_utils._rounds.Rounds`).
    """

    def rounds(self, args: dict, now: float) -> Any:
        """The rounds of this task (a ``_rounds.Rounds``)."""
        raise NotImplementedError

    def execute(self, args: dict, task_vars: dict) -> dict:
        if self._task.async_val:
            # An async job has nobody to print progress to: it works until done, in one run.
            return self.call({**args, "progress_interval": 0}, task_vars)
        rounds = self.rounds(args, time.time())
        while True:
            lines = rounds.add(self.call(rounds.next_args(time.time()), task_vars))
            if rounds.finished():
                return rounds.result()
            display.display(progress_text(self._task.get_name(), rounds.count, lines))


def progress_text(task: str, count: int, lines: list[str]) -> str:
    """What is printed after a round: the task, the round, then where things stand, indented."""
    return "\n".join([f"{task} (round {count}):", *(f"    {line}" for line in lines)])
