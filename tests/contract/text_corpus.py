"""A small text corpus with planted near-duplicates, for plugins that wrap text retrievers (BM25...).

Twelve topics of 24 words each (made-up tokens ``t<topic>w<j>``, so no two topics share a word):
topics 0-3 come in three copies (the original, the same with ``!`` appended, and the same with
its last word changed), topics 4-11 once. :data:`QUERY` names two words of each of topics 0-3
and one of each of topics 4-7, so a lexical top 6 holds copies of at most four clusters and a
diversified top 6 needs a refill to reach topics 4 and 5. The cluster map is built by
:func:`diversify.build` over the texts (a real artifact), not planted.
"""

from __future__ import annotations

import functools
import hashlib
import math

TOPICS, COPIED, WORDS = 12, 4, 24

QUERY = " ".join([f"t{t}w{j}" for t in range(COPIED) for j in (1, 2)] + [f"t{t}w1" for t in range(COPIED, 8)])


def _topic(t: int) -> list[str]:
    return [f"t{t}w{j}" for j in range(WORDS)]


@functools.lru_cache(maxsize=1)
def texts() -> dict[str, str]:
    """``{id: text}`` in a fixed order; ids ``"doc-<topic>"``, copies ``"doc-<topic>-bang"`` /
    ``"doc-<topic>-edit"``."""
    out: dict[str, str] = {}
    for t in range(TOPICS):
        words = _topic(t)
        out[f"doc-{t}"] = " ".join(words)
        if t < COPIED:
            out[f"doc-{t}-bang"] = " ".join(words) + " !"
            out[f"doc-{t}-edit"] = " ".join(words[:-1] + [f"t{t}edit"])
    return out


@functools.lru_cache(maxsize=1)
def cluster_map():
    """The real ClusterMap of :func:`texts`, built in process."""
    from diversify import build

    corpus = texts()
    return build(texts=list(corpus.values()), ids=list(corpus)).cluster_map


def cluster_of() -> dict[str, int]:
    cm = cluster_map()
    return {i: int(cm.cluster_of(i)) for i in texts()}


def topic_of(doc_id: str) -> int:
    return int(doc_id.split("-")[1])


def embed(text: str, dim: int = 64) -> list[float]:
    """Deterministic bag-of-words embedding (blake2b of each word into ``dim`` buckets), unit norm."""
    v = [0.0] * dim
    for word in text.lower().split():
        v[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little") % dim] += 1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]
