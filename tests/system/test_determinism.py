"""Same input => same bytes: thread counts, input order, golden artifact hash.

Kinds: determinism (artifacts built in subprocesses with NUMBA_NUM_THREADS=1 and 2 compared byte
for byte; partitions invariant under shuffling unrelated chunks of input) and golden (sha256 of a
tiny artifact).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import reference as R
from conftest import BASE_SEED, CREATED_AT
from test_build import planted, planted_vectors

from diversify import build
from diversify.artifact import load
from diversify.config import BuildConfig

REPO = Path(__file__).resolve().parents[2]

# Builds one corpus (> 256 documents, so the parallel kernels split it into several blocks) with
# text and vector stages and saves it.
_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    sys.path[:0] = {tests!r}
    from test_build import planted, planted_vectors
    from diversify import build
    import numba

    rng = np.random.default_rng({seed})
    texts, _ = planted(rng, 400, size=3)
    texts += ["", "   ", "!!!"]
    vecs, _ = planted_vectors(rng, len(texts) // 3 + 1, 3, dim=24)
    vecs = vecs[: len(texts)]
    ids = [f"doc-{{i}}" for i in range(len(texts))]
    build(texts=texts, ids=ids, vectors=vecs, created_at={created_at!r}).save(sys.argv[1])
    print(numba.get_num_threads())
    """
)


@pytest.fixture(scope="module")
def thread_builds(tmp_path_factory):
    """{threads: artifact path} for builds run in subprocesses with NUMBA_NUM_THREADS=1 and 2."""
    out = {}
    d = tmp_path_factory.mktemp("threads")
    script = _SCRIPT.format(tests=[str(REPO / "tests"), str(REPO / "tests" / "unit")], seed=BASE_SEED, created_at=CREATED_AT)
    for threads in (1, 2):
        path = d / f"threads{threads}.dvf"
        env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), PYTHONPATH=str(REPO))
        env.pop("SOURCE_DATE_EPOCH", None)
        proc = subprocess.run([sys.executable, "-c", script, str(path)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip() == str(threads), f"the subprocess ran with {proc.stdout.strip()} threads"
        out[threads] = path
    return out


_SIMD_SCRIPT = textwrap.dedent(
    """
    import hashlib, sys
    import numpy as np
    sys.path[:0] = {tests!r}
    from test_build import planted, planted_vectors
    from diversify import BuildConfig, MinHashConfig, TextConfig, build

    rng = np.random.default_rng({seed})
    texts, _ = planted(rng, 100, size=3)
    vecs, _ = planted_vectors(rng, len(texts) // 3 + 1, 3, dim=24)
    out = []
    for cfg in (BuildConfig(), BuildConfig(text=TextConfig(shingle="char", k=4),
                                           minhash=MinHashConfig(method="classic", threshold=0.6, num_perm=64))):
        build(texts=texts, vectors=vecs[: len(texts)], config=cfg, created_at={created_at!r}).save(sys.argv[1])
        out.append(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())
    print(" ".join(out))
    """
)


def test_artifact_bytes_do_not_depend_on_numpys_cpu_dispatch(tmp_path):
    """numpy picks a loop per CPU (AVX-512 where there is one), and its AVX-512 ``power`` and
    ``log`` differ from the C library's in the last bit: the LSH figures and the SimHash
    hyperplanes changed with the machine (a golden artifact built on an AVX-512 Xeon differed from
    one built on an AVX2 machine). A build with numpy's AVX-512 loops turned off must write the
    bytes of one with them on."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    wide = [f for f in __cpu_dispatch__ if __cpu_features__.get(f) and (f == "X86_V4" or f.startswith("AVX512"))]
    if not wide:
        pytest.skip("this CPU has no AVX-512: numpy takes the same loops either way")
    script = _SIMD_SCRIPT.format(tests=[str(REPO / "tests"), str(REPO / "tests" / "unit")], seed=BASE_SEED, created_at=CREATED_AT)
    got = []
    for disable in ("", " ".join(wide)):
        env = dict(os.environ, PYTHONPATH=str(REPO), NPY_DISABLE_CPU_FEATURES=disable)
        env.pop("SOURCE_DATE_EPOCH", None)
        proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "a.dvf")], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        got.append(proc.stdout.split())
    assert got[0] == got[1], f"numpy's AVX-512 loops ({wide}) changed the artifact bytes"


def test_lsh_curve_powers_are_the_c_librarys():
    """The s-curve takes every power from the C library (math.pow), whatever loop numpy would pick."""
    import math

    from diversify.linking.bands import candidate_probability

    xs = np.linspace(0.0, 1.0, 257)

    def pw(v: float, e: int) -> float:  # numpy's shortcuts for e <= 2, else the C library
        return 1.0 if e == 0 else v if e == 1 else v * v if e == 2 else math.pow(v, e)

    for b, r in ((16, 8), (20, 5), (7, 3), (1, 1), (2, 2), (64, 1)):
        want = [1.0 - pw(1.0 - pw(x, r), b) for x in xs]
        assert candidate_probability(xs, b, r).tolist() == want, (b, r)
    assert float(candidate_probability(0.8, 16, 8)) == 1.0 - math.pow(1.0 - math.pow(0.8, 8), 16)


def test_artifact_bytes_do_not_depend_on_thread_count(thread_builds):
    # wall-clock timings used to be written into build_info, so no two builds were byte-identical
    one, two = thread_builds[1].read_bytes(), thread_builds[2].read_bytes()
    assert len(one) > 10_000
    assert hashlib.sha256(one).hexdigest() == hashlib.sha256(two).hexdigest(), (
        "artifacts built with NUMBA_NUM_THREADS=1 and 2 differ")


def test_artifact_content_does_not_depend_on_thread_count(thread_builds):
    """The same comparison part by part, so that a failure says what differs."""
    a, b = load(thread_builds[1]), load(thread_builds[2])
    assert a.header == b.header
    assert a.cluster_ids.tolist() == b.cluster_ids.tolist()
    assert a.is_representative.tolist() == b.is_representative.tolist()
    assert a.doc_stages.tolist() == b.doc_stages.tolist()
    assert set(a.extras) == set(b.extras)
    for name in a.extras:
        assert np.array_equal(np.asarray(a.extras[name]), np.asarray(b.extras[name])), name


# ----------------------------------------------------------------------------- input order


def test_shuffling_unrelated_chunks_does_not_change_the_partition(rng):
    texts, group = planted(rng, 40, size=3)
    texts += [" ".join(f"u{j}" for j in rng.integers(0, 10**6, 30)) for _ in range(20)]
    group += list(range(1000, 1020))
    ids = [f"d{i}" for i in range(len(texts))]
    chunks: dict = {}
    for i, g in enumerate(group):
        chunks.setdefault(g, []).append(i)
    base = build(texts=texts, ids=ids)
    want = R.partition(base.cluster_ids, ids)
    assert want == R.partition(group, ids)
    for trial in range(3):
        order = [i for g in rng.permutation(list(chunks)) for i in chunks[int(g)]]
        res = build(texts=[texts[i] for i in order], ids=[ids[i] for i in order])
        assert R.partition(res.cluster_ids, [ids[i] for i in order]) == want, f"shuffle {trial} changed the partition"


def test_vector_partition_invariant_under_shuffling(rng):
    vecs, group = planted_vectors(rng, 20, 3)
    ids = list(range(len(group)))
    want = R.partition(build(vectors=vecs, ids=ids).cluster_ids, ids)
    order = rng.permutation(len(ids))
    got = R.partition(build(vectors=vecs[order], ids=[ids[i] for i in order]).cluster_ids, [ids[i] for i in order])
    assert got == want == R.partition(group, ids)


# ----------------------------------------------------------------------------- golden artifact
# sha256 of a tiny artifact with created_at pinned. It changes with the hash scheme, the container
# format, the library version and the config fields (both recorded in the header) and the build
# stats. Regenerate deliberately with
#   python -c "import sys; sys.path[:0] = ['tests', 'tests/unit', 'tests/system']; import test_determinism as t; print(t.golden_artifact_sha256())"
# Every config field is explicit, so that a changed default does not change the golden bytes.
GOLDEN_CONFIG = {
    "bucket_window": 64, "empty": "singleton", "exact": True, "incremental": True, "representative": "longest",
    "seed": 1, "text": {"k": 5, "shingle": "word"},
    "minhash": {"bands": None, "borderline": 2.0, "false_negative_weight": 0.95, "false_positive_weight": 0.05,
                "method": "oph", "num_perm": 128, "rows": None, "threshold": 0.8, "verify": "estimate"},
    "simhash": {"bands": None, "bits": 256, "families": 1, "pigeonhole": False, "threshold": 0.95, "verify": "exact"},
    "text_simhash": None,
}
GOLDEN_ARTIFACT_SHA256 = "51125cc6e97c7c2de14fd584e981f40f410118244eee540a3fbcf1be19173d8b"


def golden_artifact_sha256(tmp_dir: Path | None = None) -> str:
    import tempfile

    texts = ["The quick brown fox jumps over the lazy dog", "the quick brown fox jumps over the lazy dog!",
             "The quick brown fox jumps over the lazy dog today", "Lorem ipsum dolor sit amet", ""]
    res = build(texts=texts, ids=["a", "b", "c", "d", "e"], config=BuildConfig(**GOLDEN_CONFIG), created_at=CREATED_AT)
    assert "timings" not in res.cluster_map.build_info, "wall-clock timings must stay out of the artifact"
    assert res.cluster_ids.tolist() == [0, 0, 0, 3, 4]
    with tempfile.TemporaryDirectory(dir=tmp_dir) as d:
        p = Path(d) / "golden.dvf"
        res.save(p)
        return hashlib.sha256(p.read_bytes()).hexdigest()


def test_golden_artifact_sha256(monkeypatch, tmp_path):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    assert golden_artifact_sha256(tmp_path) == GOLDEN_ARTIFACT_SHA256


def test_two_builds_in_one_process_are_byte_identical(rng, tmp_path):
    texts, _ = planted(rng, 30, size=3)
    paths = [tmp_path / "one.dvf", tmp_path / "two.dvf"]
    for p in paths:
        build(texts=texts, created_at=CREATED_AT).save(p)
    assert paths[0].read_bytes() == paths[1].read_bytes()
