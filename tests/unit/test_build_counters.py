"""The build's counters are named for what they count, and they add up: per stage,
``candidates == already_joined + checked``, ``merged <= checked``, ``exact_checks <= checked``,
and ``verified`` (what the artifact stores) is ``checked`` plus the exact re-checks."""

from __future__ import annotations

import re

import numpy as np
import pytest

import diversify
from diversify.config import BuildConfig, MinHashConfig
from diversify.corpus.datagen import generate_corpus


def _check(stats) -> None:
    for name, c in stats["candidates"].items():
        joined, checked = stats["already_joined"][name], stats["checked"][name]
        assert joined >= 0 and checked >= 0, (name, stats)
        assert c == joined + checked, (name, stats)
        assert stats["merged"][name] <= checked, (name, stats)
        assert stats.get("exact_checks", {}).get(name, 0) <= checked, (name, stats)
        assert stats["verified"][name] >= checked, (name, stats)


def _summary_adds_up(summary: str) -> int:
    rows = re.findall(r"candidate pairs ([\d,]+) = ([\d,]+) already in one cluster \+ ([\d,]+) checked", summary)
    for c, j, k in rows:
        assert int(c.replace(",", "")) == int(j.replace(",", "")) + int(k.replace(",", "")), summary
    assert "verified=" not in summary
    return len(rows)


@pytest.fixture(scope="module")
def texts():
    return list(generate_corpus(3000, seed=5).texts)


@pytest.mark.parametrize("stream", [False, True])
def test_text_build_counters_add_up(texts, stream):
    res = diversify.build(iter(texts) if stream else texts)
    _check(res.stats)
    assert (res.stats["exact_checks"]["minhash"] > 0) != stream  # texts at hand: borderline pairs checked exactly
    assert _summary_adds_up(res.summary()) == 2


def test_the_summary_no_longer_shows_verified_above_candidates(texts):
    res = diversify.build(texts)
    s = res.stats
    assert s["verified"]["minhash"] > s["checked"]["minhash"]  # exact re-checks ran
    line = next(x for x in res.summary().splitlines() if x.startswith("minhash") and "candidate pairs" in x)
    assert f"{s['exact_checks']['minhash']:,} borderline re-checked by exact Jaccard" in line


@pytest.mark.parametrize("verify", ["estimate", "exact"])
def test_counters_without_borderline_checks(texts, verify):
    res = diversify.build(texts, config=BuildConfig(minhash=MinHashConfig(verify=verify)))
    _check(res.stats)
    assert res.stats["verified"] == res.stats["checked"]


def test_vector_and_add_counters_add_up(texts, rng):
    centres = rng.standard_normal((50, 16))
    vecs = np.repeat(centres, 4, axis=0) + 0.01 * rng.standard_normal((200, 16))
    res = diversify.build(texts[:200], vectors=vecs)
    _check(res.stats)
    assert res.stats["merged"]["simhash"] > 0
    added = diversify.add(res.cluster_map, texts[200:400], vectors=vecs[::-1].copy())
    _check(added.stats)
    assert _summary_adds_up(added.summary()) == 3


def test_exact_stage_counts_copies(rng):
    texts = ["same words in this document"] * 4 + ["another text entirely here"] * 3
    res = diversify.build(texts)
    _check(res.stats)
    assert res.stats["candidates"]["exact"] == res.stats["checked"]["exact"] == res.stats["merged"]["exact"] == 5
