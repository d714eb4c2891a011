"""Cancel means stop: a delete_machine run interrupted with SIGINT (how AWX and
a terminal cancel a job) stops its drain at once. The API server's audit log
shows no eviction after the run exited, even once the budget would allow one;
no module process of the run is left; a later run finishes the deletion."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, ansible_env, machine_collection
from khelpers import stop_process, wait_for
from test_delete_machine import PLAYBOOK, assert_all_gone, playbook_vars

EXTENDED_FLAVOURS = ("v1beta1",)  # variants make test leaves out (conftest.py: pytest_collection_modifyitems)


def evictions_after(audit_events, namespace: str, moment: dt.datetime) -> list[str]:
    late = []
    for event in audit_events(namespace=namespace, resource="pods", subresource="eviction", verb="create"):
        received = dt.datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))
        if received > moment:
            late.append(f"{event['objectRef']['name']} at {event['requestReceivedTimestamp']}")
    return late


def run_processes(marker: str) -> list[str]:
    """Processes still running whose command line carries ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in command:
            found.append(f"{entry.name}: {command[:160]}")
    return found


def test_sigint_stops_the_drain_and_a_rerun_finishes(*, flavour, kube, kubeconfig, victim, run_playbook, audit_events, tmp_path) -> None:
    v = victim()
    # Every replacement stays Pending: the budget allows one eviction, then holds the drain.
    spare_nodes = [n["metadata"]["name"] for n in kube.list("/api/v1/nodes") if n["metadata"]["name"] != v.node]
    pool = kube.get(f"/api/v1/nodes/{v.node}")["metadata"]["labels"]["lm-pool"]
    spares = [n for n in spare_nodes if (kube.get(f"/api/v1/nodes/{n}")["metadata"].get("labels") or {}).get("lm-pool") == pool]
    for node in spares:
        kube.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})

    env = ansible_env(kubeconfig)
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    marker = f"lm-cancel-{v.name}"
    extra = {**playbook_vars(v), "lm_test_marker": marker}
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(PLAYBOOK), "-e", json.dumps(extra)]
    log = (tmp_path / "run.log").open("w")
    run = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=REPO)
    try:

        def held() -> bool:
            # One web Pod evicted, the other left on the Node: the budget holds it.
            on_node = [p for p in v.web_pods() if p["spec"].get("nodeName") == v.node and not p["metadata"].get("deletionTimestamp")]
            return len(on_node) == 1

        wait_for(held, 120, what="the drain to evict one Pod and be held by the budget")
        time.sleep(2)
        # Only the playbook gets the signal, as AWX sends it: its modules must stop on their own.
        run.send_signal(signal.SIGINT)
        run.wait(timeout=10)
    finally:
        stop_process(run)
        log.close()
    exited = dt.datetime.now(dt.UTC)

    # Give a leftover drain every chance to evict: let the replacement run and the budget allow it.
    for node in spares:
        kube.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": None}})
    time.sleep(8)
    assert evictions_after(audit_events, v.namespace, exited) == [], (tmp_path / "run.log").read_text()[-3000:]
    assert run_processes(marker) == [], "the run is still there"

    again = run_playbook(PLAYBOOK, playbook_vars(v), timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    assert_all_gone(kube, v)
    evictions = audit_events(namespace=v.namespace, resource="pods", subresource="eviction", verb="create")
    evicted = [e["objectRef"]["name"] for e in evictions if (e.get("responseStatus") or {}).get("code") == 201]
    assert len(evicted) == len(set(evicted)), f"a Pod was evicted twice: {evicted}"


@pytest.mark.parametrize("flavour", ["openshift"], indirect=True)
def test_a_module_that_starts_after_its_run_was_killed_sends_nothing(*, flavour, kube, kubeconfig, namespace, make_machine, tmp_path) -> None:
    """The run is killed after Ansible forked the worker for a task but before the module
    started (a slow interpreter start stands in for that moment): the worker lives on in a
    session of its own, and the module it then starts must see that its run is gone."""
    machine = make_machine(namespace)
    path = f"{machine_collection(flavour, namespace)}/{machine['metadata']['name']}"
    before = kube.get(path)["metadata"]["resourceVersion"]
    slow_python = tmp_path / "slow-python"
    slow_python.write_text(f'#!/bin/sh\nsleep 4\nexec {sys.executable} "$@"\n')
    slow_python.chmod(0o755)
    env = ansible_env(kubeconfig)
    env["ANSIBLE_PYTHON_INTERPRETER"] = str(slow_python)
    env["ANSIBLE_REMOTE_TMP"] = marker = str(tmp_path / "remote")  # in the module's command line
    arguments = {"machine": machine["metadata"]["name"], "namespace": namespace, "point": "preDrain", "name": "orphan-test", "owner": "orphan-test"}
    command = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,", "-m", "lifecycle.machine.machine_hook"]
    command += ["-a", json.dumps(arguments)]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        wait_for(lambda: run_processes(str(slow_python)) and run_processes(marker), 30, what="the worker to start the module's interpreter")
        os.kill(run.pid, signal.SIGKILL)  # the run only: its worker lives in a session of its own
        run.wait(timeout=10)
        wait_for(lambda: not run_processes(marker), 30, what="the module to end")
    finally:
        stop_process(run)
        for leftover in run_processes(marker) + run_processes(str(slow_python)):
            os.kill(int(leftover.split(":", 1)[0]), signal.SIGKILL)

    current = kube.get(path)
    assert current["metadata"]["resourceVersion"] == before, "the module of a killed run wrote to the Machine"
    assert not (current["spec"].get("lifecycleHooks") or {}).get("preDrain")
