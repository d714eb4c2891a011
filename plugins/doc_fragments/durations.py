# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""How every option that counts seconds is written: seconds, or a Go duration."""

from __future__ import annotations


class ModuleDocFragment:
    # Notes only: each module documents its own duration options (type raw); ansible-doc wants an options key.
    DOCUMENTATION = r"""
options: {}
notes:
  - Every timeout, interval and grace period (C(wait_timeout), C(wait_sleep), C(drain_timeout), C(terminate_timeout),
    C(progress_interval), C(grace_period), C(controller_grace)) takes a number of seconds (V(300), V("300")) or a Go
    duration, as Cluster API's own fields do (V(90s), V(5m), V(1h30m), V(500ms); the units are C(ns), C(us), C(ms),
    C(s), C(m) and C(h)). A part of a second counts as a whole second. Anything else is refused before anything is
    read or changed, with a message naming the option. The same holds for the roles' and playbooks' timeouts.
"""
