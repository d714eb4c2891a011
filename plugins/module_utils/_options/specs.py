# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The argument specs of the options several modules take, in one place (pure).

``machine_drain``, ``machine_terminate`` and ``machine_delete`` take the same
``workload_cluster``, ``machine_controller`` and ``controller_grace``; each
module's spec adds :func:`machine_side_spec` instead of repeating them.
"""

from __future__ import annotations

# Who carries out a deletion (``_machine/controller.py``): decide from managedFields, a live controller, or the collection.
MACHINE_CONTROLLER_SETTINGS = ("auto", "live", "absent")
MACHINE_CONTROLLER_DEFAULT = "auto"
# Seconds a live controller is given to answer a deletion before the collection acts.
CONTROLLER_GRACE_DEFAULT = 10

# Options that may hold a kubeconfig as a mapping (its credentials inline): the spec marks them no_log, so
# Ansible never logs them; once parsed, only their credentials stay masked (_module.py, mask_credentials).
KUBECONFIG_OPTIONS = ("kubeconfig", "workload_cluster")


# What a drain does once a blocker can never clear as things stand (docs/stalls.md): wait, as the
# machine controllers do, or fail at once, leaving the deletion to be resumed once fixed.
ON_STALL_WAIT, ON_STALL_FAIL = "wait", "fail"
STALL_POLICIES = (ON_STALL_WAIT, ON_STALL_FAIL)
STALL_POLICY_DEFAULT = ON_STALL_WAIT


def stall_spec() -> dict:
    """``on_stall``, ``stall_timeout`` and ``escalations``, as machine_drain and machine_delete take them
    (an escalation's keys are checked again, with its duration and selector, by ``_drain/escalations.py``)."""
    escalation = {
        "after": {"type": "raw", "required": True},
        "action": {"type": "str", "default": "delete_pod", "choices": ["delete_pod"]},
        "reason": {"type": "str", "required": True},
        "namespaces": {"type": "list", "elements": "str", "default": []},
        "pod_selector": {"type": "dict"},
        "drain_rules": {"type": "list", "elements": "str", "default": []},
    }
    return {
        "on_stall": {"type": "str", "default": STALL_POLICY_DEFAULT, "choices": list(STALL_POLICIES)},
        "escalations": {"type": "list", "elements": "dict", "default": [], "options": escalation},
        # A duration: seconds or a Go duration, made whole seconds by _module.new_module; unset: never.
        "stall_timeout": {"type": "raw"},
    }


def pause_spec() -> dict:
    """``override_pause``: who asked to act on a paused Machine, and why (unset: a paused Machine is left alone;
    ``_machine/pause.py``). Every module that changes a Machine's deletion takes it."""
    return {"override_pause": {"type": "str"}}


def machine_side_spec() -> dict:
    """``workload_cluster``, ``machine_controller`` and ``controller_grace``, as every module that acts on a Machine's Node takes them."""
    return {
        # Its inline kubeconfigs carry credentials (doc fragment lifecycle.machine.workload).
        "workload_cluster": {"type": "dict", "default": {}, "no_log": True},
        "machine_controller": {"type": "str", "default": MACHINE_CONTROLLER_DEFAULT, "choices": list(MACHINE_CONTROLLER_SETTINGS)},
        # A duration: seconds or a Go duration, made whole seconds by _module.new_module.
        "controller_grace": {"type": "raw", "default": CONTROLLER_GRACE_DEFAULT},
    }
