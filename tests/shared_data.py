"""The real labelled data sets next to the repository (``../shared/data``, or
``DIVERSIFY_SHARED_DATA``), as the tests that read them need them; a test skips when its set is
absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(os.environ.get("DIVERSIFY_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def twitter_sentences() -> list:
    """The distinct sentences of the Twitter URL corpus's test file, in file order (raw-string
    duplicates only: sentences equal after normalization stay, so that exact copies cluster)."""
    path = DATA / "twitter_url_corpus" / "Twitter_URL_Corpus_test.txt"
    if not path.exists():
        pytest.skip(f"real data set absent ({path}); set DIVERSIFY_SHARED_DATA to the shared data folder")
    seen: set = set()
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            for s in line.rstrip("\n").split("\t")[:2]:
                if s not in seen:
                    seen.add(s)
                    out.append(s)
    return out
