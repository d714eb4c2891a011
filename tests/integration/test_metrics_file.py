"""The numbers to graph, against the real API server: the delete_machine role ends with a table of each
Machine's figures and, when asked, writes them where node_exporter's textfile collector reads them; the
Prometheus project's own parser reads the file back."""

from __future__ import annotations

import json
import sys
import time

import pytest
from conftest import ansible_env
from prometheus_client.parser import text_string_to_metric_families
from test_delete_machine import PLAYBOOK, _spare_node, assert_all_gone, playbook_vars
from test_long_rounds import playbook_command, run_until_round


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_the_role_writes_each_machines_figures_for_prometheus_and_prints_a_table(*, flavour, kube, victim, run_playbook, tmp_path) -> None:
    v = victim()
    cluster = kube.get(v.path)["spec"]["clusterName"]
    target = tmp_path / "textfile" / "lifecycle_machine.prom"
    target.parent.mkdir()

    preview = run_playbook(PLAYBOOK, {**playbook_vars(v), "delete_machine_metrics_file": str(target)}, check=True)
    assert preview.returncode == 0, preview.stdout[-3000:]
    assert not target.exists(), "check mode writes no file"

    result = run_playbook(PLAYBOOK, {**playbook_vars(v), "delete_machine_metrics_file": str(target)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert_all_gone(kube, v)
    assert "Machine" in result.stdout and "drain s" in result.stdout and "terminate s" in result.stdout, result.stdout[-3000:]

    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(target.read_text())
        for sample in family.samples
    }
    machine = (("cluster_name", cluster), ("name", v.name), ("namespace", v.namespace))
    assert (("lifecycle_machine_phase_seconds", (*machine, ("phase", "drain")))) in samples, sorted(samples)
    assert samples[("lifecycle_machine_phase_seconds", (*machine, ("phase", "drain")))] >= 0
    assert ("lifecycle_machine_evicted_pods", machine) in samples
    assert samples[("lifecycle_machine_metrics_written_timestamp_seconds", ())] > 1_700_000_000
    assert oct(target.stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_a_drain_held_across_rounds_counts_every_pod_and_writes_unix_time_under_a_utc_offset(
    *, flavour, kube, kubeconfig, victim, audit_events, tmp_path
) -> None:
    """The figures of a deletion whose drain a budget holds for several rounds (its spare Node cordoned, the first
    Pod's replacement cannot run, so the second Pod waits), with the controller at UTC+1/+2: every Pod evicted is
    counted (not the last round's), the outcome is done, the samples carry Cluster API's Machine labels, the time
    written is Unix time, and the set_stats artifact holds the same figures."""
    v = victim()
    cluster = kube.get(v.path)["spec"]["clusterName"]
    spare = _spare_node(kube, v)
    kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": True}})
    target = tmp_path / "lifecycle_machine.prom"
    extra = {**playbook_vars(v), "progress_interval": 1, "delete_machine_metrics_file": str(target)}
    env = {**ansible_env(kubeconfig), "ANSIBLE_PYTHON_INTERPRETER": sys.executable, "TZ": "Europe/Paris", "ANSIBLE_SHOW_CUSTOM_STATS": "true"}
    pattern = r"^(?:\S+ : )?Delete the Machines, printing where each stands as it goes \(round (\d+)\):$"

    def release() -> None:
        kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": None}})

    started = time.time()
    code, output, seen = run_until_round(playbook_command(PLAYBOOK, extra), env, pattern, 4, release)
    finished = time.time()
    assert code == 0, output[-4000:]
    assert seen[:4] == [1, 2, 3, 4], "the drain went on for several rounds"
    assert_all_gone(kube, v)
    granted = [e for e in audit_events(namespace=v.namespace, subresource="eviction") if (e.get("responseStatus") or {}).get("code") in (200, 201)]
    assert len(granted) == 2

    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(target.read_text())
        for sample in family.samples
    }
    machine = (("cluster_name", cluster), ("name", v.name), ("namespace", v.namespace))
    assert samples[("lifecycle_machine_evicted_pods", machine)] == 2, "both rounds' Pods"
    assert [samples[("lifecycle_machine_outcome", (*machine, ("outcome", outcome)))] for outcome in ("done", "failed", "waiting")] == [1, 0, 0]
    assert samples[("lifecycle_machine_phase_seconds", (*machine, ("phase", "drain")))] >= 3
    written = samples[("lifecycle_machine_metrics_written_timestamp_seconds", ())]
    assert started <= written <= finished, f"the time written is {written - finished:+.0f} s off the controller's clock"

    (stats,) = [json.loads(line.split("RUN: ", 1)[1]) for line in output.splitlines() if line.lstrip().startswith("RUN: ")]
    figures = stats["lifecycle_machine_metrics"][f"{v.namespace}/{v.name}"]
    assert {key: figures[key] for key in ("name", "namespace", "cluster_name", "outcome", "evicted")} == {
        "name": v.name,
        "namespace": v.namespace,
        "cluster_name": cluster,
        "outcome": "done",
        "evicted": 2,
    }
