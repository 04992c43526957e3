"""Generated data, made once and cached in ``benchmarks/.cache``: text corpora (one UTF-8 blob +
offsets, so a worker loads them without the generator) and embedding-like vectors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

from . import lib
from .paths import CACHE, key, log

# The synthetic corpus of the MinHash comparisons. Edit rates spread from exact copies (J = 1)
# past the threshold (rate 0.05 → J ≈ 0.6), so the near-threshold cases are well represented.
TEXT_CORPUS = dict(words_per_doc=550, dup_fraction=0.2, edit_rate=(0.0, 0.05), boilerplate_fraction=0.0,
                   topics=20, seed=0)
# Giant buckets: a fifth of the corpus is pages rendered from 8 templates (500 pages each at 20k
# docs, so every template page shares LSH buckets with hundreds of others).
BOILERPLATE_CORPUS = dict(TEXT_CORPUS, boilerplate_fraction=0.2, n_templates=8)


def write_texts(prefix: str, texts, **meta) -> str:
    """Store ``texts`` as ``prefix.bin`` (UTF-8, concatenated) + ``prefix.npz`` (offsets, meta)."""
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    with open(prefix + ".bin.tmp", "wb") as f:
        for i, text in enumerate(texts):
            b = text.encode("utf-8")
            f.write(b)
            offsets[i + 1] = offsets[i] + len(b)
    os.replace(prefix + ".bin.tmp", prefix + ".bin")
    np.savez(prefix + ".npz", offsets=offsets, **meta)
    return prefix


def load_texts(prefix: str) -> list[str]:
    offsets = np.load(prefix + ".npz")["offsets"]
    with open(prefix + ".bin", "rb") as f:
        blob = f.read()
    return [blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def corpus_params(prefix: str) -> dict:
    return json.loads(str(np.load(prefix + ".npz")["params"]))


def corpus_file(n: int, params: dict = TEXT_CORPUS) -> str:
    """Generate (once) and store ``generate_corpus(n, **params)``; returns the path prefix.

    Large corpora are generated in a child process so this process does not keep their memory."""
    CACHE.mkdir(exist_ok=True)
    prefix = str(CACHE / f"corpus-{n}-{key(params)}")
    if os.path.exists(prefix + ".npz"):
        return prefix
    if n > 50_000 and not os.environ.get("_BENCH_CORPUS_CHILD"):
        from .worker import child_env

        code = f"from benchmarks.corpora import corpus_file; corpus_file({n}, {params!r})"
        subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd(),
                       env=child_env(extra={"_BENCH_CORPUS_CHILD": "1"}))
        return prefix
    t = time.perf_counter()
    c = lib.generate_corpus(n, **params)
    gen_s = time.perf_counter() - t
    write_texts(prefix, c.texts, source=c.source, edit_rates=c.edit_rates,
                params=json.dumps(dict(n_docs=n, **params)), generate_s=gen_s)
    log(f"corpus n={n:,} generated in {gen_s:.1f}s ({os.path.getsize(prefix + '.bin') / 2**20:,.0f} MiB of UTF-8)")
    return prefix


def texts_file(name: str, texts) -> str:
    """A corpus file for given texts (e.g. a real data set), cached under ``name`` + their digest."""
    CACHE.mkdir(exist_ok=True)
    prefix = str(CACHE / f"texts-{name}-{key(list(texts))}")
    if not os.path.exists(prefix + ".npz"):
        write_texts(prefix, texts)
    return prefix


# Vectors for the embedding route: only the corpus's planted structure is used (which document
# copies which, topics, edit rates), so the texts are short.
VECTOR_CORPUS = dict(words_per_doc=20, dup_fraction=0.2, edit_rate=(0.0, 0.2), topics=20, seed=0)
# copy noise 0.15·(1 + 10·rate): copies land at cosine ≈ 0.99 down to ≈ 0.9 to their original (and
# two copies of one original lower still), so both thresholds cut through the planted pairs.
VECTORS = dict(copy_noise=0.15, seed=0)


def vectors_file(n: int, dim: int) -> tuple[str, dict]:
    """Vectors (cached .npy, float32 unit rows) and the corpus parameters they came from; the
    planted sources are saved beside them as ``src-n{n}.npy``."""
    folder = CACHE / "vectors"
    folder.mkdir(parents=True, exist_ok=True)
    tag = f"vec-n{n}-d{dim}-e{VECTOR_CORPUS['edit_rate'][1]}-c{VECTORS['copy_noise']}"
    path = folder / f"{tag}.npy"
    params = dict(n_docs=n, dim=dim, **VECTOR_CORPUS, vectors=dict(VECTORS))
    if not path.exists():
        t = time.perf_counter()
        c = lib.generate_corpus(n, **VECTOR_CORPUS)
        v = lib.generate_vectors(c, dim=dim, **VECTORS)
        np.save(folder / f"{tag}.tmp.npy", v)
        os.replace(folder / f"{tag}.tmp.npy", path)
        np.save(folder / f"src-n{n}.npy", np.asarray(c.source))
        log(f"vectors n={n:,} dim={dim} generated in {time.perf_counter() - t:.1f}s")
    return str(path), params


def planted_sources(n: int) -> np.ndarray:
    return np.load(CACHE / "vectors" / f"src-n{n}.npy")


def small_texts(n: int = 300, seed: int = 99) -> list[str]:
    """The warm-up corpus every text tool runs on before it is measured."""
    return lib.generate_corpus(n, words_per_doc=80, dup_fraction=0.3, seed=seed).texts




# Real non-ASCII text found on this machine: the translated messages of the installed programs'
# gettext catalogs (/usr/share/locale/*/LC_MESSAGES/*.mo, vim's lang/ folders), by script.
SCRIPTS = {
    "accented Latin": ("fr", "de", "es", "cs", "pl", "sv"),
    "Cyrillic": ("ru", "uk", "bg"),
    "Greek": ("el",),
    "CJK": ("ja", "zh_CN", "zh_TW", "ko"),
}


def _catalog_messages(lang: str) -> list[str]:
    """Every translated message (each plural form on its own) of language ``lang`` in the machine's
    .mo catalogs (sorted files)."""
    import gettext
    import glob

    found = sorted(set(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo")
                       + glob.glob(f"/usr/share/*/*/lang/{lang}/LC_MESSAGES/*.mo")
                       + glob.glob(f"/usr/share/*/*/lang/{lang}.UTF-8/LC_MESSAGES/*.mo")))
    out = []
    for path in found:
        try:
            with open(path, "rb") as f:
                cat = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        for k, v in sorted(cat.items(), key=lambda kv: str(kv[0])):
            if k and isinstance(v, str):  # a plural entry holds its forms separated by NUL
                out.extend(form for form in v.split("\x00") if form.strip())
    return out


def multilingual_texts(n_docs: int, doc_bytes: int = 3500, seed: int = 0) -> tuple[list[str], dict]:
    """``n_docs`` documents of about ``doc_bytes`` UTF-8 bytes, a quarter per script of
    :data:`SCRIPTS`, each a seeded draw of that script's translated messages; a fifth are copies of
    an earlier document of the same script with a tenth of their messages redrawn. Returns the
    texts and, per script, the languages, messages and MiB found. Empty when nothing is installed."""
    rng = np.random.default_rng(seed)
    pools, found = {}, {}
    for script, langs in SCRIPTS.items():
        msgs = [m for lang in langs for m in _catalog_messages(lang)]
        if msgs:
            pools[script] = msgs
            found[script] = dict(languages=list(langs), messages=len(msgs),
                                 mib=sum(len(m.encode()) for m in msgs) / 2**20)
    if not pools:
        return [], found
    names = sorted(pools)
    texts: list[str] = []
    parts_of: list[list[int]] = []
    for i in range(n_docs):
        script = names[i % len(names)]
        pool = pools[script]
        same = [j for j in range(max(0, i - 40), i) if names[j % len(names)] == script]
        if same and rng.random() < 0.2:
            parts = list(parts_of[same[int(rng.integers(len(same)))]])
            for k in rng.choice(len(parts), size=max(1, len(parts) // 10), replace=False):
                parts[int(k)] = int(rng.integers(len(pool)))
        else:
            parts, size = [], 0
            while size < doc_bytes:
                k = int(rng.integers(len(pool)))
                parts.append(k)
                size += len(pool[k].encode()) + 1
        parts_of.append(parts)
        texts.append(" ".join(pool[k] for k in parts))
    return texts, found
