"""The rules of the state an incremental ``add`` reads back from an artifact, checked before any kernel sees it.

An ``add`` hands the stored state (``extra/*``: signatures, shingle rows, vectors, flags, per-document
thresholds and keys, aliases) and the stored clusters (``doc/*``) to Numba kernels that index
with them and do not check bounds. A file whose checksums are valid can still break what those
kernels rely on (a signature array one row short, a shingle offset past the end, a cluster id
that is not a member's index), so :func:`check_add_state` checks every rule of
``docs/artifact-format.md`` section 2.1 first and raises :class:`~diversify.errors.ArtifactError`
naming the array, the rule, what was found and the fix. Every check is O(n) numpy (the alias
chains O(m log m)); none loops in Python over the documents.

:func:`label_violation` and :func:`alias_violation` are the two cluster rules, shared with the
writer (:mod:`.assemble` refuses to write what a reader refuses) and the reader (:mod:`.validation`
checks the labels at every verified load; :mod:`.aliases` ignores an alias table that breaks them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

import numpy as np

from diversify.artifact.layout import artifact_error, dtype_code
from diversify.errors import ArtifactError
from diversify.stages import (
    FLAG_CHAR_SHINGLES,
    FLAG_EMPTY_TEXT,
    FLAG_HAS_VECTOR,
    STAGE_EXACT,
    STAGE_MINHASH,
    STAGE_SIMHASH,
    STAGE_TEXT_SIMHASH,
)

if TYPE_CHECKING:
    from diversify.config import BuildConfig

__all__ = ["LabelViolation", "label_violation", "alias_violation", "build_config_of", "check_add_state",
           "REBUILD"]

#: the fix every refusal of stored state gives
REBUILD = ("Rebuild the artifact from its corpus (`diversify build`, or diversify.build) and add to the new one; "
           "a writer in another language must follow docs/artifact-format.md section 2.1.")
#: how far a stored vector's L2 norm may be from 1 (float32 rounding is ~1e-7 per dimension)
NORM_TOLERANCE = 1e-3
#: how far a stored fold similarity may lie outside [-1, 1] (cosine rounding)
SIMILARITY_TOLERANCE = 1e-3
_DOC_FLAGS = FLAG_EMPTY_TEXT | FLAG_HAS_VECTOR | FLAG_CHAR_SHINGLES


# --------------------------------------------------------------------------- the two cluster rules


class LabelViolation(NamedTuple):
    """A document whose cluster id is not the index of a member of that cluster."""

    doc: int  #: a document of the cluster
    cluster: int  #: its cluster id
    home: int  #: the cluster that document ``cluster`` belongs to (differs from ``cluster``)
    affected: int  #: documents affected


def label_violation(cluster_ids: np.ndarray) -> Optional[LabelViolation]:
    """The first break of "a cluster id is the document index of one of its members", or None.

    ``cluster_ids`` (int (n,), values in ``[0, n)``, already checked) is each document's resolved
    cluster id. The rule is ``cluster_ids[cluster_ids] == cluster_ids``: the document a cluster is
    named after belongs to it. Dense labels ``0..k-1`` break it as soon as document ``j`` is not
    in cluster ``j``; an ``add`` would then join unrelated clusters.
    """
    if cluster_ids.size == 0:
        return None
    bad = np.flatnonzero(cluster_ids[cluster_ids] != cluster_ids)
    if bad.size == 0:
        return None
    doc = int(bad[0])
    c = int(cluster_ids[doc])
    return LabelViolation(doc, c, int(cluster_ids[c]), int(bad.size))


def alias_violation(rows: np.ndarray, cluster_ids: np.ndarray) -> Optional[str]:
    """What is wrong with the alias table ``rows`` of an artifact whose clusters are ``cluster_ids``, or None.

    ``rows`` is int (m, 2) of ``[merged_id, surviving_id]``; ``cluster_ids`` the resolved cluster id
    of each document (the labels rule holds). The rules: ids are document indices; a row ``[c, c]``
    is a no-op; a merged id is listed with one surviving id (identical rows repeat harmlessly); a merged id is not a live
    cluster id (an alias naming a live cluster would re-route it); following the rows
    (``a -> b -> c``) ends without a cycle at a live cluster, and it is the cluster that the
    merged id's own document now belongs to (the merged cluster's members went there).
    """
    n = cluster_ids.size
    if n and (int(cluster_ids.min()) < 0 or int(cluster_ids.max()) >= n):
        return "cannot be checked: `doc/cluster_id` holds values outside [0, n_docs)"
    a = np.asarray(rows)
    if a.dtype.kind not in "iu" or a.ndim != 2 or a.shape[1] != 2:
        return f"must be an integer array of shape (m, 2) [merged_id, surviving_id]; got dtype {a.dtype}, shape {a.shape}"
    if a.shape[0] == 0:
        return None
    a = a.astype(np.int64)
    a = a[a[:, 0] != a[:, 1]]  # a row [c, c] ("merged into itself") is a no-op
    if a.shape[0] == 0:
        return None
    out = (a < 0) | (a >= n)
    if out.any():
        r = int(np.flatnonzero(out.any(axis=1))[0])
        return f"ids must be document indices in [0, {n}); got row {r} = {a[r].tolist()}"
    u = np.unique(a, axis=0)  # sorted by merged id, duplicates dropped
    src, dst = u[:, 0], u[:, 1]
    twice = np.flatnonzero(src[1:] == src[:-1])
    if twice.size:
        j = int(twice[0])
        return f"must map each merged id to one surviving id; got {int(src[j])} -> {int(dst[j])} and -> {int(dst[j + 1])}"
    live = np.flatnonzero(np.bincount(cluster_ids, minlength=n))  # sorted live cluster ids, O(n)
    is_live = _member(live, src)
    if is_live.any():
        s = int(src[np.flatnonzero(is_live)[0]])
        return (f"must not name a live cluster as merged id (it would re-route that cluster); got merged id {s}, "
                f"which is the id of a cluster of {int((cluster_ids == s).sum())} documents")
    end = dst.copy()
    for _ in range(max(1, int(src.size).bit_length()) + 1):  # pointer doubling: chains halve each round
        pos = np.minimum(np.searchsorted(src, end), src.size - 1)
        step = src[pos] == end
        if not step.any():
            break
        end = np.where(step, end[pos], end)
    pos = np.minimum(np.searchsorted(src, end), src.size - 1)
    cyc = src[pos] == end
    if cyc.any():
        s = int(src[np.flatnonzero(cyc)[0]])
        return f"must not contain a cycle; got one through merged id {s}"
    wrong = cluster_ids[src] != end
    if wrong.any():
        j = int(np.flatnonzero(wrong)[0])
        s, e = int(src[j]), int(end[j])
        where = "a live cluster" if bool(_member(live, np.array([e]))[0]) else "not a cluster"
        return (f"must lead each merged id to the cluster its own document belongs to; got {s} -> {e} ({where}) "
                f"while document {s} is in cluster {int(cluster_ids[s])}")
    return None


def _member(sorted_values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Mask of the entries of ``x`` found in the sorted array ``sorted_values``."""
    if sorted_values.size == 0:
        return np.zeros(x.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_values, x), sorted_values.size - 1)
    return sorted_values[pos] == x


# --------------------------------------------------------------------------- what add reads


def build_config_of(cmap: Any) -> BuildConfig:
    """The artifact's build configuration as a :class:`~diversify.config.BuildConfig`, or ArtifactError."""
    from pydantic import ValidationError

    from diversify.config import BuildConfig

    raw = cmap.config
    try:
        if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
            raise TypeError("not a map of str keys")
        return BuildConfig(**raw)
    except (ValidationError, TypeError, ValueError) as exc:
        first = str(exc).replace("\n", " ")[:200]
        raise artifact_error(_path(cmap), f"header `config` is not a valid build configuration of this version "
                                          f"({type(exc).__name__}: {first}). {REBUILD}") from None


class _State:
    """The arrays of one artifact an add reads, and the one wording of a refusal."""

    def __init__(self, cmap: Any):
        self.path = _path(cmap)
        self.n = int(cmap.n_docs)
        self.extras: dict[str, np.ndarray] = cmap.extras

    def fail(self, name: str, rule: str, got: str) -> ArtifactError:
        return artifact_error(self.path, f"`{name}` {rule}; got {got}. {REBUILD}")

    def get(self, key: str, code: str, shape: tuple, *, what: str) -> Optional[np.ndarray]:
        """``extra/<key>`` checked for its dtype code and shape (None entries: any size), or None when absent."""
        arr = self.extras.get(key)
        if arr is None:
            return None
        return self.typed(f"extra/{key}", np.asarray(arr), code, shape, what=what)

    def typed(self, name: str, arr: np.ndarray, code: str, shape: tuple, *, what: str) -> np.ndarray:
        got_code = dtype_code(arr.dtype) or str(arr.dtype)
        if got_code != code or arr.ndim != len(shape) or any(s is not None and s != g for s, g in zip(shape, arr.shape)):
            want = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
            raise self.fail(name, f"must be {code} of shape {want} ({what})", f"{got_code} of shape {tuple(arr.shape)}")
        return arr

    def need(self, key: str, why: str) -> np.ndarray:
        arr = self.extras.get(key)
        if arr is None:
            raise self.fail(f"extra/{key}", f"must be present ({why})", "no such array")
        return np.asarray(arr)


def _path(cmap: Any) -> str:
    return cmap.path or "<in memory>"


def check_add_state(cmap: Any, cfg: BuildConfig, *, texts: bool) -> None:
    """Check everything an ``add`` to ``cmap`` reads, before it runs (docs/artifact-format.md section 2.1).

    Parameters
    ----------
    cmap : ClusterMap
        The artifact, loaded with or without ``verify`` (the rules here do not rely on it).
    cfg : BuildConfig
        The artifact's own build configuration (shapes follow from it: ``num_perm``, ``bits``...).
    texts : bool
        Whether the add brings texts: the shingle rows they are compared with must then be present.
        (Texts or vectors for an artifact built without them are an input mistake that ``add``
        reports itself.)

    Raises
    ------
    ArtifactError
        Naming the array, the rule, what was found and the fix (rebuild the artifact).
    """
    st = _State(cmap)
    _check_documents(st, cmap, cfg)
    flags = _check_flags(st, cfg)
    _check_text_state(st, cfg, flags, texts=texts)
    _check_vector_state(st, cfg, flags)
    _check_per_document(st, cfg)
    aliases = st.get("aliases", "i8", (None, 2), what="rows [merged_id, surviving_id]")
    if aliases is not None:
        why = alias_violation(aliases, np.asarray(cmap.cluster_ids, dtype=np.int64))
        if why is not None:
            raise artifact_error(st.path, f"`extra/aliases` {why}. {REBUILD}")


def _check_documents(st: _State, cmap: Any, cfg: BuildConfig) -> None:
    """``doc/*``: cluster ids are member indices, one representative each, stage bits of enabled stages."""
    n = st.n
    cl = st.typed("doc/cluster_id", np.asarray(cmap.cluster_ids), "i8", (n,), what="one cluster id per document")
    rep = st.typed("doc/is_representative", np.asarray(cmap.is_representative), "bool", (n,), what="one flag per document")
    stages = st.typed("doc/stages", np.asarray(cmap.doc_stages), "u1", (n,), what="one stage bitmask per document")
    st.typed("doc/length", np.asarray(cmap.doc_lengths), "u4", (n,), what="one text length per document")
    if n == 0:
        return
    if int(cl.min()) < 0 or int(cl.max()) >= n:
        raise st.fail("doc/cluster_id", f"values must be document indices in [0, {n})",
                      f"values from {int(cl.min())} to {int(cl.max())}")
    bad = label_violation(cl)
    if bad is not None:
        raise st.fail("doc/cluster_id", "must name each cluster by the document index of one of its members "
                      "(doc/cluster_id[c] == c for every cluster id c)",
                      f"cluster {bad.cluster} (of document {bad.doc}) whose document {bad.cluster} is in cluster "
                      f"{bad.home}, {bad.affected} documents affected (dense labels 0..k-1 do this)")
    per_cluster = np.bincount(cl[rep], minlength=n)
    used = np.bincount(cl, minlength=n) > 0
    wrong = np.flatnonzero(per_cluster != used)
    if wrong.size:
        c = int(wrong[0])
        raise st.fail("doc/is_representative", "must mark exactly one member of each cluster",
                      f"{int(per_cluster[c])} in cluster {c}, {wrong.size} clusters wrong")
    allowed = ((STAGE_EXACT if cfg.exact else 0) | (STAGE_MINHASH if cfg.minhash is not None else 0)
               | (STAGE_SIMHASH if cfg.simhash is not None else 0)
               | (STAGE_TEXT_SIMHASH if cfg.text_simhash is not None else 0))
    extra_bits = stages & np.uint8(0xFF ^ allowed)
    if extra_bits.any():
        d = int(np.flatnonzero(extra_bits)[0])
        raise st.fail("doc/stages", f"may hold only the bits of the stages the config enables (mask {allowed})",
                      f"{int(stages[d])} at document {d}")


def _check_flags(st: _State, cfg: BuildConfig) -> np.ndarray:
    """``extra/doc_flags``: known bits only; the vector bit on every document or none."""
    n = st.n
    flags = st.get("doc_flags", "u1", (n,), what="one flag byte per document")
    if flags is None:
        flags = st.need("doc_flags", "every incremental artifact stores one flag byte per document")
    unknown = flags & np.uint8(0xFF ^ _DOC_FLAGS)
    if unknown.any():
        d = int(np.flatnonzero(unknown)[0])
        raise st.fail("extra/doc_flags", f"may hold only the bits {FLAG_EMPTY_TEXT} (no text), {FLAG_HAS_VECTOR} (vector), "
                      f"{FLAG_CHAR_SHINGLES} (character shingles)", f"{int(flags[d])} at document {d}")
    vec = (flags & np.uint8(FLAG_HAS_VECTOR)) != 0
    n_vec = int(vec.sum())
    if n_vec not in (0, n):
        raise st.fail("extra/doc_flags", f"must set bit {FLAG_HAS_VECTOR} (vector) on every document or on none",
                      f"{n_vec} of {n}")
    if n_vec and cfg.simhash is None:
        raise st.fail("extra/doc_flags", f"may set bit {FLAG_HAS_VECTOR} (vector) only when the config has a simhash stage",
                      "simhash=None in the config")
    char = (flags & np.uint8(FLAG_CHAR_SHINGLES)) != 0
    if char.any() and cfg.text.shingle != "auto":
        raise st.fail("extra/doc_flags", f"may set bit {FLAG_CHAR_SHINGLES} (character shingles) only under "
                      "text.shingle='auto'", f"{int(char.sum())} documents under shingle={cfg.text.shingle!r}")
    return flags


def _check_text_state(st: _State, cfg: BuildConfig, flags: np.ndarray, *, texts: bool) -> None:
    """``exact_hash``, ``minhash``, the shingle rows and ``text_simhash``: one row per document, config widths."""
    n = st.n
    if st.get("exact_hash", "u8", (n,), what="one exact-text hash per document") is None:
        st.need("exact_hash", "every incremental artifact stores one exact-text hash per document")
    has_text = bool(((flags & np.uint8(FLAG_EMPTY_TEXT)) == 0).any())
    mc = cfg.minhash
    if mc is not None:
        sig = st.get("minhash", "u4", (n, mc.num_perm), what=f"one signature of config minhash.num_perm={mc.num_perm} "
                                                                  "per document")
        if sig is None and has_text:
            st.need("minhash", "the config has a MinHash stage and documents have text")
        _check_shingle_rows(st, cfg, texts=texts and sig is not None)
    ts = cfg.text_simhash
    if ts is not None:
        fp = st.get("text_simhash", "u8", (n,), what="one 64-bit text fingerprint per document")
        if fp is None and has_text:
            st.need("text_simhash", "the config has a text SimHash stage and documents have text")


def _check_shingle_rows(st: _State, cfg: BuildConfig, *, texts: bool) -> None:
    """``shingle_indptr`` / ``shingle_hashes``: a CSR table of sorted distinct hashes, one row per document."""
    n = st.n
    indptr = st.get("shingle_indptr", "i8", (n + 1,), what="CSR row pointers, one row per document")
    hashes = st.get("shingle_hashes", "u8", (None,), what="the rows' shingle hashes")
    assert cfg.minhash is not None
    if indptr is None and hashes is None:
        if texts and cfg.minhash.verify == "exact":
            st.need("shingle_indptr", "adding texts under minhash.verify='exact' compares stored shingle rows; the "
                    "local engine writes them")
        return
    if indptr is None or hashes is None:
        missing = "shingle_indptr" if indptr is None else "shingle_hashes"
        st.need(missing, "shingle_indptr and shingle_hashes are stored together")
    assert indptr is not None and hashes is not None
    if int(indptr[0]) != 0 or int(indptr[-1]) != hashes.size:
        raise st.fail("extra/shingle_indptr", f"must start at 0 and end at the length of extra/shingle_hashes ({hashes.size})",
                      f"{int(indptr[0])} .. {int(indptr[-1])}")
    down = np.flatnonzero(indptr[1:] < indptr[:-1])
    if down.size:
        r = int(down[0])
        raise st.fail("extra/shingle_indptr", "must be non-decreasing (row r is hashes[indptr[r]:indptr[r+1]])",
                      f"{int(indptr[r])} then {int(indptr[r + 1])} at row {r}")
    if hashes.size > 1:
        row_start = np.zeros(hashes.size + 1, dtype=bool)
        row_start[indptr] = True  # positions where a row begins (and the end)
        bad = np.flatnonzero((hashes[1:] <= hashes[:-1]) & ~row_start[1:-1])
        if bad.size:
            p = int(bad[0]) + 1
            row = int(np.searchsorted(indptr, p, side="right")) - 1
            raise st.fail("extra/shingle_hashes", "must hold each row's distinct hashes in increasing order",
                          f"{int(hashes[p - 1])} then {int(hashes[p])} in row {row}")


def _check_vector_state(st: _State, cfg: BuildConfig, flags: np.ndarray) -> None:
    """``simhash`` and ``vectors``: present exactly with the vector flag; config widths; finite unit rows."""
    n = st.n
    has_vec = bool(n) and bool(flags[0] & np.uint8(FLAG_HAS_VECTOR))
    sc = cfg.simhash
    present = [k for k in ("simhash", "vectors") if k in st.extras]
    if not has_vec:
        if present:
            raise st.fail(f"extra/{present[0]}", f"must be absent when extra/doc_flags has no vector bit ({FLAG_HAS_VECTOR})",
                          "the array")
        return
    assert sc is not None  # _check_flags refused the vector bit without a simhash stage
    width = sc.families * sc.bits // 64
    sig = st.get("simhash", "u8", (n, width), what=f"one signature of simhash.families*bits/64 = {width} words per "
                                                     "document")
    if sig is None:
        st.need("simhash", "documents carry vectors (extra/doc_flags)")
    code = "f4" if sc.verify == "estimate" else "f8"
    vecs = st.get("vectors", code, (n, None), what=f"one vector per document, {code} under simhash.verify={sc.verify!r}")
    if vecs is None:
        vecs = st.need("vectors", "documents carry vectors (extra/doc_flags)")
    if vecs.shape[1] == 0:
        raise st.fail("extra/vectors", "must have at least one dimension", f"shape {vecs.shape}")
    finite = np.isfinite(vecs).all(axis=1)
    if not finite.all():
        d = int(np.flatnonzero(~finite)[0])
        raise st.fail("extra/vectors", "must be finite", f"NaN or inf in row {d}")
    norms = np.sqrt(np.einsum("ij,ij->i", vecs, vecs, dtype=np.float64))
    off = np.abs(norms - 1.0) > NORM_TOLERANCE
    if off.any():
        d = int(np.flatnonzero(off)[0])
        raise st.fail("extra/vectors", f"must hold L2-normalized rows (norm 1 +- {NORM_TOLERANCE})",
                      f"norm {float(norms[d]):.6g} in row {d}")


def _check_per_document(st: _State, cfg: BuildConfig) -> None:
    """``rep_keys``, ``doc_threshold``, ``fold_similarity``: one finite row per document, values in range."""
    n = st.n
    keys = st.extras.get("rep_keys")
    if keys is None and cfg.representative == "key":
        st.need("rep_keys", "the config has representative='key'")
    if keys is not None:
        keys = np.asarray(keys)
        shape: tuple = (n,) if keys.ndim != 2 else (n, keys.shape[1])
        keys = st.typed("extra/rep_keys", keys, "f8", shape, what="one key, or one row of 2+ keys, per document")
        if keys.ndim == 2 and keys.shape[1] < 2:
            raise st.fail("extra/rep_keys", "must be (n,) or (n, m) with m >= 2 key columns", f"shape {keys.shape}")
        if not np.isfinite(keys).all():
            raise st.fail("extra/rep_keys", "must be finite", "NaN or inf")
    thr = st.get("doc_threshold", "f8", (n,), what="one Jaccard threshold per document")
    if cfg.source_thresholds is not None:
        if thr is None:
            thr = st.need("doc_threshold", "the config has source_thresholds")
        assert cfg.minhash is not None  # the config refuses source thresholds without MinHash
        allowed = np.unique(np.array([cfg.minhash.threshold, *cfg.source_thresholds.values()], dtype=np.float64))
        ok = _member(allowed, thr)
        if not ok.all():
            d = int(np.flatnonzero(~ok)[0])
            raise st.fail("extra/doc_threshold", f"must hold, per document, one of the config's thresholds "
                          f"{allowed.tolist()}", f"{float(thr[d])!r} at document {d}")
    sim = st.get("fold_similarity", "f4", (n,), what="one verified similarity per document")
    if sim is not None:
        out = ~np.isnan(sim) & (np.abs(sim) > 1.0 + SIMILARITY_TOLERANCE)
        if out.any():
            d = int(np.flatnonzero(out)[0])
            raise st.fail("extra/fold_similarity", "must be NaN or a similarity in [-1, 1]", f"{float(sim[d])!r} at document {d}")
