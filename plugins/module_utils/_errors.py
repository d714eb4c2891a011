# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The domain error every feature raises (pure)."""

from __future__ import annotations

from typing import Any


class MachineError(Exception):
    """A domain failure that names the object and the reason.

    ``result`` carries whatever partial, truthful result the module wants to
    report alongside the failure (for example a drain's progress).
    """

    def __init__(self, msg: str, **result: Any):
        super().__init__(msg)
        self.msg = msg
        self.result = result
