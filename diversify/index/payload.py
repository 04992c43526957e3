"""What the live index keeps of each document: its sketches as one fixed-size record, and its band rows.

A document's ``payload`` (:attr:`~diversify.index.storage.DocRow.payload`) is one packed
little-endian record whose fields depend only on the index's config and :class:`Layout`:

=============  ==================  ==============================================================
``flags``      uint8               1 = no words (empty text), 2 = has a vector, 4 = shingled by character
``length``     uint32              normalized text length in bytes (the ``longest`` rule)
``exact``      uint64              hash of the normalized text (the exact stage)
``minhash``    uint32 x num_perm   MinHash signature (when the MinHash stage is on and texts are given)
``tsimhash``   uint64              text SimHash fingerprint (when ``text_simhash`` is on)
``simhash``    uint64 x words      vector SimHash, all families (when vectors are given)
``vector``     float64 x dim       the normalized vector (float32 under the vector stage's ``verify="estimate"``)
``keys``       float64 x columns   representative keys (``representative="key"`` only)
``threshold``  float64             the document's Jaccard threshold (``source_thresholds`` only)
=============  ==================  ==============================================================

At 128 permutations a text document's record is 525 bytes. Band rows are derived from the record
(the same band-key functions as the batch build, :mod:`diversify.linking.keys`), so they never
need to be stored for documents that are not representatives.

Under ``MinHashConfig(verify="auto")`` (the default) or ``"exact"``, the record is followed by the
document's shingle set: its distinct shingle hashes cut to their high 32 bits, sorted, as
little-endian uint32 (4 bytes per distinct shingle; about 2.2 KB for a 550-word document). With
them a borderline pair of a new document and a stored one is decided by exact Jaccard, as the
batch build decides pairs whose texts it holds, so every fold of the index is verified exactly
(without them the MinHash estimate decided, and a streamed corpus of man pages kept folds below
the threshold; docs/index.md). ``verify="estimate"`` stores no sets (the record alone). Indexes created
before the sets existed (their layout has no ``shingles``) keep the record alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, Optional

import numpy as np

from ..config import BuildConfig
from ..errors import InputError, StorageError
from ..sketches.batch import Sketches
from ..sketches.source import TextSource

__all__ = ["Docs", "Layout", "record_dtype", "encode", "with_sets", "without_sets", "decode", "concat", "band_rows"]

F_EMPTY, F_VECTOR, F_CHAR = 1, 2, 4
#: salt of the exact-hash band key (used only when the MinHash stage is off)
_EXACT_SALT = np.uint64(0x6A09E667F3BCC909)


class Docs(NamedTuple):
    """Documents as the index's steps hand them on: their sketches, each one's Jaccard threshold
    (``source_thresholds``: the record's ``threshold``; None without), and their texts at hand (a
    batch being added or queried: what its sketching returned; None for stored documents, whose
    texts the index does not keep)."""

    sketches: Sketches
    thresholds: Optional[np.ndarray] = None
    source: Optional[TextSource] = None

    @property
    def n(self) -> int:
        return self.sketches.n


@dataclass(frozen=True)
class Layout:
    """What the first add fixes for every later document of an index."""

    texts: bool  # documents carry texts (text stages); False for a vectors-only index
    vector_dim: int  # 0 without vectors
    key_columns: int  # 0 unless representative="key"
    shingles: bool = False  # each payload ends with the document's 32-bit shingle set

    def dumps(self) -> str:
        d = {"texts": self.texts, "vector_dim": self.vector_dim, "key_columns": self.key_columns}
        if self.shingles:  # absent in indexes created before the sets existed
            d["shingles"] = True
        return json.dumps(d, sort_keys=True, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str, url: str) -> Optional[Layout]:
        if not text:
            return None
        try:
            d = json.loads(text)
            out = cls(bool(d["texts"]), int(d["vector_dim"]), int(d["key_columns"]), bool(d.get("shingles", False)))
            if not (0 <= out.vector_dim < 2**31 and 0 <= out.key_columns < 2**31):
                raise ValueError("dimension")
            return out
        except (ValueError, KeyError, TypeError, RecursionError, OverflowError, AttributeError) as exc:
            raise StorageError(f"the state record of the index at {url} is damaged: `layout` must be the JSON the "
                               f"index wrote; found {text[:80]!r}. It was not changed; the index was altered outside "
                               "diversify or its storage is damaged: restore it from a backup, or create a new index "
                               "and add the documents again.") from exc

    @classmethod
    def of(cls, sk: Sketches, cfg: BuildConfig) -> Layout:
        dim = int(sk.vectors.shape[1]) if sk.simhash is not None and sk.vectors is not None else 0
        cols = 0
        if cfg.representative == "key" and sk.keys is not None:
            cols = 1 if sk.keys.ndim == 1 else int(sk.keys.shape[1])
        shingles = bool(sk.has_text and cfg.minhash is not None and cfg.minhash.verify in ("auto", "exact"))
        return cls(texts=sk.has_text, vector_dim=dim, key_columns=cols, shingles=shingles)

    def check_same(self, other: Layout) -> None:
        """Refuse a batch whose layout differs from the index's (InputError naming what differs)."""
        if self == other or replace(self, shingles=other.shingles) == other:  # sets: see :func:`encode`
            return
        if self.texts != other.texts:
            raise InputError(f"`texts` must be given exactly when the index was created with texts (index: "
                             f"{'texts' if self.texts else 'vectors only'}; this batch: "
                             f"{'texts' if other.texts else 'vectors only'}).")
        if self.vector_dim != other.vector_dim:
            raise InputError(f"`vectors` must have the index's dimension ({self.vector_dim or 'no vectors'}); got "
                             f"{other.vector_dim or 'no vectors'}. Embed every document with the same model, and give "
                             "vectors with every batch or with none.")
        raise InputError(f"`keys` must have the index's number of key columns ({self.key_columns}); got "
                         f"{other.key_columns}. Pass the same key fields, in the same order, with every batch.")


def record_dtype(cfg: BuildConfig, layout: Layout) -> np.dtype:
    """The packed record of one document under ``cfg`` and ``layout`` (see the module docstring)."""
    fields: list[tuple] = [("flags", "u1"), ("length", "<u4"), ("exact", "<u8")]
    if layout.texts and cfg.minhash is not None:
        fields.append(("minhash", "<u4", (cfg.minhash.num_perm,)))
    if layout.texts and cfg.text_simhash is not None:
        fields.append(("tsimhash", "<u8"))
    if layout.vector_dim and cfg.simhash is not None:
        fields.append(("simhash", "<u8", (cfg.simhash.bits * cfg.simhash.families // 64,)))
        # the build keeps float64 vectors for the exact cosine check, float32 otherwise (for `add`)
        fields.append(("vector", "<f8" if cfg.simhash.verify == "exact" else "<f4", (layout.vector_dim,)))
    if layout.key_columns:
        fields.append(("keys", "<f8", (layout.key_columns,)))
    if layout.texts and cfg.source_thresholds is not None:
        fields.append(("threshold", "<f8"))
    return np.dtype(fields)


def encode(docs: Docs, cfg: BuildConfig, layout: Layout) -> list[bytes]:
    """One payload per document of ``docs`` (with its shingle set when ``layout.shingles``: then
    its sketches must have ``sets32``, see :func:`with_sets`)."""
    sk = docs.sketches
    dt = record_dtype(cfg, layout)
    rec = np.zeros(sk.n, dtype=dt)
    flags = sk.empty.astype(np.uint8) * F_EMPTY
    if sk.char_docs is not None:
        flags |= sk.char_docs.astype(np.uint8) * F_CHAR
    if sk.simhash is not None:
        flags |= F_VECTOR
    rec["flags"] = flags
    rec["length"] = sk.lengths
    rec["exact"] = sk.exact
    names = dt.names or ()
    if "minhash" in names:
        rec["minhash"] = sk.minhash
    if "tsimhash" in names:
        rec["tsimhash"] = sk.text_simhash
    if "simhash" in names:
        rec["simhash"] = sk.simhash
    if "vector" in names:
        rec["vector"] = sk.vectors
    if "keys" in names:
        assert sk.keys is not None
        rec["keys"] = sk.keys.reshape(sk.n, -1)
    if "threshold" in names:
        assert docs.thresholds is not None, "an index with source_thresholds needs each document's threshold"
        rec["threshold"] = docs.thresholds
    buf = rec.tobytes()
    size = dt.itemsize
    if not layout.shingles:
        return [buf[i * size: (i + 1) * size] for i in range(sk.n)]
    assert sk.sets32 is not None and sk.sets32_indptr is not None, "with_sets first"
    tail = sk.sets32.astype("<u4", copy=False).tobytes()
    ptr = (sk.sets32_indptr * 4).tolist()
    return [buf[i * size: (i + 1) * size] + tail[ptr[i]: ptr[i + 1]] for i in range(sk.n)]


def with_sets(docs: Docs, cfg: BuildConfig) -> Docs:
    """``docs`` with each document's 32-bit shingle set (``sets32``/``sets32_indptr``) from its texts
    at hand (a batch being added or queried that its sketching did not give them)."""
    from ..text import shingle_sets32

    assert docs.source is not None, "a batch with texts has them at hand (Index._sketch makes them a sequence)"
    indptr, sets = shingle_sets32(docs.source.texts, cfg.text, cfg.seed)
    return docs._replace(sketches=replace(docs.sketches, sets32_indptr=indptr, sets32=sets))


def without_sets(docs: Docs) -> Docs:
    """``docs`` without shingle sets (an index created before the stored sets has none to compare with)."""
    return docs._replace(sketches=replace(docs.sketches, sets32_indptr=None, sets32=None))


def decode(payloads: Sequence[bytes], cfg: BuildConfig, layout: Layout, url: str) -> Docs:
    """The :class:`Docs` of stored documents (in the order given): their sketches, as the linking
    code reads them, and their thresholds."""
    dt = record_dtype(cfg, layout)
    size = dt.itemsize
    if layout.shingles:
        bad = next((i for i, p in enumerate(payloads) if len(p) < size or (len(p) - size) % 4), None)
        want = f"{size} bytes plus 4 per shingle"
    else:
        bad = next((i for i, p in enumerate(payloads) if len(p) != size), None)
        want = f"{size} bytes"
    if bad is not None:
        raise StorageError(f"a stored document of {url} has a {len(payloads[bad])}-byte record where this index's "
                           f"config makes {want}; the index was altered by another program or version.")
    n = len(payloads)
    fields: dict = {}
    if layout.shingles:
        rec = np.frombuffer(b"".join([p[:size] for p in payloads]), dtype=dt) if n else np.zeros(0, dtype=dt)
        lens = np.fromiter((len(p) - size for p in payloads), dtype=np.int64, count=n) // 4
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        fields["sets32_indptr"] = indptr
        fields["sets32"] = np.frombuffer(b"".join([p[size:] for p in payloads]), dtype="<u4").astype(np.uint32)
    else:
        rec = np.frombuffer(b"".join(payloads), dtype=dt) if n else np.zeros(0, dtype=dt)
    names = dt.names or ()
    flags = rec["flags"]
    if cfg.text.shingle == "auto" and layout.texts:
        fields["char_docs"] = (flags & F_CHAR) != 0
    if "minhash" in names:
        fields["minhash"] = np.ascontiguousarray(rec["minhash"], dtype=np.uint32)
    if "tsimhash" in names:
        fields["text_simhash"] = np.ascontiguousarray(rec["tsimhash"], dtype=np.uint64)
    if "simhash" in names:
        fields["simhash"] = np.ascontiguousarray(rec["simhash"], dtype=np.uint64)  # (n, words): a subarray field
    if "vector" in names:
        dtype = np.float64 if cfg.simhash is not None and cfg.simhash.verify == "exact" else np.float32
        fields["vectors"] = np.ascontiguousarray(rec["vector"], dtype=dtype)
    if "keys" in names:
        k = np.ascontiguousarray(rec["keys"], dtype=np.float64)
        fields["keys"] = k[:, 0].copy() if layout.key_columns == 1 else k
    sk = Sketches(ids=list(range(n)), lengths=rec["length"].astype(np.uint32), exact=rec["exact"].astype(np.uint64),
                  empty=(flags & F_EMPTY) != 0, has_text=layout.texts, **fields)
    thresholds = np.ascontiguousarray(rec["threshold"], dtype=np.float64) if "threshold" in names else None
    return Docs(sk, thresholds)


def concat(a: Docs, b: Docs) -> Docs:
    """``a``'s documents followed by ``b``'s (the same fields set); ``b``'s texts stay at hand, as
    documents ``a.n, a.n + 1, ...`` (without what their sketching kept)."""

    def cat(x, y):
        if x is None or y is None:
            return None
        return np.concatenate([x, y.astype(x.dtype, copy=False)])

    x, y = a.sketches, b.sketches
    sets: dict = {}
    if x.sets32 is not None and y.sets32 is not None:  # every document's set: exact checks for every pair
        assert x.sets32_indptr is not None and y.sets32_indptr is not None
        sets = {"sets32": np.concatenate([x.sets32, y.sets32]),
                "sets32_indptr": np.concatenate([x.sets32_indptr, y.sets32_indptr[1:] + x.sets32_indptr[-1]])}
    sk = Sketches(ids=list(x.ids) + list(y.ids), lengths=cat(x.lengths, y.lengths), exact=cat(x.exact, y.exact),
                  empty=cat(x.empty, y.empty), minhash=cat(x.minhash, y.minhash),
                  text_simhash=cat(x.text_simhash, y.text_simhash), simhash=cat(x.simhash, y.simhash),
                  vectors=cat(x.vectors, y.vectors), keys=cat(x.keys, y.keys), char_docs=cat(x.char_docs, y.char_docs),
                  has_text=x.has_text or y.has_text, **sets)
    source = TextSource(b.source.texts, a.n) if b.source is not None else None
    return Docs(sk, cat(a.thresholds, b.thresholds), source)


def band_rows(sk: Sketches, docs: np.ndarray, cfg: BuildConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(owner, key)``: the band keys of documents ``docs`` of ``sk`` (int64 each, ``owner[i]`` the
    document of ``key[i]``), for every stage that proposes candidates, as the batch build makes them.

    Documents with no words get no text keys (no text stage joins them), as in the build.
    """
    from ..linking.keys import minhash_band_keys, simhash_band_keys, text_simhash_band_keys
    from ..staging import linking_config

    cfg = linking_config(cfg)  # with source thresholds: the bands of the lowest, as the build's edges
    docs = np.asarray(docs, dtype=np.int64)
    owners: list[np.ndarray] = []
    keys: list[np.ndarray] = []
    text_docs = docs[~sk.empty[docs]] if sk.has_text else docs[:0]

    def put(who: np.ndarray, mat: np.ndarray) -> None:
        owners.append(np.repeat(who, mat.shape[1]))
        keys.append(mat.reshape(-1).view(np.int64))

    if text_docs.size:
        if cfg.minhash is not None and sk.minhash is not None:
            put(text_docs, minhash_band_keys(sk.minhash, text_docs, cfg))
        elif cfg.exact:
            put(text_docs, (sk.exact[text_docs] ^ _EXACT_SALT).reshape(-1, 1))
        if cfg.text_simhash is not None and sk.text_simhash is not None:
            put(text_docs, text_simhash_band_keys(sk.text_simhash, text_docs, cfg))
    if cfg.simhash is not None and sk.simhash is not None and docs.size:
        put(docs, simhash_band_keys(sk.simhash, docs, cfg))
    if not owners:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(owners), np.concatenate(keys)
