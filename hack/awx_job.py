"""What AWX does to launch a job template, for tests that run our playbooks the way AWX runs them.

Restated from AWX's behaviour (no AWX code is imported or copied):

* saving a survey (``JobTemplateSurveySpec`` in ``awx/api/views``): ``name``, ``description`` and a
  non-empty ``spec`` list; every question has ``type``, ``question_name``, ``variable`` (strings) and
  ``required`` (bool); variables are unique; a non-empty default has the question type's Python type;
  ``min``/``max`` are integers; choice questions list choices and their default is one of them;
* launching (``SurveyJobTemplateMixin``): the launch form submits every question, pre-filled with its
  default; extra variables are the template's ``extra_vars``, then each survey default that passes the
  question's own validation, then the answers; an answer that fails validation, a missing required
  answer (even one with a default) or a variable outside the survey (with "prompt on launch" off for
  variables) refuses the launch;
* the job's ``env/extravars`` (``RunJob.build_extra_vars_file`` and ``safe_dump``): every string a user
  could type is written with YAML's ``!unsafe`` tag, so Ansible never templates it; AWX's own
  ``awx_*``/``tower_*`` variables are added;
* the "OpenShift or Kubernetes API Bearer Token" credential (``kubernetes_bearer_token`` injector):
  ``K8S_AUTH_HOST``, ``K8S_AUTH_API_KEY``, and with "Verify SSL" (an input that defaults to on) and non-empty
  CA data ``K8S_AUTH_VERIFY_SSL=True`` and ``K8S_AUTH_SSL_CA_CERT`` naming a file AWX writes under the private
  data dir's ``env/``; otherwise ``K8S_AUTH_VERIFY_SSL=False``, whatever "Verify SSL" says.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import yaml

ALLOWED_TYPES: dict[str, type | tuple[type, ...]] = {
    "text": str,
    "textarea": str,
    "password": str,
    "multiplechoice": str,
    "multiselect": str,
    "integer": int,
    "float": float,
}


class LaunchRefused(Exception):
    """AWX would not start the job (HTTP 400 on launch)."""


def _choices(question: dict) -> list[str]:
    choices = question.get("choices") or []
    return [c for c in choices.splitlines() if c.strip()] if isinstance(choices, str) else list(choices)


def _question_errors(where: str, question: Any) -> list[str]:
    if not isinstance(question, dict):
        return [f"{where} is not a mapping"]
    missing = [
        f"{where}: {field!r} missing or not a {kind.__name__}"
        for field, kind in (("type", str), ("question_name", str), ("variable", str), ("required", bool))
        if not isinstance(question.get(field), kind)
    ]
    if missing:
        return missing
    kind = ALLOWED_TYPES.get(question["type"])
    if kind is None:
        return [f"{where}: type {question['type']!r} is not one of {sorted(ALLOWED_TYPES)}"]
    errors = []
    default = question.get("default")
    if "default" in question and default != "" and (not isinstance(default, kind) or isinstance(default, bool)):
        errors.append(f"{where}: default {default!r} is not a {question['type']}")
    for limit in ("min", "max"):
        value = question.get(limit)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            errors.append(f"{where}: {limit} {value!r} is not an integer")
    if question["type"] in ("multiplechoice", "multiselect"):
        if "choices" not in question:
            return [*errors, f"{where}: a {question['type']} question must list choices"]
        defaults = [d for d in default.splitlines() if d.strip()] if isinstance(default, str) else list(default or [])
        if question["type"] == "multiplechoice" and len(defaults) > 1:
            errors.append(f"{where}: a multiplechoice question has one default")
        if any(d not in _choices(question) for d in defaults):
            errors.append(f"{where}: default {default!r} is not one of the choices")
    return errors


def survey_spec_errors(spec: Any) -> list[str]:
    """What AWX refuses when the survey is saved (empty list: it is accepted)."""
    if not isinstance(spec, dict):
        return ["the survey spec is not a mapping"]
    errors = [
        f"field {field!r} missing or not a {kind.__name__}"
        for field, kind in (("name", str), ("description", str), ("spec", list))
        if not isinstance(spec.get(field), kind)
    ]
    if errors:
        return errors
    if not spec["spec"]:
        return ["'spec' doesn't contain any items"]
    variables = [q.get("variable") for q in spec["spec"] if isinstance(q, dict)]
    errors = [f"variable {v!r} duplicated" for v in sorted({v for v in variables if variables.count(v) > 1})]
    for index, question in enumerate(spec["spec"]):
        errors.extend(_question_errors(f"question {index}", question))
    return errors


def _limit(question: dict, name: str) -> float | None:
    value = question.get(name)
    return None if value in ("", None) else value


def _string_errors(question: dict, value: Any) -> list[str]:
    variable, low, high = question["variable"], _limit(question, "min"), _limit(question, "max")
    if not isinstance(value, str):
        return [f"value {value!r} for {variable!r} expected to be a string"]
    if low is not None and len(value) < int(low):
        return [f"{variable!r} value is too short (length {len(value)}, at least {low})"]
    if high is not None and len(value) > int(high):
        return [f"{variable!r} value is too long (length {len(value)}, at most {high})"]
    return []


def _number_errors(question: dict, value: Any) -> list[str]:
    variable, low, high = question["variable"], _limit(question, "min"), _limit(question, "max")
    integer = question["type"] == "integer"
    if type(value) not in ((int,) if integer else (int, float)):
        return [f"value {value!r} for {variable!r} expected to be {'an integer' if integer else 'numeric'}"]
    if low is not None and value < low:
        return [f"{variable!r} value {value} is too small (at least {low})"]
    if high is not None and value > high:
        return [f"{variable!r} value {value} is too large (at most {high})"]
    return []


def _choice_errors(question: dict, value: Any) -> list[str]:
    variable, choices = question["variable"], _choices(question)
    if question["type"] == "multiplechoice":
        return [] if value in choices else [f"value {value!r} for {variable!r} expected to be one of {choices}"]
    if not isinstance(value, list):
        return [f"{variable!r} value is expected to be a list"]
    return [f"value {v!r} for {variable!r} expected to be one of {choices}" for v in value if v not in choices]


_CHECKS = {
    "text": _string_errors,
    "textarea": _string_errors,
    "password": _string_errors,
    "integer": _number_errors,
    "float": _number_errors,
    "multiplechoice": _choice_errors,
    "multiselect": _choice_errors,
}


def answer_errors(question: dict, answers: dict) -> list[str]:
    """AWX's launch-time check of one question against the answers given."""
    if question["variable"] not in answers:
        return [f"{question['variable']!r} value missing"] if question["required"] else []
    return _CHECKS[question["type"]](question, answers[question["variable"]])


def survey_answers(spec: dict, typed: dict) -> dict:
    """What the launch form submits: every question pre-filled with its default, then what the user typed."""
    answers = {q["variable"]: q["default"] for q in spec["spec"] if "default" in q}
    answers.update(typed)
    return answers


def launch_extra_vars(spec: dict, answers: dict, template_extra_vars: dict | None = None) -> dict:
    """The extra variables of a job launched with ``answers`` to the survey ``spec``.

    Raises LaunchRefused where AWX answers the launch with HTTP 400."""
    extra_vars = dict(template_extra_vars or {})
    for question in spec["spec"]:
        if question.get("default") is not None and not answer_errors(question, {question["variable"]: question["default"]}):
            extra_vars[question["variable"]] = question["default"]
    errors = [error for question in spec["spec"] for error in answer_errors(question, answers)]
    unknown = sorted(set(answers) - {question["variable"] for question in spec["spec"]})
    if unknown:
        errors.append(f"Variables {', '.join(unknown)} are not allowed on launch (prompt on launch for variables is off)")
    if errors:
        raise LaunchRefused("; ".join(errors))
    extra_vars.update(answers)
    return extra_vars


def awx_meta_vars(job_id: int, template_name: str, user: str = "admin") -> dict:
    """A few of the variables AWX adds to every job (awx_* and their tower_* twins)."""
    meta = {"job_id": job_id, "job_launch_type": "manual", "job_template_name": template_name, "user_name": user, "project_revision": ""}
    return {f"{prefix}_{key}": value for prefix in ("awx", "tower") for key, value in meta.items()}


class _UnsafeStrings(yaml.SafeDumper):
    """Writes every string, keys included, with the ``!unsafe`` tag."""

    def represent_str(self, data: str) -> yaml.ScalarNode:
        return self.represent_scalar("!unsafe", data)


_UnsafeStrings.add_representer(str, _UnsafeStrings.represent_str)


class _AnsibleYaml(yaml.SafeLoader):
    """Reads Ansible YAML: an ``!unsafe`` string is just its text here."""


_AnsibleYaml.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def load_ansible_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_AnsibleYaml)


def dump_extravars(extra_vars: dict, trusted: dict | None = None) -> str:
    """``env/extravars`` as AWX writes it: a top-level variable stays plain only when the job
    template's own ``extra_vars`` (``trusted``) set it to the same value."""
    trusted = trusted or {}
    parts = []
    for key, value in extra_vars.items():
        dumper = yaml.SafeDumper if key in trusted and trusted[key] == value else _UnsafeStrings
        parts.append(yaml.dump({key: value}, Dumper=dumper, default_flow_style=False))
    return "".join(parts)


def kubernetes_bearer_token_env(inputs: dict, private_data_dir: Path) -> dict[str, str]:
    """The environment the "OpenShift or Kubernetes API Bearer Token" credential injects."""
    env = {"K8S_AUTH_HOST": inputs.get("host", ""), "K8S_AUTH_API_KEY": inputs.get("bearer_token", "")}
    # get_input() falls back to the field's default (True); has_input() is false for "" and None.
    if inputs.get("verify_ssl", True) and inputs.get("ssl_ca_cert") not in ("", None):
        env_dir = Path(private_data_dir) / "env"
        env_dir.mkdir(parents=True, exist_ok=True)
        handle, path = tempfile.mkstemp(dir=env_dir)
        with os.fdopen(handle, "w") as ca_file:
            os.chmod(path, stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IWGRP)
            ca_file.write(inputs["ssl_ca_cert"])
        env["K8S_AUTH_VERIFY_SSL"] = "True"
        env["K8S_AUTH_SSL_CA_CERT"] = path
    else:
        env["K8S_AUTH_VERIFY_SSL"] = "False"
    return env
