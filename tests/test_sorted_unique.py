"""The one-pass sorted-unique shingle kernel (used for exact borderline checks) equals the CSR path."""

import numpy as np
import pytest

from diversify.config import TextConfig
from diversify.text import exact_jaccard, shingle_hashes, sorted_unique_shingles

TEXTS = ["", "  ", "a", "a b", "one two three four five six seven", "x, y. z! x y z x y z x y z",
         "Straße ﬁne  ÄÖ", "w " * 300, "abc" * 50]


@pytest.mark.parametrize("cfg", [TextConfig(), TextConfig(k=1), TextConfig(shingle="char", k=3), TextConfig(shingle="char", k=1)])
def test_sorted_unique_equals_csr_unique(cfg):
    sh = shingle_hashes(TEXTS, cfg, 7)
    starts, counts, hashes = sorted_unique_shingles(TEXTS, cfg, 7)
    for i in range(len(TEXTS)):
        got = hashes[starts[i] : starts[i] + counts[i]]
        assert np.array_equal(got, np.unique(sh.doc(i))), (TEXTS[i][:20], cfg)


def test_exact_jaccard_equals_python_sets_of_the_sorted_unique_rows():
    cfg = TextConfig(k=2)
    starts, counts, hashes = sorted_unique_shingles(TEXTS, cfg, 3)
    rows = [hashes[s : s + c] for s, c in zip(starts, counts)]
    for i, a in enumerate(rows):
        for j, b in enumerate(rows):
            sa, sb = set(a.tolist()), set(b.tolist())
            want = len(sa & sb) / len(sa | sb) if sa | sb else 1.0
            assert exact_jaccard(a, b) == want, (TEXTS[i][:20], TEXTS[j][:20])
    empty = np.zeros(0, np.uint64)
    assert exact_jaccard(empty, empty) == 1.0, "two empty sets are identical, as in the builder's exact check"
    assert exact_jaccard(empty, rows[4]) == 0.0
