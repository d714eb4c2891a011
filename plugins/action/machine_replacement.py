# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Runs machine_replacement with its kubeconfig found and, when vaulted, decrypted (see plugin_utils/_action.py)."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.plugin_utils._action import MachineAction as ActionModule

__all__ = ["ActionModule"]
