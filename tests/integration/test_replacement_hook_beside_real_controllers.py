"""The recipe of docs/hooks.md beside the real controllers: a preDrain hook whose work
(docs/examples/tasks/replacement_ready.yml, the machine_replacement module) holds a deleted
Machine's drain until its replacement has a Ready Node, served by the hook_controller role or by
ansible-rulebook with the serve_gates rulebook.

Someone deletes a Machine of a pool of two with a plain deletion. OpenShift's MachineSet creates
its replacement at once; Cluster API's would only once the Machine is gone, so the work surges the
owner by one and brings it back. Either way the real controller holds at the hook until the new
Machine's Node is Ready, then drains: the old Node is cordoned only after the new one is Ready,
the pool never serves fewer than two Machines, and the replicas end at two.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import realctl
from conftest import REPO, ansible_env, run_module_with
from khelpers import stop_process, wait_for
from rulebook import Rulebook
from test_replacement_beside_real_controllers import Watch, capi_pool, cloud, cordoned_at, mapi_pool, ready_since

pytestmark = [pytest.mark.real_controllers, pytest.mark.slow]

HOOK = "replacement-ready"
TASKS = REPO / "docs" / "examples" / "tasks" / "replacement_ready.yml"

ROLE_PLAY = """\
- name: Serve the replacement-ready hook with the hook_controller role
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Hold the deleted Machine's drain until its replacement has a Ready Node
      ansible.builtin.include_role:
        name: lifecycle.machine.hook_controller
      vars:
        hook_controller_hook_name: {hook}
        hook_controller_hook_owner: {owner}
        hook_controller_point: preDrain
        hook_controller_machine: "{{{{ machine }}}}"
        hook_controller_namespace: "{{{{ namespace }}}}"
        hook_controller_tasks_file: {tasks}
        hook_controller_wait_timeout: 180
"""


@pytest.mark.parametrize("serving", ["role", "rulebook"])
@pytest.mark.parametrize("kind", ["capi", "mapi"])
def test_a_deleted_machine_is_drained_only_once_its_replacement_is_ready(kind: str, serving: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    plane = request.getfixturevalue("capi_plane" if kind == "capi" else "mapi_plane")
    pool = capi_pool(plane, "hook-capi", 2) if kind == "capi" else mapi_pool(plane, "hook-mapi", 2)
    kubeconfig = pool.state_dir / "kubeconfig"
    env = ansible_env(str(kubeconfig))
    with cloud(pool):
        old, kept = pool.wait_running(2)
        old_node = pool.node_of(pool.kube.get(f"{pool.machines_path}/{old}"))["metadata"]["name"]
        for name in (old, kept):
            hook = {"machine": name, "namespace": pool.namespace, "point": "preDrain", "name": HOOK, "owner": realctl.HOOK_OWNER}
            hooked = run_module_with(str(kubeconfig), "machine_hook", hook)
            assert not hooked.get("failed"), hooked
        server: subprocess.Popen | Rulebook
        if serving == "rulebook":
            variables = {"hook_owner": realctl.HOOK_OWNER, "hook_name": HOOK, "hook_points": ["preDrain"], "machine_namespace": pool.namespace}
            variables["hook_tasks_file"] = str(TASKS)
            server = Rulebook("lifecycle.machine.serve_gates", variables, env, tmp_path / "rulebook").start()
        else:
            play = tmp_path / "serve.yml"
            play.write_text(ROLE_PLAY.format(hook=HOOK, owner=realctl.HOOK_OWNER, tasks=TASKS))
            extra = json.dumps({"machine": old, "namespace": pool.namespace})
            command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(play), "-e", extra]
            log = (tmp_path / "role.log").open("w")
            server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            with Watch(pool) as watch:
                pool.kube.delete(f"{pool.machines_path}/{old}")  # a plain deletion, by someone else
                wait_for(lambda: pool.kube.get(f"{pool.machines_path}/{old}") is None, 300, 1, f"Machine {old} gone")
                new = wait_for(lambda: [n for n in pool.running() if n not in (old, kept)], 60, 1, "the replacement serving")[0]
            if isinstance(server, Rulebook):
                assert f"reached the preDrain gate of hook {HOOK}" in server.output(), server.output()[-4000:]
            else:
                assert server.wait(timeout=120) == 0, (tmp_path / "role.log").read_text()[-6000:]
        finally:
            server.stop() if isinstance(server, Rulebook) else stop_process(server)
    new_node = pool.node_of(pool.kube.get(f"{pool.machines_path}/{new}"))["metadata"]["name"]
    ready, cordoned = ready_since(pool, new_node), cordoned_at(pool, watch, old_node)
    assert ready <= cordoned, (ready, cordoned)
    assert watch.fewest_serving >= 1 and pool.replicas() == 2 and sorted(pool.names()) == sorted([kept, new])
    # The pool served two Machines until the old one was cordoned: one serving at worst is the old Node draining.
    print(f"{kind} served by the {serving}: the replacement {new} Ready at {ready}, the old Node cordoned at {cordoned}")
