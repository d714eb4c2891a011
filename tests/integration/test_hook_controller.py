"""The hook_controller role against the real API server, for OpenShift, Cluster
API v1beta1-only and Cluster API v1beta2 Machines.

The drain is simulated by writing the condition the drain writes (OpenShift
``Drained``, Cluster API ``DrainingSucceeded``), the way the Machine controller
would record it.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import machine_collection
from khelpers import drained_status, wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

EXTENDED_FLAVOURS = ("v1beta1",)  # variants make test leaves out (conftest.py: pytest_collection_modifyitems)

CAPI_PREFIX = {"preDrain": "pre-drain.delete.hook.machine.cluster.x-k8s.io", "preTerminate": "pre-terminate.delete.hook.machine.cluster.x-k8s.io"}
OWNER = "log-shipper"

PLAYBOOK = """\
- name: Run the hook controller
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Serve the hook
      block:
        - name: Run the role
          ansible.builtin.include_role:
            name: lifecycle.machine.hook_controller
      always:
        - name: Save the report
          ansible.builtin.copy:
            content: "{{ hook_controller_report | default({}) | to_json }}"
            dest: "{{ report_path }}"
            mode: "0644"
          # Bookkeeping of the test, not a change the controller made.
          changed_when: false
"""

# The work: refuse while the "broken" marker exists for this Machine, else log one line per run.
TASKS = """\
- name: Check that the log shipper is reachable
  ansible.builtin.fail:
    msg: log shipper unreachable
  when: (broken_dir ~ '/' ~ hook_controller_machine_info.name) is file

- name: Flush the logs
  ansible.builtin.shell: >-
    echo "{{ hook_controller_machine_info.name }} deleting={{ hook_controller_machine_info.deleting }}
    drained={{ hook_controller_machine_info.gates.drained }}" >> {{ work_log }}
  changed_when: true
"""


class Controller:
    """Runs the role through ansible-playbook with a work log, a report and a "broken" switch."""

    def __init__(self, tmp_path: Path, run_playbook, namespace: str, point: str, name: str = "flush-logs"):
        self.dir = tmp_path
        self.run_playbook = run_playbook
        self.namespace = namespace
        self.point = point
        self.name = name
        self.work_log = tmp_path / "work.log"
        self.report_path = tmp_path / "report.json"
        self.broken = tmp_path / "broken"
        self.broken.mkdir()
        (tmp_path / "play.yml").write_text(PLAYBOOK)
        (tmp_path / "tasks.yml").write_text(TASKS)

    def run(self, **overrides) -> subprocess.CompletedProcess:
        variables = {
            "hook_controller_hook_name": self.name,
            "hook_controller_hook_owner": OWNER,
            "hook_controller_point": self.point,
            "hook_controller_namespace": self.namespace,
            "hook_controller_tasks_file": str(self.dir / "tasks.yml"),
            "hook_controller_wait_timeout": 60,
            "report_path": str(self.report_path),
            "work_log": str(self.work_log),
            "broken_dir": str(self.broken),
            **overrides,
        }
        self.report_path.unlink(missing_ok=True)
        return self.run_playbook(self.dir / "play.yml", variables)

    @property
    def report(self) -> dict:
        return json.loads(self.report_path.read_text())

    def work_done(self) -> list[str]:
        return self.work_log.read_text().splitlines() if self.work_log.exists() else []

    def break_work(self, machine: str) -> None:
        (self.broken / machine).touch()

    def fix_work(self, machine: str) -> None:
        (self.broken / machine).unlink()


def ok(process: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert process.returncode == 0, f"rc={process.returncode}\n{process.stdout[-6000:]}\n{process.stderr[-3000:]}"
    return process


def changed_count(process: subprocess.CompletedProcess) -> int:
    """Tasks that reported a change (a loop counts once)."""
    recap = process.stdout[process.stdout.rindex("PLAY RECAP") :]
    return int(recap.split("changed=")[1].split()[0])


def machine_path(flavour: str, namespace: str, name: str) -> str:
    return f"{machine_collection(flavour, namespace)}/{name}"


def hooks_of(kube: KubeApi, flavour: str, namespace: str, name: str, point: str) -> dict[str, str]:
    machine = kube.get(machine_path(flavour, namespace, name))
    if flavour == "openshift":
        return {h["name"]: h["owner"] for h in (machine["spec"].get("lifecycleHooks") or {}).get(point) or []}
    prefix = CAPI_PREFIX[point] + "/"
    return {k[len(prefix) :]: v for k, v in (machine["metadata"].get("annotations") or {}).items() if k.startswith(prefix)}


def condition_of(kube: KubeApi, flavour: str, namespace: str, name: str, condition_type: str) -> dict | None:
    machine = kube.get(machine_path(flavour, namespace, name))
    return next((c for c in (machine.get("status") or {}).get("conditions") or [] if c["type"] == condition_type), None)


def events_of(kube: KubeApi, namespace: str, name: str, reason: str) -> list[dict]:
    events = kube.list(f"/api/v1/namespaces/{namespace}/events", field_selector=f"involvedObject.name={name}")
    return [e for e in events if e["reason"] == reason]


def mark_for_deletion(kube: KubeApi, flavour: str, namespace: str, name: str) -> None:
    """Delete the Machine; its finalizer keeps it in the API, marked for deletion."""
    kube.delete(machine_path(flavour, namespace, name))


def record_drained(kube: KubeApi, flavour: str, namespace: str, name: str) -> None:
    """Write what the drain writes when it finishes."""
    kube.patch(machine_path(flavour, namespace, name), {"status": drained_status(flavour)}, subresource_status=True)


def test_install_only_adds_hooks_but_never_to_a_deleting_machine(*, flavour, namespace, make_machine, run_playbook, kube, tmp_path) -> None:
    pool = sorted(make_machine(namespace, labels={"pool": "logs"})["metadata"]["name"] for _member in range(2))
    deleting = make_machine(namespace, labels={"pool": "logs"})["metadata"]["name"]
    mark_for_deletion(kube, flavour, namespace, deleting)
    controller = Controller(tmp_path, run_playbook, namespace, "preTerminate")

    first = ok(controller.run(hook_controller_label_selectors=["pool=logs"], hook_controller_install_only=True, hook_controller_tasks_file=""))
    assert sorted(controller.report["hooked"]) == [f"{namespace}/{name}" for name in pool]
    for name in pool:
        assert hooks_of(kube, flavour, namespace, name, "preTerminate") == {"flush-logs": OWNER}
    assert hooks_of(kube, flavour, namespace, deleting, "preTerminate") == {}
    assert changed_count(first) == 1

    again = ok(controller.run(hook_controller_label_selectors=["pool=logs"], hook_controller_install_only=True, hook_controller_tasks_file=""))
    assert controller.report["hooked"] == []
    assert changed_count(again) == 0

    # Serving with no time to wait: the live Machines are not at their gate yet, which is no failure.
    served = ok(controller.run(hook_controller_label_selectors=["pool=logs"], hook_controller_wait_timeout=0))
    assert sorted(controller.report["pending"]) == [f"{namespace}/{name}" for name in pool]
    assert controller.report["skipped"] == [{"machine": f"{namespace}/{deleting}", "reason": "being deleted without the hook"}]
    assert controller.report["served"] == []
    assert controller.work_done() == []
    assert changed_count(served) == 0


def test_pre_drain_controller_acts_once_when_deletion_starts(*, flavour, namespace, make_machine, run_playbook, kube, tmp_path) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    other_hook = {"preDrain": [("etcd-quorum", "etcd-guard")]}
    bystander = make_machine(namespace, hooks=other_hook)["metadata"]["name"]
    controller = Controller(tmp_path, run_playbook, namespace, "preDrain", name="migrate-app")
    ok(controller.run(hook_controller_machine=machine, hook_controller_install_only=True, hook_controller_tasks_file=""))
    assert hooks_of(kube, flavour, namespace, machine, "preDrain") == {"migrate-app": OWNER}

    # The controller waits for the deletion to start; the Machine is deleted while it waits.
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(process=controller.run(hook_controller_machine=machine)))
    runner.start()
    time.sleep(5)
    assert controller.work_done() == [], "the work ran before the Machine's deletion started"
    mark_for_deletion(kube, flavour, namespace, machine)
    runner.join(180)
    ok(result["process"])

    assert controller.work_done() == [f"{machine} deleting=True drained=False"]
    assert controller.report["served"] == [f"{namespace}/{machine}"]
    assert hooks_of(kube, flavour, namespace, machine, "preDrain") == {}
    succeeded = condition_of(kube, flavour, namespace, machine, "PreDrainMigrateAppSucceeded")
    assert (succeeded["status"], succeeded["reason"]) == ("True", "HookSucceeded")
    assert len(events_of(kube, namespace, machine, "HookSucceeded")) == 1
    assert kube.get(machine_path(flavour, namespace, machine))["metadata"]["deletionTimestamp"]
    # Someone else's hook on another Machine is untouched.
    assert hooks_of(kube, flavour, namespace, bystander, "preDrain") == {"etcd-quorum": "etcd-guard"}

    again = ok(controller.run(hook_controller_machine=machine))
    assert controller.work_done() == [f"{machine} deleting=True drained=False"], "the work ran twice"
    assert controller.report["skipped"] == [{"machine": f"{namespace}/{machine}", "reason": "being deleted without the hook"}]
    assert changed_count(again) == 0


def test_pre_terminate_controller_waits_for_the_drain(*, flavour, namespace, make_machine, run_playbook, kube, tmp_path) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    controller = Controller(tmp_path, run_playbook, namespace, "preTerminate")
    ok(controller.run(hook_controller_machine=machine, hook_controller_install_only=True, hook_controller_tasks_file=""))
    mark_for_deletion(kube, flavour, namespace, machine)

    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(process=controller.run(hook_controller_machine=machine)))
    runner.start()
    time.sleep(6)
    # Deleting but not drained: the preTerminate gate is not reached.
    assert controller.work_done() == [], "the work ran before the drain finished"
    assert hooks_of(kube, flavour, namespace, machine, "preTerminate") == {"flush-logs": OWNER}
    record_drained(kube, flavour, namespace, machine)
    runner.join(180)
    ok(result["process"])

    assert controller.work_done() == [f"{machine} deleting=True drained=True"]
    assert hooks_of(kube, flavour, namespace, machine, "preTerminate") == {}
    assert condition_of(kube, flavour, namespace, machine, "PreTerminateFlushLogsSucceeded")["status"] == "True"

    ok(controller.run(hook_controller_machine=machine))
    assert len(controller.work_done()) == 1, "the work ran twice"


def test_failing_work_keeps_the_hook_records_the_error_and_is_retried(*, flavour, namespace, make_machine, run_playbook, kube, tmp_path) -> None:
    failing = make_machine(namespace, labels={"pool": "logs"})["metadata"]["name"]
    healthy = make_machine(namespace, labels={"pool": "logs"})["metadata"]["name"]
    controller = Controller(tmp_path, run_playbook, namespace, "preTerminate")
    selection = {"hook_controller_label_selectors": ["pool=logs"]}
    ok(controller.run(**selection, hook_controller_install_only=True, hook_controller_tasks_file=""))
    for name in (failing, healthy):
        mark_for_deletion(kube, flavour, namespace, name)
        record_drained(kube, flavour, namespace, name)
    controller.break_work(failing)

    broken = controller.run(**selection)
    assert broken.returncode != 0
    assert f"The preTerminate hook flush-logs failed on {namespace}/{failing}" in broken.stdout
    report = controller.report
    assert [f["machine"] for f in report["failed"]] == [f"{namespace}/{failing}"]
    assert report["failed"][0]["recorded"] is True
    # One failure does not stop the others.
    assert report["served"] == [f"{namespace}/{healthy}"]
    assert controller.work_done() == [f"{healthy} deleting=True drained=True"]

    # The failing Machine is still at its gate, holding the hook, with the error on it.
    current = kube.get(machine_path(flavour, namespace, failing))
    assert current["metadata"]["deletionTimestamp"]
    assert hooks_of(kube, flavour, namespace, failing, "preTerminate") == {"flush-logs": OWNER}
    condition = condition_of(kube, flavour, namespace, failing, "PreTerminateFlushLogsSucceeded")
    assert (condition["status"], condition["reason"]) == ("False", "HookFailed")
    assert condition["message"] == "Check that the log shipper is reachable: log shipper unreachable"
    (event,) = events_of(kube, namespace, failing, "HookFailed")
    assert (event["type"], event["message"]) == ("Warning", condition["message"])
    assert event["involvedObject"]["uid"] == current["metadata"]["uid"]

    # Fixed: the next run retries and succeeds.
    controller.fix_work(failing)
    ok(controller.run(**selection))
    assert controller.report["served"] == [f"{namespace}/{failing}"]
    assert sorted(controller.work_done()) == sorted([f"{healthy} deleting=True drained=True", f"{failing} deleting=True drained=True"])
    assert hooks_of(kube, flavour, namespace, failing, "preTerminate") == {}
    condition = condition_of(kube, flavour, namespace, failing, "PreTerminateFlushLogsSucceeded")
    assert (condition["status"], condition["reason"]) == ("True", "HookSucceeded")
    assert len(events_of(kube, namespace, failing, "HookSucceeded")) == 1


def test_work_recorded_as_done_is_not_done_again(*, flavour, namespace, make_machine, run_playbook, kube, tmp_path, run_module) -> None:
    """A run that recorded success but stopped before removing the hook: the
    next run only removes the hook."""
    machine = make_machine(namespace, hooks={"preDrain": [("migrate-app", OWNER)]})["metadata"]["name"]
    mark_for_deletion(kube, flavour, namespace, machine)
    recorded = run_module(
        "machine_condition",
        {"machine": machine, "namespace": namespace, "hook": {"point": "preDrain", "name": "migrate-app"}, "status": "True", "reason": "HookSucceeded"},
    )
    assert recorded["condition_type"] == "PreDrainMigrateAppSucceeded"
    controller = Controller(tmp_path, run_playbook, namespace, "preDrain", name="migrate-app")
    ok(controller.run(hook_controller_machine=machine))
    assert controller.work_done() == []
    assert controller.report["served"] == [f"{namespace}/{machine}"]
    assert hooks_of(kube, flavour, namespace, machine, "preDrain") == {}


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_machine_gone_while_waiting_is_skipped(*, flavour, namespace, make_machine, run_playbook, kube, tmp_path) -> None:
    machine = make_machine(namespace, hooks={"preTerminate": [("flush-logs", OWNER)]})["metadata"]["name"]
    mark_for_deletion(kube, flavour, namespace, machine)
    controller = Controller(tmp_path, run_playbook, namespace, "preTerminate")
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(process=controller.run(hook_controller_machine=machine)))
    runner.start()
    time.sleep(5)
    kube.patch(machine_path(flavour, namespace, machine), {"metadata": {"finalizers": None}})
    wait_for(lambda: kube.get(machine_path(flavour, namespace, machine)) is None, timeout=30, what="the Machine to go")
    runner.join(180)
    ok(result["process"])
    assert controller.report["skipped"] == [{"machine": f"{namespace}/{machine}", "reason": "gone"}]
    assert controller.work_done() == []


def test_an_event_is_served_at_once_and_a_failed_work_keeps_the_hook(*, flavour, namespace, make_machine, run_playbook, run_module, kube, tmp_path) -> None:
    """The event entry point, as the serve_gate playbook of a rulebook runs it
    (``tasks_from: serve_event``) and as the main entry point given
    ``hook_controller_event``: the event is the read, the work runs at once; a
    failure keeps the hook and records it, the next event serves the Machine, and
    an event of a Machine whose hook is gone runs nothing."""
    machine = make_machine(namespace, hooks={"preTerminate": [("flush-logs", OWNER)]})["metadata"]["name"]
    mark_for_deletion(kube, flavour, namespace, machine)
    record_drained(kube, flavour, namespace, machine)
    controller = Controller(tmp_path, run_playbook, namespace, "preTerminate")

    def event() -> dict:
        (read,) = run_module("machine_info", {"machine": machine, "namespace": namespace})["machines"]
        return {"point": "preTerminate", "hook": {"name": "flush-logs", "owner": OWNER}, "gate": "drained", "reason": "watch", "machine": read}

    # From a rulebook: serve_gate.yml with the event as ansible_eda, the work failing.
    serve_gate = Path(__file__).resolve().parents[2] / "playbooks" / "serve_gate.yml"
    gate_vars = {"serve_gate_tasks_file": str(tmp_path / "tasks.yml"), "work_log": str(controller.work_log), "broken_dir": str(controller.broken)}
    controller.break_work(machine)
    failed = run_playbook(serve_gate, {**gate_vars, "ansible_eda": {"event": {"machine_gate": event()}}})
    assert failed.returncode != 0
    assert f"The preTerminate hook flush-logs failed on {namespace}/{machine}" in failed.stdout
    assert hooks_of(kube, flavour, namespace, machine, "preTerminate") == {"flush-logs": OWNER}
    condition = condition_of(kube, flavour, namespace, machine, "PreTerminateFlushLogsSucceeded")
    assert (condition["status"], condition["reason"]) == ("False", "HookFailed")
    assert condition["message"] == "Check that the log shipper is reachable: log shipper unreachable"
    assert [e["type"] for e in events_of(kube, namespace, machine, "HookFailed")] == ["Warning"]

    # The main entry point given the next event of the same gate: served.
    controller.fix_work(machine)
    ok(controller.run(hook_controller_event=event()))
    assert controller.report == {
        "condition_type": "PreTerminateFlushLogsSucceeded",
        "hooked": [],
        "served": [f"{namespace}/{machine}"],
        "failed": [],
        "pending": [],
        "skipped": [],
    }
    assert controller.work_done() == [f"{machine} deleting=True drained=True"]
    assert hooks_of(kube, flavour, namespace, machine, "preTerminate") == {}
    assert condition_of(kube, flavour, namespace, machine, "PreTerminateFlushLogsSucceeded")["status"] == "True"

    # An event of the Machine as it is now (no hook): nothing runs, nothing changes.
    version = kube.get(machine_path(flavour, namespace, machine))["metadata"]["resourceVersion"]
    again = ok(controller.run(hook_controller_event=event()))
    assert controller.report["skipped"] == [{"machine": f"{namespace}/{machine}", "reason": "being deleted without the hook"}]
    assert controller.report["served"] == []
    assert controller.work_done() == [f"{machine} deleting=True drained=True"]
    assert changed_count(again) == 0
    assert kube.get(machine_path(flavour, namespace, machine))["metadata"]["resourceVersion"] == version

    # Without an event, the playbook refuses before anything is read.
    refused = run_playbook(serve_gate, gate_vars)
    assert refused.returncode != 0
    assert "ansible_eda.event.machine_gate is missing" in refused.stdout


def test_bad_inputs_fail_before_touching_machines(*, flavour, namespace, make_machine, run_playbook, kube, tmp_path) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    version = kube.get(machine_path(flavour, namespace, machine))["metadata"]["resourceVersion"]
    controller = Controller(tmp_path, run_playbook, namespace, "preDrain")
    missing = controller.run(hook_controller_machine=machine, hook_controller_tasks_file="relative/tasks.yml")
    assert missing.returncode != 0
    assert "hook_controller_tasks_file must be the absolute path of an existing task file" in missing.stdout
    deadlock = controller.run(hook_controller_machine=machine, hook_controller_wait_for="drained")
    assert deadlock.returncode != 0
    assert "A preDrain hook cannot wait for the drain" in deadlock.stdout
    both = controller.run(hook_controller_machine=machine, hook_controller_label_selectors=["a=b"])
    assert both.returncode != 0
    assert "Set exactly one of hook_controller_machine and hook_controller_label_selectors" in both.stdout
    assert kube.get(machine_path(flavour, namespace, machine))["metadata"]["resourceVersion"] == version


DOCS_EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def test_docs_example_playbooks_run_as_written(*, flavour, namespace, make_machine, run_playbook, kube) -> None:
    """docs/hooks.md's install and serve playbooks, run as shipped (only their vars overridden)."""
    workers = sorted(make_machine(namespace, labels={"pool": "workers"})["metadata"]["name"] for _member in range(2))
    common = {"machine_namespace": namespace}

    installed = ok(run_playbook(DOCS_EXAMPLES / "hook_install.yml", common))
    assert changed_count(installed) == 1
    for name in workers:
        assert hooks_of(kube, flavour, namespace, name, "preTerminate") == {"flush-logs": "log-shipper"}
    assert changed_count(ok(run_playbook(DOCS_EXAMPLES / "hook_install.yml", common))) == 0

    machine = workers[0]
    mark_for_deletion(kube, flavour, namespace, machine)
    result: dict = {}
    serve = {**common, "machine_name": machine}
    runner = threading.Thread(target=lambda: result.update(process=run_playbook(DOCS_EXAMPLES / "hook_serve.yml", serve)))
    runner.start()
    time.sleep(5)
    assert kube.get(f"/api/v1/namespaces/{namespace}/configmaps/logs-flushed-{machine}") is None, "the work ran before the drain finished"
    record_drained(kube, flavour, namespace, machine)
    runner.join(180)
    ok(result["process"])

    assert kube.get(f"/api/v1/namespaces/{namespace}/configmaps/logs-flushed-{machine}") is not None
    assert hooks_of(kube, flavour, namespace, machine, "preTerminate") == {}
    assert condition_of(kube, flavour, namespace, machine, "PreTerminateFlushLogsSucceeded")["status"] == "True"
    assert hooks_of(kube, flavour, namespace, workers[1], "preTerminate") == {"flush-logs": "log-shipper"}

    again = ok(run_playbook(DOCS_EXAMPLES / "hook_serve.yml", serve))
    assert changed_count(again) == 0


TWO_CONTROLLERS = """\
- name: Run two hook controllers in one play
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Serve the preDrain hook
      ansible.builtin.include_role:
        name: lifecycle.machine.hook_controller
      vars:
        hook_controller_hook_name: migrate-app
        hook_controller_hook_owner: app-migrator
        hook_controller_point: preDrain
        hook_controller_machine: "{{ machine }}"
        hook_controller_namespace: "{{ namespace }}"
        hook_controller_tasks_file: "{{ tasks_file }}"
        hook_controller_wait_timeout: 30

    - name: Keep the first report
      ansible.builtin.set_fact:
        first_report: "{{ hook_controller_report }}"

    - name: Serve the preTerminate hook
      ansible.builtin.include_role:
        name: lifecycle.machine.hook_controller
      vars:
        hook_controller_hook_name: flush-logs
        hook_controller_hook_owner: log-shipper
        hook_controller_point: preTerminate
        hook_controller_machine: "{{ machine }}"
        hook_controller_namespace: "{{ namespace }}"
        hook_controller_tasks_file: "{{ tasks_file }}"
        hook_controller_wait_timeout: 30

    - name: Save both reports
      ansible.builtin.copy:
        content: "{{ [first_report, hook_controller_report] | to_json }}"
        dest: "{{ report_path }}"
        mode: "0644"
      changed_when: false
"""


def test_two_controllers_in_one_play_do_not_mix_their_state(*, flavour, namespace, make_machine, run_playbook, kube, tmp_path) -> None:
    hooks = {"preDrain": [("migrate-app", "app-migrator")], "preTerminate": [("flush-logs", "log-shipper")]}
    machine = make_machine(namespace, hooks=hooks)["metadata"]["name"]
    mark_for_deletion(kube, flavour, namespace, machine)
    record_drained(kube, flavour, namespace, machine)
    (tmp_path / "tasks.yml").write_text(TASKS)
    (tmp_path / "broken").mkdir()
    (tmp_path / "two.yml").write_text(TWO_CONTROLLERS)
    variables = {
        "machine": machine,
        "namespace": namespace,
        "tasks_file": str(tmp_path / "tasks.yml"),
        "report_path": str(tmp_path / "report.json"),
        "work_log": str(tmp_path / "work.log"),
        "broken_dir": str(tmp_path / "broken"),
    }
    ok(run_playbook(tmp_path / "two.yml", variables))
    first, second = json.loads((tmp_path / "report.json").read_text())
    label = f"{namespace}/{machine}"
    assert (first["condition_type"], first["served"]) == ("PreDrainMigrateAppSucceeded", [label])
    assert (second["condition_type"], second["served"], second["skipped"]) == ("PreTerminateFlushLogsSucceeded", [label], [])
    assert len((tmp_path / "work.log").read_text().splitlines()) == 2
    assert hooks_of(kube, flavour, namespace, machine, "preDrain") == {}
    assert hooks_of(kube, flavour, namespace, machine, "preTerminate") == {}
