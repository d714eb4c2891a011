# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Runs machine_drain, printing where the drain stands every progress_interval
seconds and going on until it completes (see plugin_utils/_action.py)."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.plugin_utils._action import RoundsAction
from ansible_collections.lifecycle.machine.plugins.plugin_utils._rounds import DrainRounds


class ActionModule(RoundsAction):
    def rounds(self, args: dict, now: float) -> DrainRounds:
        return DrainRounds(args, now, check_mode=bool(self._task.check_mode))
