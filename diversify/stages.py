"""Stage bits and document flags: what joined a document to its cluster, and what it carried.

Recorded in the artifact (``doc_stages``, ``doc_flags``; docs/artifact-format.md) and used by every
engine. One home, so a new stage gets one bit everywhere.
"""

from __future__ import annotations

__all__ = ["STAGE_EXACT", "STAGE_MINHASH", "STAGE_SIMHASH", "STAGE_TEXT_SIMHASH", "STAGE_CONTAINMENT", "STAGE_NAMES",
           "FLAG_EMPTY_TEXT", "FLAG_HAS_VECTOR", "stage_names"]

STAGE_EXACT = 1
STAGE_MINHASH = 2
STAGE_SIMHASH = 4
STAGE_TEXT_SIMHASH = 8
STAGE_NAMES = {STAGE_EXACT: "exact", STAGE_MINHASH: "minhash", STAGE_SIMHASH: "simhash", STAGE_TEXT_SIMHASH: "text_simhash"}
#: a chunk folded under a page sibling's chunk that contains it (diversify.engines.chunked); not a
#: stage of ``build``, so not in STAGE_NAMES, which every build records
STAGE_CONTAINMENT = 16
_ALL_NAMES = {**STAGE_NAMES, STAGE_CONTAINMENT: "containment"}


def stage_names(bits: int) -> list[str]:
    """The names of the stages in a ``doc_stages`` bitmask, lowest bit first (``[]`` for 0); an
    unknown bit is named ``"bit<N>"`` (a newer writer's stage), never dropped."""
    names = []
    bit = 1
    while bits >= bit:
        if bits & bit:
            names.append(_ALL_NAMES.get(bit, f"bit{bit}"))
        bit <<= 1
    return names

# bits of the per-document "doc_flags" extra
FLAG_EMPTY_TEXT = 1
FLAG_HAS_VECTOR = 2
#: shingle="auto" shingled the document by character (a script written without spaces)
FLAG_CHAR_SHINGLES = 4
