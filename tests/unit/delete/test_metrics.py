"""Each Machine's figures for graphs and for people (``_delete/metrics.py``, the ``prometheus_text`` and
``metrics_table`` filters): the text is what the Prometheus project's own parser reads back, labelled as
Cluster API's own Machine metrics are (``name``, ``namespace``, ``cluster_name``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import cluster as cluster_tool
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.lifecycle.machine.plugins.filter.metrics_table import FilterModule as TableFilters
from ansible_collections.lifecycle.machine.plugins.filter.prometheus_text import FilterModule as TextFilters
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.metrics import prometheus_text, summary_table

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
METRICS = {
    "shop/worker-1": {
        "name": "worker-1",
        "namespace": "shop",
        "cluster_name": "prod",
        "outcome": "waiting",
        "phase_seconds": {"drain": 42.5, "terminate": 7},
        "evicted": 3,
        "blockers_by_kind": {"budget refusal": 2},
        "blockers_by_verdict": {"can never clear as things stand": 2},
    },
    'odd"ns/w\\2': {"outcome": "done", "phase_seconds": {"drain": 1}, "evicted": 0, "blockers_by_kind": {}, "blockers_by_verdict": {}},
}
WORKER = (("cluster_name", "prod"), ("name", "worker-1"), ("namespace", "shop"))
FAMILIES = [
    "lifecycle_machine_phase_seconds",
    "lifecycle_machine_blockers",
    "lifecycle_machine_blockers_by_verdict",
    "lifecycle_machine_evicted_pods",
    "lifecycle_machine_outcome",
]


def samples(text: str) -> tuple[dict, dict]:
    families = {family.name: family for family in text_string_to_metric_families(text)}
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in families.values() for s in family.samples}, families


def test_the_text_parses_back_to_every_figure_with_its_labels() -> None:
    found, families = samples(prometheus_text(METRICS, timestamp=1_800_000_000.5))
    assert {name: family.type for name, family in families.items()} == {
        **dict.fromkeys(FAMILIES, "gauge"),
        "lifecycle_machine_metrics_written_timestamp_seconds": "gauge",
    }
    assert found[("lifecycle_machine_phase_seconds", (*WORKER, ("phase", "drain")))] == 42.5
    assert found[("lifecycle_machine_phase_seconds", (*WORKER, ("phase", "terminate")))] == 7
    assert found[("lifecycle_machine_blockers", (*WORKER[:1], ("kind", "budget refusal"), *WORKER[1:]))] == 2
    assert found[("lifecycle_machine_blockers_by_verdict", (*WORKER, ("verdict", "can never clear as things stand")))] == 2
    assert found[("lifecycle_machine_evicted_pods", WORKER)] == 3
    assert found[("lifecycle_machine_metrics_written_timestamp_seconds", ())] == 1_800_000_000.5


def test_the_outcome_is_a_state_set_one_for_the_machines_own() -> None:
    found, _families = samples(prometheus_text(METRICS))
    worker = {outcome: found[("lifecycle_machine_outcome", (*WORKER, ("outcome", outcome)))] for outcome in ("done", "failed", "waiting")}
    assert worker == {"done": 0, "failed": 0, "waiting": 1}
    odd = (("cluster_name", ""), ("name", "w\\2"), ("namespace", 'odd"ns'))
    assert found[("lifecycle_machine_outcome", (*odd[:2], odd[2], ("outcome", "done")))] == 1


def test_label_values_are_escaped_and_a_missing_cluster_is_empty() -> None:
    found, _families = samples(prometheus_text(METRICS))
    assert found[("lifecycle_machine_evicted_pods", (("cluster_name", ""), ("name", "w\\2"), ("namespace", 'odd"ns')))] == 0


def test_every_sample_carries_cluster_apis_machine_labels() -> None:
    """name, namespace and cluster_name on every Machine's sample (kube-state-metrics' capi_machine_* carry the same),
    and no ``machine`` label any more."""
    _found, families = samples(prometheus_text(METRICS))
    for name in FAMILIES:
        for sample in families[name].samples:
            assert {"name", "namespace", "cluster_name"} <= set(sample.labels) and "machine" not in sample.labels, sample


def test_no_machines_is_still_a_valid_text() -> None:
    assert [family.name for family in text_string_to_metric_families(prometheus_text({}))] == FAMILIES


def test_the_filter_writes_the_controllers_clock_whatever_its_time_zone() -> None:
    """The role writes the figures with the filter's default time: the controller's Unix time, which no time zone moves
    (``now(utc=true).timestamp()``, which the role passed before, read a naive UTC date as local time: -3600 s at UTC+1)."""
    code = (
        "import time; from ansible_collections.lifecycle.machine.plugins.filter.prometheus_text import FilterModule;"
        "text = FilterModule().filters()['prometheus_text']({});"
        "line = [l for l in text.splitlines() if l.startswith('lifecycle_machine_metrics_written_timestamp_seconds ')][0];"
        "print(float(line.split()[1]) - time.time())"
    )
    for zone in ("Europe/Paris", "America/Los_Angeles", "Asia/Kolkata", "UTC"):
        ran = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "TZ": zone, "PYTHONPATH": str(cluster_tool.collections_root())},
            capture_output=True,
            text=True,
            check=True,
        )
        assert abs(float(ran.stdout)) < 5, (zone, ran.stdout)


def test_the_roles_written_time_is_unix_time_under_a_utc_offset(tmp_path: Path) -> None:
    """The role's very task (roles/delete_machine/tasks/main.yml), run by ansible-playbook under TZ=Europe/Paris."""
    tasks = yaml.safe_load((REPO / "roles" / "delete_machine" / "tasks" / "main.yml").read_text())
    (task,) = [task for task in tasks if task["name"].startswith("Write each Machine's figures for Prometheus")]
    target = tmp_path / "out.prom"
    figures = {"ns/m": {"name": "m", "namespace": "ns", "cluster_name": "c", "outcome": "done", "evicted": 2}}
    variables = {"delete_machine_metrics_file": str(target), "delete_machine_metrics": figures}
    play = {"hosts": "localhost", "gather_facts": False, "vars": variables, "tasks": [task]}
    playbook = tmp_path / "write.yml"
    playbook.write_text(yaml.safe_dump([play], sort_keys=False))
    env = {**os.environ, "TZ": "Europe/Paris", "ANSIBLE_COLLECTIONS_PATH": str(cluster_tool.collections_root()), "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    started = time.time()
    command = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)]
    ran = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    found, _families = samples(target.read_text())
    written = found[("lifecycle_machine_metrics_written_timestamp_seconds", ())]
    assert started - 1 <= written <= time.time() + 1, written - started
    assert found[("lifecycle_machine_evicted_pods", (("cluster_name", "c"), ("name", "m"), ("namespace", "ns")))] == 2


def test_the_table_has_a_line_per_machine_with_its_status() -> None:
    lines = summary_table({"shop/worker-1": METRICS["shop/worker-1"]}, {"shop/worker-1": {"status": "done"}})
    assert lines[0].split() == ["Machine", "status", "drain", "s", "terminate", "s", "evicted", "holds", "it", "now"]
    assert lines[1].split("  ")[0] == "shop/worker-1"
    assert "done" in lines[1] and "42.5" in lines[1] and "2 can never clear as things stand" in lines[1]
    assert "waiting" in summary_table({"shop/worker-1": METRICS["shop/worker-1"]})[1], "without the report, the outcome"


def test_the_filters_refuse_what_is_not_metrics() -> None:
    with pytest.raises(AnsibleFilterError, match="prometheus_text expects machine_delete's metrics"):
        TextFilters().filters()["prometheus_text"](["not", "metrics"])
    with pytest.raises(AnsibleFilterError, match="metrics_table expects"):
        TableFilters().filters()["metrics_table"]("text")
    assert TableFilters().filters()["metrics_table"]({}) == ["Machine  status  drain s  terminate s  evicted  holds it now"]


def test_the_roles_rounds_add_up_the_pods_evicted(tmp_path: Path) -> None:
    """The role's own task that notes a round (roles/delete_machine/tasks/round.yml), run by ansible-playbook twice: a
    drain under way when a round ended (an OpenShift Machine's provider tasks ran between) evicts more in the next; the
    figures count both rounds' Pods, and take every other figure from the later round."""
    tasks = yaml.safe_load((REPO / "roles" / "delete_machine" / "tasks" / "round.yml").read_text())
    (note,) = [task for task in tasks if task["name"] == "Note the outcome of the round"]
    out = tmp_path / "metrics.json"

    def step(evicted: dict[str, int], outcome: str) -> dict:
        metrics = {key: {"name": key.split("/")[1], "namespace": "ns", "cluster_name": "", "outcome": outcome, "evicted": n} for key, n in evicted.items()}
        machines = [{"key": key, "name": key.split("/")[1], "namespace": "ns", "status": "in_progress"} for key in evicted]
        return {"metrics": metrics, "machines": machines, "clock": {}, "progress": [], "errors": []}

    plays = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {"delete_machine_metrics": {}, "delete_machine_report": {}, "delete_machine__failures": []},
            "tasks": [
                {"name": "first round", "ansible.builtin.set_fact": {"delete_machine__step": step({"ns/a": 2, "ns/b": 1}, "waiting")}},
                note,
                {"name": "second round", "ansible.builtin.set_fact": {"delete_machine__step": step({"ns/a": 3}, "done")}},
                note,
                {"name": "keep", "ansible.builtin.copy": {"content": "{{ delete_machine_metrics | to_json }}", "dest": str(out), "mode": "0644"}},
            ],
        }
    ]
    playbook = tmp_path / "rounds.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(cluster_tool.collections_root()), "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    command = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)]
    ran = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    metrics = json.loads(out.read_text())
    assert (metrics["ns/a"]["evicted"], metrics["ns/a"]["outcome"]) == (5, "done")
    assert (metrics["ns/b"]["evicted"], metrics["ns/b"]["outcome"]) == (1, "waiting"), "a Machine the later round no longer had"


def test_the_replacements_figures_are_written_for_the_machines_that_have_them() -> None:
    replaced = {
        **METRICS,
        "shop/worker-2": {
            "phase_seconds": {"replace": 95.0, "drain": 4},
            "replacement_ready_seconds": 93.2,
            "pool_short_seconds": 0.0,
            "evicted": 0,
            "blockers_by_kind": {},
            "blockers_by_verdict": {},
        },
    }
    families = text_string_to_metric_families(prometheus_text(replaced))
    found = {(family.name, tuple(sorted(s.labels.items()))): s.value for family in families for s in family.samples}
    labels = (("cluster_name", ""), ("name", "worker-2"), ("namespace", "shop"))
    assert found[("lifecycle_machine_replacement_ready_seconds", labels)] == 93.2
    assert found[("lifecycle_machine_pool_short_seconds", labels)] == 0.0
    assert not any(name == "lifecycle_machine_pool_short_seconds" and dict(key).get("name") == "worker-1" for name, key in found)
    assert found[("lifecycle_machine_phase_seconds", (*labels, ("phase", "replace")))] == 95.0
    table = summary_table(replaced)
    assert [cell.strip() for cell in table[0].split("  ") if cell.strip()][:6] == [
        "Machine",
        "status",
        "drain s",
        "terminate s",
        "replacement ready s",
        "short s",
    ]
    assert "93.2" in table[-1] and table[1].count(" - ") >= 2
