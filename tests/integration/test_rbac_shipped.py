"""The RBAC that ships (extensions/awx/rbac.yml) against the real API server: the jobs' ServiceAccount, bound to
exactly the shipped ClusterRole and authenticated by its own token as an AWX credential gives it, runs the
delete_machine role's preflight and deletion with no request refused (the API server's audit log shows every
request it sent, and none answered 403), the preflight judges the Pods' controllers (it reads their ReplicaSets);
and an option that needs more than the role grants (escalations, disable_eviction: plain Pod deletion, in the
opt-in lifecycle-machine-pod-delete role) fails before anything is changed, naming the permission, until that
role is bound."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import REPO, ansible_env
from rbachelpers import RBAC, SA_NAME, SA_NAMESPACE, SA_USER, apply, service_account_token
from test_delete_machine import PLAYBOOK, assert_all_gone, playbook_vars

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import Permission

sys.path.insert(0, str(REPO / "tests" / "unit"))
import rbac  # the unit tests' reading of the shipped roles

POD_DELETE_BINDING = "lifecycle-machine-awx-pod-delete"
ESCALATIONS = [{"after": "30m", "reason": "CHG-42: the db budget is fixed at zero"}]


@pytest.fixture(scope="module")
def as_service_account(kube: KubeApi, kubeconfig: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """extensions/awx/rbac.yml applied as shipped (the opt-in role unbound); the environment of a job whose credential
    is a token of its ServiceAccount (K8S_AUTH_HOST, K8S_AUTH_API_KEY, the CA): no kubeconfig at all."""
    for item in yaml.safe_load(RBAC.read_text())["items"]:
        apply(kube, item)
    cluster = json.loads(Path(kubeconfig).read_text())["clusters"][0]["cluster"]
    ca = tmp_path_factory.mktemp("credential") / "ca.crt"
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    env = {key: value for key, value in ansible_env(kubeconfig).items() if key not in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG")}
    env.update(
        K8S_AUTH_HOST=cluster["server"],
        K8S_AUTH_API_KEY=service_account_token(kube, SA_NAME),
        K8S_AUTH_VERIFY_SSL="True",
        K8S_AUTH_SSL_CA_CERT=str(ca),
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
    )
    return env


@pytest.fixture
def pod_delete_bound(kube: KubeApi) -> Iterator[None]:
    """The opt-in role bound to the jobs' ServiceAccount for one test, unbound after it."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": POD_DELETE_BINDING},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": rbac.OPT_IN_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": SA_NAME, "namespace": SA_NAMESPACE}],
    }
    apply(kube, binding)
    try:
        yield
    finally:
        kube.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{POD_DELETE_BINDING}")


@pytest.fixture(scope="module")
def provider_tasks(tmp_path_factory: pytest.TempPathFactory) -> str:
    """OpenShift provider tasks that terminate the instance with the provider's own credentials (here: nothing to do),
    not the jobs' ServiceAccount, which the role does not let near a cloud."""
    path = tmp_path_factory.mktemp("provider") / "provider.yml"
    path.write_text("- name: The provider terminates the instance with its own credentials\n  ansible.builtin.debug:\n    msg: terminated\n")
    return str(path)


def job_vars(victim, provider_tasks: str, **extra) -> dict:
    return {**playbook_vars(victim), **({"provider_tasks": provider_tasks} if victim.flavour == "openshift" else {}), **extra}


def run(env: dict, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / arguments[0]), *arguments[1:]], env=env, capture_output=True, text=True, timeout=900, check=False)


def playbook(env: dict, extra: dict, *, check: bool = False) -> subprocess.CompletedProcess:
    return run(env, "ansible-playbook", "-i", "localhost,", "-c", "local", str(PLAYBOOK), "-e", json.dumps(extra), *(["--check"] if check else []))


def audit_lines(kubeconfig: str) -> list[dict]:
    path = Path(kubeconfig).parent / "audit.log"
    if not path.exists():
        pytest.skip("this control plane keeps no audit log")
    return [json.loads(line) for line in path.read_text().splitlines()]


def sent_by_the_service_account(kubeconfig: str, since: int) -> list[dict]:
    """The requests the jobs' ServiceAccount sent (its own token: the audit log's user) after line ``since``."""
    return [event for event in audit_lines(kubeconfig)[since:] if (event.get("user") or {}).get("username") == SA_USER]


def permission(event: dict) -> tuple[str, str, str]:
    ref = event.get("objectRef") or {}
    resource = f"{ref.get('resource')}/{ref['subresource']}" if ref.get("subresource") else str(ref.get("resource"))
    return (ref.get("apiGroup") or "", resource, event["verb"])


@pytest.mark.parametrize("flavour", ["openshift", "v1beta2"], indirect=True)
def test_the_shipped_role_runs_the_preflight_and_the_deletion_with_nothing_refused(
    *, flavour, kube, kubeconfig, victim, as_service_account, provider_tasks
) -> None:
    v = victim()
    since = len(audit_lines(kubeconfig))

    preview = playbook(as_service_account, job_vars(v, provider_tasks), check=True)
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]
    assert "The preflight could not read" not in preview.stdout + preview.stderr, "the preflight was refused a read"
    assert '"not_counted": {}' in preview.stdout, preview.stdout[-3000:]

    done = playbook(as_service_account, job_vars(v, provider_tasks))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    if flavour == "openshift":  # the provider tasks here terminate nothing (the provider's credentials would)
        for path in v.infra_paths:
            kube.delete(path)
    assert_all_gone(kube, v)

    sent = sent_by_the_service_account(kubeconfig, since)
    refused = sorted({f"{e['verb']} {e.get('requestURI')}" for e in sent if (e.get("responseStatus") or {}).get("code") == 403})
    assert not refused, f"the shipped role refused: {refused}"
    asked = {permission(event) for event in sent if event.get("objectRef")}  # discovery is no resource
    assert ("", "pods/eviction", "create") in asked or flavour != "openshift", asked
    if flavour == "openshift":  # its Pods are beside it: the preflight read their controllers with the ServiceAccount's token
        assert ("apps", "replicasets", "get") in asked, sorted(asked)
    outside = sorted(
        (group, resource, verb)
        for group, resource, verb in asked
        if (group, resource, verb) not in rbac.EVERY_USER
        and not rbac.role_allows(rbac.ROLE, Permission(verb, resource.partition("/")[0], group, subresource=resource.partition("/")[2] or None))
    )
    assert not outside, f"requests the bound role does not grant: {outside}"


@pytest.mark.parametrize("flavour", ["openshift"], indirect=True)
def test_escalations_without_pod_delete_fail_before_anything_changes_until_the_opt_in_role_is_bound(
    *, flavour, kube, kubeconfig, victim, as_service_account, provider_tasks, request
) -> None:
    v = victim()
    version = kube.get(v.path)["metadata"]["resourceVersion"]
    extra = job_vars(v, provider_tasks, escalations=ESCALATIONS)
    since = len(audit_lines(kubeconfig))
    for check in (True, False):
        refused = playbook(as_service_account, extra, check=check)
        assert refused.returncode != 0, refused.stdout[-3000:]
        said = refused.stdout + refused.stderr
        assert "escalations[0] deletes Pods instead of evicting them, which needs delete pods (core API group) in every namespace" in said, said[-3000:]
        assert "lifecycle-machine-pod-delete" in said and "Nothing was changed." in said
    machine = kube.get(v.path)
    assert machine["metadata"]["resourceVersion"] == version and not machine["metadata"].get("deletionTimestamp"), "the Machine was changed"
    writes = [e for e in sent_by_the_service_account(kubeconfig, since) if e["verb"] not in ("get", "list", "watch")]
    assert {permission(e) for e in writes} <= {("authorization.k8s.io", "selfsubjectaccessreviews", "create")}, writes

    request.getfixturevalue("pod_delete_bound")
    planned = playbook(as_service_account, extra, check=True)
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr[-2000:]


def test_disable_eviction_without_pod_delete_fails_naming_it(kube, kubeconfig, make_node, as_service_account) -> None:
    node = make_node()
    params = {"node": node, "disable_eviction": True}
    env = {**as_service_account, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}
    ran = run(env, "ansible", "localhost", "-c", "local", "-i", "localhost,", "-m", "lifecycle.machine.machine_drain", "-a", json.dumps(params))
    result = json.loads(ran.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert result.get("failed") and result["msg"].startswith("disable_eviction deletes Pods instead of evicting them, which needs delete pods"), result
    assert not (kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable")), "the Node was cordoned"
