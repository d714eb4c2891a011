# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Runs machine_delete, printing where each Machine stands every progress_interval
seconds and going on while any is in progress (see plugin_utils/_action.py)."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.plugin_utils._action import RoundsAction
from ansible_collections.lifecycle.machine.plugins.plugin_utils._rounds import DeleteRounds


class ActionModule(RoundsAction):
    def rounds(self, args: dict, now: float) -> DeleteRounds:
        return DeleteRounds(args, check_mode=bool(self._task.check_mode))
