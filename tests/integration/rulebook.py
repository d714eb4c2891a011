"""Running ``ansible-rulebook`` with the collection's rulebooks against the local
control plane (tests and benchmarks).

A rulebook runs in a session of its own, its output in a log file; ``stop()``
sends SIGINT (how ansible-rulebook is asked to stop), then kills whatever of
its process tree is left, so nothing it started outlives it.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from khelpers import descendants, kill_tree

BIN = Path(sys.executable).parent
INVENTORY = {"all": {"hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}
FOLLOWING = "lifecycle.machine.machine_gates - INFO - Following the Machines of"


def java_home() -> str | None:
    """A Java 17 (what ansible-rulebook's rule engine needs): JAVA_HOME, else the Debian package's."""
    given = os.environ.get("JAVA_HOME")
    if given and Path(given, "bin", "java").exists():
        return given
    found = sorted(glob.glob("/usr/lib/jvm/java-17-openjdk-*")) + sorted(glob.glob("/usr/lib/jvm/*17*"))
    return next((path for path in found if Path(path, "bin", "java").exists()), None)


class Rulebook:
    """One ``ansible-rulebook`` run of ``rulebook`` (a collection rulebook name or a path)."""

    def __init__(self, rulebook: str, variables: dict, env: dict, workdir: Path, extra_args: list[str] | None = None):
        self.rulebook = rulebook
        self.extra_args = list(extra_args or [])
        self.variables = variables
        self.env = env
        self.workdir = workdir
        self.log = workdir / "rulebook.log"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, timeout: float = 120) -> Rulebook:
        """Start it and wait until the source follows the Machines."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "inventory.yml").write_text(json.dumps(INVENTORY))
        (self.workdir / "vars.yml").write_text(json.dumps(self.variables))
        env = dict(self.env)
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        home = java_home()
        if home is None:
            raise RuntimeError("ansible-rulebook needs Java 17: set JAVA_HOME or install openjdk-17-jre-headless (.ci/run does)")
        env["JAVA_HOME"] = home
        command = [
            str(BIN / "ansible-rulebook"),
            "--rulebook",
            self.rulebook,
            "--inventory",
            str(self.workdir / "inventory.yml"),
            "--vars",
            str(self.workdir / "vars.yml"),
            "--verbose",
            *self.extra_args,
        ]
        self.starts += 1
        with self.log.open("a") as out:
            out.write(f"\n===== start {self.starts} =====\n")
            out.flush()
            self.proc = subprocess.Popen(command, env=env, cwd=self.workdir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        mark = f"===== start {self.starts} ====="
        deadline = time.monotonic() + timeout
        while FOLLOWING not in self.output().rpartition(mark)[2]:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ansible-rulebook exited with {self.proc.returncode}:\n{self.output()[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"ansible-rulebook did not start following the Machines within {timeout} s:\n{self.output()[-4000:]}")
            time.sleep(0.2)
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20) -> int | None:
        """SIGINT, then SIGKILL to whatever of the tree is still there; the exit code (None when it had to be killed)."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        tree = descendants(proc.pid)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
        code = proc.poll()
        kill_tree(proc.pid)
        for pid in tree:  # the ones already orphaned by the exit
            kill_tree(pid)
        proc.wait()
        return code
