"""The shipped RBAC (extensions/awx/rbac.yml) and impersonated users on the control plane: what the tests
that act as the jobs' ServiceAccount, or as a user with fewer rights, share (the real AWX's tests in
awxserver.py, the RBAC, impersonation, inventory and Lease tests)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from conftest import REPO

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError

RBAC = REPO / "extensions" / "awx" / "rbac.yml"
SA_NAMESPACE = "lifecycle-machine"
SA_NAME = "lifecycle-machine-awx"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"

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


def service_account_token(kube: KubeApi, name: str, seconds: int = 3600) -> str:
    """A TokenRequest token of the ServiceAccount ``name`` in the shipped namespace."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}}
    return kube.create(f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts/{name}/token", request)["status"]["token"]


def api_server_and_ca(kubeconfig: str) -> tuple[str, str]:
    """The API server's address and its CA (PEM) from the tests' kubeconfig."""
    cluster = json.loads(Path(kubeconfig).read_text())["clusters"][0]["cluster"]
    return cluster["server"], base64.b64decode(cluster["certificate-authority-data"]).decode()


def credential_inputs(kubeconfig: str, token: str) -> dict:
    """The inputs of an AWX "OpenShift or Kubernetes API Bearer Token" credential."""
    host, ca = api_server_and_ca(kubeconfig)
    return {"host": host, "bearer_token": token, "verify_ssl": True, "ssl_ca_cert": ca}
