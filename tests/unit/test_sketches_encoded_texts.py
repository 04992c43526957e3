"""Encodings kept from sketching for the exact checks (diversify.sketches.source.EncodedTexts): the
bytes they give are the bytes encode_batch gives, and a build that uses them writes the artifact a
build without them writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

import diversify
from diversify.config import BuildConfig, MinHashConfig
from diversify.errors import InputError
from diversify.sketches import batch as sb
from diversify.sketches import source as ts
from diversify.sketches.memo import ExactMemo
from diversify.text import encode_batch, shingle_hashes, sorted_unique_shingles

WORDS = ["caf\u00e9", "\u0130stanbul", "\u4e2d\u6587\u672c", "\u0410\u0411\u0412", "\u2026", "\uff21\uff22", "stra\u00dfe",
         "\u03a3\u03b1", "\u0301x", "plain", "words", "\u1f80"]


def _texts(n, seed=0):
    rng = np.random.default_rng(seed)
    base = [" ".join(rng.choice(WORDS, 40)) for _ in range(n // 2)]
    out = []
    for t in base:  # each with a near copy: borderline pairs for the exact checks
        out.append(t)
        words = t.split()
        words[int(rng.integers(0, len(words)))] = "zz"
        out.append(" ".join(words))
    return out + ["only ascii here " * 5] * (n - len(out))


def test_kept_chunks_give_the_bytes_encode_batch_gives():
    texts = _texts(400) + ["ascii only text"] * 100
    kept = ts.EncodedTexts()
    for start in range(0, len(texts), 100):  # chunks of 100; the last one all ASCII
        block = texts[start: start + 100]
        buf, offsets = encode_batch(block)
        kept.keep(start, block, buf, offsets)
    assert kept.starts == [0, 100, 200, 300]  # the ASCII chunk is not kept
    rng = np.random.default_rng(1)
    for docs in ([], [5], [499, 3, 250, 3], rng.integers(0, len(texts), 300).tolist()):  # kept, not kept, repeats
        buf, offsets = kept.encode(docs, texts)
        want_buf, want_offsets = encode_batch([texts[d] for d in docs])
        assert buf.tobytes() == want_buf.tobytes() and offsets.tolist() == want_offsets.tolist()
        assert not buf.flags.writeable


def test_budget_bounds_what_is_kept():
    texts = _texts(200)
    kept = ts.EncodedTexts(budget=1)
    buf, offsets = encode_batch(texts)
    kept.keep(0, texts, buf, offsets)
    assert kept.chunks == [] and kept.kept == 0
    assert kept.encode([3, 1], texts)[0].tobytes() == encode_batch([texts[3], texts[1]])[0].tobytes()


def test_reshingle_equals_sorted_unique_shingles():
    texts = _texts(300)
    cfg = BuildConfig()
    source = sb.sketch_texts(texts, None, cfg, chunk_size=64, timings={}).source
    assert source is not None and source.encoded is not None and len(source.encoded.chunks) == 5
    # the room of each re-shingled document comes from the sketching pass's counts
    assert source.shingle_counts is not None and source.shingle_counts.dtype == np.uint32
    assert source.shingle_counts.tolist() == [shingle_hashes([t], cfg.text, cfg.seed).doc(0).size for t in texts]
    docs = [299, 0, 17, 64, 65, 200, 17]
    got = ts.reshingle(source, docs, cfg)
    want = sorted_unique_shingles([texts[d] for d in docs], cfg.text, cfg.seed)
    for j in range(len(docs)):
        a = got[2][got[0][j]: got[0][j] + got[1][j]]
        b = want[2][want[0][j]: want[0][j] + want[1][j]]
        assert np.array_equal(a, b), j


def test_build_with_and_without_kept_encodings_writes_the_same_bytes(tmp_path, monkeypatch):
    texts = _texts(3000, seed=2)
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.8, verify="auto"))
    calls = []
    real = ts.EncodedTexts.encode

    def counted(self, docs, texts_):
        calls.append(len(docs))
        return real(self, docs, texts_)

    monkeypatch.setattr(ts.EncodedTexts, "encode", counted)
    with_kept = diversify.build(texts, config=cfg, created_at="2000-01-01T00:00:00Z", chunk_size=1000)
    assert sum(calls) > 100  # the exact checks and the cut into clusters re-shingled from the kept chunks
    monkeypatch.setattr(ts, "KEEP_ENCODED", 0)
    calls.clear()
    without = diversify.build(texts, config=cfg, created_at="2000-01-01T00:00:00Z", chunk_size=1000)
    assert calls == []  # nothing kept: every document normalized again, as before
    a, b = tmp_path / "a.dvf", tmp_path / "b.dvf"
    with_kept.save(a)
    without.save(b)
    assert a.read_bytes() == b.read_bytes()



def _sets(result) -> list:
    starts, counts, hashes = result
    return [hashes[a: a + c].tolist() for a, c in zip(starts.tolist(), counts.tolist())]


def test_reshingled_batches_equal_reshingle_of_each(tmp_path):
    """The texts of the next batch are read in a thread: each batch's sets are still its own, in
    order, from a JSONL file's texts as from a list's; no batches, nothing."""
    from diversify.corpus.filetexts import JsonlTexts

    texts = _texts(400, seed=4)
    path = tmp_path / "c.jsonl"
    path.write_text("".join(f'{{"id": {i}, "text": {json.dumps(t)}}}\n' for i, t in enumerate(texts)), encoding="utf-8")
    cfg = BuildConfig()
    batches = [[3, 1, 399], [0], [17, 17, 250, 64], list(range(100, 180))]
    for source in (texts, JsonlTexts(str(path))):
        if isinstance(source, JsonlTexts):
            assert sum(1 for _ in source) == 400  # the first pass, in order
        kept = sb.sketch_texts(source, None, cfg, chunk_size=64, timings={}).source
        assert kept is not None
        got = list(ts.reshingled(kept, batches, cfg))
        assert len(got) == len(batches)
        for docs, result in zip(batches, got):
            want = ts.reshingle(kept, docs, cfg)
            assert _sets(result) == _sets(want)
            assert _sets(result) == _sets(sorted_unique_shingles([texts[d] for d in docs], cfg.text, cfg.seed))
        assert list(ts.reshingled(kept, [], cfg)) == []


def test_reshingled_raises_what_reading_raises(tmp_path):
    """A text that cannot be read back (the file changed under the build) fails the consumer."""
    from diversify.corpus.filetexts import JsonlTexts

    texts = [f"plain ascii text number {i} " * 8 for i in range(50)]  # nothing kept encoded: read back from the file
    path = tmp_path / "c.jsonl"
    path.write_text("".join(f'{{"id": {i}, "text": {json.dumps(t)}}}\n' for i, t in enumerate(texts)), encoding="utf-8")
    source = JsonlTexts(str(path))
    kept = sb.sketch_texts(source, None, BuildConfig(), chunk_size=16, timings={}).source
    path.write_text("changed\n", encoding="utf-8")
    assert kept is not None
    with pytest.raises(InputError, match="changed"):
        list(ts.reshingled(kept, [[0], [1]], BuildConfig()))


def same_artifact(a, b, tmp_path) -> bool:
    """Whether two build results save to the same bytes."""
    pa, pb = tmp_path / "a.dvf", tmp_path / "b.dvf"
    a.save(pa)
    b.save(pb)
    return pa.read_bytes() == pb.read_bytes()


def test_fold_check_takes_the_linkings_exact_jaccard_for_pairs(tmp_path, monkeypatch):
    """A two-document component whose pair the linking checked exactly is not re-shingled for the
    cut into clusters: it takes the Jaccard the linking computed (the same sets, the same function).
    The artifact is byte for byte the one the cut writes when it shingles every member again."""
    texts = _texts(3000, seed=7)
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.8, verify="auto"))
    shingled: list = []
    real = ts._gather

    def counted(source, docs):
        shingled.append(len(docs))
        return real(source, docs)

    monkeypatch.setattr(ts, "_gather", counted)
    with_known = diversify.build(texts, config=cfg, created_at="2000-01-01T00:00:00Z", chunk_size=1000)
    used = sum(shingled)
    monkeypatch.setattr(ExactMemo, "known", lambda self: (np.zeros(0, np.int64), np.zeros(0, np.float64)))
    shingled.clear()
    without = diversify.build(texts, config=cfg, created_at="2000-01-01T00:00:00Z", chunk_size=1000)
    assert with_known.stats["exact_checks"]["minhash"] > 100  # the linking checked pairs exactly...
    assert used < sum(shingled) - 100  # ...and the cut re-shingled fewer documents for it
    assert same_artifact(with_known, without, tmp_path)


def test_known_jaccard_keys_are_sorted_unique_pairs():
    memo = ExactMemo(10)
    assert [a.size for a in memo.known()] == [0, 0]
    memo.remember(np.array([[1, 5], [0, 2], [3, 4]]), np.array([0.5, -1.0, 0.75]))  # -1: not computed
    memo.remember(np.array([[1, 5], [0, 9]]), np.array([0.5, 1.0]))
    keys, vals = memo.known()
    assert keys.tolist() == [9, 15, 34] and vals.tolist() == [1.0, 0.5, 0.75]


def test_linking_takes_the_jaccard_of_a_pair_an_earlier_call_checked(tmp_path, monkeypatch):
    """A borderline pair handed out again in a later call of the scan (it shares another band) is
    decided by the Jaccard the first check computed: the same decisions, counts and bytes as
    checking it again, and fewer documents re-shingled."""
    import diversify.linking.link as link

    texts = _texts(3000, seed=7)
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.8, verify="auto"))
    real_scan = link.scan_buckets
    # a small buffer, so many calls: pairs come again in later ones
    monkeypatch.setattr(link, "scan_buckets", lambda *a, **k: real_scan(*a, **k, capacity=32))
    shingled: list = []
    real_gather, real_known = ts._gather, ExactMemo.lookup
    hits: list = []

    def counted(source, docs):
        shingled.append(len(docs))
        return real_gather(source, docs)

    def seen(memo, pairs):
        out = real_known(memo, pairs)
        hits.append(int((out >= 0).sum()))
        return out

    monkeypatch.setattr(ts, "_gather", counted)
    monkeypatch.setattr(ExactMemo, "lookup", seen)
    with_known = diversify.build(texts, config=cfg, created_at="2000-01-01T00:00:00Z", chunk_size=1000)
    used = sum(shingled)
    assert sum(hits) > 10  # pairs did come again
    monkeypatch.setattr(ExactMemo, "lookup", lambda memo, pairs: np.full(pairs.shape[0], -1.0))
    shingled.clear()
    without = diversify.build(texts, config=cfg, created_at="2000-01-01T00:00:00Z", chunk_size=1000)
    assert used < sum(shingled)
    assert with_known.stats["exact_checks"] == without.stats["exact_checks"]
    assert same_artifact(with_known, without, tmp_path)


def test_memo_lookup_finds_pairs_in_either_order():
    memo = ExactMemo(10)
    pairs = np.array([[1, 5], [5, 1], [0, 9], [2, 3], [9, 9]], dtype=np.int64)
    assert memo.lookup(pairs).tolist() == [-1.0] * 5
    memo.remember(np.array([[1, 5], [0, 9]]), np.array([0.5, 0.25]))
    assert memo.lookup(pairs).tolist() == [0.5, 0.5, 0.25, -1.0, -1.0]
    assert memo.lookup(np.zeros((0, 2), np.int64)).size == 0
