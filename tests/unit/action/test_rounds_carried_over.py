"""What a Machine's final entry keeps from an earlier round of machine_delete (plugin_utils/_rounds.py, pure)."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.plugin_utils._rounds import carried_over


def test_a_round_that_finds_the_machine_gone_keeps_who_carried_it_out() -> None:
    earlier = {"key": "ns/m", "status": "in_progress", "carried_out_by": "controller", "api_version": "cluster.x-k8s.io/v1beta2", "flavour": "capi"}
    later = {"key": "ns/m", "status": "done", "carried_out_by": None, "api_version": None, "flavour": None, "changed": True}
    merged = carried_over(earlier, later)
    assert (merged["status"], merged["carried_out_by"], merged["api_version"], merged["flavour"]) == ("done", "controller", "cluster.x-k8s.io/v1beta2", "capi")


def test_what_the_later_round_saw_wins() -> None:
    earlier = {"key": "ns/m", "carried_out_by": "collection"}
    later = {"key": "ns/m", "carried_out_by": "controller"}
    assert carried_over(earlier, later)["carried_out_by"] == "controller"
    assert carried_over({}, later) is later
