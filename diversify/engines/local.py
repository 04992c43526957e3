"""Offline builder: from a corpus to a cluster id per document, as a :class:`ClusterMap`.

>>> import diversify
>>> res = diversify.build(texts=["a b c d e f", "a b c d e f!", "something else"], ids=["x", "y", "z"])
>>> res.cluster_ids.tolist()
[0, 0, 2]
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Optional, Union

import numpy as np

from .._spill import Spill
from .._tuning import build_pages
from ..clusters import union_pairs
from ..config import BuildConfig, fingerprint, resolve_config
from ..errors import ConfigError, IncompatibleArtifactError, InputError
from ..files import file_identity
from ..ids import PackedIds, check_ids
from ..linking.link import link
from ..sketches.batch import Sketches
from ..stages import FLAG_CHAR_SHINGLES, FLAG_EMPTY_TEXT, FLAG_HAS_VECTOR
from ..staging import doc_thresholds, linking_config, sketch_inputs
from .finish import BuildResult, BuildStats, finish

__all__ = ["build", "add", "BuildResult", "BuildStats"]

def build(
    texts: Optional[Iterable[str]] = None,
    *,
    ids: Optional[Iterable] = None,
    vectors: Any = None,
    config: Union[BuildConfig, Mapping, None] = None,
    keys: Any = None,
    sources: Any = None,
    metadata: Optional[Mapping] = None,
    progress: bool = False,
    chunk_size: int = 16384,
    created_at: Optional[str] = None,
    spill_dir: Union[str, os.PathLike, None] = None,
    engine: str = "local",
    client: Any = None,
    **engine_options: Any,
) -> BuildResult:
    """Cluster near-duplicate documents.

    Parameters
    ----------
    texts : iterable of str, optional
        Document texts; may be a generator (processed in chunks of ``chunk_size``).
    ids : iterable of str or int, optional
        One unique id per document; default 0..n-1.
    vectors : array (n, dim), optional
        Embeddings; enables the SimHash stage (cosine similarity).
    config : BuildConfig or dict, optional
        Stages and thresholds. ``BuildConfig()`` runs the exact stage and MinHash at Jaccard 0.8.
    keys : array (n,) or (n, m), optional
        Numbers for ``representative="key"`` (largest wins, e.g. a timestamp for "newest"); with m
        columns, compared in order (e.g. authority, then updated_at), ties to the longest text.
    sources : sequence of str (n,), optional
        Each document's source or kind, for ``BuildConfig(source_thresholds={...})``.
    metadata : dict, optional
        Stored in the artifact, e.g. ``{"embedding_model": "all-MiniLM-L6-v2"}``.
    progress : bool
        Show a progress bar on stderr.
    created_at : str, optional
        ISO-8601 time recorded in the artifact; default now (or ``SOURCE_DATE_EPOCH``).
    spill_dir : str or path, optional
        A directory for the build's temporary files: the MinHash signatures and the LSH band keys
        are kept there (unnamed files, gone with the build's result) instead of in memory, and
        read back a group at a time (at most 64 MB of signatures held), so that the build's memory
        barely grows with the corpus (``diversify build --stream`` puts them beside the output).
        Needs ~670 bytes of disk a document, ~1.2 KB for one with near-duplicates; the same
        clusters and bytes as without it (docs/building.md).
    engine : {"local", "dask"}
        ``"dask"`` runs the same stages on a Dask cluster (``client``, default the current one or
        a temporary local cluster) and gives the same clusters; ``texts`` may then also be a path
        glob, a dask DataFrame or Bag. Extra keyword options go to
        :func:`diversify.engines.dask.build_dask` (e.g. ``npartitions``). See docs/dask.md.

    Returns
    -------
    BuildResult

    Notes
    -----
    Results are approximate in the way MinHash is: a pair near the threshold may fall on either
    side (standard error about sqrt(J(1-J)/num_perm)); raise ``num_perm`` or use
    ``MinHashConfig(verify="exact")`` to tighten it.
    """
    if engine == "dask":
        if spill_dir is not None:
            raise ConfigError("`spill_dir` applies to engine='local'; the Dask engine keeps its data with its workers. "
                              "Drop spill_dir, or use engine='local'.")
        if vectors is not None:
            raise ConfigError("`engine='dask'` clusters texts only; got `vectors`. Use engine='local' for vectors.")
        from .dask import build_dask

        if resolve_config(config).text_simhash is not None:
            raise ConfigError("`text_simhash` is not available with engine='dask' yet; use engine='local' or text_simhash=None.")

        return build_dask(texts, ids=ids, config=config, keys=keys, client=client, metadata=metadata,
                          progress=progress, created_at=created_at, **engine_options)
    if engine != "local":
        raise ConfigError(f"`engine` must be 'local' or 'dask'; got {engine!r}.")
    if spill_dir is not None and texts is None:
        raise ConfigError("`spill_dir` keeps the signatures of texts on disk; a build of vectors only has none. "
                          "Drop spill_dir, or pass texts.")
    if engine_options or client is not None:
        raise ConfigError(f"`client` and extra options {sorted(engine_options)} apply only to engine='dask'.")
    cfg = resolve_config(config)
    if texts is None and vectors is None:
        raise InputError("build needs `texts`, `vectors` or both; got neither. Pass texts=[...] and/or vectors=array.")
    if isinstance(texts, (str, bytes)):
        raise InputError("`texts` must be an iterable of documents, not one str. Wrap it: texts=[text].")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ConfigError(f"`chunk_size` must be a positive int; got {chunk_size!r}. The default 16384 suits most corpora.")
    spill = Spill(spill_dir) if spill_dir is not None else None
    with build_pages(vectors):
        timings: dict = {}
        sk, source = sketch_inputs(texts, ids, vectors, keys, cfg, progress=progress, chunk_size=chunk_size,
                                   timings=timings, spill=spill)
        thresholds = doc_thresholds(cfg, sources, sk.n)
        if sk.n == 0:
            raise InputError("the corpus is empty: `texts`/`vectors` held no documents. Pass at least one document.")
        ids_ahead = _id_columns_beside(sk.ids)
        try:
            linked = link(sk, linking_config(cfg), source=source, timings=timings, progress=progress)
            return finish(sk, cfg, linked, timings, thresholds=thresholds, source=source,
                          aliases=np.zeros((0, 2), np.int64), raw_cluster=None, metadata=metadata,
                          created_at=created_at, ids_ahead=ids_ahead)
        finally:
            if spill is not None:
                spill.kept = None  # its file goes (the signatures' own stays with the result)


def _id_columns_beside(ids: list | PackedIds) -> Future:
    """The artifact's id columns (:func:`diversify.artifact.assemble.id_columns`: each id encoded,
    its lookup key hashed; Python work, under the GIL) computed in a thread while the
    linking and the cut into clusters run in kernels that release the GIL. Errors surface where the
    result is taken, in :func:`finish`, as they would have there."""
    from ..artifact.assemble import id_columns

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="diversify-ids")
    try:
        return pool.submit(id_columns, ids)
    finally:
        pool.shutdown(wait=False)


def add(
    cluster_map,
    texts: Optional[Iterable[str]] = None,
    *,
    ids: Optional[Iterable] = None,
    vectors: Any = None,
    config: Union[BuildConfig, Mapping, None] = None,
    keys: Any = None,
    sources: Any = None,
    progress: bool = False,
    chunk_size: int = 16384,
    created_at: Optional[str] = None,
    on_existing: str = "error",
) -> BuildResult:
    """Add documents to an existing build without recomputing the old ones.

    Existing documents keep their cluster ids. A new document joins a cluster or starts one (its
    id is its position in the combined corpus). A new document that bridges two clusters merges
    them: the smaller id survives and the other is recorded as an alias of it.

    Parameters
    ----------
    cluster_map : ClusterMap or path
        A build made with ``incremental=True`` (the default).
    config : optional
        If given, must have the artifact's fingerprint (else :class:`IncompatibleArtifactError`).
    on_existing : "error" or "skip"
        A new document whose id the artifact already has: ``"error"`` (default) raises
        :class:`~diversify.errors.ExistingIdError` naming the first (its position among ``ids``);
        ``"skip"`` leaves those documents out (their ids in ``BuildResult.skipped``); when every
        document is left out, the result holds the artifact unchanged. Replacing a document is not
        offered (see :mod:`diversify.engines.existing`).

    Returns
    -------
    BuildResult
        Its ``origin`` is the version of the artifact file it was derived from: ``save`` back to
        that file raises :class:`~diversify.errors.WriteConflictError` if the file has changed in
        between (another writer's update would be lost). To serialize read and write, hold the
        lock: ``with diversify.files.file_lock(path): add(path, ...).save(path)``.
    """
    from .existing import check_on_existing, leave_out_existing

    check_on_existing(on_existing)
    cmap, origin = _read_versioned(cluster_map)
    cfg = _incremental_config(cmap, config)
    # every rule the kernels below rely on, before any of them runs (docs/artifact-format.md 2.1)
    from ..artifact.state import check_add_state

    check_add_state(cmap, cfg, texts=texts is not None)
    ex = cmap.extras
    n_old = cmap.n_docs
    old_ids = cmap.ids
    old_ids = old_ids.tolist() if isinstance(old_ids, np.ndarray) else list(old_ids)
    texts, ids, vectors, keys, sources, skipped = leave_out_existing(cmap, texts, ids, vectors, keys, sources,
                                                                     on_existing)
    if skipped and ids is not None and not any(True for _ in ids):  # every document is in the artifact already
        return BuildResult.nothing_added(cmap, origin, skipped)
    with build_pages(vectors):
        timings: dict = {}
        new, new_source = sketch_inputs(texts, ids, vectors, keys, cfg, progress=progress, chunk_size=chunk_size,
                                        timings=timings, id_offset=n_old)
        if new.n == 0:
            raise InputError("`add` got no documents. Pass at least one text or vector.")
        old_flags = np.asarray(ex["doc_flags"])
        if (new.simhash is not None) != bool(old_flags.size and (old_flags & FLAG_HAS_VECTOR).any()) and n_old:
            raise InputError(
                "`vectors` must be given to `add` exactly when the artifact was built with vectors "
                f"(artifact has vectors: {bool((old_flags & FLAG_HAS_VECTOR).any())}; got vectors: {new.simhash is not None})."
            )
        _check_widths(ex, new, cfg)
        kind_old = cmap.id_kind
        if new.ids and (kind_old == "str") != isinstance(new.ids[0], str):
            raise InputError(
                f"`ids` must be of the artifact's id kind ({kind_old}); got {type(new.ids[0]).__name__} ids. "
                "Convert the new ids to the same kind."
            )
        all_ids = old_ids + list(new.ids)  # a list: `add` does not spill
        check_ids(all_ids)
        sk, thresholds = _extend(cmap, cfg, new, all_ids, old_flags, sources)
        # stored ids of old documents become their resolved ids (lookups are unchanged); the alias
        # table is kept so that ids written elsewhere (e.g. into a store's payload) still resolve
        raw_old = np.asarray(cmap.cluster_ids, dtype=np.int64)
        old_aliases = np.asarray(ex.get("aliases", np.zeros((0, 2), np.int64)), dtype=np.int64).reshape(-1, 2)
        parent = np.arange(sk.n, dtype=np.int64)
        union_pairs(parent, np.stack([np.arange(n_old, dtype=np.int64), raw_old], axis=1))
        flags = np.concatenate([np.asarray(cmap.doc_stages, np.uint8), np.zeros(new.n, np.uint8)])
        linked = link(sk, linking_config(cfg), source=new_source, parent=parent, flags=flags, new_start=n_old,
                      timings=timings, progress=progress)
        old_sim = np.asarray(ex["fold_similarity"], dtype=np.float32) if "fold_similarity" in ex else None
        res = finish(sk, cfg, linked, timings, thresholds=thresholds, source=new_source, aliases=old_aliases,
                     raw_cluster=raw_old, metadata=cmap.metadata, created_at=created_at,
                     old_reps=np.asarray(cmap.is_representative, dtype=bool), old_similarity=old_sim)
        res.origin = origin
        res.skipped = skipped
        return res


def _read_versioned(cluster_map):
    """(ClusterMap, the FileIdentity of the version it was read from, or None without a file).

    A path is read between two identity checks (again if a writer replaced it meanwhile), so the
    identity is the version read. A map given loaded carries the identity ClusterMap.load saw; a map
    built in memory (or whose file changed during its load) takes the file's current one.
    """
    from ..artifact import load

    if not isinstance(cluster_map, (str, os.PathLike)):
        origin = getattr(cluster_map, "_origin", None)  # the version ClusterMap.load read
        if origin is None and cluster_map.path:
            origin = file_identity(cluster_map.path)
        return cluster_map, origin
    for _ in range(3):
        before = file_identity(cluster_map)
        cmap = load(cluster_map)
        if before is not None and before.same_version(file_identity(cluster_map)):
            break
    return cmap, before


def _incremental_config(cmap, config) -> BuildConfig:
    """The artifact's own config, checked: its fingerprint, the caller's config, incremental state."""
    from ..artifact.state import build_config_of

    cfg = build_config_of(cmap)
    if fingerprint(cfg) != cmap.fingerprint:
        raise IncompatibleArtifactError(
            f"the artifact's config does not match its fingerprint ({cmap.fingerprint[:12]}...); it was written by "
            "another version of diversify's config. Rebuild it with this version."
        )
    if config is not None:
        given = resolve_config(config)
        if fingerprint(given) != cmap.fingerprint:
            raise IncompatibleArtifactError(
                f"`config` must match the artifact's build config to add documents; fingerprints differ "
                f"(artifact {cmap.fingerprint[:12]}..., given {fingerprint(given)[:12]}...). Pass config=None to "
                "use the artifact's own config, or rebuild from scratch with the new config."
            )
    if not cfg.incremental:  # (an incremental artifact without its state is refused by check_add_state)
        raise IncompatibleArtifactError(
            "the artifact has no incremental state (built with incremental=False); `add` cannot run without a "
            "rebuild. Rebuild with BuildConfig(incremental=True)."
        )
    return cfg


def _check_widths(ex, new: Sketches, cfg: BuildConfig) -> None:
    """The new documents' sketches, vectors and keys have stored counterparts of the same width."""
    for name in ("minhash", "text_simhash"):
        if getattr(new, name) is not None and name not in ex:
            raise InputError(
                f"`texts` cannot be added to this artifact: it was built without texts (it has no `{name}` state). "
                "Add vectors only (vectors=..., ids=...), or rebuild from texts and vectors together."
            )
    if new.vectors is not None and "vectors" in ex and new.vectors.shape[1] != ex["vectors"].shape[1]:
        raise InputError(
            f"`vectors` must have the artifact's dimension ({ex['vectors'].shape[1]}); got {new.vectors.shape[1]}. "
            "Embed the new documents with the model the artifact was built with."
        )
    if cfg.representative == "key" and new.keys is not None and new.keys.shape[1:] != ex["rep_keys"].shape[1:]:
        cols = ex["rep_keys"].shape[1] if ex["rep_keys"].ndim == 2 else 1
        got = new.keys.shape[1] if new.keys.ndim == 2 else 1
        raise InputError(
            f"`keys` must have the artifact's number of key columns ({cols}); got {got}. "
            "Pass the same key fields, in the same order, as the build."
        )


def _extend(cmap, cfg: BuildConfig, new: Sketches, all_ids: list, old_flags: np.ndarray, sources
            ) -> tuple[Sketches, Optional[np.ndarray]]:
    """The stored state of the artifact's documents followed by the new documents' sketches, and
    each document's Jaccard threshold (None without source thresholds)."""
    ex = cmap.extras
    sk = Sketches(
        ids=all_ids,
        lengths=np.concatenate([np.asarray(cmap.doc_lengths, np.uint32), new.lengths]),
        exact=np.concatenate([np.asarray(ex["exact_hash"]), new.exact]),
        empty=np.concatenate([(old_flags & FLAG_EMPTY_TEXT).astype(bool), new.empty]),
    )
    if new.char_docs is not None:
        sk.char_docs = np.concatenate([(old_flags & FLAG_CHAR_SHINGLES).astype(bool), new.char_docs])
    if new.minhash is not None:
        sk.minhash = np.concatenate([np.asarray(ex["minhash"]), new.minhash])
    if new.shingle_indptr is not None:
        sk.shingle_indptr, sk.shingle_hashes = _concat_csr_pair(np.asarray(ex["shingle_indptr"]), np.asarray(ex["shingle_hashes"]),
                                                     new.shingle_indptr, new.shingle_hashes)
    if new.text_simhash is not None:
        sk.text_simhash = np.concatenate([np.asarray(ex["text_simhash"]), new.text_simhash])
    if new.simhash is not None:
        sk.simhash = np.concatenate([np.asarray(ex["simhash"]), new.simhash])
        assert new.vectors is not None  # set together with new.simhash
        sk.vectors = np.concatenate([np.asarray(ex["vectors"]), new.vectors.astype(np.asarray(ex["vectors"]).dtype)])
    if cfg.representative == "key":
        sk.keys = np.concatenate([np.asarray(ex["rep_keys"]), new.keys])
    new_thr = doc_thresholds(cfg, sources, new.n)
    if new_thr is None:
        return sk, None
    return sk, np.concatenate([np.asarray(ex["doc_threshold"], dtype=np.float64), new_thr])


def _concat_csr_pair(p1, h1, p2, h2):
    indptr = np.concatenate([p1, p2[1:] + p1[-1]])
    return indptr, np.concatenate([h1, h2])
