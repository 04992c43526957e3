"""Many documents normalized and encoded into one UTF-8 buffer plus offsets (:func:`encode_batch`).

An all-ASCII batch is joined (or copied from the strings' own bytes into a lent buffer); a batch
with other characters is read from the strings' code units where the interpreter allows
(:mod:`diversify.text.strview`), else encoded by Python, normalized as one NUL-joined string and
folded on its bytes (:mod:`.normalization`, :mod:`.fold`). Every path gives the same bytes.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import InputTypeError
from . import normalization, strview
from .buffers import readonly
from .fold import DENSE_FUSED, SPARSE_LEADS, fold_bytes, fold_dense, nfkc_fold_dense
from .normalization import nfkc_utf8, prepare

__all__ = ["encode_batch", "encode_batch_scripts", "encode_python", "check_str"]


def check_str(texts: Sequence, start_index: int) -> None:
    """Raise :class:`~diversify.errors.InputTypeError` naming the first item of ``texts`` that is not
    a ``str`` (numbered from ``start_index``)."""
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InputTypeError(
                f"`texts` must hold str; item {start_index + i} is {type(t).__name__} ({t!r:.60}). "
                "Decode bytes first (e.g. b.decode('utf-8', errors='replace')) or pass str(x)."
            )


_IS_NFKC = functools.partial(unicodedata.is_normalized, "NFKC")


def _encode_joined(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """Normalize and encode a batch as one string (documents separated by NUL), or None when a
    document holds a NUL itself (the caller then goes document by document).

    The batch is normalized as one string: NFKC is the same on the joined string as on each
    document, because NUL is a starter that composes with nothing (no composition or reordering
    crosses it); casefold and the space rule map one character at a time, and are applied to the
    UTF-8 bytes through tables built from ``str.casefold`` itself. ASCII letters are left to the
    kernel, which lowercases A-Z.
    """
    n = len(texts)
    # each document encoded on its own, then the bytes joined: faster than encoding the joined
    # str, which is as wide as the widest document's characters (a single CJK document makes every
    # Latin-1 one two bytes per character before it is encoded back to one)
    encoded = b"\x00".join([t.encode("utf-8", "surrogatepass") for t in texts])
    extra = len(encoded) - (n - 1) - sum(map(len, texts))  # UTF-8 bytes beyond one per character
    if len(encoded) >= normalization.SPLICE_FROM and extra / 2 >= DENSE_FUSED * len(encoded):
        # dense non-ASCII text: NFKC and the fold in one pass (the same bytes as the passes below;
        # a text NFKC leaves alone has no piece it changes), which also counts the NULs (None: a
        # document holds one)
        return nfkc_fold_dense(readonly(np.frombuffer(encoded, dtype=np.uint8)), n)
    normalized = all(map(_IS_NFKC, texts))
    if encoded.count(0) != n - 1:  # UTF-8 has a NUL byte only for U+0000
        return None
    if not normalized:
        # NFKC of the joined string is the join of each document's NFKC (see above), normalized only
        # around the characters it can change (see normalization.nfkc; NUL is a starter NFKC leaves alone)
        raw = nfkc_utf8(encoded)
    else:
        raw = np.frombuffer(encoded, dtype=np.uint8)
    sparse = bool(raw.size < 2 or np.count_nonzero(raw[:-1] >= 0xC0) < SPARSE_LEADS * raw.size)
    if sparse:  # mostly ASCII: fold in place with numpy (below)
        if not raw.flags.writeable:
            raw = raw.copy()
        seps = np.flatnonzero(raw == 0)  # before the fold pads shrinking folds with NULs
        sparse = fold_bytes(raw)  # False: a fold that grows, and nothing written
    if not sparse:
        # dense non-ASCII text, or a fold that grows: fold and drop the NULs in one kernel pass,
        # into a new buffer (read-only input either way: one kernel specialization)
        return fold_dense(readonly(raw.view()), n)
    # drop the separators and the NUL padding of folds that shrank; a document's offset is its start
    # less the NULs before it
    zeros = np.flatnonzero(raw == 0)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:n] = seps - np.searchsorted(zeros, seps)
    offsets[n] = raw.size - zeros.size
    return readonly(raw[raw != 0] if zeros.size else raw), offsets


def encode_batch(texts: Sequence[str], *, start_index: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Normalize and encode many documents into one UTF-8 buffer plus int64 offsets (n+1)."""
    buf, offsets, _ = encode_batch_scripts(texts, start_index=start_index)
    return buf, offsets


def encode_batch_scripts(texts: Sequence[str], *, start_index: int = 0,
                         into: Callable[[int], np.ndarray] | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`encode_batch` and :func:`~diversify.text.shingle.unspaced_docs` of its result where that came for free: an
    ASCII batch has no document of an unspaced script, and one read from the strings' code units
    is counted while it is written (a pass saved). None where it was not counted.

    ``into(size)``, if given, lends a writable uint8 buffer of at least ``size`` bytes for an
    all-ASCII batch, which is then copied there from the strings' own bytes instead of joined
    into a new str (the result is a read-only view of it, valid while the lender does not lend
    that buffer again). A joined batch is fresh memory each time (glibc maps allocations that large
    afresh), which a library build, whose allocator is not tuned, spends system time faulting in
    (docs/building.md).
    """
    n = len(texts)
    try:
        if all(map(str.isascii, texts)):
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=n), out=offsets[1:])
            if into is not None and n:
                out = into(int(offsets[-1]))
                if strview.ascii_into(texts, offsets, out):
                    return readonly(out[: int(offsets[-1])]), offsets, np.zeros(n, dtype=bool)
            return strview.ascii_bytes("".join(texts)), offsets, np.zeros(n, dtype=bool)
    except TypeError:
        pass  # a non-str somewhere; found and reported below
    check_str(texts, start_index)
    if sum(map(len, texts)) >= strview.FOLD_FROM:
        folded = strview.fold_batch(texts)  # read from the strings' own code units (CPython), not encoded
        if folded is not None:
            return folded
    buf, offsets = encode_python(texts)
    return buf, offsets, None


def encode_python(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`encode_batch` where the strings' code units cannot be read in place: encoded by Python."""
    n = len(texts)
    encoded = _encode_joined(texts)
    if encoded is not None:
        return encoded
    # a document holds a NUL (the batch separator): those documents one by one, the others as a batch
    lone = [i for i, t in enumerate(texts) if "\x00" in t]
    if 0 < len(lone) < n:
        rest = [t for t in texts if "\x00" not in t]
        joined = _encode_joined(rest)
        if joined is not None:
            buf, offs = joined
            pieces: list = [None] * n
            for i in lone:
                pieces[i] = np.frombuffer(prepare(texts[i]).encode("utf-8", "surrogatepass"), dtype=np.uint8)
            j = 0
            for i in range(n):
                if pieces[i] is None:
                    pieces[i] = buf[offs[j]: offs[j + 1]]
                    j += 1
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.fromiter((p.size for p in pieces), dtype=np.int64, count=n), out=offsets[1:])
            return readonly(np.concatenate(pieces)), offsets
    parts = [prepare(t).encode("utf-8", "surrogatepass") for t in texts]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=n), out=offsets[1:])
    buf = np.frombuffer(b"".join(parts), dtype=np.uint8)  # read-only, as bytes are
    return buf, offsets
