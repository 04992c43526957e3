"""The digest of the kernel sources that names the kernels' on-disk cache subdirectory
(:mod:`diversify._kernels._runtime`, "Cache")."""

from __future__ import annotations

import os
from typing import Optional

_SOURCES_DIGEST: Optional[str] = None


def sources_digest() -> str:
    """A digest of every kernel module's source, naming the cache's subdirectory.

    Numba checks a cached kernel against its own file only, so a kernel whose callee in another
    module changed (an upgrade, or an edit in a checkout) would load stale machine code. Keying the
    cache by every kernel source makes any such change start a fresh cache."""
    global _SOURCES_DIGEST
    if _SOURCES_DIGEST is None:
        _SOURCES_DIGEST = digest_of_sources(os.path.dirname(os.path.abspath(__file__)))
    return _SOURCES_DIGEST


def digest_of_sources(directory: str) -> str:
    """16 hex digits over the names and bytes of the ``.py`` files directly in ``directory``."""
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    for name in sorted(os.listdir(directory)):
        if name.endswith(".py"):
            h.update(name.encode() + b"\0")
            with open(os.path.join(directory, name), "rb") as f:
                h.update(hashlib.blake2b(f.read(), digest_size=16).digest())
    return h.hexdigest()
