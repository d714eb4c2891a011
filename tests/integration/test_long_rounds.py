"""A deletion and a drain held for many progress rounds, on the real control
plane: the role and drain_node.yml print where things stand every round, keep
going for as long as a gate holds (rounds are a loop in the action plugin, not
task files that include themselves, which ansible-core keeps on its stack and
which ended such a run with RecursionError after about 250 rounds), then finish
the work once the gate opens.

LM_LONG_ROUNDS sets how many rounds the gate holds for (12 by default, to keep
the suite short; run with 300 or 3000 by hand to see a run go far past where the
old include chain died)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, ansible_env
from khelpers import stop_process
from test_delete_machine import PLAYBOOK, assert_all_gone, playbook_vars
from test_machine_drain import PDB_REFUSAL, create_pdb, get_pod, make_pods

ROUNDS = int(os.environ.get("LM_LONG_ROUNDS", "12"))
DRAIN_NODE = REPO / "playbooks" / "drain_node.yml"


def run_until_round(command: list[str], env: dict, pattern: str, rounds: int, release: Callable[[], None]) -> tuple[int, str, list[int]]:
    """Run ``command``; once it has printed round ``rounds`` (lines matching ``pattern``), call ``release``.

    Returns (exit code, output, the round numbers printed)."""
    seen: list[int] = []
    lines: list[str] = []
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        for line in proc.stdout:
            lines.append(line)
            match = re.match(pattern, line)
            if match:
                seen.append(int(match.group(1)))
                if seen[-1] == rounds:
                    release()
        code = proc.wait(timeout=120)
    finally:
        stop_process(proc)
    return code, "".join(lines), seen


def playbook_command(playbook: Path, extra: dict) -> list[str]:
    return [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook), "-e", json.dumps(extra)]


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_the_role_holds_at_a_gate_for_many_rounds_then_deletes_the_machine(flavour, kube, kubeconfig, victim) -> None:
    v = victim(hooks={"preDrain": [("backup", "backup-ctl")]})
    extra = {**playbook_vars(v), "progress_interval": 1, "drain_timeout": ROUNDS * 10 + 300}
    env = {**ansible_env(kubeconfig), "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    pattern = r"^(?:\S+ : )?Delete the Machines, printing where each stands as it goes \(round (\d+)\):$"

    code, output, seen = run_until_round(playbook_command(PLAYBOOK, extra), env, pattern, ROUNDS, lambda: v.remove_hook("preDrain", "backup"))

    assert code == 0, output[-4000:]
    assert "RecursionError" not in output
    assert seen[:ROUNDS] == list(range(1, ROUNDS + 1)), "one line per round, in order"
    # The time counts from the start of the deletion, not from each round's: it grows round by round.
    ages = [int(age) for age in re.findall(r"^ +1 Machine after (\d+) s: ", output, re.MULTILINE)]
    assert len(ages) >= ROUNDS and ages == sorted(ages), ages
    assert ages[ROUNDS - 1] >= ROUNDS - 1, ages
    workload = "" if flavour == "openshift" else " (workload cluster lm-test)"
    assert f"{v.namespace}/{v.name}{workload}: in progress" in output
    assert_all_gone(kube, v)


def test_drain_node_holds_at_a_budget_for_many_rounds_then_drains(kube, kubeconfig, namespace, make_node) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"stuck-0": {"labels": {"app": "stuck"}}})
    create_pdb(kube, namespace, "stuck", selector={"app": "stuck"}, min_available=1, healthy=1)
    extra = {"node": node, "drain_timeout": ROUNDS * 10 + 300, "progress_interval": 1}
    env = {**ansible_env(kubeconfig), "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    pattern = r"^Drain the node, showing where it stands as it goes \(round (\d+)\):$"

    def release() -> None:
        kube.delete(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/stuck")

    code, output, seen = run_until_round(playbook_command(DRAIN_NODE, extra), env, pattern, ROUNDS, release)

    assert code == 0, output[-4000:]
    assert seen[:ROUNDS] == list(range(1, ROUNDS + 1))
    assert f"    * Pod {namespace}/stuck-0: {PDB_REFUSAL}" in output
    pod = get_pod(kube, namespace, "stuck-0")
    assert pod is None or pod["metadata"].get("deletionTimestamp")
