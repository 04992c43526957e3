"""A peer as a whole process, the way a user runs it on a JSONL file: ``python -m
benchmarks.peers.whole_process TOOL corpus.jsonl labels.npy``.

Reads the corpus with the standard library's ``json`` line by line (what a script around the peer
would do), runs the peer's bulk path from :mod:`benchmarks.peers.minhash` (rensa: ``RMinHash``
over Python shingles, the accurate path; datasketch: ``MinHash.update_batch`` + ``MinHashLSH``),
and writes one cluster label per document. diversify's counterpart is ``diversify build``.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def main(argv: list[str]) -> int:
    from .minhash import RUNNERS

    tool, corpus, out = argv
    texts, ids = [], []
    with open(corpus, "rb") as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                texts.append(rec["text"])
                ids.append(rec["id"])
    res = RUNNERS[tool](texts, ids, num_perm=128, threshold=0.8)
    np.save(out, np.asarray(res["labels"], dtype=np.int64))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
