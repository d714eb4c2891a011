"""The AWX job templates (extensions/awx) run exactly the way AWX runs a job, on the real control plane.

Each job is an ansible-runner private data dir as AWX hands it to an execution environment:
``project/`` (the project checkout: the playbooks), ``inventory/hosts`` (the inventory
configure_awx.yml creates), ``env/extravars`` (AWX's launch-time merge of the survey spec's
defaults and a survey answer file, every string ``!unsafe``-tagged) and ``env/envvars`` (the
collection path the execution environment has, and the ``K8S_AUTH_*`` variables the "OpenShift or
Kubernetes API Bearer Token" credential injects). The credential is a TokenRequest token of the
ServiceAccount in extensions/awx/rbac.yml, bound to its ClusterRole, with the API server's CA: no
kubeconfig anywhere, so every request a job sends is authorised by that ClusterRole alone. The API
server's audit log shows the evictions and the Node deletion were made by that ServiceAccount.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import ansible_runner
import pytest
import yaml
from awx_job import awx_meta_vars, dump_extravars, kubernetes_bearer_token_env, launch_extra_vars, load_ansible_yaml, survey_answers, survey_spec_errors
from conftest import COLLECTIONS_ROOT, REPO
from khelpers import deployment, wait_for
from test_cluster_alive import alive_path, create_alive, release
from test_delete_machine import PROVIDER_TASKS, assert_all_gone

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError

AWX = REPO / "extensions" / "awx"
RBAC = AWX / "rbac.yml"
SA_NAMESPACE = "lifecycle-machine"
SA_NAME = "lifecycle-machine-awx"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"
HOLDER = "buckets.storage.example.com/cleanup"
# A survey textarea answer: MachineDrainRules as YAML text.
DRAIN_RULES_TEXT = "- name: web-last\n  drain:\n    behavior: Drain\n    order: 10\n  pods:\n    - selector:\n        matchLabels:\n          app: web\n"

COLLECTIONS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
}


def apply(kube: KubeApi, document: dict) -> None:
    """Create the object, or replace it with this definition when it exists."""
    collection = COLLECTIONS[document["kind"]].format(namespace=document["metadata"].get("namespace", ""))
    try:
        kube.create(collection, document)
    except ApiError as exc:
        if exc.status != 409:
            raise
        if document["kind"] not in ("Namespace", "ServiceAccount"):
            kube.replace(f"{collection}/{document['metadata']['name']}", document)


def grant_user(kube: KubeApi, user: str, rules: list[dict]) -> None:
    """A ClusterRole named ``user`` with ``rules``, bound to the user ``user`` (impersonated by the tests)."""
    rbac = "rbac.authorization.k8s.io"
    apply(kube, {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": {"name": user}, "rules": rules})
    binding = {
        "apiVersion": f"{rbac}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": user},
        "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": user},
        "subjects": [{"apiGroup": rbac, "kind": "User", "name": user}],
    }
    apply(kube, binding)


def revoke_user(kube: KubeApi, user: str) -> None:
    """Undo :func:`grant_user`."""
    kube.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{user}")
    kube.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{user}")


def service_account_token(kube: KubeApi, name: str) -> str:
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    return kube.create(f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts/{name}/token", request)["status"]["token"]


def credential_inputs(kubeconfig: str, token: str) -> dict:
    """The inputs of an AWX "OpenShift or Kubernetes API Bearer Token" credential."""
    cluster = json.loads(Path(kubeconfig).read_text())["clusters"][0]["cluster"]
    ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
    return {"host": cluster["server"], "bearer_token": token, "verify_ssl": True, "ssl_ca_cert": ca}


@pytest.fixture(scope="module")
def awx_credential(kube: KubeApi, kubeconfig: str) -> dict:
    """extensions/awx/rbac.yml applied as shipped; a token of its ServiceAccount."""
    for item in yaml.safe_load(RBAC.read_text())["items"]:
        apply(kube, item)
    return credential_inputs(kubeconfig, service_account_token(kube, SA_NAME))


@pytest.fixture(scope="module")
def unbound_credential(kube: KubeApi, kubeconfig: str, awx_credential: dict) -> dict:
    """A token of a ServiceAccount the ClusterRole is not bound to."""
    apply(kube, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody", "namespace": SA_NAMESPACE}})
    return credential_inputs(kubeconfig, service_account_token(kube, "nobody"))


@pytest.fixture(autouse=True)
def no_other_credentials(monkeypatch) -> None:
    """Nothing but the job's K8S_AUTH_* variables reach the modules: no kubeconfig variable and
    no K8S_AUTH_* left over from elsewhere. (With a host and a token, kubernetes.core loads no
    kubeconfig file at all; the audit log and the unbound-token test below show whose token acted.)"""
    for name in list(os.environ):
        if name.startswith("K8S_AUTH_") or name == "KUBECONFIG":
            monkeypatch.delenv(name)
    # ansible-runner starts ansible-playbook from PATH, as the execution environment has it.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def _configure_play() -> dict:
    return load_ansible_yaml((AWX / "configure_awx.yml").read_text())[0]


class AwxJob:
    """One launch of a job template from configure_awx.yml, as AWX prepares and runs it."""

    def __init__(self, tmp_path: Path, playbook: str, credential: dict, job_id: int = 1):
        play = _configure_play()
        self.template = next(t for t in play["vars"]["lifecycle_awx_job_templates"] if t["playbook"] == playbook)
        self.survey = yaml.safe_load((AWX / self.template["survey"]).read_text())
        assert survey_spec_errors(self.survey) == []
        self.host_vars = next(t for t in play["tasks"] if "awx.awx.host" in t)["awx.awx.host"]["variables"]
        self.tmp_path, self.credential, self.job_id = tmp_path, credential, job_id
        self.data_dir = tmp_path / "job"
        self.project = self.data_dir / "project"
        # The project checkout: the repository's playbooks (the collection itself is in the EE).
        shutil.copytree(REPO / "playbooks", self.project / "playbooks")

    def add_to_project(self, relative: str, source: Path) -> Path:
        target = self.project / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
        return target

    def launch(self, typed: dict) -> ansible_runner.Runner:
        """Answer the survey with ``typed`` (the rest as the form pre-fills it) and run the job."""
        answers_file = self.tmp_path / "survey-answers.json"
        answers_file.write_text(json.dumps(survey_answers(self.survey, typed)))

        env_dir = self.data_dir / "env"
        env_dir.mkdir(parents=True, exist_ok=True)
        extra_vars = {**awx_meta_vars(self.job_id, self.template["name"]), **launch_extra_vars(self.survey, json.loads(answers_file.read_text()))}
        (env_dir / "extravars").write_text(dump_extravars(extra_vars))
        envvars = {**kubernetes_bearer_token_env(self.credential, self.data_dir), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_ROOT), "JOB_ID": str(self.job_id)}
        (env_dir / "envvars").write_text(yaml.safe_dump(envvars))

        inventory = self.data_dir / "inventory"
        inventory.mkdir(exist_ok=True)
        (inventory / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": self.host_vars}}}))

        return ansible_runner.run(private_data_dir=str(self.data_dir), playbook=self.template["playbook"], quiet=True, timeout=900)


def output(run: ansible_runner.Runner) -> str:
    return run.stdout.read()


def assert_successful(run: ansible_runner.Runner) -> str:
    text = output(run)
    assert (run.status, run.rc) == ("successful", 0), text
    return text


# -- delete machine ---------------------------------------------------------


def grant_simulated_provider(kube: KubeApi, namespace: str) -> None:
    """The test's OpenShift provider tasks "terminate the instance" by deleting a ConfigMap;
    that is the simulated cloud's permission, not the collection's, so it gets its own Role."""
    apply(
        kube,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "simulated-cloud", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "delete"]}],
        },
    )
    apply(
        kube,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "simulated-cloud", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "simulated-cloud"},
            "subjects": [{"kind": "ServiceAccount", "name": SA_NAME, "namespace": SA_NAMESPACE}],
        },
    )


def test_delete_machine_job_template(*, flavour, kube, victim, awx_credential, audit_events, tmp_path) -> None:
    v = victim()
    job = AwxJob(tmp_path, "playbooks/delete_machine.yml", awx_credential)
    typed = {"machine_name": v.name, "machine_namespace": v.namespace, "drain_timeout": 300, "terminate_timeout": 300, "drain_rules": DRAIN_RULES_TEXT}
    if flavour == "openshift":
        grant_simulated_provider(kube, v.namespace)
        # A task file in the project, given relative to the playbook's directory as a user would.
        job.add_to_project("provider/terminate_instance.yml", PROVIDER_TASKS)
        typed["provider_tasks"] = "../provider/terminate_instance.yml"

    assert_successful(job.launch(typed))
    assert_all_gone(kube, v)

    # The Machine side acts as the job's credential; the Node side of a Cluster API Machine as the
    # identity in its workload cluster's kubeconfig Secret (here the self-hosted cluster's admin),
    # which the job's credential reads.
    node_side = SA_USER if flavour == "openshift" else "admin"
    node_deletions = [e for e in audit_events(resource="nodes", verb="delete") if e["objectRef"].get("name") == v.node]
    assert {e["user"]["username"] for e in node_deletions} == {node_side}
    evictions = [e for e in audit_events(namespace=v.namespace, subresource="eviction") if (e.get("responseStatus") or {}).get("code") in (200, 201)]
    assert len(evictions) == 2
    assert {e["user"]["username"] for e in evictions} == {node_side}
    if flavour != "openshift":
        # (The test's fixture, as admin, wrote the Secret; the job read it with its own credential.)
        secret_reads = audit_events(namespace=v.namespace, resource="secrets", verb="get")
        assert SA_USER in {e["user"]["username"] for e in secret_reads if e["objectRef"].get("name") == "lm-test-kubeconfig"}
    refused = [
        f"{e['verb']} {e['requestURI']}" for e in audit_events() if e["user"]["username"] == SA_USER and (e.get("responseStatus") or {}).get("code") == 403
    ]
    assert refused == [], f"the shipped ClusterRole lacks permissions: {refused}"


# -- drain node -------------------------------------------------------------


def test_drain_node_job_template(kube, namespace, make_node, awx_credential, tmp_path) -> None:
    node = make_node(labels={"lm-drain": namespace})
    kube.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("web", 1, {"lm-drain": namespace}, 2))
    pods = f"/api/v1/namespaces/{namespace}/pods"
    first = wait_for(lambda: [p for p in kube.list(pods) if p.get("status", {}).get("phase") == "Running"], 60, what="the web Pod")[0]
    # A budget holds the Pod for a few seconds, so the drain takes several progress intervals.
    budgets = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    kube.create(budgets, {"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})

    def holding() -> bool:
        status = (kube.get(f"{budgets}/web") or {}).get("status") or {}
        return status.get("currentHealthy") == 1 and status.get("disruptionsAllowed") == 0

    wait_for(holding, 60, what="the budget to count the web Pod healthy and allow no disruption")
    lifted = threading.Timer(6, lambda: kube.delete(f"{budgets}/web"))
    lifted.start()
    job = AwxJob(tmp_path, "playbooks/drain_node.yml", awx_credential)

    try:
        # Machine and namespace are left empty, as the form opens: the playbook drains the Node itself.
        text = assert_successful(job.launch({"node": node, "drain_timeout": 120, "progress_interval": 1}))
    finally:
        lifted.cancel()

    assert "Drain not completed yet (started at " in text, "the job output shows where the drain stands while it runs"
    assert "cannot evict pod as it would violate the pod's disruption budget." in text, text[-4000:]
    assert kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable") is True
    assert all(p["metadata"]["uid"] != first["metadata"]["uid"] for p in kube.list(pods)), "the Pod was not evicted"


# -- teardown cluster -------------------------------------------------------


@pytest.fixture
def alive_namespace(kube: KubeApi, namespace: str) -> str:
    yield namespace
    if kube.get(alive_path(namespace)) is not None:
        kube.patch(alive_path(namespace), {"metadata": {"finalizers": None}})
        kube.delete(alive_path(namespace))


def test_teardown_cluster_job_template_waits_for_the_holders(kube, alive_namespace, awx_credential, tmp_path) -> None:
    create_alive(kube, alive_namespace, HOLDER)

    def storage_component() -> None:
        # Releases its finalizer once it sees the deletion signal and has "cleaned up".
        wait_for(lambda: (kube.get(alive_path(alive_namespace)) or {}).get("metadata", {}).get("deletionTimestamp"), 120, what="the Alive deletion")
        time.sleep(2)
        release(kube, alive_namespace, HOLDER)

    component = threading.Thread(target=storage_component)
    component.start()
    job = AwxJob(tmp_path, "playbooks/teardown_cluster.yml", awx_credential)
    run = job.launch({"alive_namespace": alive_namespace, "wait_timeout": 120})
    component.join()

    assert_successful(run)
    assert kube.get(alive_path(alive_namespace)) is None


def test_teardown_cluster_job_template_proceeds_by_policy_and_names_the_holder(kube, alive_namespace, awx_credential, tmp_path) -> None:
    create_alive(kube, alive_namespace, HOLDER)
    job = AwxJob(tmp_path, "playbooks/teardown_cluster.yml", awx_credential)

    text = assert_successful(job.launch({"alive_namespace": alive_namespace, "wait_timeout": 3, "on_timeout": "proceed"}))

    assert "TEARDOWN PROCEEDS WITHOUT CLEANUP CONFIRMATION" in text
    assert HOLDER in text
    left = kube.get(alive_path(alive_namespace))
    assert left["metadata"]["deletionTimestamp"] and left["metadata"]["finalizers"] == [HOLDER]


def test_a_token_without_the_cluster_role_is_refused(kube, alive_namespace, unbound_credential, tmp_path) -> None:
    """The RBAC check is real: the same job with a token the ClusterRole is not bound to fails and changes nothing."""
    create_alive(kube, alive_namespace, HOLDER)
    job = AwxJob(tmp_path, "playbooks/teardown_cluster.yml", unbound_credential)

    run = job.launch({"alive_namespace": alive_namespace, "wait_timeout": 10, "on_timeout": "proceed"})

    text = output(run)
    assert run.status == "failed", text
    assert "forbidden" in text.lower()
    assert "system:serviceaccount:lifecycle-machine:nobody" in text
    assert not kube.get(alive_path(alive_namespace))["metadata"].get("deletionTimestamp")
