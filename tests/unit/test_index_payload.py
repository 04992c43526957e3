"""What the live index hands between its steps (diversify.index.payload): a batch or the stored
documents travel as :class:`Docs` (sketches, each document's threshold, the texts at hand), so
that the per-document thresholds are an input and output of their own, not a field written into
the sketches; the helpers return new values and leave what they are given as it was."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from diversify.config import BuildConfig, MinHashConfig
from diversify.index.payload import Docs, Layout, concat, decode, encode, with_sets, without_sets
from diversify.sketches.batch import Sketches
from diversify.sketches.source import TextSource
from diversify.staging import doc_thresholds, sketch_inputs

CFG = BuildConfig(minhash=MinHashConfig(threshold=0.8, num_perm=32), source_thresholds={"strict": 0.95, "lax": 0.6})
TEXTS = [f"document number {i} about the river and the old town bridge {i % 3}" for i in range(6)]
SOURCES = ["strict", "lax", "other", "lax", "strict", "other"]


def _batch(texts=TEXTS, sources=SOURCES, cfg=CFG) -> Docs:
    sk, source = sketch_inputs(texts, None, None, None, cfg, progress=False, chunk_size=64, timings={})
    return Docs(sk, doc_thresholds(cfg, sources, sk.n), source)


def _fields(sk: Sketches) -> dict:
    return {f.name: (v.tobytes() if isinstance(v := getattr(sk, f.name), np.ndarray) else v)
            for f in dataclasses.fields(sk) if f.name != "spill"}


def test_the_sketches_carry_no_threshold():
    names = {f.name for f in dataclasses.fields(Sketches)}
    assert not names & {"doc_threshold", "thresholds", "source", "fold_similarity"}


def test_thresholds_round_trip_through_the_payload_beside_the_sketches():
    batch = with_sets(_batch(), CFG)
    layout = Layout.of(batch.sketches, CFG)
    assert layout.shingles
    stored = decode(encode(batch, CFG, layout), CFG, layout, "sqlite://test")
    assert isinstance(stored, Docs) and stored.source is None, "the index keeps no texts"
    assert stored.thresholds is not None and stored.thresholds.dtype == np.float64
    assert stored.thresholds.tolist() == [0.95, 0.6, 0.8, 0.6, 0.95, 0.8]
    assert np.array_equal(stored.sketches.minhash, batch.sketches.minhash)
    assert np.array_equal(stored.sketches.sets32, batch.sketches.sets32)


def test_without_source_thresholds_there_are_none_to_store():
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.8, num_perm=32))
    batch = with_sets(_batch(sources=None, cfg=cfg), cfg)
    assert batch.thresholds is None
    layout = Layout.of(batch.sketches, cfg)
    stored = decode(encode(batch, cfg, layout), cfg, layout, "sqlite://test")
    assert stored.thresholds is None


def test_an_index_with_source_thresholds_refuses_a_batch_without_them():
    batch = with_sets(_batch(), CFG)._replace(thresholds=None)
    with pytest.raises(AssertionError, match="needs each document's threshold"):
        encode(batch, CFG, Layout.of(batch.sketches, CFG))


def test_concat_puts_the_thresholds_and_the_texts_after_the_stored_ones():
    stored = _batch(TEXTS[:4], SOURCES[:4])
    stored = Docs(stored.sketches, stored.thresholds)  # stored documents: no texts at hand
    new = _batch(TEXTS[4:], SOURCES[4:])
    before = (_fields(stored.sketches), _fields(new.sketches))
    both = concat(stored, new)
    assert both.n == 6
    assert both.thresholds is not None and both.thresholds.tolist() == [0.95, 0.6, 0.8, 0.6, 0.95, 0.8]
    assert isinstance(both.source, TextSource) and both.source.offset == 4 and list(both.source.texts) == TEXTS[4:]
    assert (_fields(stored.sketches), _fields(new.sketches)) == before, "concat wrote into what it was given"
    neither = concat(Docs(stored.sketches), Docs(new.sketches))
    assert neither.thresholds is None and neither.source is None


def test_the_set_helpers_return_new_docs_and_leave_the_given_ones_alone():
    batch = _batch()
    assert batch.sketches.sets32 is None  # sketched without asking for them
    before = _fields(batch.sketches)
    with_them = with_sets(batch, CFG)
    assert with_them.sketches.sets32 is not None and with_them.sketches.sets32_indptr.shape == (batch.n + 1,)
    assert with_them.thresholds is batch.thresholds and with_them.source is batch.source
    assert _fields(batch.sketches) == before
    kept = _fields(with_them.sketches)
    dropped = without_sets(with_them)
    assert dropped.sketches.sets32 is None and dropped.sketches.sets32_indptr is None
    assert _fields(with_them.sketches) == kept
