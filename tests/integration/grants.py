"""Who the integration tests act as, besides the tests' own admin: the jobs' ServiceAccount bound to the
shipped ClusterRole (extensions/awx/rbac.yml, applied as shipped with :func:`apply`) and authenticated by a
token of its own, and impersonated users granted a few rules each (the inventory's user without Secrets, the
Lease test's user without Leases). Used by test_rbac_shipped.py, test_impersonation.py, test_inventory.py and
test_controller_lease.py; the real AWX (awxserver.py) applies the same RBAC."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from awxserver import AWX_DIR, SA_NAME, SA_NAMESPACE, SA_USER, apply

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

RBAC = AWX_DIR / "rbac.yml"

__all__ = ["RBAC", "SA_NAME", "SA_NAMESPACE", "SA_USER", "apply", "credential_inputs", "grant_user", "revoke_user", "service_account_token"]


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
    """A TokenRequest token (an hour) of the ServiceAccount ``name`` in the jobs' namespace."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    return kube.create(f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts/{name}/token", request)["status"]["token"]


def credential_inputs(kubeconfig: str, token: str) -> dict:
    """The inputs of an AWX "OpenShift or Kubernetes API Bearer Token" credential."""
    cluster = json.loads(Path(kubeconfig).read_text())["clusters"][0]["cluster"]
    ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
    return {"host": cluster["server"], "bearer_token": token, "verify_ssl": True, "ssl_ca_cert": ca}
