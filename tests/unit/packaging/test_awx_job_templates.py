"""The AWX job templates and surveys in extensions/awx, read as files: every survey answer lands
on a variable the playbook reads, with the playbook's own defaults, and the docs show them. What
AWX itself makes of them (it accepts the surveys, validates the answers, injects the credentials)
is proven on a real AWX by tests/integration/test_awx.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]


class _AnsibleYaml(yaml.SafeLoader):
    """Reads Ansible YAML: an ``!unsafe`` string is just its text here."""


_AnsibleYaml.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def load_ansible_yaml(text: str):
    return yaml.load(text, Loader=_AnsibleYaml)


AWX = REPO / "extensions" / "awx"
BIN = Path(sys.executable).parent


def _configure_play() -> dict:
    return load_ansible_yaml((AWX / "configure_awx.yml").read_text())[0]


def _templates() -> list[dict]:
    return _configure_play()["vars"]["lifecycle_awx_job_templates"]


def _survey(template: dict) -> dict:
    return yaml.safe_load((AWX / template["survey"]).read_text())


def _playbook_inputs(playbook: Path) -> dict:
    """The extra variables a playbook reads, with its defaults: its play ``vars`` and every
    ``name | default(value, true)`` it templates (not ``object.key | default(...)``)."""
    play = yaml.safe_load(playbook.read_text())[0]
    inputs = dict(play.get("vars") or {})
    for name, quoted, number in re.findall(r"(?<![.\w])(\w+) \| default\((?:'([^']*)'|(\d+))", playbook.read_text()):
        inputs.setdefault(name, int(number) if number else quoted)
    return inputs


def _ids(templates: list[dict]) -> list[str]:
    return [Path(t["playbook"]).stem for t in templates]


TEMPLATES = _templates()


def test_there_is_a_job_template_per_awx_playbook() -> None:
    assert sorted(_ids(TEMPLATES)) == ["delete_machine", "delete_machines", "drain_node", "teardown_cluster"]
    assert len({t["name"] for t in TEMPLATES}) == len(TEMPLATES)


def _workload_credential_type() -> dict:
    return yaml.safe_load((AWX / "workload-kubeconfig-credential-type.yml").read_text())


def _not_asked(playbook: Path) -> set[str]:
    """A playbook's inputs no survey asks for: mappings (``workload_cluster``), which a survey cannot carry and
    only extra variables give, and what the workload cluster kubeconfig credential injects."""
    mappings = {name for name, default in _playbook_inputs(playbook).items() if isinstance(default, dict)}
    return mappings | set(_workload_credential_type()["injectors"]["extra_vars"])


@pytest.mark.parametrize("template", TEMPLATES, ids=_ids(TEMPLATES))
def test_survey_variables_are_exactly_the_playbook_inputs(template: dict) -> None:
    asked = {q["variable"] for q in _survey(template)["spec"]}
    playbook = REPO / template["playbook"]
    assert asked == set(_playbook_inputs(playbook)) - _not_asked(playbook)


WORKLOAD_SURVEY = {"workload_cluster_source", "workload_kubeconfig"}
WORKLOAD_EXTRA_VARS = {"workload_cluster", "workload_kubeconfig_credential"}


@pytest.mark.parametrize("template", TEMPLATES, ids=_ids(TEMPLATES))
def test_the_templates_that_reach_nodes_say_how_the_workload_clusters_are_reached(template: dict) -> None:
    """Every job template whose playbook drains or deletes Machines asks for the workload cluster's way, and its
    playbook takes the mapping and the credential's file too, and gets the credential; teardown cluster none of it."""
    playbook = REPO / template["playbook"]
    inputs = set(_playbook_inputs(playbook))
    asked = {q["variable"] for q in _survey(template)["spec"]}
    reaches_nodes = Path(template["playbook"]).stem in ("delete_machine", "delete_machines", "drain_node")
    if reaches_nodes:
        assert asked >= WORKLOAD_SURVEY and inputs >= WORKLOAD_SURVEY | WORKLOAD_EXTRA_VARS
        assert _playbook_inputs(playbook)["workload_cluster"] == {}
        assert "vars/workload_cluster.yml" in playbook.read_text(), "the playbook checks the combination before anything"
        assert "{{ workload_cluster_option }}" in playbook.read_text(), "the playbook passes the option on"
    else:
        assert not (asked | inputs) & (WORKLOAD_SURVEY | WORKLOAD_EXTRA_VARS)
    assert template.get("workload_credential", False) is reaches_nodes


def test_the_workload_source_choices_are_the_options_sources() -> None:
    sources = re.findall(r"V\((\w+)\)", (REPO / "plugins" / "doc_fragments" / "workload.py").read_text().split("C(source) is", 1)[1])
    for name in ("delete_machine", "delete_machines", "drain_node"):
        spec = yaml.safe_load((AWX / "surveys" / f"{name}.yml").read_text())
        question = next(q for q in spec["spec"] if q["variable"] == "workload_cluster_source")
        assert question["choices"] == sources[:3] == ["secret", "management", "kubeconfig"]


def test_the_workload_credential_type_is_one_awx_accepts() -> None:
    """As AWX checks a custom credential type: a kind a user may create, input fields with id, label and type,
    required fields among them, and injectors that only use inputs and the files they write (tower.filename.<name>)."""
    kind = _workload_credential_type()
    assert kind["kind"] == "cloud" and kind["name"] and kind["description"]
    fields = {field["id"]: field for field in kind["inputs"]["fields"]}
    assert all(field["type"] == "string" and field["label"] for field in fields.values())
    assert set(kind["inputs"]["required"]) <= set(fields)
    assert fields["kubeconfig"]["secret"] is True and fields["kubeconfig"]["multiline"] is True
    injectors = kind["injectors"]
    assert set(injectors) == {"file", "extra_vars"}
    labels = {key.split(".", 1)[1] for key in injectors["file"]}
    assert all(key.startswith("template.") for key in injectors["file"])
    for template in injectors["file"].values():
        assert set(re.findall(r"{{\s*(\w+)\s*}}", template)) <= set(fields)
    assert injectors["extra_vars"] == {"workload_kubeconfig_credential": "{{ tower.filename.kubeconfig }}"}
    assert set(re.findall(r"tower\.filename\.(\w+)", str(injectors["extra_vars"]))) <= labels
    # A survey answer would hide an injected extra variable of the same name (AWX passes the answers last).
    asked = {q["variable"] for t in TEMPLATES for q in _survey(t)["spec"]}
    assert not asked & set(injectors["extra_vars"])


@pytest.mark.parametrize("template", TEMPLATES, ids=_ids(TEMPLATES))
def test_survey_defaults_are_the_playbook_defaults(template: dict) -> None:
    """Launched with the form as it opens (or through the API with nothing but the Machine), the
    job gets the values the playbook would use on its own."""
    defaults = _playbook_inputs(REPO / template["playbook"])
    survey = _survey(template)
    for question in survey["spec"]:
        value = question.get("default", "")
        if question["type"] == "textarea":
            value = yaml.safe_load(value)  # the playbooks read YAML text from a textarea
        assert value == defaults[question["variable"]], question["variable"]


def _docs_survey_tables() -> dict[str, list[dict]]:
    """docs/awx.md's survey tables, by the bold title above each (``**delete machine**``): one dict per row."""
    section = (REPO / "docs" / "awx.md").read_text().split("## 5. The surveys", 1)[1].split("\n## ", 1)[0]
    tables: dict[str, list[dict]] = {}
    title = None
    for line in section.splitlines():
        if bold := re.fullmatch(r"\*\*(.+)\*\*", line.strip()):
            title = bold[1]
            tables[title] = []
        elif line.startswith("| ") and title is not None and not line.startswith(("| Question", "| ---")):
            question, variable, type_default, _maps_to = [cell.strip() for cell in line.strip("|").split(" | ")]
            kind, default = type_default.split(", ", 1)
            tables[title].append({"question": question, "variable": variable.strip("`"), "type": kind, "default": default})
    return tables


def _documented_type(question: dict) -> str:
    if question["type"] == "multiplechoice":
        return " / ".join(question["choices"])
    return question["type"]


def _documented_default(question: dict) -> str:
    default = question.get("default", "")
    if default == "":
        return "empty"
    return str(default) if question["type"] == "integer" else f"`{default}`"


def test_the_docs_survey_tables_are_the_surveys() -> None:
    """docs/awx.md shows each survey's questions, in order, with their variables, types and defaults."""
    tables = _docs_survey_tables()
    assert sorted(tables) == sorted(t["name"].removeprefix("lifecycle.machine - ") for t in TEMPLATES)
    for template in TEMPLATES:
        rows = tables[template["name"].removeprefix("lifecycle.machine - ")]
        expected = [
            {"question": q["question_name"], "variable": q["variable"], "type": _documented_type(q), "default": _documented_default(q)}
            for q in _survey(template)["spec"]
        ]
        documented = [{**row, "type": row["type"].split(" (", 1)[0]} for row in rows]  # "textarea (YAML or JSON)"
        assert documented == expected, template["name"]


def _module_choices(module: str, option: str) -> list[str]:
    source = (REPO / "plugins" / "modules" / f"{module}.py").read_text()
    documentation = yaml.safe_load(source.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    return documentation["options"][option]["choices"]


def _role_choices(role: str, option: str) -> list[str]:
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return specs["argument_specs"]["main"]["options"][option]["choices"]


@pytest.mark.parametrize(
    ("survey", "variable", "choices"),
    [
        ("drain_node", "state", lambda: _module_choices("machine_drain", "state")),
        ("teardown_cluster", "on_timeout", lambda: _role_choices("teardown_cluster", "teardown_cluster_on_timeout")),
    ],
)
def test_choices_are_the_ones_the_module_or_role_accepts(survey: str, variable: str, choices) -> None:
    spec = yaml.safe_load((AWX / "surveys" / f"{survey}.yml").read_text())
    question = next(q for q in spec["spec"] if q["variable"] == variable)
    assert question["choices"] == choices()


def test_configure_playbook_passes_syntax_check() -> None:
    checked = subprocess.run(
        [str(BIN / "ansible-playbook"), "--syntax-check", "-i", "localhost,", str(AWX / "configure_awx.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_configure_playbook_uses_only_documented_awx_options() -> None:
    """Every awx.awx task names options its module documents, with its required ones, and
    literal values among their choices (ansible-lint does not check the arguments of these modules)."""
    tasks = [(name, task[name]) for task in _configure_play()["tasks"] for name in task if name.startswith("awx.awx.")]
    modules = sorted({name for name, _arguments in tasks})
    listed = subprocess.run([str(BIN / "ansible-doc"), "--json", *modules], capture_output=True, text=True, check=True)
    docs = {name: doc["doc"]["options"] for name, doc in json.loads(listed.stdout).items()}
    for name, arguments in tasks:
        options = docs[name]
        known = {alias for option, spec in options.items() for alias in [option, *(spec.get("aliases") or [])]}
        assert set(arguments) <= known, f"{name}: unknown options {sorted(set(arguments) - known)}"
        missing = [option for option, spec in options.items() if spec.get("required") and option not in arguments]
        assert not missing, f"{name}: missing required options {missing}"
        for option, value in arguments.items():
            choices = (options.get(option) or {}).get("choices")
            if choices and isinstance(value, str) and "{{" not in value:
                assert value in choices, f"{name}: {option}={value!r} is not one of {choices}"


def test_job_templates_prompt_for_nothing_but_the_job_type_of_the_deletions() -> None:
    """The survey is the only input; the deletion templates also ask Run or Check (the preflight)."""
    task = next(t for t in _configure_play()["tasks"] if "awx.awx.job_template" in t)
    arguments = task["awx.awx.job_template"]
    assert arguments["survey_enabled"] is True
    assert all(value is False for key, value in arguments.items() if key.startswith("ask_") and key != "ask_job_type_on_launch")
    assert arguments["ask_job_type_on_launch"] == "{{ item.check_on_launch | default(false) }}"
    checked = {t["playbook"] for t in TEMPLATES if t.get("check_on_launch")}
    assert checked == {"playbooks/delete_machine.yml", "playbooks/delete_machines.yml"}


def test_the_eda_controller_rulebook_launches_a_job_template_that_takes_the_event() -> None:
    """serve_gates_awx.yml names the job template configure_awx.yml creates, which runs serve_gate.yml
    and accepts the extra variables the EDA controller sends (the event and the task file)."""
    rulebook = yaml.safe_load((REPO / "extensions" / "eda" / "rulebooks" / "serve_gates_awx.yml").read_text())[0]
    (rule,) = rulebook["rules"]
    launch = rule["action"]["run_job_template"]
    task = next(t["awx.awx.job_template"] for t in _configure_play()["tasks"] if t.get("awx.awx.job_template", {}).get("name") == launch["name"])
    assert (REPO / task["playbook"]).is_file()
    assert task["ask_variables_on_launch"] is True and "survey_spec" not in task
    assert set(launch["job_args"]["extra_vars"]) == set(_playbook_inputs(REPO / task["playbook"]))
