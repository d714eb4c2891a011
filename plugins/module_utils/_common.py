# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What every module of the collection shares: argument specs, the one place
that turns domain errors into ``fail_json``, and small time helpers."""

from __future__ import annotations

import copy
import datetime as _dt
import traceback
from collections.abc import Callable
from typing import Any

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.lifecycle.machine.plugins.module_utils._api import ApiError, api_from_module

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

    HAS_K8S_CORE = True
    K8S_CORE_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - reported by fail_json at run time
    AUTH_ARG_SPEC = {}
    AnsibleK8SModule = None

    class CoreException(Exception):  # type: ignore[no-redef]
        """Stand-in so this module imports without kubernetes.core."""

    HAS_K8S_CORE = False
    K8S_CORE_IMPORT_ERROR = traceback.format_exc()

try:
    from kubernetes import __version__ as KUBERNETES_VERSION

    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
except ImportError:  # pragma: no cover
    KUBERNETES_VERSION = None
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()


class MachineError(Exception):
    """A domain failure that names the object and the reason.

    ``result`` carries whatever partial, truthful result the module wants to
    report alongside the failure (for example a drain's progress).
    """

    def __init__(self, msg: str, **result: Any):
        super().__init__(msg)
        self.msg = msg
        self.result = result


def new_module(argument_spec: dict, **kwargs: Any) -> Any:
    """The module object: kubernetes.core's AnsibleK8SModule (what its client
    factory expects), with kubernetes.core's connection options added."""
    spec = auth_argument_spec()
    spec.update(argument_spec)
    if not HAS_K8S_CORE:
        module = AnsibleModule(argument_spec=spec, **kwargs)
        module.fail_json(msg="The kubernetes.core collection is required by lifecycle.machine", exception=K8S_CORE_IMPORT_ERROR)
    return AnsibleK8SModule(argument_spec=spec, check_pyyaml=False, **kwargs)


def auth_argument_spec() -> dict:
    """kubernetes.core's connection options (kubeconfig, context, host, ...)."""
    return copy.deepcopy(AUTH_ARG_SPEC)


def machine_argument_spec() -> dict:
    """Options that choose Machines (doc fragment ``lifecycle.machine.machines``)."""
    return {
        "machine": {"type": "str"},
        "label_selectors": {"type": "list", "elements": "str"},
        "namespace": {"type": "str"},
        "api_version": {"type": "str"},
    }


WAIT_ARGUMENT_SPEC = {
    "wait": {"type": "bool", "default": False},
    "wait_timeout": {"type": "int", "default": 120},
    "wait_sleep": {"type": "int", "default": 2},
}


def run(module: Any, body: Callable[[Any], dict]) -> None:
    """Run ``body(api)`` and report: exit_json with its result, or fail_json.

    ``body`` returns the module result (must include ``changed``). Domain errors
    (MachineError) and API errors become one clear fail_json message.
    """
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    if not HAS_K8S_CORE:
        module.fail_json(msg="The kubernetes.core collection is required by lifecycle.machine", exception=K8S_CORE_IMPORT_ERROR)
    try:
        api = api_from_module(module)
        result = body(api)
    except MachineError as exc:
        module.fail_json(msg=exc.msg, **exc.result)
    except ApiError as exc:
        module.fail_json(msg=f"Kubernetes API error on {exc.method} {exc.path}: {exc.status} {exc.message}", status=exc.status)
    except CoreException as exc:  # kubernetes.core's error for unusable auth settings
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


def now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0)


def rfc3339(value: _dt.datetime) -> str:
    return value.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> _dt.datetime | None:
    """Parse a Kubernetes timestamp (RFC 3339, optionally fractional); ``None`` stays ``None``."""
    if not value:
        return None
    text = value.replace("Z", "+00:00")
    if "." in text:
        head, _dot, tail = text.partition(".")
        zone = ""
        for sign in ("+", "-"):
            if sign in tail:
                frac, _sign, rest = tail.partition(sign)
                zone = sign + rest
                break
        else:
            frac = tail
        text = f"{head}.{frac[:6].ljust(6, '0')}{zone}"
    parsed = _dt.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_dt.UTC)
    return parsed


def parse_duration(value: str | int | None) -> int | None:
    """Seconds of a Go-style duration (``10m``, ``1h30m``, ``90s``) or an int; ``None``/0 = no limit."""
    if value in (None, "", 0, "0", "0s"):
        return None
    if isinstance(value, int):
        return value
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 0.000001, "µs": 0.000001, "ns": 0.000000001}
    total = 0.0
    number = ""
    text = str(value).strip()
    index = 0
    while index < len(text):
        char = text[index]
        if char.isdigit() or char == ".":
            number += char
            index += 1
            continue
        unit = char
        if text[index : index + 2] in ("ms", "us", "µs", "ns"):
            unit = text[index : index + 2]
        if unit not in units or not number:
            raise ValueError(f"invalid duration {value!r}")
        total += float(number) * units[unit]
        number = ""
        index += len(unit)
    if number:
        raise ValueError(f"invalid duration {value!r}: missing unit")
    return int(total) or None
