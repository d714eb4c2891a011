"""The workload_cluster option of machine_drain / machine_terminate / machine_delete reaches them from every
role and playbook that drains or deletes Machines: the delete_machine role's delete_machine_workload_cluster,
the playbooks' workload_cluster_source / workload_kubeconfig / workload_cluster, which
playbooks/vars/workload_cluster.yml checks (each playbook asserts it before anything is read or changed) and
turns into the option.
No cluster is needed: the checks fail before the first request, and the mapping is run on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cluster as cluster_tool
import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
NODE_MODULES = ("machine_drain", "machine_terminate", "machine_delete")
OPTION = "workload_cluster"


def _tasks(path: Path) -> list[dict]:
    """Every task of a task file or playbook, blocks and their rescue/always opened."""
    loaded = yaml.safe_load(path.read_text()) or []
    plays = [play for play in loaded if "hosts" in play] if any("hosts" in item for item in loaded) else [{"tasks": loaded}]
    found: list[dict] = []

    def walk(tasks: list[dict]) -> None:
        for task in tasks or []:
            found.append(task)
            for key in ("block", "rescue", "always"):
                walk(task.get(key))

    for play in plays:
        for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
            walk(play.get(key))
    return found


def _module_args(task: dict) -> tuple[str, dict] | None:
    for key, value in task.items():
        if key.startswith("lifecycle.machine.") and key.split(".")[-1] in NODE_MODULES:
            return key.split(".")[-1], value
    return None


ROLE_TASK_FILES = sorted((REPO / "roles").glob("*/tasks/*.yml"))


@pytest.mark.parametrize("path", ROLE_TASK_FILES, ids=[str(p.relative_to(REPO / "roles")) for p in ROLE_TASK_FILES])
def test_every_role_task_that_drains_or_terminates_passes_its_role_variable(path: Path) -> None:
    role = path.parents[1].name
    for task in _tasks(path):
        called = _module_args(task)
        if called:
            assert called[1].get(OPTION) == f"{{{{ {role}_workload_cluster }}}}", f"{path}: {task.get('name')}"


def test_the_delete_machine_role_hands_its_variable_to_machine_delete() -> None:
    (call,) = [_module_args(t) for t in _tasks(REPO / "roles" / "delete_machine" / "tasks" / "round.yml") if _module_args(t)]
    assert call == ("machine_delete", call[1]) and call[1][OPTION] == "{{ delete_machine_workload_cluster }}"


def test_only_delete_machine_has_such_a_role_variable() -> None:
    """teardown_cluster and hook_controller call none of the modules that reach Nodes."""
    calling = {path.parents[1].name for path in ROLE_TASK_FILES if any(_module_args(t) for t in _tasks(path))}
    assert calling == {"delete_machine"}


def test_the_role_variable_is_documented_and_defaults_to_the_secrets() -> None:
    role = REPO / "roles" / "delete_machine"
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    option = spec["delete_machine_workload_cluster"]
    assert option["type"] == "dict" and option["default"] == {}
    assert "O(lifecycle.machine.machine_delete#module:workload_cluster)" in " ".join(option["description"])
    assert yaml.safe_load((role / "defaults" / "main.yml").read_text())["delete_machine_workload_cluster"] == {}
    assert "| `delete_machine_workload_cluster` | `{}` |" in (role / "README.md").read_text()


PLAYBOOKS = {"delete_machine.yml": "role", "delete_machines.yml": "role", "drain_node.yml": "machine_drain"}
# The check each of them runs first (on the variables of playbooks/vars/workload_cluster.yml).
CHECK = {"that": "workload_cluster__errors | length == 0", "fail_msg": "{{ workload_cluster__errors | join('; ') }}; nothing was changed", "quiet": True}


@pytest.mark.parametrize("name", sorted(PLAYBOOKS))
def test_each_playbook_checks_the_variables_before_anything_and_passes_the_option_on(name: str) -> None:
    (play,) = yaml.safe_load((REPO / "playbooks" / name).read_text())
    assert play["vars_files"] == ["vars/workload_cluster.yml"]
    tasks = _tasks(REPO / "playbooks" / name)
    (check,) = [i for i, t in enumerate(tasks) if t.get("ansible.builtin.assert") == CHECK]
    acting = [i for i, t in enumerate(tasks) if "ansible.builtin.include_role" in t or any(k.startswith("lifecycle.machine.") for k in t)]
    assert acting and check < min(acting), "the combination is checked before the first task that reads or changes anything"
    if PLAYBOOKS[name] == "role":
        (role,) = [t for t in tasks if "ansible.builtin.include_role" in t]
        assert role["vars"]["delete_machine_workload_cluster"] == "{{ workload_cluster_option }}"
    else:
        (drain,) = [t for t in tasks if "lifecycle.machine.machine_drain" in t]
        assert drain["lifecycle.machine.machine_drain"][OPTION] == "{{ workload_cluster_option }}"


def test_teardown_cluster_reaches_no_node() -> None:
    text = (REPO / "playbooks" / "teardown_cluster.yml").read_text()
    assert "workload" not in text and not any(_module_args(t) for t in _tasks(REPO / "playbooks" / "teardown_cluster.yml"))


# -- the checks and the mapping of playbooks/vars/workload_cluster.yml, run on their own ----------------------

DEFAULTS = {"workload_cluster": {}, "workload_cluster_source": "secret", "workload_kubeconfig": "", "workload_kubeconfig_credential": ""}
KUBECONFIG = "{kubeconfig}"  # replaced by a file the test writes
CASES = {
    "defaults": ({}, {}),
    "survey-empty-answers": ({"workload_cluster": None, "workload_cluster_source": None, "workload_kubeconfig": None}, {}),
    "management": ({"workload_cluster_source": "management"}, {"source": "management"}),
    "kubeconfig-path": (
        {"workload_cluster_source": "kubeconfig", "workload_kubeconfig": KUBECONFIG},
        {"source": "kubeconfig", "kubeconfig": KUBECONFIG},
    ),
    "kubeconfig-from-the-credential": (
        {"workload_cluster_source": "kubeconfig", "workload_kubeconfig_credential": KUBECONFIG},
        {"source": "kubeconfig", "kubeconfig": KUBECONFIG},
    ),
    "typed-path-wins-over-the-credential": (
        {"workload_cluster_source": "kubeconfig", "workload_kubeconfig": KUBECONFIG, "workload_kubeconfig_credential": "/elsewhere"},
        {"source": "kubeconfig", "kubeconfig": KUBECONFIG},
    ),
    "credential-unused-with-secret": ({"workload_kubeconfig_credential": KUBECONFIG}, {}),
    "mapping-as-given": (
        {"workload_cluster": {"clusters": {"c1": "management", "prod/c2": KUBECONFIG}}},
        {"clusters": {"c1": "management", "prod/c2": KUBECONFIG}},
    ),
    "node-with-defaults": ({"workload_cluster_for_node": True}, {}),
    "kubeconfig-with-secret": (
        {"workload_kubeconfig": KUBECONFIG},
        "workload_kubeconfig is given ({kubeconfig}) but workload_cluster_source is secret: a kubeconfig is only used with "
        "workload_cluster_source kubeconfig; nothing was changed",
    ),
    "kubeconfig-with-management": (
        {"workload_cluster_source": "management", "workload_kubeconfig": KUBECONFIG},
        "workload_kubeconfig is given ({kubeconfig}) but workload_cluster_source is management",
    ),
    "kubeconfig-source-without-one": (
        {"workload_cluster_source": "kubeconfig"},
        "workload_cluster_source is kubeconfig but no kubeconfig is given: set workload_kubeconfig to its path, or attach a "
        "workload cluster kubeconfig credential; nothing was changed",
    ),
    "kubeconfig-not-a-file": (
        {"workload_cluster_source": "kubeconfig", "workload_kubeconfig": "/nonexistent/workload.kubeconfig"},
        "the workload cluster kubeconfig /nonexistent/workload.kubeconfig is not a file; nothing was changed",
    ),
    "unknown-source": ({"workload_cluster_source": "Secret"}, "workload_cluster_source must be one of secret, management, kubeconfig (got Secret)"),
    "mapping-and-survey": (
        {"workload_cluster": {"source": "management"}, "workload_cluster_source": "management"},
        "give either workload_cluster or workload_cluster_source / workload_kubeconfig, not both (workload_cluster_source is "
        "management, workload_kubeconfig is empty)",
    ),
    "not-a-mapping": ({"workload_cluster": "management"}, "workload_cluster must be a mapping (its keys are source, kubeconfig, context and clusters"),
    "node-with-a-source": (
        {"workload_cluster_for_node": True, "workload_cluster_source": "management"},
        "workload_cluster, workload_cluster_source and workload_kubeconfig apply to the Node of a Machine (machine and "
        "machine_namespace); a Node given by name is drained through the job's own connection (K8S_AUTH_*)",
    ),
    "node-with-a-mapping": ({"workload_cluster_for_node": True, "workload_cluster": {"source": "management"}}, "apply to the Node of a Machine"),
}


def _fill(value, kubeconfig: str):
    return json.loads(json.dumps(value).replace(KUBECONFIG, kubeconfig))


def _env() -> dict:
    # Nothing may be contacted: a server that refuses every connection.
    collections = str(cluster_tool.collections_root())
    return {**os.environ, "ANSIBLE_COLLECTIONS_PATH": collections, "K8S_AUTH_HOST": "https://127.0.0.1:9", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """Each case of CASES through the playbooks' check and the option it passes on, in one ansible-playbook
    run: the option, or the message the check fails with."""
    work = tmp_path_factory.mktemp("workload")
    kubeconfig = work / "workload.kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    results = work / "results"
    results.mkdir()
    (work / "case.yml").write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Run one case",
                    "block": [
                        {"name": "Check as the playbooks do", "ansible.builtin.assert": CHECK},
                        {
                            "name": "Write the option",
                            "ansible.builtin.copy": {
                                "dest": f"{results}/{{{{ case_id }}}}.json",
                                "content": "{{ {'option': workload_cluster_option} | to_json }}",
                                "mode": "0600",
                            },
                        },
                    ],
                    "rescue": [
                        {
                            "name": "Write the message",
                            "ansible.builtin.copy": {
                                "dest": f"{results}/{{{{ case_id }}}}.json",
                                "content": "{{ {'msg': ansible_failed_result.msg} | to_json }}",
                                "mode": "0600",
                            },
                        }
                    ],
                }
            ]
        )
    )
    includes = [
        {
            "name": f"Case {case_id}",
            "ansible.builtin.include_tasks": str(work / "case.yml"),
            "vars": {**DEFAULTS, **_fill(given, str(kubeconfig)), "case_id": case_id},
        }
        for case_id, (given, _expected) in CASES.items()
    ]
    play = {"name": "Cases", "hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": includes}
    play["vars_files"] = [str(REPO / "playbooks" / "vars" / "workload_cluster.yml")]
    (work / "cases.yml").write_text(yaml.safe_dump([play]))
    command = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-e", f"ansible_python_interpreter={sys.executable}", str(work / "cases.yml")]
    ran = subprocess.run(command, capture_output=True, text=True, env=_env(), check=False, timeout=300)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    return {path.stem: json.loads(path.read_text()) for path in results.glob("*.json")}, str(kubeconfig)


@pytest.mark.parametrize("case_id", list(CASES))
def test_the_variables_become_the_option_or_are_refused(outcomes, case_id: str) -> None:
    found, kubeconfig = outcomes
    _given, expected = CASES[case_id]
    if isinstance(expected, dict):
        assert found[case_id] == {"option": _fill(expected, kubeconfig)}
    else:
        assert expected.format(kubeconfig=kubeconfig) in found[case_id].get("msg", ""), found[case_id]


@pytest.mark.parametrize(
    ("playbook", "extra", "message"),
    [
        ("drain_node.yml", {"node": "worker-1", "workload_cluster_source": "management"}, "a Node given by name is drained through the job's own connection"),
        ("delete_machine.yml", {"machine_name": "m", "machine_namespace": "ns", "workload_kubeconfig": "/tmp/k"}, "workload_kubeconfig is given (/tmp/k)"),
        ("delete_machines.yml", {"machine_group": "all", "workload_cluster_source": "kubeconfig"}, "workload_cluster_source is kubeconfig but no kubeconfig"),
    ],
)
def test_a_playbook_refuses_a_contradiction_before_its_first_request(tmp_path: Path, playbook: str, extra: dict, message: str) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    command = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / playbook), "-e", json.dumps(extra)]
    ran = subprocess.run(command, capture_output=True, text=True, env=_env(), check=False, timeout=300)
    output = " ".join((ran.stdout + ran.stderr).split())
    assert ran.returncode != 0 and message in output, output[-3000:]
    assert "nothing was changed" in output
    tasks = [line for line in ran.stdout.splitlines() if line.startswith("TASK [")]
    assert tasks and all(("workload" in line or "drain_timeout" in line) for line in tasks), f"tasks that ran: {tasks}"
