"""Golden artifacts: sha256 of the bytes written for a fixed set of corpora and configs.

Run as a script to print the table (``python tests/golden/make_golden.py``), or with
``--write`` to pin it in ``tests/golden/artifacts.json``. ``tests/golden/test_golden_bytes.py`` rebuilds
every case and compares. A change here is a change of output bytes: it must be deliberate.

Only the public API and the command line are used, so the table survives any internal move.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TABLE = HERE / "artifacts.json"
CREATED_AT = "2026-01-01T00:00:00Z"


def _corpus(n: int = 240, seed: int = 7):
    from diversify.corpus.datagen import generate_corpus

    corpus = generate_corpus(n, words_per_doc=60, dup_fraction=0.3, boilerplate_fraction=0.2, seed=seed)
    texts = list(corpus.texts) + ["", "   ", "!!!", "Ünïcödé ﬁne text — with NFKC ﬀ ligatures"]
    return texts


def _vectors(n: int, seed: int = 3):
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n // 2 + 1, 32))
    v = np.repeat(base, 2, axis=0)[:n] + 0.01 * rng.standard_normal((n, 32))
    return v.astype(np.float32)


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cases(tmp: Path, *, with_dask: bool = True) -> dict:
    import diversify
    from diversify import BuildConfig, MinHashConfig, SimHashConfig, TextConfig

    texts = _corpus()
    ids = [f"d{i}" for i in range(len(texts))]
    out: dict = {}

    def save(name, res):
        p = tmp / f"{name}.artifact"
        res.save(p)
        out[name] = _sha(p)
        return p

    save("text_default", diversify.build(texts, ids=ids, created_at=CREATED_AT))
    save("text_int_ids", diversify.build(texts, created_at=CREATED_AT))
    save("text_exact", diversify.build(texts, ids=ids, created_at=CREATED_AT,
                                       config=BuildConfig(minhash=MinHashConfig(verify="exact"))))
    save("text_estimate", diversify.build(texts, ids=ids, created_at=CREATED_AT,
                                          config=BuildConfig(minhash=MinHashConfig(verify="estimate"))))
    save("text_classic_char", diversify.build(texts, ids=ids, created_at=CREATED_AT, config=BuildConfig(
        text=TextConfig(shingle="char", k=4), minhash=MinHashConfig(method="classic", threshold=0.6, num_perm=64))))
    save("text_simhash_stage", diversify.build(texts, ids=ids, created_at=CREATED_AT,
                                               config={"text_simhash": {"max_hamming": 3}}))
    save("text_components", diversify.build(texts, ids=ids, created_at=CREATED_AT,
                                            config=BuildConfig(clustering="components")))
    save("text_star", diversify.build(texts, ids=ids, created_at=CREATED_AT, config=BuildConfig(clustering="star")))
    # the earlier name of "star" builds the same bytes
    save("text_star_as_guaranteed", diversify.build(texts, ids=ids, created_at=CREATED_AT,
                                                    config={"clustering": "guaranteed"}))
    sources = ["a" if i % 3 else "b" for i in range(len(texts))]
    save("text_source_thresholds", diversify.build(texts, ids=ids, sources=sources, created_at=CREATED_AT,
                                                   config=BuildConfig(source_thresholds={"a": 0.7, "b": 0.9})))
    keys2 = np.stack([np.arange(len(texts)) % 4, np.arange(len(texts))[::-1]], axis=1).astype(np.float64)
    save("text_composite_keys", diversify.build(texts, ids=ids, keys=keys2, created_at=CREATED_AT,
                                                config=BuildConfig(representative="key")))
    keys = np.arange(len(texts), dtype=np.float64)[::-1].copy()
    save("text_key_rep", diversify.build(texts, ids=ids, keys=keys, created_at=CREATED_AT,
                                         config=BuildConfig(representative="key"), metadata={"source": "golden"}))
    vecs = _vectors(len(texts))
    save("vectors_only", diversify.build(vectors=vecs, ids=ids, created_at=CREATED_AT,
                                         config=BuildConfig(minhash=None, exact=False)))
    save("vectors_pigeonhole", diversify.build(vectors=vecs, ids=ids, created_at=CREATED_AT, config=BuildConfig(
        minhash=None, exact=False, simhash=SimHashConfig(bits=64, families=2, pigeonhole=True, threshold=0.9))))
    save("text_and_vectors", diversify.build(texts, ids=ids, vectors=vecs, created_at=CREATED_AT))

    half = len(texts) // 2
    base = save("add_base", diversify.build(texts[:half], ids=ids[:half], vectors=vecs[:half], created_at=CREATED_AT))
    save("add_step", diversify.add(base, texts[half:], ids=ids[half:], vectors=vecs[half:], created_at=CREATED_AT))

    if with_dask:
        save("dask_text", diversify.build(texts, ids=ids, created_at=CREATED_AT, engine="dask", npartitions=3))

    # the command line, as users run it
    corpus = tmp / "corpus.jsonl"
    with open(corpus, "w", encoding="utf-8") as f:
        for i, t in zip(ids, texts):
            f.write(json.dumps({"id": i, "text": t}) + "\n")
    env = dict(os.environ, SOURCE_DATE_EPOCH="1767225600")
    for name, extra in (("cli_default", []), ("cli_threshold_07", ["--threshold", "0.7", "--no-incremental"])):
        art = tmp / f"{name}.artifact"
        subprocess.run([sys.executable, "-m", "diversify", "build", str(corpus), "-o", str(art), "--no-progress", *extra],
                       check=True, env=env, capture_output=True)
        out[name] = _sha(art)
    for fmt in ("csv", "jsonl"):
        exp = tmp / f"export.{fmt}"
        subprocess.run([sys.executable, "-m", "diversify", "export", str(tmp / "cli_default.artifact"), "-o", str(exp)],
                       check=True, env=env, capture_output=True)
        out[f"cli_export_{fmt}"] = _sha(exp)
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory() as d:
        table = cases(Path(d))
    text = json.dumps(table, indent=2, sort_keys=True) + "\n"
    if "--write" in argv:
        TABLE.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
