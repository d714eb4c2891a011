"""One ``ansible-playbook playbooks/delete_machine.yml`` attempt: started, maybe killed, always stopped.

The attempt runs in a session (process group) of its own and carries
``LM_CHAOS_ATTEMPT=<id>`` in its environment, which every process it starts
inherits. A kill is sent to the process group only, as a terminal (SIGINT) or a
``kill -9`` of the job does: Ansible's workers and the modules they run are in
other process groups and must notice by themselves that the run is gone
(docs/delete_machine.md "Cancelling"). Whatever still carries the mark
``ORPHAN_SECONDS`` after the playbook exited is counted as left behind, then
killed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from scenario import Kill

MARK = "LM_CHAOS_ATTEMPT"
SIGINT_GRACE = 20.0  # a playbook that ignores SIGINT this long gets SIGKILL
ORPHAN_SECONDS = 15.0
ATTEMPT_TIMEOUT = 600.0

TESTS = Path(__file__).resolve().parents[1]
for extra in (TESTS / "integration", TESTS.parent / "hack"):
    if str(extra) not in sys.path:
        sys.path.append(str(extra))

import cluster as cluster_tool
from khelpers import kill_tree


@dataclass
class Attempt:
    number: int
    rc: int | None = None
    killed_by: str | None = None  # SIGKILL / SIGINT when the kill came before the playbook ended
    escalated: bool = False  # SIGINT was not enough
    timed_out: bool = False
    orphans: list[str] = field(default_factory=list)
    seconds: float = 0.0
    log: Path | None = None
    started_at: dt.datetime | None = None  # wall clock (UTC), as the audit log records it
    killed_at: dt.datetime | None = None
    failure: str | None = None

    @property
    def done(self) -> bool:
        return self.rc == 0 and self.killed_by is None

    def read_failure(self) -> None:
        """Why an attempt that was not killed failed: the last error Ansible printed."""
        if self.done or self.killed_by or self.log is None:
            return
        lines = self.log.read_text(errors="replace").splitlines()
        errors = [line.strip() for line in lines if line.startswith(("fatal:", "[ERROR]"))]
        self.failure = errors[-1][:300] if errors else f"rc {self.rc}"


def marked(mark: str) -> list[tuple[int, str]]:
    """(pid, command) of the processes whose environment carries ``MARK=mark``."""
    return cluster_tool.marked_processes(MARK, mark)


class Runner:
    """Runs the attempts of one run; ``live`` is the attempt's process while it runs (stop() ends it)."""

    def __init__(self, playbook: Path, extra_vars: str, env: dict, workdir: Path):
        self.playbook = playbook
        self.extra_vars = extra_vars
        self.env = env
        self.workdir = workdir
        self.live: subprocess.Popen | None = None
        self._mark: str | None = None

    def attempt(self, number: int, mark: str, kill: Kill | None) -> Attempt:
        result = Attempt(number, log=self.workdir / f"attempt-{number}.log")
        tmp = self.workdir / f"tmp-{number}"
        tmp.mkdir(parents=True, exist_ok=True)
        env = {**self.env, MARK: mark, "ANSIBLE_LOCAL_TEMP": str(tmp), "ANSIBLE_REMOTE_TMP": str(tmp)}
        command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(self.playbook), "-e", self.extra_vars]
        started = time.monotonic()
        result.started_at = dt.datetime.now(dt.UTC)
        self._mark = mark
        with result.log.open("w") as log:
            self.live = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, stdin=subprocess.DEVNULL)
            try:
                self._wait(result, kill)
            finally:
                result.orphans = self.stop()
        result.seconds = time.monotonic() - started
        result.read_failure()
        return result

    def _wait(self, result: Attempt, kill: Kill | None) -> None:
        proc = self.live
        if kill is not None:
            try:
                result.rc = proc.wait(timeout=kill.after)
                return
            except subprocess.TimeoutExpired:
                pass
            result.killed_by = kill.signal_name
            result.killed_at = dt.datetime.now(dt.UTC)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, kill.signum)
            if kill.signum == signal.SIGINT:
                try:
                    result.rc = proc.wait(timeout=SIGINT_GRACE)
                except subprocess.TimeoutExpired:
                    result.escalated = True
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
            result.rc = proc.wait()
            return
        try:
            result.rc = proc.wait(timeout=ATTEMPT_TIMEOUT)
        except subprocess.TimeoutExpired:
            result.timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            result.rc = proc.wait()

    def stop(self) -> list[str]:
        """End the attempt and everything it started; the commands that outlived the playbook by ``ORPHAN_SECONDS``."""
        proc, mark = self.live, self._mark
        if proc is None:
            return []
        if proc.poll() is None:
            kill_tree(proc.pid)
            proc.wait(timeout=30)
        deadline = time.monotonic() + ORPHAN_SECONDS
        while marked(mark) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = marked(mark)
        for pid, _command in left:
            kill_tree(pid)
        self.live = None
        return [f"{pid}: {command[:160]}" for pid, command in left]
