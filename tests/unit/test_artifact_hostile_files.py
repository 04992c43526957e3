"""Hostile artifact files: the fixtures in tests/hostile/, odd file types, and fuzzing under a memory cap.

Complements tests/unit/test_artifact_format.py and tests/unit/test_artifact_clustermap.py (hand-forged
containers, tampered ClusterMaps, in-process mutation fuzzing); nothing here repeats them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from diversify.artifact import load
from diversify.errors import ArtifactError, ArtifactNotFoundError

HOSTILE = Path(__file__).resolve().parents[1] / "hostile"


def _generator():
    spec = importlib.util.spec_from_file_location("make_hostile", HOSTILE / "make_hostile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod._register_truncations()
    return mod


GEN = _generator()
# Bugs found here and fixed since: unhashable dtypes, duplicate header keys, FIFOs, double-wrapped messages.
BUGS: dict = {}


def touch_everything(cm) -> None:
    """What a query, an `expand` and an `add` read: every lazily verified array gets checked."""
    cm.lookup(["doc-1", "doc-5", "nope"])
    len(cm.ids)
    for c in cm.cluster_sizes()[0].tolist():
        cm.members(c)
    for arr in cm.extras.values():
        np.asarray(arr).sum()


def test_fixtures_match_their_generator():
    files = GEN.generate()
    on_disk = {p.name for p in HOSTILE.glob("*.dvf")}
    assert on_disk == set(files) == set(GEN.CASES), sorted(on_disk ^ set(files))
    stale = [name for name, data in files.items() if (HOSTILE / name).read_bytes() != data]
    assert not stale, f"fixtures differ from make_hostile.py: {stale}. Run python tests/hostile/make_hostile.py"


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=BUGS[n])) if n in BUGS else n
     for n in sorted(GEN.CASES)],
)
@pytest.mark.parametrize("mmap", [True, False], ids=["mmap", "read"])
def test_hostile_fixture(name, mmap):
    expected, why = GEN.CASES[name]
    path = HOSTILE / name
    if expected is None:
        touch_everything(load(path, mmap=mmap))
        return
    with pytest.raises(ArtifactError) as info:
        touch_everything(load(path, mmap=mmap))
    msg = str(info.value)
    assert re.search(expected, msg), f"{name} ({why}): message {msg!r} does not match {expected!r}"
    assert "rebuild" in msg.lower() or "re-copy" in msg.lower() or "hostile" in msg.lower() \
        or "corrupt" in msg.lower() or "upgrade" in msg.lower(), f"{name}: the message gives no next step: {msg!r}"


def test_every_section_of_a_real_clustermap_has_a_truncation_fixture():
    import struct

    import msgpack

    good = (HOSTILE / "valid.dvf").read_bytes()
    hlen = struct.unpack_from("<Q", good, 16)[0]
    names = {e["name"] for e in msgpack.unpackb(good[24 : 24 + hlen])["arrays"]}
    have = {n for n in GEN.CASES if n.startswith("trunc-array-")}
    assert {f"trunc-array-{n.replace('/', '-')}.dvf" for n in names} == have


def test_verify_false_still_refuses_every_layout_fixture():
    """verify=False skips checksums and O(n) checks only; every other fixture is still refused."""
    for name, (expected, _) in GEN.CASES.items():
        if expected is None or name.startswith("crc-") or name in BUGS:
            continue
        with pytest.raises(ArtifactError):
            load(HOSTILE / name, verify=False)


# --------------------------------------------------------------------------- odd file types


def test_character_devices_and_proc_files_are_refused():
    for p in ("/dev/zero", "/dev/null", "/dev/urandom"):
        if os.path.exists(p):
            with pytest.raises(ArtifactError, match="not a regular file"):
                load(p)
    if os.path.exists("/proc/self/status"):
        with pytest.raises(ArtifactError, match="magic"):
            load("/proc/self/status")


def test_non_regular_file_message_is_not_double_wrapped():
    with pytest.raises(ArtifactNotFoundError) as info:
        load("/dev/zero")
    assert "Check permissions" not in str(info.value) and str(info.value).count("artifact '/dev/zero'") == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_named_pipe_is_refused_not_hung(tmp_path):
    fifo = tmp_path / "pipe.dvf"
    os.mkfifo(fifo)
    code = ("import sys\nfrom diversify.artifact import load\nfrom diversify.errors import ArtifactError\n"
            f"try:\n    load({str(fifo)!r})\nexcept ArtifactError as e:\n    print('refused', e)\n")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3)
    except subprocess.TimeoutExpired:
        pytest.fail("load() of a named pipe hung for 3 s")
    assert out.stdout.startswith("refused") and "regular file" in out.stdout, out


def test_unreadable_file_is_artifact_not_found(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode")
    p = tmp_path / "secret.dvf"
    p.write_bytes((HOSTILE / "valid.dvf").read_bytes())
    p.chmod(0)
    with pytest.raises(ArtifactNotFoundError, match="cannot be opened"):
        load(p)


# --------------------------------------------------------------------------- fuzzing under a memory cap

FUZZ_EXAMPLES = 600


def test_fuzz_load_in_memory_capped_process():
    """Arbitrary, prefix-valid, byte-mutated, header-mutated (CRC fixed) and data-mutated (CRC fixed)
    files: each loads (and answers lookups, members, ids, extras) or raises ArtifactError, with the
    address space capped at +384 MiB so that an unbounded allocation fails the run."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    seed = int(os.environ.get("DIVERSIFY_FUZZ_SEED", "20261130"))  # fixed: CI is deterministic; vary it by hand
    out = subprocess.run([sys.executable, str(HOSTILE / "fuzz_worker.py"), str(FUZZ_EXAMPLES), str(seed)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.stdout.strip(), f"fuzz worker died (rc {out.returncode}): {out.stderr[-2000:]}"
    report = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"fuzz: {report['tried']} inputs, {report['loaded']} loaded, {report['refused']} refused, seed {seed}, "
          f"max RSS {report['maxrss_kb']} KiB")
    if report["known_bug_hits"]:
        print(f"fuzz: {report['known_bug_hits']} inputs hit a known bug (see KNOWN_BUGS in fuzz_worker.py)")
    assert not report["failures"], f"seed {seed} (rerun with DIVERSIFY_FUZZ_SEED={seed}): {report['failures']}"
    assert report["tried"] == FUZZ_EXAMPLES and report["refused"] > FUZZ_EXAMPLES // 2, report
    assert report["loaded"] > 0, f"no input loaded: the checks of a loaded map never ran ({report})"
    assert report["maxrss_kb"] < 400 * 1024, report
