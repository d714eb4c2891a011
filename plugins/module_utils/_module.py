# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The modules' side of the collection: the module object, the connection
options (the list all entry points share, ``_options.connection``), and :func:`run`, the one place that turns a feature's result or
failure into ``exit_json`` / ``fail_json``. The only file that imports
AnsibleModule.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.parameters import _list_no_log_values

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_module
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, Cancelled, ConfigError
from ansible_collections.lifecycle.machine.plugins.module_utils._options.connection import CONNECTION_OPTIONS, SECRET_OPTIONS, kubeconfig_credentials
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import DURATION_OPTIONS, invalid_options, parse_durations
from ansible_collections.lifecycle.machine.plugins.module_utils._options.specs import KUBECONFIG_OPTIONS
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import DURATIONPY_IMPORT_ERROR

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

# The oldest Python the modules run on (they run where the task runs, usually the controller).
MIN_PYTHON = (3, 11)


def python_error(version: tuple[int, ...] | None = None) -> str | None:
    """Why this Python cannot run the collection's modules; None when it can."""
    version = tuple(version or sys.version_info[:3])
    if version[:2] >= MIN_PYTHON:
        return None
    found = ".".join(str(part) for part in version[:3])
    wanted = ".".join(str(part) for part in MIN_PYTHON)
    return (
        f"lifecycle.machine needs Python {wanted} or newer on the host that runs its modules (usually the Ansible controller); "
        f"this is Python {found}. Point ansible_python_interpreter at a newer Python, or use the collection's execution environment."
    )


def new_module(argument_spec: dict, **kwargs: Any) -> Any:
    """The module object: kubernetes.core's AnsibleK8SModule (what its client
    factory expects), with kubernetes.core's connection options added."""
    spec = auth_argument_spec()
    spec.update(argument_spec)
    too_old = python_error()
    if too_old or not HAS_K8S_CORE:
        module = AnsibleModule(argument_spec=spec, **kwargs)
        if too_old:
            module.fail_json(msg=too_old)
        module.fail_json(msg="The kubernetes.core collection is required by lifecycle.machine", exception=K8S_CORE_IMPORT_ERROR)
    module = AnsibleK8SModule(argument_spec=spec, check_pyyaml=False, **kwargs)
    mask_credentials(module, spec)
    read_durations(module, spec)
    return module


def read_durations(module: Any, spec: dict) -> None:
    """The duration options (``_options.logic.DURATION_OPTIONS``, type raw in the spec) as whole seconds, so every
    request reads a number: ``5m`` is 300. One failure naming each option that is neither seconds nor a Go duration."""
    seconds, errors = parse_durations(module.params, [name for name in DURATION_OPTIONS if name in spec])
    if errors:
        module.fail_json(msg=invalid_options(module._name.rsplit(".", 1)[-1], errors).msg)
    module.params.update(seconds)


def auth_argument_spec() -> dict:
    """The connection options (``_options.connection``: kubeconfig, context, host, ...), each
    as kubernetes.core specifies it (type, aliases; its doc fragment documents them). Whatever
    can carry a credential is no_log, also with a kubernetes.core that does not mark it so."""
    spec = {name: copy.deepcopy(AUTH_ARG_SPEC[name]) for name in CONNECTION_OPTIONS if name in AUTH_ARG_SPEC}
    for name in (*SECRET_OPTIONS, *KUBECONFIG_OPTIONS):
        if name in spec:
            spec[name]["no_log"] = True
    return spec


def mask_credentials(module: Any, spec: dict) -> None:
    """Mask the credentials of the options that may hold a kubeconfig, and only those.

    They are no_log in the spec, so Ansible logs none of them; but no_log hides every value of a
    kubeconfig mapping in every message and result, its cluster names, servers and ``v1``
    included, and a kubeconfig's path. Once the options are parsed, what stays hidden is what
    the other no_log options hold plus the credentials of each given kubeconfig
    (:func:`_options.connection.kubeconfig_credentials`)."""
    relaxed = {name: {**opts, "no_log": False} if name in KUBECONFIG_OPTIONS else opts for name, opts in spec.items()}
    hidden = set(_list_no_log_values(relaxed, module.params))
    for name in KUBECONFIG_OPTIONS:
        hidden |= kubeconfig_credentials(module.params.get(name))
    ansible_module = getattr(module, "_module", module)  # AnsibleK8SModule wraps the AnsibleModule
    ansible_module.no_log_values.clear()
    ansible_module.no_log_values.update(hidden)


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
    # Durations: seconds or a Go duration, made whole seconds by new_module.
    "wait_timeout": {"type": "raw", "default": 120},
    "wait_sleep": {"type": "raw", "default": 2},
}


def run(module: Any, body: Callable[[Any], dict]) -> None:
    """Run ``body(api)`` and report: exit_json with its result, or fail_json.

    ``body`` returns the module result (must include ``changed``; its ``warnings``, a list, are shown
    as Ansible warnings). Domain
    errors (MachineError, with their partial result) and API errors become one
    clear message naming the object and the server's reason. Requests the
    transport had to retry are reported as one warning.
    """
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    if DURATIONPY_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("durationpy"), exception=DURATIONPY_IMPORT_ERROR)
    api = None
    try:
        api = api_from_module(module)
        stop_when_cancelled(api)
        result = body(api)
    except MachineError as exc:
        _warn_retries(module, api)
        module.fail_json(msg=exc.msg, **exc.result)
    except ApiError as exc:
        _warn_retries(module, api)
        module.fail_json(msg=f"Kubernetes API error: {exc.describe()}", status=exc.status)
    except Cancelled as exc:
        module.fail_json(msg=f"Cancelled: {exc}")
    except (CoreException, ConfigError) as exc:  # connection settings that cannot be used
        module.fail_json(msg=str(exc))
    _warn_retries(module, api)
    for warning in result.pop("warnings", None) or []:  # what the task could not find out, said as Ansible warns
        module.warn(warning)
    module.exit_json(**result)


def _warn_retries(module: Any, api: Any) -> None:
    if api is not None and api.retry_summary():
        module.warn(f"Kubernetes API requests were retried after transient failures: {api.retry_summary()}")


# Signals with which Ansible, AWX (ansible-runner) and a terminal stop a run.
CANCEL_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
# How often the watchdog looks at the run that started the module.
WATCHDOG_SECONDS = 0.5


def stop_when_cancelled(api: Any) -> None:
    """Cancel the transport (no request is sent after it, waits end at once) when
    the module gets SIGINT / SIGTERM / SIGHUP, or when the Ansible run that
    started it is gone: a cancelled job must not go on evicting or deleting."""
    for name in CANCEL_SIGNALS:
        with contextlib.suppress(ValueError, OSError, AttributeError):  # not the main thread, or no such signal
            signal.signal(getattr(signal, name), lambda _signum, _frame: api.cancel())
    ancestors = ansible_ancestors(os.getpid())
    if not ancestors:
        return
    if run_gone_before_start(os.getpid()):
        api.cancel()
        return

    def watch() -> None:
        while not api.cancelled:
            if any(_start_time(pid) != started for pid, started in ancestors):
                api.cancel()
                return
            time.sleep(WATCHDOG_SECONDS)

    threading.Thread(target=watch, name="lifecycle-machine-watchdog", daemon=True).start()


# The Ansible programs that run modules in worker processes forked from themselves.
ANSIBLE_CLIS = ("ansible-playbook", "ansible", "ansible-console")


def run_gone_before_start(pid: int) -> bool:
    """Whether the Ansible run that started this module had already ended when the module started.

    Ansible runs a module from a worker forked from the ``ansible-playbook`` (or
    ``ansible``) process, and the worker lives in a session of its own: a run
    killed as the module starts leaves the worker behind, its parent gone, and
    the watchdog would find no run to watch. A worker's parent carries the same
    command line (it is a fork of it); when it does not, the run is gone.
    """
    chain = [pid]
    while True:
        parent = _parent(chain[-1])
        if parent is None or parent <= 0:
            return False
        command = _argv(parent)
        if command is None:
            return False
        if worker_of_cli(command):
            return _argv(_parent(parent) or 0) != command
        if parent <= 1 or not any("ansible" in part for part in command):
            return False  # not started by an Ansible program (a script, async_wrapper, ...)
        chain.append(parent)


def worker_of_cli(argv: list[str]) -> bool:
    """Whether a command line is one of the Ansible programs that fork workers (``python .../ansible-playbook ...``)."""
    names = [os.path.basename(part) for part in argv[:2]]
    return any(name in ANSIBLE_CLIS for name in names)


def _argv(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        return None


def ansible_ancestors(pid: int) -> list[tuple[int, str]]:
    """(pid, start time) of this process's ancestors that run Ansible (ansible-playbook,
    its workers, ansible, ansible-runner); empty where /proc is not available."""
    found = []
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        parent = _parent(pid)
        if parent is None or parent <= 1:
            break
        try:
            with open(f"/proc/{parent}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            break
        if "ansible" in command:
            found.append((parent, _start_time(parent)))
        pid = parent
    return found


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            # The command name may hold spaces and parentheses: the fields follow the last ")".
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def _start_time(pid: int) -> str | None:
    """When the process started (field 22 of /proc/<pid>/stat): a reused pid gets another."""
    fields = _stat(pid)
    if not fields or fields[0] == "Z":
        return None
    return fields[19]
