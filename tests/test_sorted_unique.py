"""The one-pass sorted-unique shingle kernel (used for exact borderline checks) equals the CSR path."""

import numpy as np
import pytest

from diversify.config import TextConfig
from diversify.text import shingle_hashes, sorted_unique_shingles

TEXTS = ["", "  ", "a", "a b", "one two three four five six seven", "x, y. z! x y z x y z x y z",
         "Straße ﬁne  ÄÖ", "w " * 300, "abc" * 50]


@pytest.mark.parametrize("cfg", [TextConfig(), TextConfig(k=1), TextConfig(shingle="char", k=3), TextConfig(shingle="char", k=1)])
def test_sorted_unique_equals_csr_unique(cfg):
    sh = shingle_hashes(TEXTS, cfg, 7)
    starts, counts, hashes = sorted_unique_shingles(TEXTS, cfg, 7)
    for i in range(len(TEXTS)):
        got = hashes[starts[i] : starts[i] + counts[i]]
        assert np.array_equal(got, np.unique(sh.doc(i))), (TEXTS[i][:20], cfg)
