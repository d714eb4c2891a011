"""The RBAC that ships (extensions/awx/rbac.yml) against every request the collection's code can send.

Three ways to find those requests, so that a new one without its rule fails a test:

* at run time, every request the code sends through the in-memory transport in any unit test
  (tests/unit/conftest.py, ``requests_are_granted``; also what the transport would read before sending again
  a request whose answer was lost);
* from the source here: every call of the transport (``get``, ``list``, ``watch``, ``create``, ``patch``,
  ``delete``, ``request``, the waits built on them) whose path the code builds with ``resource_path`` - in
  place, through a local or module constant, a helper such as ``node_path``, or a table of kinds - read with
  ``ast`` and turned into the verb, API group and resource the API server authorizes it as;
* ``REQUESTS``, every request with why it is sent, which the role must grant exactly (nothing more).

The proof against the real API server, with a ServiceAccount bound to exactly these roles, is
tests/integration/test_rbac_shipped.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import rbac
import yaml

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import Permission

REPO = Path(__file__).resolve().parents[3]
PLUGINS = REPO / "plugins"

MACHINE_GROUPS = ("machine.openshift.io", "cluster.x-k8s.io")
PROVIDER_GROUPS = ("infrastructure.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io")
# Every request the collection's code sends, as (API group, resource, verb), and why.
REQUESTS = {
    **{
        (group, "machines", verb): "machine_info, label selectors, gates, finalizer, hooks, deletion mark"
        for group in MACHINE_GROUPS
        for verb in ("get", "list", "watch", "patch", "delete")
    },
    **{(group, "machines/status", "patch"): "conditions, phase, status.deletion start times" for group in MACHINE_GROUPS},
    **{("cluster.x-k8s.io", "clusters", verb): "Cluster API skip rules (machine_delete: listed once, then watched)" for verb in ("get", "list", "watch")},
    **{
        (group, "machinesets", verb): "replacement none / first: the Machine's MachineSet, its replicas"
        for group in MACHINE_GROUPS
        for verb in ("get", "patch")
    },
    ("cluster.x-k8s.io", "machinesets", "list"): "replacement none / first: a MachineDeployment's MachineSets (a rollout is refused)",
    ("cluster.x-k8s.io", "machinedeployments", "patch"): "replacement none / first: the MachineDeployment's replicas",
    **{
        ("cluster.x-k8s.io", kind, "get"): "a followed Machine's owners (v1.14.2 never deletes one whose owner is gone); replacement none / first"
        for kind in ("machinesets", "machinedeployments")
    },
    ("authentication.k8s.io", "selfsubjectreviews", "create"): "override_pause: who asked, in the Event on the Machine",
    ("coordination.k8s.io", "leases", "get"): "machine_controller auto: the machine controller's leader-election Lease",
    ("controlplane.cluster.x-k8s.io", "*", "get"): "Cluster API skip rules (the control plane)",
    **{("cluster.x-k8s.io", "machinedrainrules", verb): "MachineDrainRules (machine_delete: listed once, then watched)" for verb in ("list", "watch")},
    **{
        (group, "*", verb): "infrastructure and bootstrap objects (machine_delete: each kind of a namespace listed once, then watched)"
        for group in PROVIDER_GROUPS
        for verb in ("get", "list", "watch", "delete")
    },
    **{("", "nodes", verb): "cordon, follow, re-list after a lost watch, delete" for verb in ("get", "list", "watch", "patch", "delete")},
    ("", "pods", "get"): "an eviction whose answer was lost: its Pod is read before it is sent again",
    ("", "pods", "list"): "the Node's Pods",
    ("", "pods", "watch"): "the Node's Pods",
    ("", "pods/eviction", "create"): "evictions",
    ("policy", "poddisruptionbudgets", "list"): "budgets",
    ("policy", "poddisruptionbudgets", "watch"): "budgets",
    **{("", "namespaces", verb): "drain rule namespace selectors, the Alive object's namespace" for verb in ("get", "list", "watch", "create")},
    ("apps", "daemonsets", "get"): "Pods of a deleted DaemonSet",
    ("apps", "replicasets", "get"): "check mode's preflight: the replicas of a Pod's controller",
    ("apps", "statefulsets", "get"): "check mode's preflight: the replicas of a Pod's controller",
    ("", "replicationcontrollers", "get"): "check mode's preflight: the replicas of a Pod's controller",
    **{("", "persistentvolumes", verb): "volume wait (machine_delete: listed once, then watched)" for verb in ("list", "watch")},
    **{("storage.k8s.io", "volumeattachments", verb): "volume wait (machine_delete: listed once, then watched)" for verb in ("list", "watch")},
    ("", "events", "create"): "Events on Machines",
    ("", "events", "list"): "OpenShift's drain report (DrainRequeued Events on a followed Machine)",
    ("", "secrets", "get"): "the workload cluster's kubeconfig Secret (<cluster>-kubeconfig)",
    **{("lifecycle.machine.dev", "alives", verb): "the cluster deletion signal" for verb in ("get", "watch", "create", "patch", "delete")},
}
# Not bound on purpose: plain Pod deletion (disable_eviction, escalations), the lifecycle-machine-pod-delete role.
OPT_IN = {("", "pods", "delete"): "disable_eviction; escalations that delete a Pod instead of evicting it"}


def _granted(role: dict) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]}


def test_the_bound_role_grants_exactly_the_requests_listed() -> None:
    granted = _granted(rbac.cluster_role(rbac.ROLE))
    assert not set(REQUESTS) - granted, f"extensions/awx/rbac.yml does not grant {sorted(set(REQUESTS) - granted)}"
    assert not granted - set(REQUESTS), f"extensions/awx/rbac.yml grants what the collection never sends: {sorted(granted - set(REQUESTS))}"


def test_plain_pod_deletion_is_only_in_the_opt_in_role_which_nothing_binds() -> None:
    documents = yaml.safe_load(rbac.RBAC.read_text())["items"]
    assert _granted(rbac.cluster_role(rbac.OPT_IN_ROLE)) == set(OPT_IN)
    for rule in rbac.cluster_role(rbac.ROLE)["rules"]:
        if "" in rule["apiGroups"] and "pods" in rule["resources"]:
            assert "delete" not in rule["verbs"] and "*" not in rule["verbs"]
    bindings = [d for d in documents if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert [binding["roleRef"]["name"] for binding in bindings] == [rbac.ROLE]


# -- the requests in the source ----------------------------------------------------------------------------------

# Transport calls: the argument that is the path, and the verbs it is sent as (None: from the path, get or list).
CALLS = {
    "get": (0, None),
    "list": (0, ("list",)),
    "list_with_version": (0, ("list",)),
    "watch": (0, ("watch",)),
    "create": (0, ("create",)),
    "patch": (0, ("patch",)),
    "replace": (0, ("update",)),
    "delete": (0, ("delete",)),
    "delete_object": (0, ("delete",)),
    # The waits of _k8s/watch.py and the informers (_k8s/informer.py: the caches, the drain's watches): a list (to
    # start, or after 410 Gone) and a watch; the wait for one object reads it, then watches its collection; an
    # object a step follows through the run's cache (Reader.follow) is read, or listed and watched with its collection.
    "watch_until": (1, ("list", "watch")),
    "Informer": (1, ("list", "watch")),
    "informer": (0, ("list", "watch")),
    "items": (0, ("list", "watch")),
    "wait_for_object": (1, ("get", "watch")),
    "wait_until_gone": (1, ("get", "watch")),
    "follow": (0, ("get", "list", "watch")),
}
REQUEST_VERBS = {"GET": None, "POST": ("create",), "PATCH": ("patch",), "PUT": ("update",), "DELETE": ("delete",)}


class Path_:
    """What the code builds a path of: API groups (None: decided at run time), resource, and whether it names one object."""

    def __init__(self, groups: tuple[str | None, ...], resource: str, named: bool | None, subresource: str | None = None):
        self.groups, self.resource, self.named, self.subresource = groups, resource, named, subresource

    def with_suffix(self, suffix: str) -> Path_:
        parts = [part for part in suffix.split("/") if part]
        if not parts:
            return self
        if self.named:
            return Path_(self.groups, self.resource, True, parts[0])
        return Path_(self.groups, self.resource, True, parts[1] if len(parts) > 1 else None)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class Source:
    """The modules of plugins/, read once: module constants, helpers returning a path, tables of kinds."""

    def __init__(self) -> None:
        self.trees = {path: ast.parse(path.read_text(), str(path)) for path in sorted(PLUGINS.rglob("*.py"))}
        self.constants: dict[str, list[Path_]] = {}
        self.helpers: dict[str, list[Path_]] = {}
        self.tables: dict[Path, list[tuple[str, str]]] = {}
        for path, tree in self.trees.items():
            self.tables[path] = [
                pair
                for node in tree.body
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                for value in node.value.values
                if isinstance(value, ast.Tuple) and len(value.elts) == 2
                for pair in [(_literal(value.elts[0]), _literal(value.elts[1]))]
                if all(pair)
            ]
        for _round in range(2):  # a constant or helper may be built on another
            for path, tree in self.trees.items():
                for node in tree.body:
                    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                        found = self.paths(path, node.value, {})
                        if found:
                            self.constants[node.targets[0].id] = found
                    elif isinstance(node, ast.FunctionDef):
                        returned = [self.paths(path, ret.value, {}) for ret in ast.walk(node) if isinstance(ret, ast.Return) and ret.value is not None]
                        if returned and all(returned):
                            self.helpers[node.name] = [Path_(p.groups, p.resource, None, p.subresource) for found in returned for p in found]

    def paths(self, file: Path, node: ast.AST, local: dict[str, list[Path_]]) -> list[Path_]:
        """What ``node`` builds a path of ([] when it cannot be told from the source)."""
        found: list[Path_] = []
        if isinstance(node, ast.Call):
            found = self._called(file, node)
        elif isinstance(node, ast.Name):
            found = local.get(node.id) or self.constants.get(node.id) or []
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _literal(node.right) is not None:
            found = [p.with_suffix(_literal(node.right)) for p in self.paths(file, node.left, local)]
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.FormattedValue):
            rest = "".join(_literal(v) or "x" for v in node.values[1:])
            found = [p.with_suffix(rest) for p in self.paths(file, node.values[0].value, local)]
        return found

    def _called(self, file: Path, node: ast.Call) -> list[Path_]:
        name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else None
        if name != "resource_path" or len(node.args) < 2:
            return self.helpers.get(name or "", [])
        named = len(node.args) >= 4 or any(k.arg == "name" for k in node.keywords)
        version, plural = _literal(node.args[0]), _literal(node.args[1])
        if plural is not None:
            return [Path_((_group(version) if version is not None else None,), plural, named)]
        if version is None:  # a table of kinds: (apiVersion, plural) by kind
            return [Path_((_group(v),), p, named) for v, p in self.tables.get(file, [])]
        return []

    def requests(self) -> frozenset[tuple[str | None, str, str, str]]:
        """Every request found: (API group or None, resource, verb, where)."""
        found: set[tuple[str | None, str, str, str]] = set()
        for file, tree in self.trees.items():
            for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]:
                nodes = list(ast.walk(scope)) if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) else list(scope.body)
                local: dict[str, list[Path_]] = {}
                for node in nodes:
                    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                        built = self.paths(file, node.value, local)
                        if built:
                            local[node.targets[0].id] = built
                for node in nodes:
                    if isinstance(node, ast.Call):
                        found |= self._sent(file, node, local)
        return frozenset(found)

    def _sent(self, file: Path, node: ast.Call, local: dict[str, list[Path_]]) -> set[tuple[str | None, str, str, str]]:
        """The requests one call sends, when it is a transport call whose path the source tells."""
        name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id if isinstance(node.func, ast.Name) else None
        if name == "request" and len(node.args) >= 2 and _literal(node.args[0]) in REQUEST_VERBS:
            index, verbs = 1, REQUEST_VERBS[_literal(node.args[0])]
        elif name in CALLS:
            index, verbs = CALLS[name]
        else:
            return set()
        if len(node.args) <= index:
            return set()
        # subresource_status: the status subresource when true; a variable: either.
        status = [k.value for k in node.keywords if k.arg == "subresource_status"]
        subresources = [False] if not status or (isinstance(status[0], ast.Constant) and not status[0].value) else [True]
        if status and not isinstance(status[0], ast.Constant):
            subresources = [False, True]
        where = f"{file.relative_to(REPO)}:{node.lineno}"
        found = set()
        for path in self.paths(file, node.args[index], local):
            for to_status in subresources:
                subresource = "status" if to_status else path.subresource
                resource = f"{path.resource}/{subresource}" if subresource else path.resource
                for verb in verbs or (("get",) if path.named is not False else ("list",)):
                    found |= {(group, resource, verb, where) for group in path.groups}
        return found


SOURCE = Source()
FOUND = SOURCE.requests()


def _allowed(group: str | None, resource: str, verb: str) -> bool:
    """By the roles (bound or opt-in) or what every user may; a group decided at run time: by the role for some group."""
    plural, _slash, subresource = resource.partition("/")
    groups = [group] if group is not None else sorted({g for rule in rbac.cluster_role(rbac.ROLE)["rules"] for g in rule["apiGroups"]})
    for candidate in groups:
        if (candidate, resource, verb) in rbac.EVERY_USER:
            return True
        permission = Permission(verb, plural, candidate, subresource=subresource or None)
        if rbac.role_allows(rbac.ROLE, permission) or rbac.role_allows(rbac.OPT_IN_ROLE, permission):
            return True
    return False


def test_every_request_in_the_source_is_granted() -> None:
    found = FOUND
    refused = sorted(f"{where}: {verb} {resource} (API group {group!r})" for group, resource, verb, where in found if not _allowed(group, resource, verb))
    assert not refused, "requests in the code extensions/awx/rbac.yml does not grant:\n" + "\n".join(refused)


@pytest.mark.parametrize(
    "request_",
    [
        ("", "pods", "get"),  # the read before an eviction whose answer was lost is sent again (a local path + verify)
        ("", "pods/eviction", "create"),  # path + "/eviction"
        ("", "pods", "delete"),  # disable_eviction and escalations (the opt-in role)
        ("", "nodes", "list"),  # the drain's re-list of its Node (a constant of _k8s/paths.py)
        ("", "nodes", "patch"),  # node_path, a helper
        ("apps", "statefulsets", "get"),  # the preflight's table of controller kinds
        ("", "replicationcontrollers", "get"),
        ("authorization.k8s.io", "selfsubjectaccessreviews", "create"),  # the permission check before any change
        (None, "machines/status", "patch"),  # machine_path with subresource_status
        ("", "namespaces", "create"),  # cluster_alive's namespace for the Alive object
    ],
)
def test_the_source_scan_finds_each_way_a_path_is_built(request_) -> None:
    found = {(group, resource, verb) for group, resource, verb, _where in FOUND}
    assert request_ in found, sorted(found, key=str)


def test_every_resource_the_code_names_is_listed() -> None:
    """Every resource the code names at all (in a path, a kind's plural, an API path) is in REQUESTS or OPT_IN."""
    code = [path.read_text() for path in sorted(PLUGINS.rglob("*.py"))]
    named = {plural for text in code for plural in re.findall(r"resource_path\([^,]+, \"(\w+)\"", text)}
    named |= {plural for text in code for plural in re.findall(r"_PLURAL = \"(\w+)\"", text)}
    named |= {plural for text in code for plural in re.findall(r"\(\"(?:[\w.]+/)?v\d\w*\", \"(?!v\d)(\w+)\"\)", text)}
    listed = {resource.split("/")[0] for _group, resource, _verb in [*REQUESTS, *OPT_IN, *rbac.EVERY_USER]}
    assert named - listed == set(), f"resources the code names that REQUESTS does not list: {sorted(named - listed)}"


# -- the docs --------------------------------------------------------------------------------------------------


def _awx_table() -> set[tuple[str, str, str]]:
    """The RBAC table of docs/awx.md, as (group, resource, verb)."""
    text = (REPO / "docs" / "awx.md").read_text()
    table = text.split("| API group | Resources | Verbs | Why |", 1)[1].split("\n\n", 1)[0]
    rows, last_groups = set(), []
    for line in table.strip().splitlines()[1:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        groups = last_groups if cells[0] == "same" else ["" if g.strip() == "core" else g.strip(" `") for g in cells[0].split(",")]
        last_groups = groups
        resources = [r.strip(" `") for r in cells[1].split(",")]
        verbs = [v.strip() for v in cells[2].split(",")]
        rows |= {(g, r, v) for g in groups for r in resources for v in verbs}
    return rows


def test_the_awx_docs_table_is_the_role() -> None:
    assert _awx_table() == _granted(rbac.cluster_role(rbac.ROLE))
