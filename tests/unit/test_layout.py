"""The layout of plugins/ stays as designed (read from the source with ast, nothing is imported):

(a) in a feature package (``plugins/module_utils/_<feature>/``) only ``api.py``
    and ``run.py`` talk to the API: every other file is pure, dicts in and
    decisions out, importing nothing of ``_k8s``, ``_module``, ``kubernetes``
    or ``ansible.module_utils.basic``, nor another package's api/run;
(b) only ``_module.py`` imports AnsibleModule (``ansible.module_utils.basic``);
(c) ``_k8s/`` (the transport) imports no feature package and not ``_module``;
(d) modules in ``plugins/modules/`` are thin: no function but ``main``, no class;
(e) ``plugins/module_utils/`` holds packages plus ``_module.py``,
    ``_errors.py`` and ``_timeutil.py``: new code goes into a package.

Each failure says which rule broke, where, and how to fix it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
MODULE_UTILS = PLUGINS / "module_utils"
MODULES = PLUGINS / "modules"
COLLECTION = "ansible_collections.lifecycle.machine"
UTILS = f"{COLLECTION}.plugins.module_utils"

TRANSPORT = "_k8s"
API_FILES = ("api.py", "run.py")
TOP_LEVEL_FILES = ("_module.py", "_errors.py", "_timeutil.py")
# What only api.py / run.py of a feature package may import.
IMPURE = (f"{UTILS}._k8s", f"{UTILS}._module", "kubernetes", "ansible.module_utils.basic")
BASIC = "ansible.module_utils.basic"


# -- reading imports ------------------------------------------------------------------------


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
    source = path.read_text() if source is None else source
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


def under(target: str, prefix: str) -> bool:
    return target == prefix or target.startswith(prefix + ".")


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(REPO)}:{line}"


def feature_packages() -> list[Path]:
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
    return len(parts) >= 2 and parts[0] in {p.name for p in feature_packages()} and parts[1] in ("api", "run")


def impure_imports(path: Path, source: str | None = None) -> list[str]:
    """Rule (a) for one file of a feature package."""
    if path.name in API_FILES:
        return []
    package = path.relative_to(MODULE_UTILS).parts[0]
    errors = []
    for line, target, text in first_per_file(imports(path, source), lambda t: any(under(t, prefix) for prefix in IMPURE)):
        errors.append(
            f"[rule a] {where(path, line)}: `{text}` - {path.name} is a pure file of feature package {package} (dicts in, "
            f"decisions out): only api.py and run.py may import _k8s, _module, kubernetes or {BASIC} (here {target}). "
            f"Move the API call into {package}/api.py (or the task's steps into {package}/run.py) and pass the data in."
        )
    for line, target, text in first_per_file(imports(path, source), talks_to_the_api):
        errors.append(
            f"[rule a] {where(path, line)}: `{text}` - {target} talks to the API, so {path.name} would not be pure any more. "
            f"Import the pure function it uses instead (from that package's logic), or do the call in {package}/api.py or run.py."
        )
    return errors


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
    above = [f"{UTILS}.{p.name}" for p in feature_packages()] + [f"{UTILS}._module"]
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
    packages = {p.name for p in feature_packages()}
    assert {"_machine", "_drain", "_terminate", "_hook", "_condition", "_info", "_mark", "_alive"} <= packages
    assert (MODULE_UTILS / TRANSPORT / "client.py").is_file()
    assert len(list(MODULES.glob("*.py"))) >= 9


def test_a_feature_packages_pure_files_do_not_talk_to_the_api() -> None:
    errors = [error for package in feature_packages() for path in python_files(package) for error in impure_imports(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


def test_only_module_py_imports_ansible_module() -> None:
    errors = [error for path in python_files(PLUGINS) for error in ansible_module_imports(path)]
    if errors:
        pytest.fail(report(errors), pytrace=False)


def test_the_transport_imports_no_feature_package() -> None:
    errors = [error for path in python_files(MODULE_UTILS / TRANSPORT) for error in transport_imports(path)]
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
