"""The collection's AWX recipes on a real AWX (hack/awx.py): the job templates, surveys and
credential configure_awx.yml creates, run by AWX through receptor and ansible-runner in the
collection's execution environment (podman), against this session's control plane with a token
of the shipped ServiceAccount. What the jobs did is read from the API server's audit log; what
AWX recorded (status, events, artifacts, output) from AWX's REST API.

Marked ``awx``: ``make awx-integration`` runs them (serially: one AWX for the session)."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
import yaml
from awxserver import audit_sa_refusals, secrets_in
from conftest import REPO
from khelpers import wait_for
from rbachelpers import SA_NAMESPACE, SA_USER, apply, service_account_token
from test_cancel import evictions_after
from test_delete_machine import PROVIDER_TASKS, assert_all_gone

pytestmark = pytest.mark.awx

TEMPLATE = "lifecycle.machine - delete machine"


def grant_simulated_provider(kube, namespace: str) -> None:
    """The test's OpenShift provider tasks "terminate the instance" by deleting a ConfigMap:
    the simulated cloud's permission, not the collection's, so a Role of its own."""
    rbac = "rbac.authorization.k8s.io"
    apply(
        kube,
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "Role",
            "metadata": {"name": "simulated-cloud", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "delete"]}],
        },
    )
    apply(
        kube,
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "simulated-cloud", "namespace": namespace},
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "simulated-cloud"},
            "subjects": [{"kind": "ServiceAccount", "name": "lifecycle-machine-awx", "namespace": "lifecycle-machine"}],
        },
    )


def survey_answers(v, **more) -> dict:
    answers = {"machine_name": v.name, "machine_namespace": v.namespace, "drain_timeout": 300, "terminate_timeout": 300, "progress_interval": 2, **more}
    if v.flavour == "openshift":
        # The simulated cloud's task file, in the project (the repository's hack/demo), given
        # relative to the playbook's directory as a user would.
        answers["provider_tasks"] = f"../{PROVIDER_TASKS.relative_to(REPO)}"
    return answers


def release_at_gates(v, point_hooks: dict[str, str], delay: float = 1.0) -> threading.Thread:
    """A hook-implementing controller of the test's: removes each hook once the Machine is being
    deleted, the preDrain one first, ``delay`` seconds apart."""

    def serve() -> None:
        wait_for(lambda: (v.kube.get(v.path) or {}).get("metadata", {}).get("deletionTimestamp"), 300, what="the Machine to be deleted")
        for point, name in point_hooks.items():
            time.sleep(delay)
            v.remove_hook(point, name)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("flavour", ["openshift", "v1beta2"], indirect=True)
def test_delete_machine_job_template_through_its_gates(*, flavour, kube, victim, awx, awx_configured, audit_events) -> None:
    """The survey's answers, the credential's K8S_AUTH_* variables and the EE's collection delete
    a Machine through its preDrain and preTerminate gates; the job's artifacts carry its metrics;
    at verbosity 4 no event and no line of output holds the credential's token."""
    v = victim(hooks={"preDrain": [("backup", "backup-ctl")], "preTerminate": [("flush-logs", "log-ctl")]})
    if flavour == "openshift":
        grant_simulated_provider(kube, v.namespace)
    template = awx.named("job_templates", TEMPLATE)
    awx.request("PATCH", f"job_templates/{template['id']}/", {"verbosity": 4})
    try:
        controller = release_at_gates(v, {"preDrain": "backup", "preTerminate": "flush-logs"})
        job = awx.run(TEMPLATE, survey_answers(v), timeout=600)
        controller.join(timeout=5)
    finally:
        awx.request("PATCH", f"job_templates/{template['id']}/", {"verbosity": 0})

    assert_all_gone(kube, v)
    stdout = awx.stdout(job["id"])
    assert "Drain not completed yet" in stdout or "evict" in stdout.lower(), stdout[-3000:]
    metrics = job["artifacts"]["lifecycle_machine_metrics"]
    assert metrics, job["artifacts"]
    # The EE as AWX ran it: the project in /runner/project, the EE's Python 3.11 and its
    # ansible-core, the credential as K8S_AUTH_* with the CA in a file of the job's private
    # data dir and the token hidden from the job's recorded environment.
    assert "/runner/project/playbooks/delete_machine.yml" in stdout
    assert "python version = 3.11" in stdout
    env = job["job_env"]
    assert env["K8S_AUTH_HOST"] == awx_configured["host"]
    assert env["K8S_AUTH_VERIFY_SSL"] == "True"
    assert env["K8S_AUTH_SSL_CA_CERT"].startswith("/runner/env/")
    assert env["K8S_AUTH_API_KEY"] != awx_configured["token"]
    events = awx.events(job["id"])
    assert len(events) > 10
    leaked = secrets_in(stdout + "\n".join(str(e) for e in events), awx_configured["token"])
    assert leaked == [], "the credential's token reached the job's output or events"
    assert audit_sa_refusals(audit_events) == [], "the shipped RBAC refused a request of the job"
    node_side = SA_USER if flavour == "openshift" else "admin"
    evictions = [e for e in audit_events(namespace=v.namespace, subresource="eviction") if (e.get("responseStatus") or {}).get("code") in (200, 201)]
    assert {e["user"]["username"] for e in evictions} == {node_side}


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_cancel_in_awx_stops_the_deletion_and_a_relaunch_finishes_it(*, flavour, kube, victim, awx, audit_events) -> None:
    """Cancel in AWX (through receptor and ansible-runner) stops the drain within 10 s; the
    relaunch finishes the deletion and no Pod is evicted twice."""
    v = victim()
    pool = kube.get(f"/api/v1/nodes/{v.node}")["metadata"]["labels"]["lm-pool"]
    spares = [n["metadata"]["name"] for n in kube.list("/api/v1/nodes", label_selector=f"lm-pool={pool}") if n["metadata"]["name"] != v.node]
    for node in spares:  # the replacements stay Pending: the budget holds the second eviction
        kube.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})
    job_id = awx.launch(TEMPLATE, survey_answers(v))["job"]

    def held() -> bool:
        on_node = [p for p in v.web_pods() if p["spec"].get("nodeName") == v.node and not p["metadata"].get("deletionTimestamp")]
        return len(on_node) == 1

    wait_for(held, 300, what="the job's drain to evict one Pod and be held by the budget")
    time.sleep(2)
    asked = time.monotonic()
    awx.post(f"jobs/{job_id}/cancel/", expect=(202,))
    job = awx.wait(job_id, timeout=60, events=False)
    stopped_after = time.monotonic() - asked
    stopped_at = dt.datetime.now(dt.UTC)
    assert job["status"] == "canceled", job
    assert stopped_after < 10, f"the job took {stopped_after:.1f} s to stop"

    for node in spares:  # every chance for a leftover drain to evict
        kube.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": None}})
    time.sleep(8)
    assert evictions_after(audit_events, v.namespace, stopped_at) == []

    awx.run(TEMPLATE, survey_answers(v), timeout=600)
    assert_all_gone(kube, v)
    evictions = audit_events(namespace=v.namespace, resource="pods", subresource="eviction", verb="create")
    evicted = [e["objectRef"]["name"] for e in evictions if (e.get("responseStatus") or {}).get("code") == 201]
    assert len(evicted) == len(set(evicted)) == 2, f"a Pod was evicted twice: {evicted}"


# -- the Machines inventory source and job slicing ---------------------------------------


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_inventory_source_lists_the_machines_and_a_job_sliced_in_two_deletes_the_group(
    *, flavour, kube, namespace, make_node, make_machine, capi_cluster, awx, audit_events
) -> None:
    """The Machines inventory's source (the machines plugin, updated in the EE with the
    credential's K8S_AUTH_* variables) lists the Machines; "delete machines" sliced in 2 splits
    a group of 4 into two jobs of 2, which delete all 4."""
    capi_cluster(namespace)
    pool = f"slice-{namespace[-6:]}"
    names = []
    for _index in range(4):
        machine = make_machine(namespace, node=make_node(), labels={"cluster.x-k8s.io/set-name": pool})
        names.append(machine["metadata"]["name"])
    inventory = awx.named("inventories", "lifecycle.machine Machines")
    source = awx.named("inventory_sources", "lifecycle.machine Machines")
    update = awx.post(f"inventory_sources/{source['id']}/update/", expect=(202,))
    finished = awx.wait(update["inventory_update"], kind="inventory_updates", events=False, timeout=300)
    assert finished["status"] == "successful", awx.stdout(update["inventory_update"], "inventory_updates")[-4000:]
    hosts = {h["name"] for h in awx.all(f"inventories/{inventory['id']}/hosts/")}
    assert {f"{namespace}.{name}" for name in names} <= hosts
    group = f"lm_machineset_{pool.replace('-', '_')}"
    members = {h["name"] for g in awx.all(f"inventories/{inventory['id']}/groups/?name={group}") for h in awx.all(f"groups/{g['id']}/all_hosts/")}
    assert members == {f"{namespace}.{name}" for name in names}

    template = awx.named("job_templates", "lifecycle.machine - delete machines")
    awx.request("PATCH", f"job_templates/{template['id']}/", {"job_slice_count": 2})
    try:
        launched = awx.launch("lifecycle.machine - delete machines", {"machine_group": group, "drain_timeout": 300, "terminate_timeout": 300})
        workflow = awx.wait(launched["id"], kind="workflow_jobs", events=False, timeout=900)
    finally:
        awx.request("PATCH", f"job_templates/{template['id']}/", {"job_slice_count": 1})
    slices = [n["summary_fields"]["job"] for n in awx.all(f"workflow_jobs/{workflow['id']}/workflow_nodes/") if n["summary_fields"].get("job")]
    assert len(slices) == 2
    outputs = {s["id"]: awx.stdout(s["id"]) for s in slices}
    assert workflow["status"] == "successful", outputs
    for name in names:
        assert kube.get(f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines/{name}") is None
    per_slice = [sorted(name for name in names if f"{namespace}.{name}" in text and "ok=" in text) for text in outputs.values()]
    assert all(len(handled) == 2 for handled in per_slice), per_slice


# -- surveys as AWX validates them -------------------------------------------------------


def test_awx_refuses_survey_answers_out_of_bounds_and_passes_empty_ones_as_not_set(awx) -> None:
    """AWX itself refuses an answer out of the question's bounds or choices (HTTP 400 at launch,
    no job); a check-mode launch with the form as it opens reaches the playbook with the empty
    answers as not set, and the playbook refuses a name without a namespace before touching anything."""
    for bad in ({"concurrency": 0}, {"concurrency": 101}, {"machine_controller": "sometimes"}, {"drain_timeout": "soon"}):
        answer = awx.launch(TEMPLATE, {"machine_name": "m", "machine_namespace": "ns", **bad}, expect=(400,))
        assert answer, bad
    job = awx.wait(awx.launch(TEMPLATE, {"machine_name": "nothing-here"}, job_type="check")["job"])
    assert job["status"] == "failed"
    assert job["job_type"] == "check"
    assert "delete_machine_namespace" in awx.stdout(job["id"]) or "namespace" in awx.stdout(job["id"])


# -- the rulebook's run_job_template against AWX's API ----------------------------------


def grant_work(kube, namespace: str) -> None:
    """The hook's work in the test records itself as a ConfigMap: the work's own permission,
    not the collection's, so a Role of its own for the jobs' ServiceAccount."""
    rbac = "rbac.authorization.k8s.io"
    apply(
        kube,
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "Role",
            "metadata": {"name": "hook-work", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}],
        },
    )
    apply(
        kube,
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "hook-work", "namespace": namespace},
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "hook-work"},
            "subjects": [{"kind": "ServiceAccount", "name": "lifecycle-machine-awx", "namespace": "lifecycle-machine"}],
        },
    )


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_serve_gates_awx_rulebook_launches_the_serve_gate_job_template(
    *, flavour, kube, kubeconfig, namespace, make_node, make_machine, capi_cluster, awx, awx_configured, tmp_path
) -> None:
    """serve_gates_awx.yml: each Machine reaching the gate of the chosen hook launches the job
    template "serve gate" through AWX's API (a token of AWX's, as the EDA controller's credential
    would give it); the job does the work, records the condition and removes the hook."""
    from conftest import ansible_env  # noqa: PLC0415
    from rulebook import Rulebook  # noqa: PLC0415

    grant_work(kube, namespace)
    capi_cluster(namespace)
    owner = f"awx-eda-{namespace[-5:]}"
    machine = make_machine(namespace, node=make_node(), hooks={"preDrain": [("awx-backup", owner)]})
    path = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines/{machine['metadata']['name']}"
    token = awx.post("users/1/personal_tokens/", {"description": "EDA rulebook of the AWX tests", "scope": "write"}, expect=(201,))["token"]
    variables = {
        "hook_owner": owner,
        "hook_name": "awx-backup",
        "hook_points": ["preDrain"],
        "machine_namespace": namespace,
        # A path in the project, relative to playbooks/ as the job runs serve_gate.yml there.
        "hook_tasks_file": "../tests/integration/files/tasks/record_gate.yml",
        "awx_organization": "Default",
    }
    env = {**ansible_env(kubeconfig), "EDA_CONTROLLER_URL": awx.url, "EDA_CONTROLLER_TOKEN": token, "EDA_CONTROLLER_SSL_VERIFY": "no"}
    served = Rulebook("lifecycle.machine.serve_gates_awx", variables, env, tmp_path / "rulebook").start()
    try:
        kube.delete(path)

        def hook_gone() -> bool:
            annotations = (kube.get(path) or {}).get("metadata", {}).get("annotations") or {}
            return not any(key.endswith("/awx-backup") for key in annotations)

        wait_for(hook_gone, 300, what="the serve gate job to remove the hook")
    finally:
        code = served.stop()
    output = served.output()
    jobs = awx.all("jobs/?name=lifecycle.machine - serve gate&order_by=-id")
    assert jobs, output[-3000:]
    job = awx.wait(jobs[0]["id"], timeout=120)  # it removes the hook last, then ends
    assert job["status"] == "successful", awx.stdout(job["id"])[-3000:]
    assert job["extra_vars"] and "ansible_eda" in job["extra_vars"]
    assert kube.list(f"/api/v1/namespaces/{namespace}/configmaps", label_selector="lm-work-hook=awx-backup"), "the work never ran"
    assert secrets_in(output, token) == []
    assert code is not None, "ansible-rulebook had to be killed"


# -- the workflow: preflight, approval, deletion -----------------------------------------

WORKFLOW = "lifecycle.machine - delete machine, preflight first"


def cancel_unless_final(awx, workflow_id: int) -> None:
    """A workflow left at its approval would hold the next one of the template: cancel it."""
    if awx.get(f"workflow_jobs/{workflow_id}/")["status"] not in ("successful", "failed", "error", "canceled"):
        awx.post(f"workflow_jobs/{workflow_id}/cancel/", expect=(202,))


def workflow_nodes(awx, workflow_id: int) -> dict[str, dict]:
    nodes = awx.all(f"workflow_jobs/{workflow_id}/workflow_nodes/")
    return {n["identifier"]: n for n in nodes}


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_preflight_workflow_deletes_only_after_the_preflight_and_the_approval(*, flavour, kube, victim, awx) -> None:
    """The check-mode job runs first and changes nothing; once it says every Machine can finish
    and someone approves, the same answers delete the Machine."""
    v = victim()
    launched = awx.post(f"workflow_job_templates/{awx.named('workflow_job_templates', WORKFLOW)['id']}/launch/", {"extra_vars": survey_answers(v)})
    workflow_id = launched["workflow_job"]

    def approval_pending() -> dict | None:
        found = awx.all(f"workflow_approvals/?workflow_approval_template__workflowjobtemplatenodes__workflow_job_template__name={WORKFLOW}&status=pending")
        mine = [a for a in found if a["summary_fields"].get("source_workflow_job", {}).get("id") == workflow_id]
        return mine[0] if mine else None

    try:
        approval = wait_for(approval_pending, 300, what="the workflow to reach its approval")
        nodes = workflow_nodes(awx, workflow_id)
        preflight = awx.get(f"jobs/{nodes['preflight']['summary_fields']['job']['id']}/")
        assert preflight["job_type"] == "check" and preflight["status"] == "successful"
        verdicts = preflight["artifacts"]["lifecycle_machine_preflight"]
        # It finishes, at once or once the budget allows again (the replacement Pod Ready).
        assert f"{v.namespace}/{v.name}" in [*verdicts["would_finish"], *verdicts["would_wait"]], verdicts
        assert not verdicts["can_never_finish"], verdicts
        assert not (kube.get(v.path) or {}).get("metadata", {}).get("deletionTimestamp"), "the preflight changed the Machine"

        awx.post(f"workflow_approvals/{approval['id']}/approve/", expect=(204,))
        workflow = awx.wait(workflow_id, kind="workflow_jobs", events=False, timeout=600)
    finally:
        cancel_unless_final(awx, workflow_id)
    assert workflow["status"] == "successful"
    assert_all_gone(kube, v)


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_preflight_workflow_stops_when_a_machine_can_never_finish(*, flavour, kube, victim, awx) -> None:
    """A budget that can never allow an eviction: the preflight job fails (on_stall fail in check
    mode), the workflow never reaches the approval or the deletion, nothing is changed."""
    v = victim()
    budgets = f"/apis/policy/v1/namespaces/{v.namespace}/poddisruptionbudgets"
    kube.patch(f"{budgets}/web", {"spec": {"minAvailable": None, "maxUnavailable": 0}})
    wait_for(lambda: (kube.get(f"{budgets}/web").get("status") or {}).get("observedGeneration") == kube.get(f"{budgets}/web")["metadata"]["generation"], 60)
    launched = awx.post(f"workflow_job_templates/{awx.named('workflow_job_templates', WORKFLOW)['id']}/launch/", {"extra_vars": survey_answers(v)})
    try:
        workflow = awx.wait(launched["workflow_job"], kind="workflow_jobs", events=False, timeout=600)
    finally:
        cancel_unless_final(awx, launched["workflow_job"])
    nodes = workflow_nodes(awx, workflow["id"])
    preflight = nodes["preflight"]["summary_fields"]["job"]
    assert preflight["status"] == "failed", awx.stdout(preflight["id"])[-3000:]
    assert "can never finish" in awx.stdout(preflight["id"])
    assert not nodes["approve"]["summary_fields"].get("job")
    assert not nodes["delete"]["summary_fields"].get("job")
    assert not kube.get(v.path)["metadata"].get("deletionTimestamp")


# -- configuration as code, and the workload kubeconfig credential -----------------------


@pytest.mark.awx_extended
def test_configure_awx_is_idempotent(awx_configured) -> None:
    """configure_awx.yml run again with the same variables changes nothing but two things awx.awx
    always reports: the credential's token (AWX never shows a secret back, so it is written again,
    update_secrets) and a workflow with an approval node (the module compares the node's fields
    with the approval template's, which never match); the objects themselves stay as they were."""
    import re  # noqa: PLC0415

    from awxserver import run_configure  # noqa: PLC0415

    again = run_configure(awx_configured["admin"], awx_configured["extra_vars"])
    changed = re.findall(r"TASK \[([^\]]+)\] \**\nchanged:", again.stdout)
    assert changed == [
        "Create the Kubernetes credential (injected as K8S_AUTH_* environment variables)",
        "Create the workflow that runs the preflight first, then the deletion once approved",
    ], again.stdout[-4000:]
    assert secrets_in(again.stdout + again.stderr, awx_configured["token"]) == []


@pytest.mark.awx_extended
@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_workload_kubeconfig_credential_reaches_the_job_as_a_file(*, flavour, kube, victim, awx, awx_configured, self_hosted_kubeconfig, audit_events) -> None:
    """The custom credential type's injectors as AWX renders them: its kubeconfig becomes a file in
    the job's private data dir, named by the extra variable workload_kubeconfig_credential, which
    the playbook uses when the survey's workload_kubeconfig is left empty; no Secret is read."""
    from awxserver import run_configure  # noqa: PLC0415

    kubeconfig_text = self_hosted_kubeconfig
    run_configure(awx_configured["admin"], {**awx_configured["extra_vars"], "lifecycle_awx_workload_kubeconfig": kubeconfig_text})
    try:
        v = victim()
        job = awx.run(TEMPLATE, survey_answers(v, workload_cluster_source="kubeconfig"), timeout=600)
    finally:
        run_configure(awx_configured["admin"], awx_configured["extra_vars"])
    assert_all_gone(kube, v)
    secret_reads = [e for e in audit_events(namespace=v.namespace, resource="secrets", verb="get") if e["user"]["username"] == SA_USER]
    assert secret_reads == [], "the job read the kubeconfig Secret instead of the credential's file"
    text = awx.stdout(job["id"]) + "\n".join(str(e) for e in awx.events(job["id"]))
    token = next(iter(yaml.safe_load(kubeconfig_text)["users"]))["user"].get("token", "")
    assert secrets_in(text, token) == []


# -- drain node and teardown cluster ----------------------------------------------------


@pytest.mark.awx_extended
def test_drain_node_job_template(kube, namespace, make_node, awx) -> None:
    """drain_node.yml: the survey's Node is cordoned and drained by the job, its progress in the output."""
    from khelpers import deployment  # noqa: PLC0415

    node = make_node(labels={"lm-drain": namespace})
    kube.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("web", 1, {"lm-drain": namespace}, 2))
    pods = f"/api/v1/namespaces/{namespace}/pods"
    first = wait_for(lambda: [p for p in kube.list(pods) if p.get("status", {}).get("phase") == "Running"], 60, what="the web Pod")[0]
    job = awx.run("lifecycle.machine - drain node", {"node": node, "drain_timeout": 120, "progress_interval": 1})
    assert kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable") is True
    assert all(p["metadata"]["uid"] != first["metadata"]["uid"] for p in kube.list(pods)), "the Pod was not evicted"
    assert job["status"] == "successful"


@pytest.mark.awx_extended
def test_teardown_cluster_job_template_names_the_holder_when_it_proceeds(kube, namespace, awx) -> None:
    from test_cluster_alive import alive_path, create_alive  # noqa: PLC0415

    holder = "buckets.storage.example.com/cleanup"
    create_alive(kube, namespace, holder)
    try:
        job = awx.run("lifecycle.machine - teardown cluster", {"alive_namespace": namespace, "wait_timeout": 3, "on_timeout": "proceed"})
        text = awx.stdout(job["id"])
        assert "TEARDOWN PROCEEDS WITHOUT CLEANUP CONFIRMATION" in text
        assert holder in text
    finally:
        if kube.get(alive_path(namespace)) is not None:
            kube.patch(alive_path(namespace), {"metadata": {"finalizers": None}})
            kube.delete(alive_path(namespace))


# -- the execution environment as AWX runs it, and an identity without the shipped roles -----


@pytest.mark.awx_extended
def test_a_token_without_the_shipped_roles_is_refused_and_changes_nothing(kube, namespace, awx, awx_configured) -> None:
    """The RBAC is real: the same job with a token of a ServiceAccount the roles are not bound to
    fails, naming the identity and what it may not do, and changes nothing."""
    from test_cluster_alive import alive_path, create_alive  # noqa: PLC0415

    apply(kube, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody", "namespace": SA_NAMESPACE}})
    credential = awx.named("credentials", "lifecycle.machine Kubernetes")
    inputs = {"host": awx_configured["host"], "verify_ssl": True, "ssl_ca_cert": awx_configured["ca"]}
    holder = "buckets.storage.example.com/cleanup"
    create_alive(kube, namespace, holder)
    awx.request("PATCH", f"credentials/{credential['id']}/", {"inputs": {**inputs, "bearer_token": service_account_token(kube, "nobody", seconds=7200)}})
    try:
        job = awx.wait(awx.launch("lifecycle.machine - teardown cluster", {"alive_namespace": namespace, "wait_timeout": 10, "on_timeout": "proceed"})["job"])
    finally:
        awx.request("PATCH", f"credentials/{credential['id']}/", {"inputs": {**inputs, "bearer_token": awx_configured["token"]}})
        left = kube.get(alive_path(namespace))
        kube.patch(alive_path(namespace), {"metadata": {"finalizers": None}})
        kube.delete(alive_path(namespace))
    text = awx.stdout(job["id"])
    assert job["status"] == "failed", text
    assert "forbidden" in text.lower()
    assert f"system:serviceaccount:{SA_NAMESPACE}:nobody" in text
    assert not left["metadata"].get("deletionTimestamp")


@pytest.mark.awx_extended
def test_without_ca_data_awx_turns_verification_off(kube, namespace, awx, awx_configured) -> None:
    """The bearer token credential without "Certificate Authority data": AWX injects
    K8S_AUTH_VERIFY_SSL=False and no CA file, even with "Verify SSL" on (what configure_awx.yml
    warns of); the job then talks to the API server unverified."""
    credential = awx.named("credentials", "lifecycle.machine Kubernetes")
    inputs = {"host": awx_configured["host"], "bearer_token": awx_configured["token"], "verify_ssl": True}
    awx.request("PATCH", f"credentials/{credential['id']}/", {"inputs": inputs})
    try:
        job = awx.wait(awx.launch("lifecycle.machine - teardown cluster", {"alive_namespace": namespace, "wait_timeout": 3})["job"])
    finally:
        awx.request("PATCH", f"credentials/{credential['id']}/", {"inputs": {**inputs, "ssl_ca_cert": awx_configured["ca"]}})
    assert job["job_env"]["K8S_AUTH_VERIFY_SSL"] == "False"
    assert "K8S_AUTH_SSL_CA_CERT" not in job["job_env"]
