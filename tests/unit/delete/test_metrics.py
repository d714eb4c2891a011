"""Each Machine's figures for graphs and for people (``_delete/metrics.py``, the ``prometheus_text`` and
``metrics_table`` filters): the text is what the Prometheus project's own parser reads back."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.lifecycle.machine.plugins.filter.metrics_table import FilterModule as TableFilters
from ansible_collections.lifecycle.machine.plugins.filter.prometheus_text import FilterModule as TextFilters
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.metrics import prometheus_text, summary_table

METRICS = {
    "shop/worker-1": {
        "phase_seconds": {"drain": 42.5, "terminate": 7},
        "evicted": 3,
        "blockers_by_kind": {"budget refusal": 2},
        "blockers_by_verdict": {"can never clear as things stand": 2},
    },
    'odd"ns/w\\2': {"phase_seconds": {"drain": 1}, "evicted": 0, "blockers_by_kind": {}, "blockers_by_verdict": {}},
}


def samples() -> dict:
    families = {family.name: family for family in text_string_to_metric_families(prometheus_text(METRICS, timestamp=1_800_000_000.5))}
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in families.values() for s in family.samples}, families


def test_the_text_parses_back_to_every_figure_with_its_labels() -> None:
    found, families = samples()
    assert {name: family.type for name, family in families.items()} == {
        "lifecycle_machine_phase_seconds": "gauge",
        "lifecycle_machine_blockers": "gauge",
        "lifecycle_machine_blockers_by_verdict": "gauge",
        "lifecycle_machine_evicted_pods": "gauge",
        "lifecycle_machine_metrics_written_timestamp_seconds": "gauge",
    }
    worker = (("machine", "worker-1"), ("namespace", "shop"))
    assert found[("lifecycle_machine_phase_seconds", (*worker[:1], worker[1], ("phase", "drain")))] == 42.5
    assert found[("lifecycle_machine_phase_seconds", (worker[0], worker[1], ("phase", "terminate")))] == 7
    assert found[("lifecycle_machine_blockers", (("kind", "budget refusal"), *worker))] == 2
    assert found[("lifecycle_machine_blockers_by_verdict", (*worker, ("verdict", "can never clear as things stand")))] == 2
    assert found[("lifecycle_machine_evicted_pods", worker)] == 3
    assert found[("lifecycle_machine_metrics_written_timestamp_seconds", ())] == 1_800_000_000.5


def test_label_values_are_escaped() -> None:
    found, _families = samples()
    assert found[("lifecycle_machine_evicted_pods", (("machine", "w\\2"), ("namespace", 'odd"ns')))] == 0


def test_no_machines_is_still_a_valid_text() -> None:
    assert [family.name for family in text_string_to_metric_families(prometheus_text({}))] == [
        "lifecycle_machine_phase_seconds",
        "lifecycle_machine_blockers",
        "lifecycle_machine_blockers_by_verdict",
        "lifecycle_machine_evicted_pods",
    ]


def test_the_table_has_a_line_per_machine_with_its_status() -> None:
    lines = summary_table({"shop/worker-1": METRICS["shop/worker-1"]}, {"shop/worker-1": {"status": "done"}})
    assert lines[0].split() == ["Machine", "status", "drain", "s", "terminate", "s", "evicted", "holds", "it", "now"]
    assert lines[1].split("  ")[0] == "shop/worker-1"
    assert "done" in lines[1] and "42.5" in lines[1] and "2 can never clear as things stand" in lines[1]


def test_the_filters_refuse_what_is_not_metrics() -> None:
    with pytest.raises(AnsibleFilterError, match="prometheus_text expects machine_delete's metrics"):
        TextFilters().filters()["prometheus_text"](["not", "metrics"])
    with pytest.raises(AnsibleFilterError, match="metrics_table expects"):
        TableFilters().filters()["metrics_table"]("text")
    assert TableFilters().filters()["metrics_table"]({}) == ["Machine  status  drain s  terminate s  evicted  holds it now"]
