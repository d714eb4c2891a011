"""The layout of plugins/ stays as designed (read from the source with ast, nothing is imported):

(a) in a package of ``plugins/module_utils/`` (``_<feature>/``, ``_machine/``, ...)
    only ``api.py``, ``waits.py`` (waits and follows, apart from the thin api file),
    ``feed.py`` (views kept current by the transport's informers) and ``run.py`` talk to the API: every other file is pure,
    dicts in and decisions out, importing nothing of ``_k8s``, ``_module``,
    ``kubernetes`` (but the pure library functions of ``PURE_LIBRARIES``) or ``ansible.module_utils.basic``, nor another package's
    api/run - neither directly nor through another file it imports. The same
    holds for ``_errors.py``, ``_timeutil.py`` and for what runs on the
    controller (``plugins/action/``, ``plugins/plugin_utils/``,
    ``plugins/doc_fragments/``, ``plugins/filter/``);
(b) only ``_module.py`` imports AnsibleModule (``ansible.module_utils.basic``),
    anywhere under ``plugins/`` and ``extensions/``;
(c) ``_k8s/`` (the transport) imports no other package and not ``_module``, and
    nothing in ``plugins/module_utils/`` imports an entry point (a module, an
    action, inventory or event-source plugin, ``plugin_utils``);
(d) modules in ``plugins/modules/`` are thin: no function but ``main``, no class;
(e) ``plugins/module_utils/`` holds packages plus ``_module.py``,
    ``_errors.py`` and ``_timeutil.py``: new code goes into a package;
(f) a feature leans only on the shared packages (``_machine``, ``_options``,
    ``_workload``) and the transport, never on another feature: only the
    orchestrator ``_delete`` runs other features, and ``_terminate`` asks
    ``_drain`` which Pods its rules skip (``_drain.rules``,
    ``_drain.api.load_drain_rules``, ``_drain.api.SkippedPods``). The shared
    packages import no feature;
(g) a task's deadline reaches the transport one way: given where the task's
    KubeApi is made (``KubeApi.fork(deadline=...)``); nothing outside ``_k8s/``
    assigns a transport's ``deadline`` afterwards.
(h) the packages of ``plugins/module_utils/`` stand on floors (:data:`FLOORS`:
    ``_errors.py``/``_timeutil.py``, the transport ``_k8s``, ``_options``,
    ``_machine``, ``_workload``, the features, the orchestrator ``_delete``,
    ``_module.py``) and no import runs back up a floor: ``_machine`` imports
    nothing of ``_workload``, the transport nothing above it;
(i) whether a read is cached is never found out by probing the transport
    (``getattr(api, ...)``, ``hasattr(api, ...)``): callers ask for
    ``api.cached_reader()`` or ``api.live_reader()`` by name;
(j) only the flavour adapters (``_machine/flavour/``) compare a flavour's name or
    API group (``flavour.name == OPENSHIFT``, ``group == CAPI_GROUP``, a tuple of
    flavour names): everything else asks the flavour;
(k) no class in ``plugins/`` is over :data:`MAX_CLASS_LINES` lines, and the
    transport's ``client.py`` is under :data:`MAX_CLIENT_LINES`.

Each failure says which rule broke, where, and how to fix it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
EXTENSIONS = REPO / "extensions"
MODULE_UTILS = PLUGINS / "module_utils"
MODULES = PLUGINS / "modules"
COLLECTION = "ansible_collections.lifecycle.machine"
UTILS = f"{COLLECTION}.plugins.module_utils"

TRANSPORT = "_k8s"
API_FILES = ("api.py", "waits.py", "feed.py", "run.py")
TOP_LEVEL_FILES = ("_module.py", "_errors.py", "_timeutil.py")
PURE_TOP_LEVEL_FILES = ("_errors.py", "_timeutil.py")
# Controller-side code: it never talks to a cluster.
CONTROLLER_DIRS = ("action", "plugin_utils", "doc_fragments", "filter")
# Entry points: what Ansible or ansible-rulebook loads. Nothing in module_utils imports them.
ENTRY_POINTS = tuple(f"{COLLECTION}.{name}" for name in ("plugins.modules", "plugins.action", "plugins.inventory", "plugins.plugin_utils", "extensions"))
# Packages every feature may lean on (besides the transport and the top-level files).
SHARED = ("_machine", "_options", "_workload")
ORCHESTRATOR = "_delete"
# The one other feature a feature may ask, and what of it: which Pods the drain's rules skip.
ALLOWED_BETWEEN_FEATURES = {("_terminate", "_drain"): ("_drain.rules", "_drain.api.load_drain_rules", "_drain.api.SkippedPods")}
# What only api.py / run.py of a feature package may import.
IMPURE = (f"{UTILS}._k8s", f"{UTILS}._module", "kubernetes", "ansible.module_utils.basic")
# Pure functions of a library under IMPURE, which a pure file may import by this exact module: the kubernetes
# client's quantity parser (_delete/capacity.py) reads text and talks to no server.
PURE_LIBRARIES = ("kubernetes.utils.quantity",)
BASIC = "ansible.module_utils.basic"


# -- reading imports ------------------------------------------------------------------------

# What a file holds instead of what is on disk: the tests of the rules write into it.
SOURCES: dict[Path, str] = {}


def module_name(path: Path) -> str:
    """The dotted name a file under plugins/ is imported as."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([COLLECTION, *parts])


def imports(path: Path, source: str | None = None) -> list[tuple[int, str, str]]:
    """Every import of a file as (line, dotted target, how it reads in the source).

    ``from a.b import c`` yields both ``a.b`` and ``a.b.c`` (c may be a module);
    relative imports are resolved against the file's package.
    """
    source = SOURCES.get(path) or path.read_text() if source is None else source
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, f"import {alias.name}") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = ", ".join(alias.name for alias in node.names)
            text = f"from {'.' * node.level}{node.module or ''} import {names}"
            found.append((node.lineno, base, text))
            found.extend((node.lineno, f"{base}.{alias.name}", text) for alias in node.names)
    return found


def leaf_imports(path: Path, source: str | None = None) -> list[tuple[int, str, str]]:
    """The imports of a file, each named as precisely as the source does
    (``from a.b import c, d`` gives ``a.b.c`` and ``a.b.d``, not ``a.b``)."""
    found = imports(path, source)
    return [(line, target, text) for line, target, text in found if not any(line == l2 and text == t2 and o.startswith(target + ".") for l2, o, t2 in found)]


def file_of(target: str) -> list[Path]:
    """The files of the collection that importing ``target`` runs: the packages'
    ``__init__.py`` on the way and the module itself ([] outside the collection)."""
    if not under(target, COLLECTION):
        return []
    parts, files = target[len(COLLECTION) + 1 :].split("."), []
    for depth in range(1, len(parts) + 1):
        base = REPO.joinpath(*parts[:depth])
        if (base / "__init__.py").is_file():
            files.append(base / "__init__.py")
        elif base.with_suffix(".py").is_file():
            files.append(base.with_suffix(".py"))
            break
    return files


def under(target: str, prefix: str) -> bool:
    return target == prefix or target.startswith(prefix + ".")


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(REPO)}:{line}"


def packages() -> list[Path]:
    """Every package of plugins/module_utils/ but the transport: the features and the shared ones."""
    return sorted(p for p in MODULE_UTILS.iterdir() if p.is_dir() and p.name != TRANSPORT and not p.name.startswith("__"))


def python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def first_per_file(found: list[tuple[int, str, str]], matches) -> list[tuple[int, str, str]]:
    """The imports that match, one per source line (``from a import b`` yields two targets)."""
    seen, result = set(), []
    for line, target, text in found:
        if line not in seen and matches(target):
            seen.add(line)
            result.append((line, target, text))
    return result


# -- the rules --------------------------------------------------------------------------------


def talks_to_the_api(target: str) -> bool:
    """Whether an import target is (in) the api.py or run.py of a feature package."""
    prefix = UTILS + "."
    if not target.startswith(prefix):
        return False
    parts = target[len(prefix) :].split(".")
    return len(parts) >= 2 and parts[0] in {p.name for p in packages()} and parts[1] in {name.removesuffix(".py") for name in API_FILES}


def is_impure(target: str) -> bool:
    """Whether an import target talks to the API (or is AnsibleModule), the pure library functions aside."""
    return any(under(target, prefix) for prefix in IMPURE) and not any(under(target, library) for library in PURE_LIBRARIES)


def impure_imports(path: Path, source: str | None = None) -> list[str]:
    """Rule (a) for one pure file (see :func:`pure_files`): its own imports."""
    if path.name in API_FILES and MODULE_UTILS in path.parents:
        return []
    if MODULE_UTILS in path.parents and path.parent != MODULE_UTILS:
        package = path.relative_to(MODULE_UTILS).parts[0]
        what = f"{path.name} is a pure file of package {package} (dicts in, decisions out)"
        move = f"Move the API call into {package}/api.py (or the task's steps into {package}/run.py) and pass the data in."
        instead = f"or do the call in {package}/api.py or run.py"
    else:
        what = f"{path.relative_to(REPO)} is pure (it runs on the controller, or below every package)"
        move = "Let a feature's run.py make the call (the module or plugin that runs it passes the data in)."
        instead = "or leave the call to a feature's api.py or run.py"
    errors = []
    for line, target, text in first_per_file(imports(path, source), is_impure):
        errors.append(
            f"[rule a] {where(path, line)}: `{text}` - {what}: only api.py, waits.py, feed.py and run.py may import _k8s, _module, kubernetes"
            f" or {BASIC} (here {target}). {move}"
        )
    for line, target, text in first_per_file(imports(path, source), talks_to_the_api):
        errors.append(
            f"[rule a] {where(path, line)}: `{text}` - {target} talks to the API, so {path.name} would not be pure any more. "
            f"Import the pure function it uses instead (from that package's logic), {instead}."
        )
    return errors


def pure_files() -> list[Path]:
    """The files rule (a) holds pure: every file of a module_utils package but
    its api.py and run.py, the pure top-level files, and the controller side."""
    files = [path for package in packages() for path in python_files(package) if path.name not in API_FILES]
    files += [MODULE_UTILS / name for name in PURE_TOP_LEVEL_FILES]
    files += [path for name in CONTROLLER_DIRS for path in python_files(PLUGINS / name)]
    return files


def _reaches_directly(path: Path) -> str | None:
    """The import by which a file talks to the API itself, if it does."""
    if path.name in API_FILES and MODULE_UTILS in path.parents:
        return path.name
    for _line, target, text in imports(path):
        if is_impure(target):
            return f"`{text}`"
    return None


def path_to_the_transport(path: Path, seen: set[Path] | None = None) -> list[str] | None:
    """How a file reaches the transport through the collection's files it imports:
    ``[file, file, ..., "the import"]``, or None when it never does."""
    seen = set() if seen is None else seen
    if path in seen:
        return None
    seen.add(path)
    direct = _reaches_directly(path)
    if direct is not None:
        return [str(path.relative_to(REPO)), direct]
    for _line, target, _text in imports(path):
        for imported in file_of(target):
            chain = path_to_the_transport(imported, seen)
            if chain is not None:
                return [str(path.relative_to(REPO)), *chain]
    return None


def indirect_impure_imports(path: Path, source: str | None = None) -> list[str]:
    """Rule (a), transitively: a pure file's imports of the collection's other files never lead to the transport."""
    errors, seen = [], set()
    for line, target, text in first_per_file(imports(path, source), lambda t: bool(file_of(t))):
        if is_impure(target) or talks_to_the_api(target):
            continue  # reported by impure_imports
        for imported in file_of(target):
            chain = path_to_the_transport(imported, seen)
            if chain is not None:
                errors.append(
                    f"[rule a] {where(path, line)}: `{text}` - {path.name} is pure, but through this import it reaches the "
                    f"transport: {' -> '.join(chain)}. Import only the pure parts (move what {chain[-2]} needs from the API "
                    "into its package's api.py and pass the data in), or do the call in an api.py or run.py."
                )
                break
    return errors


def feature_imports(path: Path, source: str | None = None) -> list[str]:
    """Rule (f) for one file of a package of plugins/module_utils/: one error per import line."""
    package = path.relative_to(MODULE_UTILS).parts[0]
    features = {p.name for p in packages()} - set(SHARED)
    refused: dict[int, tuple[str, str, list[str]]] = {}
    for line, target, text in leaf_imports(path, source):
        if not target.startswith(UTILS + "."):
            continue
        other = target[len(UTILS) + 1 :].split(".")[0]
        if other not in features or package in (other, ORCHESTRATOR):
            continue
        allowed = ALLOWED_BETWEEN_FEATURES.get((package, other), ())
        if not any(under(target, f"{UTILS}.{name}") for name in allowed):
            refused.setdefault(line, (other, text, []))[2].append(target[len(UTILS) + 1 :])
    errors = []
    for line, (other, text, targets) in refused.items():
        allowed = ALLOWED_BETWEEN_FEATURES.get((package, other), ())
        if package in SHARED:
            fix = f"A shared package is below every feature: move what {package} needs out of {other} into {package} (or take it as an argument)."
        elif allowed:
            fix = f"{package} may ask {other} only for {', '.join(allowed)}; add what it needs there, or move shared knowledge into _machine."
        else:
            fix = (
                f"What both need about a Machine or a Node belongs in _machine (pure parts in a pure file, API calls in "
                f"_machine/api.py); what only {other} knows stays there, and only {ORCHESTRATOR}/run.py runs other features."
            )
        errors.append(f"[rule f] {where(path, line)}: `{text}` - feature {package} imports feature {other} ({', '.join(targets)}). {fix}")
    return errors


def entry_point_imports(path: Path, source: str | None = None) -> list[str]:
    """Rule (c), second half: module_utils imports no entry point."""
    hits = first_per_file(imports(path, source), lambda t: any(under(t, prefix) for prefix in ENTRY_POINTS))
    return [
        f"[rule c] {where(path, line)}: `{text}` - plugins/module_utils/ is below every entry point (modules, action, inventory "
        "and event-source plugins, plugin_utils) and imports none. Move the shared code into a package of module_utils."
        for line, _target, text in hits
    ]


def ansible_module_imports(path: Path, source: str | None = None) -> list[str]:
    """Rule (b) for one file under plugins/."""
    if path == MODULE_UTILS / "_module.py":
        return []
    found = imports(path, source)
    hits = first_per_file(found, lambda t: under(t, BASIC) or t.rpartition(".")[2] == "AnsibleModule")
    return [
        f"[rule b] {where(path, line)}: `{text}` - only plugins/module_utils/_module.py imports AnsibleModule "
        f"({BASIC}). Build the module with _module.new_module() and run it with _module.run()."
        for line, _target, text in hits
    ]


def transport_imports(path: Path, source: str | None = None) -> list[str]:
    """Rule (c) for one file of _k8s/."""
    above = [f"{UTILS}.{p.name}" for p in packages()] + [f"{UTILS}._module"]
    hits = first_per_file(imports(path, source), lambda t: any(under(t, prefix) for prefix in above))
    return [
        f"[rule c] {where(path, line)}: `{text}` - the transport (_k8s) is below every feature package and _module and "
        "imports neither. Move what it needs into _k8s, or let the caller pass it in (a callback, a value)."
        for line, _target, text in hits
    ]


def module_definitions(path: Path, source: str | None = None) -> list[str]:
    """Rule (d) for one module of plugins/modules/."""
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    allowed = {id(node) for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main"}
    errors = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and id(node) not in allowed:
            what = "class" if isinstance(node, ast.ClassDef) else "function"
            errors.append(
                f"[rule d] {where(path, node.lineno)}: {what} {node.name} - a module stays thin: docs, argument spec, a typed "
                "request and run(module, lambda api: ...) in main(). Move the code into the feature package under "
                "plugins/module_utils/ (pure parts in logic.py, API calls in api.py, the task in run.py)."
            )
    return errors


def stray_files() -> list[str]:
    """Rule (e) for plugins/module_utils/."""
    return [
        f"[rule e] {path.relative_to(REPO)} - plugins/module_utils/ holds feature packages plus {', '.join(TOP_LEVEL_FILES)}. "
        "Put new code into the feature package it belongs to (or a new package _<feature>/ with logic.py, api.py, run.py)."
        for path in sorted(MODULE_UTILS.glob("*.py"))
        if path.name not in TOP_LEVEL_FILES
    ]


def report(errors: list[str]) -> str:
    return "The layout rules of plugins/ (see tests/unit/test_layout.py) are broken:\n" + "\n".join(errors)


# -- the tree as it is ------------------------------------------------------------------------------


def test_the_tree_is_where_the_rules_expect_it() -> None:
    names = {p.name for p in packages()}
    assert {"_machine", "_drain", "_terminate", "_hook", "_condition", "_info", "_mark", "_alive"} <= names
    assert set(SHARED) <= names and ORCHESTRATOR in names
    assert (MODULE_UTILS / TRANSPORT / "client.py").is_file()
    assert len(list(MODULES.glob("*.py"))) >= 9


def test_pure_files_do_not_talk_to_the_api_directly_or_through_other_files() -> None:
    assert MODULE_UTILS / "_drain" / "logic.py" in pure_files() and PLUGINS / "action" / "machine_drain.py" in pure_files()
    errors = [error for path in pure_files() for error in impure_imports(path) + indirect_impure_imports(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


def test_only_module_py_imports_ansible_module() -> None:
    errors = [error for root in (PLUGINS, EXTENSIONS) for path in python_files(root) for error in ansible_module_imports(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


def test_the_transport_imports_no_feature_package() -> None:
    errors = [error for path in python_files(MODULE_UTILS / TRANSPORT) for error in transport_imports(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


def test_module_utils_imports_no_entry_point() -> None:
    errors = [error for path in python_files(MODULE_UTILS) for error in entry_point_imports(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


def test_features_lean_only_on_the_shared_packages() -> None:
    errors = [error for package in packages() for path in python_files(package) for error in feature_imports(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


def test_modules_define_only_main() -> None:
    errors = [error for path in python_files(MODULES) for error in module_definitions(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


def test_module_utils_holds_packages_and_three_files() -> None:
    errors = stray_files()
    if errors:
        pytest.fail(report(errors), pytrace=False)


# -- the rules catch what they should ---------------------------------------------------------------

LOGIC = MODULE_UTILS / "_drain" / "logic.py"
FLAVOUR = MODULE_UTILS / "_machine" / "flavour" / "base.py"
API = MODULE_UTILS / "_drain" / "api.py"


@pytest.mark.parametrize(
    ("path", "source"),
    [
        (LOGIC, f"from {UTILS}._k8s.client import KubeApi"),
        (LOGIC, f"from {UTILS}._k8s import errors"),
        (LOGIC, f"from {UTILS} import _k8s"),
        (LOGIC, f"import {UTILS}._module"),
        (LOGIC, "from .._module import run"),
        (LOGIC, "from .._k8s.paths import resource_path"),
        (FLAVOUR, "from ..._k8s.paths import resource_path"),
        (LOGIC, "import kubernetes.client"),
        (LOGIC, "from kubernetes import client"),
        (LOGIC, "from ansible.module_utils.basic import AnsibleModule"),
        (LOGIC, "from ansible.module_utils import basic"),
        (LOGIC, "def f():\n    from kubernetes.client import ApiClient\n"),
        (LOGIC, "from kubernetes.utils import parse_quantity"),
        (LOGIC, "from kubernetes.utils import create_from_dict"),
        (LOGIC, f"from {UTILS}._machine.api import get_machine"),
        (LOGIC, "from . import run"),
        (LOGIC, "from .._terminate.run import TerminateOptions"),
    ],
)
def test_rule_a_catches_an_impure_import(path, source) -> None:
    errors = impure_imports(path, source)
    assert len(errors) == 1, errors
    assert errors[0].startswith("[rule a] plugins/module_utils/")


@pytest.mark.parametrize(
    "source",
    [
        f"from {UTILS}._machine.flavour import flavour_for",
        f"from {UTILS}._errors import MachineError",
        "from .logic import plan_drain",
        "from .._module_helpers import x",
        f"from {UTILS}._drain.budgets import budget_groups",
        f"from {UTILS}._terminate.apiary import x",
        "import json",
        "from kubernetes.utils.quantity import parse_quantity",
    ],
)
def test_rule_a_lets_pure_imports_be(source) -> None:
    assert impure_imports(LOGIC, source) == []


def test_rule_a_lets_api_and_run_talk_to_the_api() -> None:
    assert impure_imports(API, f"from {UTILS}._k8s.client import KubeApi\nimport kubernetes") == []
    assert impure_imports(MODULE_UTILS / "_drain" / "run.py", f"from {UTILS}._k8s.client import KubeApi") == []


@pytest.mark.parametrize(
    "source",
    ["from ansible.module_utils.basic import AnsibleModule", "import ansible.module_utils.basic", "from somewhere import AnsibleModule"],
)
def test_rule_b_catches_ansible_module(source) -> None:
    assert ansible_module_imports(MODULES / "machine_drain.py", source)[0].startswith("[rule b] plugins/modules/machine_drain.py:1")
    assert ansible_module_imports(API, source)
    assert ansible_module_imports(MODULE_UTILS / "_module.py", source) == []


@pytest.mark.parametrize(
    "source",
    [f"from {UTILS}._drain.logic import go_quote", "from .._machine import flavour", f"import {UTILS}._module", "from .. import _hook"],
)
def test_rule_c_catches_the_transport_importing_upwards(source) -> None:
    errors = transport_imports(MODULE_UTILS / TRANSPORT / "client.py", source)
    assert len(errors) == 1
    assert errors[0].startswith("[rule c] plugins/module_utils/_k8s/client.py:1")


def test_rule_c_lets_the_transport_import_itself() -> None:
    assert transport_imports(MODULE_UTILS / TRANSPORT / "client.py", "from .errors import ApiError\nfrom .._errors import MachineError") == []


def test_rule_d_catches_code_in_a_module() -> None:
    source = "def main():\n    def helper():\n        pass\n\n\ndef _spec():\n    pass\n\n\nclass Options:\n    pass\n"
    errors = module_definitions(MODULES / "machine_drain.py", source)
    assert [error.split(" - ")[0] for error in errors] == [
        "[rule d] plugins/modules/machine_drain.py:6: function _spec",
        "[rule d] plugins/modules/machine_drain.py:10: class Options",
        "[rule d] plugins/modules/machine_drain.py:2: function helper",
    ]
    assert module_definitions(MODULES / "machine_drain.py", "def main():\n    run(module, lambda api: api)\n") == []


BUDGETS = MODULE_UTILS / "_drain" / "budgets.py"
CAPI_FLAVOUR = MODULE_UTILS / "_machine" / "flavour" / "capi.py"


def test_rule_a_follows_imports_to_the_transport(monkeypatch) -> None:
    monkeypatch.setitem(SOURCES, BUDGETS, f"from {UTILS}._drain.pods import pod_key\nfrom .._k8s.paths import resource_path\n")
    (error,) = indirect_impure_imports(LOGIC, f"from {UTILS}._drain.budgets import budget_groups")
    assert error.startswith(f"[rule a] plugins/module_utils/_drain/logic.py:1: `from {UTILS}._drain.budgets import budget_groups`")
    assert "plugins/module_utils/_drain/budgets.py -> `from .._k8s.paths import resource_path`" in error


def test_rule_a_follows_imports_through_a_package_init(monkeypatch) -> None:
    monkeypatch.setitem(SOURCES, CAPI_FLAVOUR, f"import json\nfrom {UTILS}._machine.api import get_machine\n")
    (error,) = indirect_impure_imports(LOGIC, f"from {UTILS}._machine.flavour.base import Flavour")
    assert "_machine/flavour/__init__.py -> plugins/module_utils/_machine/flavour/capi.py -> plugins/module_utils/_machine/api.py -> api.py" in error


def test_rule_a_reports_a_direct_impure_import_once() -> None:
    source = f"from {UTILS}._drain.api import drain_pass"
    assert len(impure_imports(LOGIC, source)) == 1
    assert indirect_impure_imports(LOGIC, source) == []


def test_rule_a_holds_for_the_controller_side() -> None:
    action = PLUGINS / "action" / "machine_drain.py"
    (error,) = impure_imports(action, f"from {UTILS}._k8s.client import KubeApi")
    assert error.startswith("[rule a] plugins/action/machine_drain.py:1:") and "runs on the controller" in error
    assert indirect_impure_imports(action, f"from {UTILS}._drain.run import run_drain") == []  # reported directly
    assert impure_imports(action, f"from {UTILS}._drain.run import run_drain")
    assert indirect_impure_imports(action, f"from {UTILS}._delete.logic import DeleteRequest") == []


def test_rule_c_catches_module_utils_importing_an_entry_point() -> None:
    for source in (f"from {COLLECTION}.plugins.plugin_utils._rounds import DrainRounds", "from ...modules import machine_drain"):
        (error,) = entry_point_imports(LOGIC, source)
        assert error.startswith("[rule c] plugins/module_utils/_drain/logic.py:1:")
    assert entry_point_imports(LOGIC, f"from {UTILS}._machine.flavour import flavour_for") == []


FEATURE = MODULE_UTILS / "_gates" / "logic.py"


@pytest.mark.parametrize(
    ("path", "source"),
    [
        (FEATURE, f"from {UTILS}._info.logic import describe"),
        (MODULE_UTILS / "_hook" / "run.py", f"from {UTILS}._condition.logic import patch_builder"),
        (MODULE_UTILS / "_terminate" / "volumes.py", f"from {UTILS}._drain.logic import classify_pods"),
        (MODULE_UTILS / "_terminate" / "api.py", f"from {UTILS}._drain.api import drain_pass"),
        (MODULE_UTILS / "_terminate" / "api.py", "from .. import _drain"),
        (MODULE_UTILS / "_drain" / "api.py", "from .._terminate.volumes import claims_of_pods"),
        (MODULE_UTILS / "_machine" / "api.py", f"from {UTILS}._drain.logic import pod_key"),
        (MODULE_UTILS / "_workload" / "logic.py", f"import {UTILS}._info.logic"),
    ],
)
def test_rule_f_catches_a_feature_leaning_on_another(path, source) -> None:
    (error,) = feature_imports(path, source)
    assert error.startswith(f"[rule f] {path.relative_to(REPO)}:1: `")
    assert "imports feature" in error


@pytest.mark.parametrize(
    ("path", "source"),
    [
        (FEATURE, f"from {UTILS}._machine.view import describe\nfrom {UTILS}._options.logic import check_options"),
        (FEATURE, f"from {UTILS}._gates.api import follow_machines\nfrom {UTILS}._k8s.client import KubeApi\nfrom .._errors import MachineError"),
        (MODULE_UTILS / "_drain" / "run.py", f"from {UTILS}._workload import api as workload"),
        (MODULE_UTILS / "_terminate" / "api.py", f"from {UTILS}._drain.api import SkippedPods, load_drain_rules"),
        (MODULE_UTILS / "_terminate" / "run.py", f"from {UTILS}._drain.rules import normalize_rules\nfrom .._drain import rules"),
        (MODULE_UTILS / "_delete" / "run.py", f"from {UTILS}._drain.run import run_drain\nfrom {UTILS}._terminate.run import terminate_machine"),
    ],
)
def test_rule_f_lets_features_lean_on_the_shared_packages(path, source) -> None:
    assert feature_imports(path, source) == []


# -- rule (g): one way for a task's deadline to reach the transport --------------------------

DEADLINE_TRANSPORT = PLUGINS / "module_utils" / "_k8s"
# Everything that runs a task: plugins (modules, module_utils, inventory, action) and the event source.
DEADLINE_SOURCES = (PLUGINS, REPO / "extensions")
NAMES = ("deadline", "_deadline")


def deadline_assignments(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, text) of every assignment of a ``deadline`` (or ``_deadline``) attribute of anything
    but ``self`` - ``api.deadline = ...``, ``self.api.deadline += ...``, ``setattr(api, "deadline", ...)``.
    An object's own ``self.deadline`` (a drain's, a gate's) is its own business."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and name.value in NAMES:
                found.append((node.lineno, ast.unparse(node)))
            continue
        flat: list[ast.expr] = []
        while targets:
            target = targets.pop()
            if isinstance(target, (ast.Tuple, ast.List)):
                targets.extend(target.elts)
            else:
                flat.append(target)
        for target in flat:
            if isinstance(target, ast.Attribute) and target.attr in NAMES and not (isinstance(target.value, ast.Name) and target.value.id == "self"):
                found.append((node.lineno, ast.unparse(target)))
    return found


def deadline_rule_files() -> list[Path]:
    return sorted(path for root in DEADLINE_SOURCES for path in root.rglob("*.py") if DEADLINE_TRANSPORT not in path.parents)


def test_rule_g_nothing_outside_the_transport_assigns_a_transports_deadline() -> None:
    offences = [
        f"{path.relative_to(REPO)}:{line}: {text} = ..." for path in deadline_rule_files() for line, text in deadline_assignments(path.read_text(), str(path))
    ]
    assert not offences, (
        "A task's deadline is given to the transport where the task's KubeApi is made - "
        "api.fork(deadline=...) - and passed down as an absolute deadline, never assigned afterwards:\n" + "\n".join(offences)
    )


def test_rule_g_finds_each_way_of_writing_the_assignment() -> None:
    source = (
        "api.deadline = 1\n"
        "self.api.deadline = 2\n"
        "task.deadline += 3\n"
        "a, b.deadline = 4, 5\n"
        "x._deadline: float = 6\n"
        "setattr(api, 'deadline', 7)\n"
        "self.deadline = 8\n"  # an object's own deadline
        "deadline = 9\n"
        "api = api.fork(deadline=10)\n"
    )
    assert [line for line, _text in deadline_assignments(source)] == [1, 2, 3, 4, 5, 6]


def test_rule_g_checks_the_runners_and_not_the_transport() -> None:
    files = {path.relative_to(REPO).as_posix() for path in deadline_rule_files()}
    assert "plugins/module_utils/_drain/run.py" in files
    assert "plugins/inventory/machines.py" in files
    assert "extensions/eda/plugins/event_source/machine_gates.py" in files
    assert not [name for name in files if name.startswith("plugins/module_utils/_k8s/")]


# -- rule (h): floors, no import back up ---------------------------------------------------------

# From the bottom up; every package not named is a feature (the floor of FEATURES).
FEATURES = "features"
FLOORS = (("_errors", "_timeutil"), (TRANSPORT,), ("_options",), ("_machine",), ("_workload",), (FEATURES,), (ORCHESTRATOR,), ("_module",))


def floor_of(name: str) -> int:
    """The floor of a top-level name of plugins/module_utils/ (a package, or a top-level file without .py)."""
    for level, names in enumerate(FLOORS):
        if name in names:
            return level
    return next(level for level, names in enumerate(FLOORS) if FEATURES in names)


def floor_imports(path: Path, source: str | None = None) -> list[str]:
    """Rule (h) for one file of plugins/module_utils/: its imports of a higher floor."""
    mine = path.relative_to(MODULE_UTILS).parts[0].removesuffix(".py")
    errors = []
    for line, target, text in first_per_file(imports(path, source), lambda t: t.startswith(UTILS + ".")):
        other = target[len(UTILS) + 1 :].split(".")[0]
        if floor_of(other) > floor_of(mine):
            errors.append(
                f"[rule h] {where(path, line)}: `{text}` - {mine} (floor {floor_of(mine)}) imports {other}, a floor above it "
                f"({floor_of(other)}; the floors: {' < '.join('/'.join(names) for names in FLOORS)}). Move what both need down "
                f"(into {mine} or below), or let the caller above pass it in."
            )
    return errors


def test_no_import_runs_back_up_a_floor() -> None:
    errors = [error for path in python_files(MODULE_UTILS) for error in floor_imports(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


def test_the_machine_package_imports_nothing_of_the_workload_package() -> None:
    found = [
        f"{where(path, line)}: `{text}`"
        for path in python_files(MODULE_UTILS / "_machine")
        for line, target, text in imports(path)
        if under(target, f"{UTILS}._workload")
    ]
    assert not found, "_machine is below _workload (rule h) and imports nothing of it:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("path", "source"),
    [
        (MODULE_UTILS / "_machine" / "waits.py", f"from {UTILS}._workload.api import node_api"),
        (MODULE_UTILS / "_k8s" / "cache.py", "from .._machine.flavour import CAPI_GROUP"),
        (MODULE_UTILS / "_options" / "logic.py", f"from {UTILS}._machine.flavour import flavour_for"),
        (MODULE_UTILS / "_drain" / "run.py", f"from {UTILS}._delete.logic import DeleteRequest"),
        (MODULE_UTILS / "_delete" / "run.py", f"from {UTILS}._module import run"),
        (MODULE_UTILS / "_timeutil.py", f"from {UTILS}._k8s.paths import resource_path"),
    ],
)
def test_rule_h_catches_an_import_back_up(path, source) -> None:
    (error,) = floor_imports(path, source)
    assert error.startswith(f"[rule h] {path.relative_to(REPO)}:1: `")


def test_rule_h_lets_imports_run_down_and_sideways() -> None:
    assert floor_imports(MODULE_UTILS / "_workload" / "api.py", f"from {UTILS}._machine.api import get_node\nfrom {UTILS}._k8s.client import KubeApi") == []
    assert floor_imports(MODULE_UTILS / "_terminate" / "api.py", f"from {UTILS}._drain.api import SkippedPods") == []
    assert floor_imports(MODULE_UTILS / "_module.py", f"from {UTILS}._options.connection import CONNECTION_OPTIONS") == []


# -- rule (i): no probing of the transport ----------------------------------------------------------

# What a transport (a KubeApi, or a fork of one) is called where it is passed around.
TRANSPORT_NAMES = ("api", "node_api", "kube", "task_api", "_api")
PROBES = ("getattr", "hasattr")


def _transport(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in TRANSPORT_NAMES
    return isinstance(node, ast.Attribute) and node.attr in TRANSPORT_NAMES


def transport_probes(path: Path, source: str | None = None) -> list[str]:
    """Rule (i) for one file under plugins/."""
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    return [
        f"[rule i] {where(path, node.lineno)}: `{ast.unparse(node)}` - a transport is not probed for what it offers: ask it "
        "by name and type (api.cached_reader() for reads a run may cache, api.live_reader() for the server's word, "
        "api.background_watches), and give the unit tests' stand-in (tests/unit/fake_kube.py) the same attribute."
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES and node.args and _transport(node.args[0])
    ]


def test_nothing_probes_the_transport() -> None:
    errors = [error for path in python_files(PLUGINS) for error in transport_probes(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


@pytest.mark.parametrize(
    "source",
    [
        'share = getattr(api, "shared_view", None)',
        'getattr(self.api, "background_watches", True)',
        'hasattr(node_api, "stop_views")',
        "x = getattr(self._api, 'server', '')",
    ],
)
def test_rule_i_catches_a_probe(source) -> None:
    (error,) = transport_probes(API, source)
    assert error.startswith("[rule i] plugins/module_utils/_drain/api.py:1:")


def test_rule_i_lets_other_getattrs_be() -> None:
    assert transport_probes(API, 'getattr(exc, "status", 0)\ngetattr(self._api_client, "configuration", None)\napi.cached_reader()') == []


# -- rule (j): flavour names compared only in the flavour adapters ---------------------------------

FLAVOUR_DIR = MODULE_UTILS / "_machine" / "flavour"
# The flavours' names and API groups, as constants and as text.
FLAVOUR_CONSTANTS = ("OPENSHIFT", "CLUSTERAPI", "OPENSHIFT_GROUP", "CAPI_GROUP")
FLAVOUR_TEXTS = ("openshift", "clusterapi", "machine.openshift.io", "cluster.x-k8s.io")


def _names_a_flavour(node: ast.expr) -> bool:
    """Whether an operand is a flavour's name or group: a constant of the flavour adapter, its text, a
    ``flavour.name`` / ``flavour.group``, or a tuple/list/set of those."""
    if isinstance(node, ast.Name | ast.Attribute) and (node.id if isinstance(node, ast.Name) else node.attr) in FLAVOUR_CONSTANTS:
        return True
    if isinstance(node, ast.Constant) and node.value in FLAVOUR_TEXTS:
        return True
    if isinstance(node, ast.Attribute) and node.attr in ("name", "group") and "flavour" in ast.unparse(node.value).lower():
        return True
    return isinstance(node, ast.Tuple | ast.List | ast.Set) and any(_names_a_flavour(element) for element in node.elts)


def flavour_comparisons(path: Path, source: str | None = None) -> list[str]:
    """Rule (j) for one file under plugins/: comparisons with a flavour's name or group, and tuples of them kept for one."""
    if FLAVOUR_DIR in path.parents:
        return []
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    found = [node for node in ast.walk(tree) if isinstance(node, ast.Compare) and any(_names_a_flavour(part) for part in (node.left, *node.comparators))]
    found += [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Tuple | ast.List | ast.Set)
        and _names_a_flavour(node.value)
        and not any(isinstance(element, ast.Tuple) for element in node.value.elts)
    ]
    return [
        f"[rule j] {where(path, node.lineno)}: `{ast.unparse(node)}` - only the flavour adapters (_machine/flavour/) tell the flavours "
        "apart by name or group. Ask the flavour what it does instead (an attribute or method of Flavour, set in openshift.py "
        "and capi.py: drain_skipped_without_node, capi_node_rules, provider_terminates_instance, ...)."
        for node in sorted(found, key=lambda node: node.lineno)
    ]


def test_only_the_flavour_adapters_compare_flavour_names() -> None:
    errors = [error for path in python_files(PLUGINS) for error in flavour_comparisons(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


@pytest.mark.parametrize(
    "source",
    [
        "if flavour.name == OPENSHIFT:\n    pass",
        "x = self.flavour.group != CAPI_GROUP",
        "y = recorder.flavour.name in (OPENSHIFT,)",
        "PROVIDER_TERMINATED_FLAVOURS = (OPENSHIFT,)",
        "z = info['flavour'] == 'openshift'",
        "w = group == CAPI_GROUP",
    ],
)
def test_rule_j_catches_a_flavour_name_compared(source) -> None:
    (error,) = flavour_comparisons(LOGIC, source)
    assert error.startswith("[rule j] plugins/module_utils/_drain/logic.py:1:")


def test_rule_j_lets_the_flavour_adapters_and_questions_to_the_flavour_be() -> None:
    assert flavour_comparisons(FLAVOUR_DIR / "__init__.py", "if group == OPENSHIFT_GROUP:\n    pass") == []
    assert flavour_comparisons(LOGIC, "if flavour.capi_node_rules and step.name == STEP_NODE:\n    pass\nVERSIONS = ((OPENSHIFT_GROUP, ('v1beta1',)),)") == []


# -- rule (k): sizes ---------------------------------------------------------------------------

MAX_CLASS_LINES = 250
MAX_CLIENT_LINES = 500


def long_classes(path: Path, source: str | None = None) -> list[str]:
    """Rule (k) for one file under plugins/."""
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    return [
        f"[rule k] {where(path, node.lineno)}: class {node.name} is {node.end_lineno - node.lineno + 1} lines (at most {MAX_CLASS_LINES}) - "
        "it holds more than one concern: give each concern it calls a room of its own (a class or a file) and let it call them."
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
    ]


def test_no_class_is_over_its_size() -> None:
    errors = [error for path in python_files(PLUGINS) for error in long_classes(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


def test_rule_k_catches_a_long_class() -> None:
    source = "class Big:\n" + "    x = 1\n" * MAX_CLASS_LINES
    (error,) = long_classes(LOGIC, source)
    assert error.startswith(f"[rule k] plugins/module_utils/_drain/logic.py:1: class Big is {MAX_CLASS_LINES + 1} lines")
    assert long_classes(LOGIC, "class Small:\n" + "    x = 1\n" * (MAX_CLASS_LINES - 1)) == []


def test_the_transport_client_stays_under_its_size() -> None:
    lines = len((MODULE_UTILS / TRANSPORT / "client.py").read_text().splitlines())
    assert lines < MAX_CLIENT_LINES, (
        f"[rule k] plugins/module_utils/_k8s/client.py is {lines} lines (under {MAX_CLIENT_LINES}): move a concern of KubeApi into a file of its own in _k8s/"
    )
