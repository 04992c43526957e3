"""Coverage-guided fuzz target for the artifact reader (atheris / libFuzzer). Not collected by pytest.

    pip install atheris
    python tests/fuzz_artifact.py -atheris_runs=100000 tests/hostile/       # seeds: the hostile fixtures
    python tests/fuzz_artifact.py -max_total_time=600 -rss_limit_mb=1024 corpus/ tests/hostile/

Property: ``diversify.load`` of any bytes either returns a ClusterMap that then answers lookups,
members, ids and extras, or raises ``ArtifactError``. Anything else (another exception, a crash, a
hang, memory beyond ``-rss_limit_mb``) is a finding: libFuzzer writes the input to ``crash-*``.
Add every finding to ``tests/hostile/make_hostile.py`` as a fixture once it is fixed.
"""

from __future__ import annotations

import os
import sys
import tempfile

import atheris

with atheris.instrument_imports():
    import msgpack  # noqa: F401  (instrumented: header parsing paths)

    from diversify.artifact import format as _format  # noqa: F401
    from diversify.artifact import load
    from diversify.errors import ArtifactError

_DIR = tempfile.mkdtemp(prefix="dvf-atheris-")
_PATH = os.path.join(_DIR, "x.dvf")


def TestOneInput(data: bytes) -> None:  # noqa: N802 (libFuzzer's name)
    mmap = bool(data[:1]) and data[0] & 1 == 1
    with open(_PATH, "wb") as f:
        f.write(data)
    try:
        cm = load(_PATH, mmap=mmap)
        cm.lookup(["doc-1", "doc-5", "nope", 3])
        len(cm.ids)
        for c in cm.cluster_sizes()[0].tolist()[:64]:
            cm.members(c)
            cm.representative_of(c)
        for arr in cm.extras.values():
            arr.sum()
    except ArtifactError:
        pass


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
