"""Coverage-guided fuzz target for the artifact reader (atheris / libFuzzer). Not collected by pytest.

    pip install atheris
    python tests/fuzz_artifact.py -atheris_runs=100000 tests/hostile/       # seeds: the hostile fixtures
    python tests/fuzz_artifact.py -max_total_time=600 -rss_limit_mb=1024 corpus/ tests/hostile/

An input whose first byte has bit 1 set is raw msgpack header bytes: the target wraps them with
a correct CRC and the base file's arrays, so mutations get past the checksum. Seed that mode with
a file holding ``b"\x02"`` followed by the header of ``tests/hostile/valid.dvf``.

Property: ``diversify.load`` of any bytes either returns a ClusterMap that then answers lookups,
members, ids and extras consistently (``check_answers`` in tests/hostile/fuzz_worker.py), or raises
``ArtifactError``. Anything else (another exception, a crash, a
hang, memory beyond ``-rss_limit_mb``) is a finding: libFuzzer writes the input to ``crash-*``.
Add every finding to ``tests/hostile/make_hostile.py`` as a fixture once it is fixed.
"""

from __future__ import annotations

import os
import struct
import sys
import tempfile
import zlib
from pathlib import Path

import atheris

with atheris.instrument_imports():
    import msgpack  # noqa: F401  (instrumented: header parsing paths)

    from diversify.artifact import format as _format  # noqa: F401  (the container, its header and layout)
    from diversify.artifact import header as _header  # noqa: F401
    from diversify.artifact import load
    from diversify.artifact import validation as _validation  # noqa: F401  (the ClusterMap checks)
    from diversify.errors import ArtifactError

sys.path.insert(0, str(Path(__file__).resolve().parent / "hostile"))
from fuzz_worker import check_answers  # noqa: E402  (one list of what a loaded map must answer)

_DIR = tempfile.mkdtemp(prefix="dvf-atheris-")
_PATH = os.path.join(_DIR, "x.dvf")
_BASE = (Path(__file__).resolve().parent / "hostile" / "valid.dvf").read_bytes()
_HLEN = struct.unpack_from("<Q", _BASE, 16)[0]
_DATA = _BASE[-(-(24 + _HLEN) // 64) * 64 :]


# Reported bugs with an xfail(strict) fixture (tests/unit/test_artifact_hostile_files.py BUGS): skipped so the
# fuzzer looks for new ones. Remove an entry when its fix lands. (The unhashable-dtype bug it once held is fixed.)
KNOWN_BUGS: list[tuple[str, str]] = []


def _with_valid_crc(header: bytes) -> bytes:
    """A container around fuzzed header bytes with a *correct* CRC and the base file's data, so
    that mutations reach the header and table checks instead of stopping at the checksum."""
    head = struct.pack("<8sHHIQ", _BASE[:8], 1, 0, zlib.crc32(header), len(header)) + header
    return head + b"\0" * (-len(head) % 64) + _DATA


def TestOneInput(data: bytes) -> None:  # noqa: N802 (libFuzzer's name)
    # first byte: bit 0 -> mmap, bit 1 -> the rest is a header to wrap with a valid CRC
    flags = data[0] if data else 0
    mmap = bool(flags & 1)
    if flags & 2:
        data = _with_valid_crc(data[1:])
    with open(_PATH, "wb") as f:
        f.write(data)
    try:
        cm = load(_PATH, mmap=mmap)
        cm.lookup(["doc-1", "doc-5", "nope", 3])
        check_answers(cm)  # loaded: it must answer consistently (an AssertionError is a finding)
    except ArtifactError:
        return  # a refusal (at load, or of an array checked on first use), as the property allows
    except Exception as exc:
        if not any(type(exc).__name__ == cls and text in str(exc) for cls, text in KNOWN_BUGS):
            raise


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
