"""Per-flow server settings (Dex names). dex defines the mode so code that names it imports; it
indexes no active steps for search, so no mode changes what dex does."""

from __future__ import annotations

import enum


class ActiveStepSearchMode(enum.Enum):
    """Which active steps a flow search may index: the server's default, all, only those with a
    wait_for, or none."""

    DEFAULT = "default"
    ALL = "all"
    WITH_WAIT_FOR = "with_wait_for"
    DISABLED = "disabled"
