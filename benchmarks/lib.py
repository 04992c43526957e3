"""The library as the benchmarks see it: the public API, plus the few internal names a suite needs,
each resolved here only (the library's internal modules are still being renamed; a move is fixed
in one place). Nothing here is imported before a suite runs."""

from __future__ import annotations

import importlib


def _attr(name: str, *modules: str):
    """``name`` from the first of ``modules`` that defines it."""
    errors = []
    for m in modules:
        try:
            return getattr(importlib.import_module(m), name)
        except (ImportError, AttributeError) as e:
            errors.append(f"{m}: {type(e).__name__}: {e}")
    raise ImportError(f"diversify has no {name!r} where the benchmarks look for it ({'; '.join(errors)}); "
                      f"update benchmarks/lib.py")


def generate_corpus(*args, **kwargs):
    return _attr("generate_corpus", "diversify.corpus.datagen", "diversify.datagen")(*args, **kwargs)


def generate_vectors(*args, **kwargs):
    return _attr("generate_vectors", "diversify.corpus.datagen", "diversify.datagen")(*args, **kwargs)


def lsh_bands():
    """(candidate_probability, optimal_params) of the MinHash banding."""
    mods = ("diversify.linking.bands", "diversify.linking", "diversify.lsh")
    return _attr("candidate_probability", *mods), _attr("optimal_params", *mods)


def evaluate(name: str):
    """A function of the evaluation helpers (jaccard_pairs, pair_metrics, pr_curve, best_threshold)."""
    return _attr(name, "diversify.evaluate", "diversify.eval")


def shingle_hashes(texts):
    return _attr("shingle_hashes", "diversify.text", "diversify.text.shingles")(texts)


def numpy_store(vectors, ids):
    return _attr("NumpyStore", "diversify.stores")(vectors, ids)


def build_dask(*args, **kwargs):
    return _attr("build_dask", "diversify.engines.dask", "diversify.dask")(*args, **kwargs)


def minhash_config(num_perm: int = 128, threshold: float = 0.8, **minhash_kwargs):
    import diversify

    return diversify.BuildConfig(minhash=diversify.MinHashConfig(num_perm=num_perm, threshold=threshold,
                                                                 **minhash_kwargs))


def simhash_config(threshold: float, bucket_window: int | None = None, clustering: str | None = None,
                   **simhash_kwargs):
    """Vectors only: no exact stage, no MinHash, SimHash at cosine ``threshold``."""
    import diversify

    extra = {} if bucket_window is None else {"bucket_window": bucket_window}
    if clustering is not None:
        extra["clustering"] = clustering
    return diversify.BuildConfig(minhash=None, exact=False,
                                 simhash=diversify.SimHashConfig(threshold=threshold, **simhash_kwargs), **extra)


def milvus_store(client, collection: str, user_filter=None):
    """``MilvusStore(client, collection, filter=...)``; ImportError when the commit has none."""
    return _attr("MilvusStore", "diversify.stores", "diversify.stores.milvus")(client, collection, filter=user_filter)
