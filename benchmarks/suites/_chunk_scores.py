"""The chunks suite's measurements: near-duplicate pages of this machine, chunked, clustered, scored.

Pages: this machine's man pages and licence files (``_real_corpora``), one page per distinct text;
the pages kept are those with a *near-duplicate* (a distinct page at exact page Jaccard >= t on
word 5-shingles, J < 1), found by :func:`benchmarks.truth.similarity_join` on
:mod:`benchmarks.reference` shingles. Their sibling pairs are the page truth.

Chunk truth (reference shingles, exact, no sampling): a chunk is *redundant* when at least t of its
distinct 5-shingles are shingles of one sibling page ("page" truth: its text is in a near-duplicate
page), or of one chunk of a sibling page ("chunk" truth: one chunk of that page covers it, so
folding it under that chunk hides nothing). Recall: share of redundant chunks that share a cluster
with a chunk of such a page (page truth) or with such a chunk (chunk truth). Precision of folds:
share of folded chunks whose shingles are >= t in their cluster's representative (what the user
sees in their place); pair purity: share of same-cluster pairs where each covers >= t of the other
(clusters of more than ``PAIR_SAMPLE`` chunks: a seeded sample of that many members).
"""

from __future__ import annotations

import random
import re
import time
from collections import defaultdict

import numpy as np

T = 0.8
PAIR_SAMPLE = 300
_WORD = re.compile(r"\S+")


def fixed_windows(text: str, size: int, stride: int) -> list[str]:
    """Windows of ``size`` whitespace words every ``stride`` words (the last one may be shorter)."""
    spans = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    out = []
    for i in range(0, len(spans), stride):
        w = spans[i:i + size]
        out.append(text[w[0][0]:w[-1][1]])
        if i + size >= len(spans):
            break
    return out


def chunkers(max_words: int) -> dict:
    from diversify.corpus.chunking import chunk_paragraphs

    return {
        f"fixed {max_words}/{max_words}": lambda t: fixed_windows(t, max_words, max_words),
        f"fixed {max_words}/{max_words * 3 // 4}": lambda t: fixed_windows(t, max_words, max_words * 3 // 4),
        f"paragraphs <= {max_words}": lambda t: [c.text for c in chunk_paragraphs(t, max_words=max_words)],
    }


def pages(limit: int | None) -> tuple[list[str], list[str], list[tuple[int, int]], dict]:
    """(ids, texts, sibling pairs, info) of the pages with a near-duplicate (module docstring)."""
    from .. import reference, truth
    from ._real_corpora import licenses, manpages

    t0 = time.perf_counter()
    man, _ = manpages()
    lic, _ = licenses()
    seen: dict = {}
    for doc_id, text in [(f"man:{i}", t) for i, t in man] + [(f"lic:{i}", t) for i, t in lic]:
        seen.setdefault(text, doc_id)
    texts = list(seen)
    ids = [seen[t] for t in texts]
    ip, h = reference.ShingleHasher().hash_many(texts)
    pairs, jac, _ = truth.similarity_join(ip, h, T)
    pairs = pairs[jac < 1]
    keep = np.unique(pairs)
    if limit is not None:
        keep = keep[:limit]
    index = {int(p): i for i, p in enumerate(keep)}
    sib = [(index[int(a)], index[int(b)]) for a, b in pairs if int(a) in index and int(b) in index]
    info = {"distinct_pages": len(texts), "pages": int(keep.size), "sibling_pairs": len(sib),
            "truth_seconds": round(time.perf_counter() - t0, 1)}
    return [ids[i] for i in keep], [texts[i] for i in keep], sib, info


def _cluster(method: str, chunks: list[str], parents: list[int]):
    import diversify
    from diversify.engines.chunked import build_chunks

    if method == "build_chunks (parents, containment 0.8)":
        r = build_chunks(chunks, parents=parents)
    else:
        thr, k = {"build, Jaccard 0.8": (0.8, 5), "build, Jaccard 0.5": (0.5, 5), "build, Jaccard 0.8, k=3": (0.8, 3)}[method]
        r = diversify.build(chunks, config=diversify.BuildConfig(minhash=diversify.MinHashConfig(threshold=thr),
                                                                 text=diversify.TextConfig(k=k)))
    return np.asarray(r.cluster_ids), np.asarray(r.is_representative, dtype=bool)


METHODS = ("build, Jaccard 0.8", "build, Jaccard 0.5", "build, Jaccard 0.8, k=3",
           "build_chunks (parents, containment 0.8)")


def score(chunks, parents, sets, page_sets, sib, cid, is_rep) -> dict:
    n = len(chunks)
    by_page = defaultdict(list)
    for x, p in enumerate(parents):
        by_page[p].append(x)
    pages_in = defaultdict(set)
    members = defaultdict(list)
    for x, c in enumerate(cid):
        pages_in[c].add(parents[x])
        members[c].append(x)
    red_p = rec_p = red_c = rec_c = 0
    for x in range(n):
        s = sets[x]
        if not s:
            continue
        need = T * len(s)
        good = [q for q in sib.get(parents[x], ()) if len(s & page_sets[q]) >= need]
        if good:
            red_p += 1
            rec_p += any(q in pages_in[cid[x]] for q in good)
        good_c = [y for q in sib.get(parents[x], ()) for y in by_page[q] if len(s & sets[y]) >= need]
        if good_c:
            red_c += 1
            rec_c += any(cid[y] == cid[x] for y in good_c)
    rep = {int(cid[x]): x for x in np.flatnonzero(is_rep)}
    folded = np.flatnonzero(~is_rep)
    ok = sum(len(sets[x] & sets[rep[int(cid[x])]]) >= T * max(len(sets[x]), 1) for x in folded)
    pure = total = 0
    rng = random.Random(0)
    for m in members.values():
        if len(m) > PAIR_SAMPLE:
            m = rng.sample(m, PAIR_SAMPLE)
        for i in range(len(m)):
            for j in range(i + 1, len(m)):
                a, b = sets[m[i]], sets[m[j]]
                total += 1
                pure += len(a & b) >= T * max(len(a), len(b), 1)
    return {"chunks": n, "mean_words": round(float(np.mean([len(c.split()) for c in chunks])), 1),
            "redundant_page": red_p, "recall_page": rec_p / max(red_p, 1),
            "redundant_chunk": red_c, "recall_chunk": rec_c / max(red_c, 1),
            "folded": int(folded.size), "fold_precision": ok / folded.size if folded.size else None,
            "pair_purity": pure / total if total else None, "pairs": total}


def run(max_words: int, limit: int | None, methods: tuple[str, ...], save, versions: int = 2000) -> dict:
    from .. import reference
    from ..paths import log

    ids, texts, sib_pairs, info = pages(limit)
    sib: dict = defaultdict(list)
    for a, b in sib_pairs:
        sib[a].append(b)
        sib[b].append(a)
    page_sets = [reference.shingle_set(t) for t in texts]
    out: dict = {"threshold": T, "max_words": max_words, "pages": info, "rows": []}
    warm = False
    for cname, chunk in chunkers(max_words).items():
        chunks, parents = [], []
        for p, t in enumerate(texts):
            for c in chunk(t):
                chunks.append(c)
                parents.append(p)
        sets = [reference.shingle_set(c) for c in chunks]
        if not warm:  # every method once, untimed, first: compiling kernels is not what the rows time
            for method in methods:
                _cluster(method, chunks, parents)
            warm = True
        for method in methods:
            t0, c0 = time.perf_counter(), time.process_time()
            cid, is_rep = _cluster(method, chunks, parents)
            row = {"chunking": cname, "method": method, "seconds": round(time.perf_counter() - t0, 2),
                   "cpu_seconds": round(time.process_time() - c0, 2)}
            row.update(score(chunks, parents, sets, page_sets, sib, cid, is_rep))
            log(f"{cname} | {method}: {row}")
            out["rows"].append(row)
            save(out)
    if versions:
        out["family"] = family_cost(texts, ids, versions, max_words)
        log(f"family: {out['family']}")
        save(out)
    return out


def family_cost(texts: list[str], ids: list[str], versions: int, max_words: int) -> dict:
    """One large page family: the longest page in ``versions`` versions, each with one made-up
    paragraph (words of the page, seeded) inserted at a random place, cut by ``chunk_paragraphs``;
    the versions land in few page clusters, so step 3 of build_chunks meets its widest scope. Times
    ``build`` and ``build_chunks`` on the same chunks (each run once untimed first)."""
    import diversify

    i = max(range(len(texts)), key=lambda j: len(texts[j].split()))
    page = texts[i]
    rng = random.Random(0)
    paragraphs = page.split("\n\n")
    vocab = page.split()
    chunks, parents = [], []
    for v in range(versions):
        ps = list(paragraphs)
        ps.insert(rng.randrange(len(ps) + 1), " ".join(rng.choice(vocab) for _ in range(rng.randint(5, 60))))
        for c in diversify.chunk_paragraphs("\n\n".join(ps), max_words=max_words):
            chunks.append(c.text)
            parents.append(v)
    out: dict = {"page": ids[i], "page_words": len(vocab), "versions": versions, "chunks": len(chunks)}
    for name in ("build", "build_chunks"):
        def call():
            if name == "build":
                return diversify.build(chunks)
            return diversify.build_chunks(chunks, parents=parents)
        call()
        t0, c0 = time.perf_counter(), time.process_time()
        r = call()
        out[name] = {"seconds": round(time.perf_counter() - t0, 2), "cpu_seconds": round(time.process_time() - c0, 2),
                     "clusters": r.cluster_map.n_clusters, "chunks": r.report.get("chunks")}
    return out
