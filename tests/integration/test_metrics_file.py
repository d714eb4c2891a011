"""The numbers to graph, against the real API server: the delete_machine role ends with a table of each
Machine's figures and, when asked, writes them where node_exporter's textfile collector reads them; the
Prometheus project's own parser reads the file back."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_delete_machine import PLAYBOOK, assert_all_gone, playbook_vars


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_the_role_writes_each_machines_figures_for_prometheus_and_prints_a_table(*, flavour, kube, victim, run_playbook, tmp_path) -> None:
    v = victim()
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
    machine = (("machine", v.name), ("namespace", v.namespace))
    assert (("lifecycle_machine_phase_seconds", (*machine, ("phase", "drain")))) in samples, sorted(samples)
    assert samples[("lifecycle_machine_phase_seconds", (*machine, ("phase", "drain")))] >= 0
    assert ("lifecycle_machine_evicted_pods", machine) in samples
    assert samples[("lifecycle_machine_metrics_written_timestamp_seconds", ())] > 1_700_000_000
    assert oct(target.stat().st_mode & 0o777) == "0o644"
