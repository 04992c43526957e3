"""The clique suite's corpora: real pages, RAG chunks of them, and a large family of near-copies.

Everything is written outside the repository (the quality_real cache folder, ``_real_corpora``):

- ``manpages.jsonl`` and ``licenses.jsonl``: ``_real_corpora.assemble`` (this machine's manual
  pages and licence/copyright files).
- ``chunks-para.jsonl``: both corpora cut into paragraph-bounded chunks of about ``PARA_WORDS``
  words (paragraphs are separated by blank lines or roff paragraph/section requests; consecutive
  paragraphs are packed until the next one would pass the target; a paragraph longer than 1.5x the
  target is cut into pieces of the target).
- ``chunks-window.jsonl``: both corpora cut into fixed windows of ``WINDOW_WORDS`` whitespace words
  every ``WINDOW_STRIDE`` words (the last window ends at the page's end), at most
  ``max_windows`` windows per page (the first ones).
- ``family-<n>-<page digest>.jsonl``: one real page plus ``n`` copies, each made by random word
  edits (substitute, delete or insert a word of the page) and kept only if its exact Jaccard to
  the page (word 5-shingles of the reference rule) is >= ``FAMILY_MIN_J``. By the triangle
  inequality of the Jaccard distance every two members are then >= ``2 * FAMILY_MIN_J - 1``
  similar, so the whole family is one clique at t = 0.8.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

PARA_WORDS = 180
WINDOW_WORDS = 200
WINDOW_STRIDE = 50
FAMILY_MIN_J = 0.9
FAMILY_PAGE = "man1/ls.1.gz"  # the default family page (another page of 300-1500 words when absent)
CHUNKED = ("manpages", "licenses")

# a paragraph ends at a blank line or before a roff paragraph / section / tagged-paragraph request
_PARA = re.compile(r"\n[ \t]*\n|\n(?=\.(?:PP|LP|P|SH|SS|TP|IP|HP|Sh|Ss|Pp|It)\b)")


def _jsonl(path: Path, rows) -> int:
    tmp = path.with_suffix(".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as fh:
        for doc_id, text in rows:
            fh.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, path)
    return n


def _pages(cache: Path):
    for name in CHUNKED:
        with open(cache / f"{name}.jsonl", encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                yield f"{name[:3]}:{rec['id']}", rec["text"]


def para_chunks(text: str, target: int = PARA_WORDS) -> list[str]:
    """Paragraph-bounded chunks of about ``target`` whitespace words (see the module docstring)."""
    pieces: list[list[str]] = []
    for para in _PARA.split(text):
        words = para.split()
        if len(words) > 1.5 * target:
            pieces += [words[s : s + target] for s in range(0, len(words), target)]
        elif words:
            pieces.append(words)
    chunks, cur = [], []
    for words in pieces:
        if cur and len(cur) + len(words) > target:
            chunks.append(" ".join(cur))
            cur = []
        cur = cur + words
    if cur:
        chunks.append(" ".join(cur))
    return chunks


def window_chunks(text: str, width: int = WINDOW_WORDS, stride: int = WINDOW_STRIDE,
                  max_windows: int = 0) -> list[tuple[int, str]]:
    """(start word, chunk) of fixed windows; the last one ends at the last word; ``max_windows`` > 0 caps."""
    words = text.split()
    if not words:
        return []
    starts = list(range(0, max(len(words) - width, 0) + 1, stride))
    if starts[-1] + width < len(words):
        starts.append(len(words) - width)
    if max_windows > 0:
        starts = starts[:max_windows]
    return [(s, " ".join(words[s : s + width])) for s in starts]


def chunk_corpora(cache: Path, max_windows: int) -> dict:
    """Write ``chunks-para.jsonl`` and ``chunks-window.jsonl`` from the page corpora; their sizes."""
    para = ((f"{pid}#p{k}", c) for pid, text in _pages(cache) for k, c in enumerate(para_chunks(text)))
    n_para = _jsonl(cache / "chunks-para.jsonl", para)
    win = ((f"{pid}#w{s}", c) for pid, text in _pages(cache) for s, c in window_chunks(text, max_windows=max_windows))
    n_win = _jsonl(cache / "chunks-window.jsonl", win)
    return {"chunks-para": {"docs": n_para, "target_words": PARA_WORDS},
            "chunks-window": {"docs": n_win, "width": WINDOW_WORDS, "stride": WINDOW_STRIDE,
                              "max_windows_per_page": max_windows or None}}


# ----------------------------------------------------------------------------- the large family


def family_page(cache: Path, wanted: str = FAMILY_PAGE) -> tuple[str, str]:
    """(id, text) of the family's page: ``wanted`` if present, else the first page of 300-1500 words."""
    fallback = None
    with open(cache / "manpages.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["id"] == wanted:
                return rec["id"], rec["text"]
            if fallback is None and 300 <= len(rec["text"].split()) <= 1500:
                fallback = (rec["id"], rec["text"])
    if fallback is None:
        raise SystemExit("no manual page of 300-1500 words on this machine for the family case")
    return fallback


def _edit(tokens: list[str], rng: np.random.Generator, edits: int) -> list[str]:
    out = list(tokens)
    for _ in range(edits):
        op = int(rng.integers(3))
        pos = int(rng.integers(len(out)))
        word = tokens[int(rng.integers(len(tokens)))]
        if op == 0:
            out[pos] = word
        elif op == 1 and len(out) > 1:
            del out[pos]
        else:
            out.insert(pos, word)
    return out


def _jaccard_to(page_set: np.ndarray, indptr: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Exact Jaccard of each document's distinct shingle hashes to ``page_set`` (sorted unique)."""
    out = np.empty(indptr.size - 1)
    for d in range(out.size):
        s = np.unique(hashes[indptr[d] : indptr[d + 1]])
        inter = np.intersect1d(s, page_set, assume_unique=True).size
        out[d] = inter / (s.size + page_set.size - inter)
    return out


def make_family(page_text: str, n: int, seed: int = 0, min_j: float = FAMILY_MIN_J) -> tuple[list[str], dict]:
    """The page followed by ``n`` edited copies, each verified >= ``min_j`` to the page; and a record.

    Edits per copy are drawn from 1..max(1, words // 90); a copy below ``min_j`` is drawn again.
    The check uses the reference rule's shingles (:class:`benchmarks.reference.ShingleHasher`, a
    function of the shingles' words only); :func:`audit_family` re-checks a sample on shingle strings.
    """
    from ..reference import ShingleHasher

    rng = np.random.default_rng(seed)
    tokens = page_text.split()
    hasher = ShingleHasher()
    ip, h = hasher.hash_many([page_text])
    page_set = np.unique(h)
    top = max(1, len(tokens) // 90)
    texts, js, redrawn = [page_text], [1.0], 0
    while len(texts) < n + 1:
        want = n + 1 - len(texts)
        batch = [" ".join(_edit(tokens, rng, int(rng.integers(1, top + 1)))) for _ in range(min(want, 5000))]
        ip, h = hasher.hash_many(batch)
        j = _jaccard_to(page_set, ip, h)
        ok = j >= min_j
        redrawn += int((~ok).sum())
        texts += [t for t, k in zip(batch, ok) if k]
        js += j[ok].tolist()
    arr = np.array(js)
    return texts, {"copies": n, "page_words": len(tokens), "max_edits": top, "redrawn": redrawn,
                   "min_jaccard_to_page": float(arr[1:].min()) if n else None,
                   "median_jaccard_to_page": float(np.median(arr[1:])) if n else None,
                   "distinct_texts": len(set(texts))}


def audit_family(texts: list[str], sample: int = 200, seed: int = 0, min_j: float = FAMILY_MIN_J) -> dict:
    """Re-check sampled copies against the page on shingle *strings* (the truth's own rule)."""
    from ..reference import shingle_set

    rng = np.random.default_rng(seed)
    page = shingle_set(texts[0])
    picks = rng.choice(np.arange(1, len(texts)), size=min(sample, len(texts) - 1), replace=False)
    js = []
    for d in picks.tolist():
        s = shingle_set(texts[d])
        js.append(len(s & page) / len(s | page))
    low = [j for j in js if j < min_j]
    if low:
        raise AssertionError(f"family copies below {min_j} on shingle strings: {sorted(low)[:5]}")
    return {"checked": len(js), "min_jaccard": min(js) if js else None}


def family_file(cache: Path, n: int, page: tuple[str, str], seed: int = 0) -> tuple[Path, dict]:
    """The family corpus as JSONL (written once per page, size and seed), with its record."""
    digest = hashlib.sha256(f"{page[0]}|{page[1]}|{n}|{seed}|{FAMILY_MIN_J}".encode()).hexdigest()[:12]
    path = cache / f"family-{n}-{digest}.jsonl"
    meta = path.with_suffix(".meta.json")
    if path.exists() and meta.exists():
        return path, json.loads(meta.read_text())
    texts, info = make_family(page[1], n, seed)
    info.update(page=page[0], seed=seed, string_audit=audit_family(texts, seed=seed))
    _jsonl(path, (("page" if k == 0 else f"copy-{k:06d}", t) for k, t in enumerate(texts)))
    meta.write_text(json.dumps(info, indent=1))
    return path, info
