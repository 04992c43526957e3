"""The Dask engine: the local engine's stages on a Dask cluster, for corpora beyond one machine.

Same clusters as ``engine="local"`` (tested byte for byte). See docs/dask.md and :mod:`.engine`.
"""

from .components import connected_components
from .engine import build_dask
from .output import ShardedBuild

__all__ = ["build_dask", "connected_components", "ShardedBuild"]
