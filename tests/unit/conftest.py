"""Make the collection importable as ``ansible_collections.lifecycle.machine``."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))

import cluster as cluster_tool

sys.path.insert(0, str(cluster_tool.collections_root()))
