# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The ``seconds`` filter: whole seconds of a number of seconds or a Go duration, as the modules read their timeouts."""

from __future__ import annotations

DOCUMENTATION = r"""
name: seconds
author: lifecycle.machine contributors
version_added: 0.3.0
short_description: Whole seconds of a number of seconds or a Go duration
description:
  - Reads a timeout or an interval as every module, role and playbook of the collection does - a number of seconds
    (V(300), V("300")) or a Go duration such as V(90s), V(5m) or V(1h30m) (units C(ns), C(us), C(ms), C(s), C(m), C(h)) -
    and returns it as whole seconds; a part of a second counts as a whole one.
  - Anything else fails the task with a message naming the option given as O(name).
positional: name
options:
  _input:
    description: The value to read.
    type: raw
    required: true
  name:
    description: The option or variable the value was given as, for the message when it is not a duration.
    type: str
    default: value
"""

EXAMPLES = r"""
- name: A deadline from a timeout given as 5m or 300
  ansible.builtin.set_fact:
    deadline: "{{ now().timestamp() + (my_timeout | lifecycle.machine.seconds('my_timeout')) }}"
"""

RETURN = r"""
_value:
  description: Whole seconds.
  type: int
"""

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import duration_seconds


def seconds(value: Any, name: str = "value") -> int:
    try:
        return duration_seconds(name, value)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self) -> dict:
        return {"seconds": seconds}
