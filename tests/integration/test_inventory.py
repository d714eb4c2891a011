"""The lifecycle.machine.machines inventory plugin on the real control plane:
Machines of both flavours as hosts, their groups and host variables (the
workload cluster of a Cluster API Machine and whether its kubeconfig Secret
exists among them); and playbooks/delete_machines.yml deleting an inventory
group, each Machine's outcome on its own host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, ansible_env
from khelpers import OPENSHIFT_MACHINES, capi_machine, capi_path, openshift_machine
from rbachelpers import RBAC, SA_NAME, apply, credential_inputs, grant_user, revoke_user, service_account_token

CAPI = "v1beta2"


@pytest.fixture
def machines(kube, namespace, capi_generation):
    """Two OpenShift Machines and three Cluster API (v1beta2) Machines, one of each being deleted."""
    capi_generation.use("v1beta2")
    paths = []

    def make(collection: str, body: dict) -> None:
        kube.create(collection, body)
        paths.append(f"{collection}/{body['metadata']['name']}")

    openshift = OPENSHIFT_MACHINES.format(ns=namespace)
    make(openshift, openshift_machine("os-a", labels={"machine.openshift.io/cluster-api-machineset": "infra-a"}))
    make(openshift, openshift_machine("os-b", hooks={"preDrain": [{"name": "etcd", "owner": "quorum-guard"}]}))
    capi = capi_path(CAPI, "machines", namespace)
    kube.create(capi_path(CAPI, "clusters", namespace), {"apiVersion": f"cluster.x-k8s.io/{CAPI}", "kind": "Cluster", "metadata": {"name": "lm-test"}})
    make(capi, capi_machine("control-plane-0", CAPI, labels={"cluster.x-k8s.io/control-plane": ""}))
    for name, extra in (("md-0-a", {}), ("md-0-b", {}), ("md-0-held", {"hooked": True})):
        annotations = {"pre-terminate.delete.hook.machine.cluster.x-k8s.io/flush": "log-ctl"} if extra else {}
        labels = {"cluster.x-k8s.io/deployment-name": "md-0", "cluster.x-k8s.io/set-name": "md-0-xyz", "lm-test/delete": "yes"}
        make(capi, capi_machine(name, CAPI, labels=labels, annotations=annotations))
        for group, plural, kind in (("infrastructure", "fakemachines", "FakeMachine"), ("bootstrap", "fakebootstrapconfigs", "FakeBootstrapConfig")):
            kube.create(
                f"/apis/{group}.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/{plural}",
                {"apiVersion": f"{group}.cluster.x-k8s.io/v1beta1", "kind": kind, "metadata": {"name": name}},
            )
    kube.delete(f"{openshift}/os-b")  # held by its finalizer: being deleted
    yield namespace
    for path in paths:
        if kube.get(path) is not None:
            kube.patch(path, {"metadata": {"finalizers": None}})
            kube.delete(path)


def inventory_file(tmp_path: Path, kubeconfig: str, namespace: str) -> Path:
    path = tmp_path / "test.machines.yml"
    config = {
        "plugin": "lifecycle.machine.machines",
        "connections": [{"name": "local", "kubeconfig": kubeconfig, "namespaces": [namespace]}],
        "groups": {"lm_deleting_candidates": "machine_labels['lm-test/delete'] | default('') == 'yes'"},
        "keyed_groups": [{"key": "machine_flavour", "prefix": "kind"}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


def plain(value):
    """ansible-inventory marks what inventory plugins report as unsafe ({"__ansible_unsafe": value}): unwrap it."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def ansible_inventory(path: Path, kubeconfig: str) -> dict:
    env = ansible_env(kubeconfig)
    command = [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(path), "--list"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return plain(json.loads(proc.stdout))


def members(listed: dict, group: str) -> list[str]:
    return sorted(listed.get(group, {}).get("hosts", []))


def test_machines_of_both_flavours_with_groups_and_host_variables(machines, kubeconfig, tmp_path) -> None:
    namespace = machines
    listed = ansible_inventory(inventory_file(tmp_path, kubeconfig, namespace), kubeconfig)
    every = [f"{namespace}.{name}" for name in ("control-plane-0", "md-0-a", "md-0-b", "md-0-held", "os-a", "os-b")]
    assert members(listed, "lm_machines") == every
    assert members(listed, "lm_openshift") == [f"{namespace}.os-a", f"{namespace}.os-b"]
    assert members(listed, "lm_clusterapi") == every[:4]
    assert members(listed, "lm_cluster_lm_test") == every  # Cluster API clusterName and OpenShift's cluster label
    assert members(listed, "lm_machineset_infra_a") == [f"{namespace}.os-a"]
    assert members(listed, "lm_machineset_md_0_xyz") == every[1:4]
    assert members(listed, "lm_machinedeployment_md_0") == every[1:4]
    assert members(listed, "lm_deleting") == [f"{namespace}.os-b"]
    assert members(listed, "lm_connection_local") == every
    assert members(listed, "lm_deleting_candidates") == every[1:4]
    assert members(listed, "kind_openshift") == [f"{namespace}.os-a", f"{namespace}.os-b"]

    held = listed["_meta"]["hostvars"][f"{namespace}.os-b"]
    assert held["machine_name"] == "os-b" and held["machine_namespace"] == namespace
    assert held["machine_flavour"] == "openshift" and held["machine_api_version"] == "machine.openshift.io/v1beta1"
    assert held["machine_deleting"] is True
    assert held["machine_hooks"]["preDrain"] == [{"name": "etcd", "owner": "quorum-guard"}]
    assert held["machine_gates"]["drainable"] is False
    assert held["machine_ref"] == {"name": "os-b", "namespace": namespace, "api_version": "machine.openshift.io/v1beta1", "flavour": "openshift"}
    assert held["machine_connection"] == "local" and held["ansible_connection"] == "local"
    worker = listed["_meta"]["hostvars"][f"{namespace}.md-0-held"]
    assert worker["machine_hooks"]["preTerminate"][0]["name"] == "flush"
    assert worker["machine_infrastructure_ref"]["kind"] == "FakeMachine"


def test_a_group_is_deleted_each_machine_reported_on_its_host(machines, kube, kubeconfig, tmp_path) -> None:
    namespace = machines
    inventory = inventory_file(tmp_path, kubeconfig, namespace)
    env = ansible_env(kubeconfig)
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    extra = {"machine_group": "lm_deleting_candidates", "terminate_timeout": 5}
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "delete_machines.yml")]
    proc = subprocess.run([*command, "-e", json.dumps(extra)], capture_output=True, text=True, env=env, check=False, timeout=600)
    recap = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith(f"{namespace}.") and "ok=" in line}
    assert proc.returncode != 0, "the Machine held at its preTerminate gate must fail its host"
    assert "failed=0" in recap[f"{namespace}.md-0-a"] and "failed=0" in recap[f"{namespace}.md-0-b"], proc.stdout[-4000:]
    assert "failed=1" in recap[f"{namespace}.md-0-held"], proc.stdout[-4000:]
    capi = capi_path(CAPI, "machines", namespace)
    assert kube.get(f"{capi}/md-0-a") is None and kube.get(f"{capi}/md-0-b") is None
    held = kube.get(f"{capi}/md-0-held")
    assert held is not None and held["metadata"].get("deletionTimestamp"), "held at its preTerminate gate"
    assert kube.get(f"{capi}/control-plane-0") is not None
    assert "preTerminate" in proc.stdout and "flush" in proc.stdout


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"connection": [{"namespaces": ["{namespace}"]}]},
            "lifecycle.machine.machines: The configuration has unknown key(s) connection (allowed: cache, cache_connection,",
        ),
        (
            {"connections": [{"kubeconfig": "{kubeconfig}", "namespace": ["{namespace}"]}]},
            "lifecycle.machine.machines: connections[0] has unknown key(s) namespace (allowed: api_key, api_version,",
        ),
        (
            {"connections": [{"kubeconfig": "{kubeconfig}", "namespaces": ["Openshift-Machine-API"]}]},
            "lifecycle.machine.machines: connections[0].namespaces 'Openshift-Machine-API' can never name a Namespace",
        ),
        (
            {"connections": [{"kubeconfig": "{kubeconfig}", "namespaces": ["{namespace}-typo"]}]},
            "lifecycle.machine.machines: cannot read the Machines of connection default: Namespace {namespace}-typo not found",
        ),
    ],
    ids=["top-level-typo", "connection-key-typo", "impossible-namespace", "missing-namespace"],
)
def test_a_mistyped_configuration_is_refused_not_read_more_widely(machines, kubeconfig, tmp_path, config, message) -> None:
    """Ansible ignores unknown keys of an inventory configuration: an ignored ``namespace`` read every namespace."""
    text = json.dumps({"plugin": "lifecycle.machine.machines", **config}).replace("{namespace}", machines).replace("{kubeconfig}", kubeconfig)
    path = tmp_path / "typo.machines.yml"
    path.write_text(text)
    env = {**ansible_env(kubeconfig), "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true"}
    command = [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(path), "--list"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode != 0, proc.stdout
    assert message.format(namespace=machines) in " ".join(proc.stderr.split()), proc.stderr


def test_the_documented_aliases_of_a_connection_are_honoured(machines, kubeconfig, tmp_path) -> None:
    """verify_ssl, ssl_ca_cert, cert_file and key_file were documented but never read."""
    path = tmp_path / "alias.machines.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "plugin": "lifecycle.machine.machines",
                "connections": [{"kubeconfig": kubeconfig, "namespaces": [machines], "ssl_ca_cert": "/nonexistent/ca.crt"}],
            }
        )
    )
    env = {**ansible_env(kubeconfig), "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true"}
    command = [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(path), "--list"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode != 0, "a CA file that does not exist must be used, and fail"


# ---------------------------------------------------------------------------
# The workload cluster of each Cluster API Machine, and its kubeconfig Secret

NO_SECRETS_USER = "lm-inventory-no-secrets"
KUBECONFIG_TEXT = "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster: {server: 'https://c1.example.com:6443'}\n"


@pytest.fixture
def workload_machines(kube, namespace, capi_generation):
    """Cluster API Machines of the workload clusters c1 (two, and its Secret c1-kubeconfig) and c2 (one, no Secret),
    and an OpenShift Machine, in one namespace."""
    capi_generation.use("v1beta2")
    paths = []
    capi = capi_path(CAPI, "machines", namespace)
    for name, cluster in (("c1-a", "c1"), ("c1-b", "c1"), ("c2-a", "c2")):
        kube.create(capi, capi_machine(name, CAPI, cluster=cluster))
        paths.append(f"{capi}/{name}")
    openshift = OPENSHIFT_MACHINES.format(ns=namespace)
    kube.create(openshift, openshift_machine("os-a"))
    paths.append(f"{openshift}/os-a")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "c1-kubeconfig", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
        "type": "cluster.x-k8s.io/secret",
        "stringData": {"value": KUBECONFIG_TEXT},
    }
    kube.create(f"/api/v1/namespaces/{namespace}/secrets", secret)
    yield namespace
    for path in paths:
        kube.patch(path, {"metadata": {"finalizers": None}})
        kube.delete(path)


@pytest.fixture
def identities(kube):
    """The AWX ServiceAccount with the shipped ClusterRole (extensions/awx/rbac.yml; the audit log records its
    requests), and a user who may list Machines but not read Secrets."""
    for item in yaml.safe_load(RBAC.read_text())["items"]:
        apply(kube, item)
    grant_user(kube, NO_SECRETS_USER, [{"apiGroups": ["machine.openshift.io", "cluster.x-k8s.io"], "resources": ["machines"], "verbs": ["list"]}])
    yield
    revoke_user(kube, NO_SECRETS_USER)


def workload_inventory(tmp_path: Path, kubeconfig: str, namespace: str, identity: dict) -> dict:
    """ansible-inventory of the Machines of ``namespace``, connected with ``identity`` (connection options)."""
    path = tmp_path / "workload.machines.yml"
    connection = {"name": "mgmt", "namespaces": [namespace], **identity}
    path.write_text(yaml.safe_dump({"plugin": "lifecycle.machine.machines", "connections": [connection]}))
    env = {**ansible_env(kubeconfig), "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true"}
    command = [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(path), "--list"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return {"hostvars": plain(json.loads(proc.stdout))["_meta"]["hostvars"], "stderr": " ".join(proc.stderr.split())}


def workload_vars(listed: dict, namespace: str) -> dict:
    return {
        host.split(".", 1)[1]: (values["machine_workload_cluster"], values["machine_workload_kubeconfig_secret"])
        for host, values in listed["hostvars"].items()
        if host.startswith(f"{namespace}.")
    }


def test_each_cluster_api_machine_names_its_workload_cluster_and_whether_its_kubeconfig_secret_exists(
    *, workload_machines, identities, kube, kubeconfig, audit_events, tmp_path
) -> None:
    """Read as AWX's inventory source would, with the token of the shipped ClusterRole's ServiceAccount (whose
    requests the audit log records): one GET per workload cluster."""
    namespace = workload_machines
    credential = credential_inputs(kubeconfig, service_account_token(kube, SA_NAME))
    ca = tmp_path / "ca.crt"
    ca.write_text(credential["ssl_ca_cert"])
    identity = {"host": credential["host"], "api_key": credential["bearer_token"], "ca_cert": str(ca)}
    listed = workload_inventory(tmp_path, kubeconfig, namespace, identity)
    assert workload_vars(listed, namespace) == {
        "c1-a": ("c1", True),
        "c1-b": ("c1", True),
        "c2-a": ("c2", False),
        "os-a": (None, None),  # an OpenShift Machine's Node is beside it
    }
    assert "kubeconfig Secrets" not in listed["stderr"]
    reads = [e for e in audit_events(namespace=namespace, resource="secrets") if e["objectRef"].get("name") != "lm-test-kubeconfig"]  # the fixture's
    assert sorted((event["verb"], event["objectRef"].get("name")) for event in reads) == [("get", "c1-kubeconfig"), ("get", "c2-kubeconfig")], (
        "one GET per workload cluster, not one per Machine, and no list"
    )
    assert kube.get(f"/api/v1/namespaces/{namespace}/secrets/c1-kubeconfig")["data"]["value"], "the Secret is only read"


def test_a_user_who_may_not_read_secrets_gets_the_inventory_with_a_warning(workload_machines, identities, kubeconfig, tmp_path) -> None:
    namespace = workload_machines
    listed = workload_inventory(tmp_path, kubeconfig, namespace, {"kubeconfig": kubeconfig, "impersonate_user": NO_SECRETS_USER})
    assert workload_vars(listed, namespace) == {"c1-a": ("c1", None), "c1-b": ("c1", None), "c2-a": ("c2", None), "os-a": (None, None)}
    assert listed["stderr"].count("may not read the kubeconfig Secrets") == 1, listed["stderr"]
    assert f"{namespace}/c1-kubeconfig, {namespace}/c2-kubeconfig (403 Forbidden)" in listed["stderr"], listed["stderr"]
