"""Slow, obvious pure-Python reference implementations of the builder's kernels.

Everything here is written from the documented scheme (``diversify/_kernels/text.py`` module
docstring, ``diversify/text.py``, ``diversify/sketches/minhash.py``), in plain Python integers masked with
``2**64 - 1``: no numpy arithmetic, no numba, no code shared with the library. The oracle tests
compare the kernels with these bit for bit.
"""

from __future__ import annotations

import string
import unicodedata
from collections import deque

M64 = (1 << 64) - 1
M32 = (1 << 32) - 1
P61 = (1 << 61) - 1
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
GOLDEN = 0x9E3779B97F4A7C15
ROLL_BASE = 0x100000001B3 * 2 + 1
EMPTY_SLOT = 0xFFFFFFFF

_PUNCT = frozenset(string.punctuation)


# ----------------------------------------------------------------------------- 64-bit primitives


def fmix64(x: int) -> int:
    """splitmix64 finalizer."""
    z = x & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def splitmix64(seed: int, i: int) -> int:
    """The i-th output (0-based) of the splitmix64 stream starting at ``seed``."""
    return fmix64((seed + (i + 1) * GOLDEN) & M64)


def fnv1a64(data: bytes) -> int:
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & M64
    return h


def unit_hash(unit: str) -> int:
    """Hash of one word or one code point."""
    return fmix64(fnv1a64(unit.encode("utf-8", "surrogatepass")))


# ----------------------------------------------------------------------------- text


def normalize(text: str) -> str:
    """NFKC, casefold, every Unicode whitespace character -> ' ' (identity + lower on ASCII)."""
    t = unicodedata.normalize("NFKC", text).casefold()
    return "".join(" " if (ord(ch) >= 128 and ch.isspace()) else ch for ch in t)


def is_separator(ch: str) -> bool:
    """Whitespace or ASCII control (folded)."""
    o = ord(ch)
    return o < 33 or o == 127 or ch.isspace()


def words(text: str) -> list[str]:
    """Maximal runs of characters that are neither separators nor ASCII punctuation."""
    out: list[str] = []
    cur: list[str] = []
    for ch in normalize(text):
        if is_separator(ch) or ch in _PUNCT:
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def folded(text: str) -> str:
    """Normalized text with separator runs folded to one space, trimmed."""
    out: list[str] = []
    pending = False
    for ch in normalize(text):
        if is_separator(ch):
            pending = bool(out)
        else:
            if pending:
                out.append(" ")
                pending = False
            out.append(ch)
    return "".join(out)


def units(text: str, mode: str) -> list[str]:
    return words(text) if mode == "word" else list(folded(text))


def seed_hash(seed: int) -> int:
    return fmix64(seed)


def shingle_hash(unit_hashes: list[int], seed: int) -> int:
    """fmix64(seed_h + sum_j u_j * B**(m-1-j)) mod 2**64."""
    acc = 0
    m = len(unit_hashes)
    for j, u in enumerate(unit_hashes):
        acc += u * pow(ROLL_BASE, m - 1 - j, 1 << 64)
    return fmix64((acc + seed_hash(seed)) & M64)


def shingles(text: str, mode: str = "word", k: int = 5, seed: int = 1) -> list[int]:
    """Shingle hashes in text order (a multiset); one shingle for 1..k-1 units; none for 0."""
    us = [unit_hash(u) for u in units(text, mode)]
    if not us:
        return []
    if len(us) < k:
        return [shingle_hash(us, seed)]
    return [shingle_hash(us[i : i + k], seed) for i in range(len(us) - k + 1)]


def exact_hash(text: str) -> int:
    return fmix64(fnv1a64(folded(text).encode("utf-8", "surrogatepass")))


def folded_length(text: str) -> int:
    return len(folded(text).encode("utf-8", "surrogatepass"))


# ----------------------------------------------------------------------------- MinHash


def minhash_seed(seed: int) -> int:
    return fmix64(seed ^ 0x6D696E68)


def _bin(v: int, num_perm: int) -> int:
    return ((v >> 32) * num_perm) >> 32


def oph(shingle_hashes: list[int], num_perm: int, seed: int = 1) -> list[int]:
    """One-permutation MinHash with optimal densification (empty bins copy the first originally
    filled bin along their own probe sequence splitmix64(seed_h ^ j, 0, 1, ...))."""
    if not shingle_hashes:
        return [EMPTY_SLOT] * num_perm
    sh = minhash_seed(seed)
    bins: dict[int, int] = {}
    for s in shingle_hashes:
        v = fmix64(s ^ sh)
        b = _bin(v, num_perm)
        val = v & M32
        if b not in bins or val < bins[b]:
            bins[b] = val
    sig = []
    for j in range(num_perm):
        if j in bins:
            sig.append(bins[j])
            continue
        attempt = 0
        while True:
            src = _bin(splitmix64(sh ^ j, attempt), num_perm)
            if src in bins:
                sig.append(bins[src])
                break
            attempt += 1
    return sig


def classic_params(seed: int, num_perm: int) -> tuple[list[int], list[int]]:
    base = seed ^ 0xA5A5A5A5
    a = [splitmix64(base, 2 * j) % (P61 - 1) + 1 for j in range(num_perm)]
    b = [splitmix64(base, 2 * j + 1) % P61 for j in range(num_perm)]
    return a, b


def classic(shingle_hashes: list[int], num_perm: int, seed: int = 1) -> list[int]:
    """min over x of ((a_j * (x mod p) + b_j) mod p), then the low 32 bits; p = 2**61 - 1."""
    if not shingle_hashes:
        return [EMPTY_SLOT] * num_perm
    a, b = classic_params(seed, num_perm)
    return [min((aj * (x % P61) + bj) % P61 for x in shingle_hashes) & M32 for aj, bj in zip(a, b)]


# ----------------------------------------------------------------------------- SimHash


def text_simhash(text: str) -> int:
    """64-bit Charikar SimHash over word unit hashes, weight = occurrence count."""
    acc = [0] * 64
    for w in words(text):
        h = unit_hash(w)
        for bit in range(64):
            acc[bit] += 1 if (h >> bit) & 1 else -1
    return sum(1 << bit for bit in range(64) if acc[bit] > 0)


def pack_bits(bits: list[bool]) -> list[int]:
    """Bit j goes to word j // 64 at position j % 64."""
    words_ = [0] * ((len(bits) + 63) // 64)
    for j, b in enumerate(bits):
        if b:
            words_[j // 64] |= 1 << (j % 64)
    return words_


# ----------------------------------------------------------------------------- LSH band keys


def minhash_band_keys(sig: list[int], rows: int, bands: int, seed_h: int) -> list[int]:
    out = []
    for b in range(bands):
        h = fmix64(seed_h ^ b)
        for r in range(rows):
            h = fmix64(h ^ sig[b * rows + r])
        out.append(h)
    return out


def simhash_band_keys(words_: list[int], bits: int, starts: list[int], seed_h: int) -> list[int]:
    """Band keys of one packed row: family f, band b -> fmix64(fmix64(seed_h ^ (f*nb+b)) ^ v)."""
    value = sum(int(w) << (64 * i) for i, w in enumerate(words_))
    nb = len(starts) - 1
    families = len(words_) * 64 // bits
    out = []
    for f in range(families):
        fam = (value >> (f * bits)) & ((1 << bits) - 1)
        for b in range(nb):
            width = starts[b + 1] - starts[b]
            v = (fam >> starts[b]) & ((1 << width) - 1)
            out.append(fmix64(fmix64(seed_h ^ (f * nb + b)) ^ v))
    return out


# ----------------------------------------------------------------------------- graphs


def components_bfs(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Label of each node = smallest node of its connected component (BFS)."""
    adj: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        adj[a].append(b)
        adj[b].append(a)
    label = [-1] * n
    for s in range(n):
        if label[s] != -1:
            continue
        label[s] = s  # s is the smallest unvisited node, hence the smallest of its component
        q = deque([s])
        while q:
            u = q.popleft()
            for v in adj[u]:
                if label[v] == -1:
                    label[v] = s
                    q.append(v)
    return label


def partition(labels, ids=None) -> frozenset:
    """The partition induced by ``labels`` as a set of frozensets of ids (labels ignored)."""
    ids = list(range(len(labels))) if ids is None else list(ids)
    groups: dict = {}
    for i, c in zip(ids, labels):
        groups.setdefault(int(c), set()).add(i)
    return frozenset(frozenset(g) for g in groups.values())
