"""The Dask engine against the local build, on a real LocalCluster with two worker processes.

Oracle: ``diversify.build`` on the same texts in the same order. The Dask build must give
the same cluster id per document (same partition into clusters AND same labels), the same stage
flags and representatives, whatever the number of input partitions.

One cluster is shared by the module (start-up is the slowest part). Shuffles use Dask's task
shuffle (fastest on tiny data) except in one test that runs the P2P shuffle, Dask's default on a
distributed cluster; the module runs in under a minute on 2 cores.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
dd = pytest.importorskip("dask.dataframe")

from shared_data import DATA, twitter_sentences  # noqa: E402

from diversify import build as local_build  # noqa: E402
from diversify.config import BuildConfig, MinHashConfig, TextConfig  # noqa: E402
from diversify.corpus.datagen import generate_corpus  # noqa: E402
from diversify.engines.dask import build_dask, connected_components  # noqa: E402
from diversify.errors import ConfigError, DuplicateIdError, InputError  # noqa: E402


@pytest.fixture(scope="module")
def corpus_texts():
    """Planted near-duplicates, exact copies (after normalization), empty documents."""
    c = generate_corpus(2500, words_per_doc=80, dup_fraction=0.3, edit_rate=(0.0, 0.06), seed=11)
    texts = list(c.texts)
    texts += [t.upper() for t in texts[:40:3]]  # exact copies after casefolding
    texts += ["", "   ", "?!"]  # no words
    texts += texts[100:130]  # verbatim copies
    return texts


def assert_same_build(dask_res, local_res, what: str) -> None:
    a, b = dask_res.cluster_ids, local_res.cluster_ids
    diff = np.flatnonzero(a != b)
    assert diff.size == 0, f"{what}: {diff.size} cluster ids differ, e.g. docs {diff[:5].tolist()}: dask " \
                           f"{a[diff[:5]].tolist()} vs local {b[diff[:5]].tolist()}"
    assert np.array_equal(dask_res.doc_stages, local_res.doc_stages), f"{what}: stage flags differ"
    assert np.array_equal(dask_res.is_representative, local_res.is_representative), f"{what}: representatives differ"
    for stat in ("candidates", "merged"):
        assert dask_res.stats[stat] == local_res.stats[stat], f"{what}: stats[{stat!r}] differ"
    assert list(dask_res.cluster_map.ids) == list(local_res.cluster_map.ids), f"{what}: ids differ"


@pytest.mark.parametrize("npartitions, shuffle_method", [(1, "tasks"), (5, "p2p")])
def test_same_clusters_as_local_on_planted_duplicates(client, corpus_texts, npartitions, shuffle_method):
    local = local_build(corpus_texts)
    assert local.n_duplicates > 300, "the corpus must hold planted duplicates for this test to mean anything"
    assert local.stats["exact_checks"]["minhash"] > 0, "borderline pairs must be exercised"
    res = build_dask(corpus_texts, client=client, npartitions=npartitions, shuffle_method=shuffle_method)
    assert_same_build(res, local, f"npartitions={npartitions}, shuffle={shuffle_method}")
    assert res.stats["dask"]["input_partitions"] == npartitions


@pytest.mark.parametrize("shuffle_partitions", [1, 7])
def test_same_clusters_whatever_the_band_partitions(client, corpus_texts, shuffle_partitions):
    """Pass 2 split by ``key % q`` on the workers: one partition, or more than the workers."""
    local = local_build(corpus_texts)
    res = build_dask(corpus_texts, client=client, npartitions=3, shuffle_partitions=shuffle_partitions)
    assert_same_build(res, local, f"shuffle_partitions={shuffle_partitions}")
    info = res.stats["dask"]
    assert info["band_partitions"] == shuffle_partitions
    # a document's record travels once per band partition holding one of its rows, not once per row
    assert 0 < info["band_doc_records"] < info["band_rows"]
    assert info["band_bytes"] == 18 * info["band_rows"] + 16 * info["band_doc_records"], "no signature in the band rows"
    assert 0 < info["pairs_verified"] <= info["scan_pairs"] <= res.stats["candidates"]["minhash"]


def test_pass_one_finds_exactly_the_keys_held_by_two_or_more_rows(corpus_texts):
    """Keys split by ``key % q`` from several chunks (each sending its distinct keys and its own
    repeated keys) give, partition by partition, exactly the keys two or more band rows hold."""
    from diversify.engines.dask import bands
    from diversify.engines.dask.inputs import Part
    from diversify.engines.dask.sketch import sketch_part
    from diversify.hashing import lsh_seed
    from diversify.linking.keys import minhash_params

    cfg = BuildConfig()
    skp = sketch_part(Part(corpus_texts), cfg.model_dump(mode="json"))
    p, seed_h, q, n = minhash_params(cfg), int(lsh_seed(cfg.seed)), 3, len(corpus_texts)
    whole = bands.band_rows(skp, 0, 0, n, p.rows, p.bands, seed_h)["key"]
    keys, counts = np.unique(whole, return_counts=True)
    expect = keys[counts >= 2]
    assert 0 < expect.size < keys.size
    cuts = [0, n // 5, n // 2, n]
    split = [bands.key_split(skp, lo, hi, p.rows, p.bands, seed_h, q) for lo, hi in zip(cuts[:-1], cuts[1:])]
    got = [bands.shared_keys(*[s[j] for s in split]) for j in range(q)]
    for j, g in enumerate(got):
        assert np.all(g % np.uint64(q) == j)
    assert np.array_equal(np.sort(np.concatenate(got)), expect)
    assert bands.shared_keys().size == 0


def test_the_band_split_sends_each_document_record_once_per_partition(corpus_texts):
    """Every kept row lands in the piece of ``key % q``; each piece carries the exact hash of
    exactly the documents of its rows, once each, and no signature; the pieces together are the
    rows of one piece."""
    from diversify.engines.dask import bands
    from diversify.engines.dask.inputs import Part
    from diversify.engines.dask.sketch import sketch_part
    from diversify.hashing import lsh_seed
    from diversify.linking.keys import minhash_params

    cfg = BuildConfig()
    skp = sketch_part(Part(corpus_texts), cfg.model_dump(mode="json"))
    p, seed_h, offset, q = minhash_params(cfg), int(lsh_seed(cfg.seed)), 1000, 4
    whole = bands.band_rows(skp, offset, 0, len(corpus_texts), p.rows, p.bands, seed_h)
    cand = bands.candidate_rows(skp, p.rows, p.bands, seed_h, None)
    pieces = bands.band_split(skp, cand, offset, 0, len(corpus_texts), q)
    assert len(pieces) == q
    for j, piece in enumerate(pieces):
        assert np.all(piece["key"] % np.uint64(q) == j)
        assert np.array_equal(piece["docs"], np.unique(piece["doc"]))
        assert np.array_equal(piece["exact"], skp["exact"][piece["docs"] - offset])
        assert set(piece) == {"key", "doc", "band", "docs", "exact"}
    rows = sorted(zip(*(np.concatenate([pc[c] for pc in pieces]).tolist() for c in ("key", "doc", "band"))))
    assert rows == sorted(zip(whole["key"].tolist(), whole["doc"].tolist(), whole["band"].tolist()))
    assert sum(pc["docs"].size for pc in pieces) <= q * whole["docs"].size < whole["key"].size
    for piece in pieces:  # rows in (document, band) order: the bucket scan's one sort relies on it
        minor = piece["doc"] * 2**16 + piece["band"]
        assert np.all(np.diff(minor) > 0)
    halves = [bands.band_split(skp, cand, offset, lo, hi, q) for lo, hi in ((0, 40), (40, len(corpus_texts)))]
    for j in range(q):  # chunks of documents split the same rows
        assert np.array_equal(np.concatenate([h[j]["key"] for h in halves]), pieces[j]["key"])
        assert np.array_equal(np.concatenate([h[j]["docs"] for h in halves]), pieces[j]["docs"])


@pytest.mark.parametrize("verify", ["estimate", "auto"])
def test_giant_buckets_use_the_same_window(client, verify):
    """Boilerplate pages make buckets far larger than the window: the window pairs must match, and
    so must the borderline decisions (both engines check every borderline pair exactly)."""
    c = generate_corpus(1500, words_per_doc=60, dup_fraction=0.2, boilerplate_fraction=0.3, n_templates=2, seed=5)
    cfg = BuildConfig(minhash=MinHashConfig(verify=verify), bucket_window=8)
    local = local_build(list(c.texts), config=cfg)
    if verify == "auto":
        assert local.stats["exact_checks"]["minhash"] > 0, "borderline pairs must be exercised"
    res = build_dask(list(c.texts), config=cfg, client=client, npartitions=3)
    assert res.stats["dask"]["band_rows_in_buckets"] > 0
    assert_same_build(res, local, f"bucket_window=8 with boilerplate, verify={verify!r}")


def test_exact_stage_only(client, corpus_texts):
    cfg = BuildConfig(minhash=None)
    local = local_build(corpus_texts, config=cfg)
    res = build_dask(corpus_texts, config=cfg, client=client, npartitions=3)
    assert local.n_duplicates > 0
    assert_same_build(res, local, "exact stage only")


def test_same_clusters_on_real_tweets(client):
    texts = twitter_sentences()
    cfg = BuildConfig(text=TextConfig(shingle="char", k=5), minhash=MinHashConfig(threshold=0.7))
    local = local_build(texts, config=cfg)
    assert local.n_duplicates > 100, "re-posted tweets should cluster"
    res = build_dask(texts, config=cfg, client=client, npartitions=4)
    assert_same_build(res, local, "Twitter URL corpus, char 5-shingles at 0.7")


def test_same_clusters_on_real_mrpc(client):
    path = DATA / "mrpc" / "msr_paraphrase_train.txt"
    if not path.exists():
        pytest.skip(f"real data set absent ({path})")
    texts = []
    with open(path, encoding="utf-8-sig") as f:
        next(f)
        for line in f:
            cols = line.rstrip("\n").split("\t")
            texts += cols[3:5]
    cfg = BuildConfig(text=TextConfig(k=2), minhash=MinHashConfig(threshold=0.6))
    local = local_build(texts, config=cfg)
    assert local.n_duplicates > 100
    res = build_dask(texts, config=cfg, client=client, npartitions=3)
    assert_same_build(res, local, "MRPC sentences, word 2-shingles at 0.6")


# ------------------------------------------------------------------------- partitioned inputs


@pytest.fixture(scope="module")
def small():
    c = generate_corpus(900, words_per_doc=60, dup_fraction=0.3, seed=21)
    ids = [f"d{i:04d}" for i in range(len(c.texts))]
    return list(c.texts), ids, local_build(list(c.texts), ids=ids)


def test_jsonl_glob_in_sorted_path_order(client, small, tmp_path):
    texts, ids, local = small
    bounds = [0, 250, 600, len(texts)]
    for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        with open(tmp_path / f"part-{j}.jsonl", "w", encoding="utf-8") as f:
            for i in range(a, b):
                f.write(json.dumps({"id": ids[i], "text": texts[i]}) + "\n")
    res = build_dask(str(tmp_path / "part-*.jsonl"), client=client, blocksize=40_000)
    assert res.stats["dask"]["input_partitions"] > 3, "blocksize must split files into several partitions"
    assert_same_build(res, local, "JSONL glob")


def test_a_directory_of_shards_reads_as_the_local_engine_reads_it(client, small, tmp_path):
    """One expansion (diversify.corpus.shards): a directory, marker files skipped, sorted paths."""
    texts, ids, local = small
    for j, (a, b) in enumerate([(0, 400), (400, len(texts))]):
        with open(tmp_path / f"part-{j}.jsonl", "w", encoding="utf-8") as f:
            for i in range(a, b):
                f.write(json.dumps({"id": ids[i], "text": texts[i]}) + "\n")
    (tmp_path / "_SUCCESS").write_text("")
    assert_same_build(build_dask(str(tmp_path), client=client), local, "directory of JSONL shards")
    (tmp_path / "notes.txt").write_text("not a shard")
    with pytest.raises(InputError, match="JSONL shards and other files"):
        build_dask(str(tmp_path), client=client)


def test_parquet_files(client, small, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    texts, ids, local = small
    for j, (a, b) in enumerate([(0, 450), (450, len(texts))]):
        pq.write_table(pa.table({"id": ids[a:b], "text": texts[a:b]}), tmp_path / f"p{j}.parquet", row_group_size=100)
    res = build_dask(str(tmp_path / "*.parquet"), client=client, blocksize=1)
    assert res.stats["dask"]["input_partitions"] == 10, "one partition per row group (5 + 5) at blocksize=1"
    assert_same_build(res, local, "Parquet files")


def test_dask_dataframe_and_bag(client, small):
    import dask.bag as db
    import pandas as pd

    texts, ids, local = small
    frame = dd.from_pandas(pd.DataFrame({"id": ids, "text": texts}), npartitions=4)
    assert_same_build(build_dask(frame, client=client), local, "dask DataFrame")
    bag = db.from_sequence([{"id": i, "text": t} for i, t in zip(ids, texts)], npartitions=3)
    assert_same_build(build_dask(bag, client=client), local, "dask Bag of records")


def test_failed_tasks_are_retried_without_corrupting_the_output(client, small, tmp_path):
    """Every partition's reader fails on its first attempt; Dask retries it and the result is intact."""
    import dask.bag as db

    texts, ids, local = small
    marker_dir = str(tmp_path)

    def flaky(records):
        records = list(records)
        marker = os.path.join(marker_dir, f"seen-{records[0]['id']}")
        if not os.path.exists(marker):
            open(marker, "w").close()
            raise OSError("injected failure (first attempt of this partition)")
        return records

    bag = db.from_sequence([{"id": i, "text": t} for i, t in zip(ids, texts)], npartitions=3).map_partitions(flaky)
    res = build_dask(bag, client=client, retries=1)
    assert len(os.listdir(marker_dir)) == 3, "each partition must have failed once"
    assert_same_build(res, local, "after retried failures")


# ------------------------------------------------------------------------- components


def _oracle_labels(n: int, edges) -> np.ndarray:
    """Each node's smallest fellow member, by a plain union-find over ``edges`` (pairs)."""
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in np.asarray(list(edges), dtype=np.int64).reshape(-1, 2).tolist():
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([find(i) for i in range(n)])


def test_connected_components_long_paths_and_random_graph(client, rng):
    n = 2000
    perm = rng.permutation(n)
    path = np.stack([perm[:199], perm[1:200]], axis=1)  # a 200-node path in random label order: ~8 rounds
    rand = rng.integers(200, n, size=(600, 2))
    edges = np.concatenate([path, rand]).astype(np.int64)
    chunks = np.array_split(edges, 4)
    futs = client.scatter([{"u": c[:, 0].copy(), "v": c[:, 1].copy()} for c in chunks])
    label_futs, rounds = connected_components(client, futs, npartitions=3)
    labels = np.arange(n)
    for f in label_futs:
        r = f.result()
        assert (r["v"] < r["u"]).all(), "a label must be smaller than its node"
        labels[r["u"]] = r["v"]
    expect = _oracle_labels(n, edges)
    assert np.array_equal(labels, expect), f"{(labels != expect).sum()} labels differ after {rounds} rounds"
    assert 3 <= rounds <= 2 * int(np.log2(n)) ** 2, f"{rounds} rounds"


# ------------------------------------------------------------------------- errors


def test_clear_errors(client, tmp_path):
    with pytest.raises(ConfigError, match="verify='exact'"):
        build_dask(["a b c"], config=BuildConfig(minhash=MinHashConfig(verify="exact")), client=client)
    with pytest.raises(InputError, match="not an existing path"):
        build_dask(str(tmp_path / "missing.jsonl"), client=client)
    with pytest.raises(InputError, match="no file matches"):
        build_dask(str(tmp_path / "none-*.jsonl"), client=client)
    with pytest.raises(InputError, match="empty"):
        build_dask([], client=client)
    with pytest.raises(DuplicateIdError):
        build_dask(["a b c", "d e f"], ids=["x", "x"], client=client)
    with pytest.raises(InputError, match="one id per text"):
        build_dask(["a b c", "d e f"], ids=["x"], client=client)


# ------------------------------------------------------------------------- build(engine='dask') and the CLI


def test_build_engine_dask_and_cli(client, small, tmp_path):
    from diversify.artifact import load
    from diversify.cli import main

    texts, ids, local = small
    res = local_build(texts, ids=ids, engine="dask", client=client)
    assert_same_build(res, local, "build(engine='dask')")
    with open(tmp_path / "c.jsonl", "w", encoding="utf-8") as f:
        for i, t in zip(ids, texts):
            f.write(json.dumps({"id": i, "text": t}) + "\n")
    out = tmp_path / "c.dvf"
    code = main(["build", str(tmp_path / "*.jsonl"), "--engine", "dask", "--scheduler", client.scheduler.address,
                 "-o", str(out), "--no-progress"])
    assert code == 0 and out.exists()
    cmap = load(str(out))
    expect = local_build(texts, ids=ids, config=BuildConfig(**cmap.config))  # the CLI's own defaults
    assert np.array_equal(np.asarray(cmap.cluster_ids), expect.cluster_ids), "CLI --engine dask: cluster ids differ"


def _scan_rows(texts, cfg):
    from diversify.engines.dask import bands
    from diversify.engines.dask.inputs import Part
    from diversify.engines.dask.sketch import sketch_part
    from diversify.hashing import lsh_seed
    from diversify.linking.keys import minhash_params

    skp = sketch_part(Part(texts), cfg.model_dump(mode="json"))
    p = minhash_params(cfg)
    return skp, bands.band_rows(skp, 0, 0, len(texts), p.rows, p.bands, int(lsh_seed(cfg.seed)))


@pytest.mark.parametrize("window", [2, 5, 64])
def test_the_bucket_scan_hands_out_every_distinct_window_pair(corpus_texts, window, monkeypatch):
    """The scan's pairs are the local scan's window pairs: rows in (key, document, band) order, the
    first copy of each text per bucket, every pair of a bucket up to ``window`` rows, else each row
    with the next ``window - 1``; each distinct pair once, whatever the blocks of rows the scan
    forms its pairs in. Oracle: a plain loop over the buckets."""
    from diversify.engines.dask import scan

    cfg = BuildConfig(bucket_window=window)
    cj = cfg.model_dump(mode="json")
    skp, piece = _scan_rows(corpus_texts, cfg)
    exact = skp["exact"].tolist()
    buckets: dict = {}
    for k, d, _ in sorted(zip(piece["key"].tolist(), piece["doc"].tolist(), piece["band"].tolist())):
        buckets.setdefault(k, []).append(d)
    expected, candidates = set(), 0
    for rows in buckets.values():
        first = {}
        for d in rows:  # rows ascend by document: the first of each text in the bucket stays
            first.setdefault(exact[d], d)
        members = [d for d in rows if first[exact[d]] == d]
        m = len(members)
        for x in range(m):
            for y in range(x + 1, m if m <= window else min(m, x + window)):
                if members[x] != members[y]:
                    candidates += 1
                    expected.add((members[x], members[y]))
    got = scan.scan_partition(cj, piece)
    assert len(expected) > 100 and candidates > len(expected), "pairs found in several bands must occur"
    assert got["candidates"] == candidates
    assert [tuple(r) for r in got["pairs"].tolist()] == sorted(expected)
    monkeypatch.setattr(scan, "SCAN_BLOCK_ROWS", 37)  # blocks of whole buckets, a few rows each
    small = scan.scan_partition(cj, piece)
    assert np.array_equal(small["pairs"], got["pairs"]) and small["candidates"] == candidates


@pytest.mark.parametrize("verify", ["auto", "estimate"])
def test_the_signature_join_decides_each_pair_as_the_local_verifier(corpus_texts, verify):
    """Pairs split by the owner of their first document, joined with its signature, decided where
    the second document is: accepted, rejected or borderline exactly as the local verifier's
    agreement band says (oracle: a loop over the signature slots), each distinct pair once,
    whatever the input partitions; a borderline pair the accepted ones already join is dropped."""
    from diversify.engines.dask import pairs as pj
    from diversify.engines.dask import scan
    from diversify.engines.dask.join import split_pairs
    from diversify.staging import agreement_band

    cfg = BuildConfig(minhash=MinHashConfig(verify=verify))
    cj = cfg.model_dump(mode="json")
    # planted copies and families of template pages: many pairs, some borderline inside a family
    texts = corpus_texts + list(generate_corpus(600, words_per_doc=80, dup_fraction=0.3, edit_rate=(0.0, 0.06),
                                                boilerplate_fraction=0.3, n_templates=2, seed=3).texts)
    skp, piece = _scan_rows(texts, cfg)

    found = scan.scan_partition(cj, piece)["pairs"]
    dup = {"pairs": np.concatenate([found, found[::-1][:, ::-1]])}  # each pair twice, once reversed
    lo, hi = agreement_band(cfg, auto=True)
    sig = skp["minhash"]
    agree = [int(np.sum(sig[a] == sig[b])) for a, b in found.tolist()]
    accept = {tuple(p) for p, g in zip(found.tolist(), agree) if g >= hi}
    border = {tuple(p) for p, g in zip(found.tolist(), agree) if lo <= g < hi}
    assert accept and (border if verify == "auto" else not border)
    n = len(texts)
    for cuts in ([0, n], [0, 700, 1500, n]):
        offsets = np.asarray(cuts, np.int64)
        parts = [{"n": hi_ - lo_, "minhash": sig[lo_:hi_]} for lo_, hi_ in zip(cuts[:-1], cuts[1:])]
        one = len(parts) == 1
        by_a = split_pairs(dup, offsets, "pairs")
        by_a = [by_a] if one else by_a
        a_out = [pj.a_side(parts[i], cuts[i], cj, offsets, by_a[i]) for i in range(len(parts))]
        a_out = [[a] if one else a for a in a_out]
        out = [pj.b_side(parts[j], cuts[j], cj, *[a[j] for a in a_out]) for j in range(len(parts))]
        assert sum(o["verified"] for o in out) == found.shape[0]
        joined = _oracle_labels(n, accept)
        # borderline pairs go on to the exact check unless the accepted pairs already join them
        deferred = {tuple(p) for o in out for p in o["deferred"].tolist()}
        assert deferred <= border
        assert {(a, b) for a, b in border if joined[a] != joined[b]} <= deferred
        if verify == "auto":
            assert len(deferred) < len(border), "some borderline pairs are inside a component already"
        # the forests' edges connect exactly the accepted pairs' components
        assert np.array_equal(_oracle_labels(n, [(u, v) for o in out for u, v in zip(o["u"].tolist(), o["v"].tolist())]),
                              joined)
        flagged = {d for o in out for d in o["flagged"].tolist()}
        assert flagged == {d for p in accept for d in p}


def test_the_filter_of_shared_keys_has_no_false_negatives_and_the_false_positives_of_theory(rng):
    """The filter pass 1 sends to the workers, sized and joined as the engine does (uint64 band
    keys, one filter per shuffle partition, a tree of unions)."""
    from diversify.engines.dask import bands
    from diversify.linking.keyfilter import PROBES, bits_for, filter_of

    keys = rng.integers(0, 2**63, size=20_000, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(1)
    keys[0] = np.uint64(2**64 - 1)  # the top bit set: a uint64 key that is no int64
    m_bits = bits_for(keys.size, bits_per_key=bands.FILTER_BITS_PER_KEY, min_bits=bands.FILTER_MIN_BITS)
    assert m_bits >= bands.FILTER_BITS_PER_KEY * keys.size and m_bits & (m_bits - 1) == 0
    third = keys.size // 3
    parts = [filter_of(keys[:third], m_bits), filter_of(keys[third:2 * third], m_bits), filter_of(keys[2 * third:], m_bits)]
    joined = parts[0].union(parts[1]).union(parts[2])
    assert joined.keys == keys.size
    assert joined.may_contain(keys).all(), "a key in the filter must always be found"
    assert np.array_equal(joined.bits, filter_of(keys, m_bits).bits), "the union is the filter of all the keys"
    others = rng.integers(0, 2**63, size=50_000, dtype=np.int64).astype(np.uint64) * np.uint64(2)  # even: disjoint
    fp = joined.may_contain(others).mean()
    expect = (1 - np.exp(-PROBES * keys.size / m_bits)) ** PROBES
    tol = 4 * np.sqrt(expect * (1 - expect) / others.size)
    assert abs(fp - expect) < tol + 0.002, f"false positive rate {fp:.4f}, theory {expect:.4f} +- {tol:.4f}"
    with pytest.raises(ValueError, match="different sizes"):
        joined.union(filter_of(keys[:10], 2 * m_bits))


def test_ids_with_files_are_refused(client, tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "a b c"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="id_field"):
        build_dask(str(tmp_path / "a.jsonl"), ids=["x"], client=client)


@pytest.mark.parametrize("verify", ["auto", "estimate"])
def test_fold_guarantee_is_the_same_on_dask(verify, client):
    """Chained edit walks: the Dask build cuts the components exactly as the local one does."""
    rng = np.random.default_rng(11)
    vocab = [f"w{i}" for i in range(400)]
    texts = []
    for _ in range(6):
        doc = list(rng.choice(vocab, 120))
        for _ in range(12):
            texts.append(" ".join(doc))
            doc = list(doc)
            for j in rng.choice(120, 2, replace=False):
                doc[j] = str(rng.choice(vocab))
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.6, verify=verify))
    local = local_build(texts, config=cfg)
    dask = build_dask(texts, config=cfg, client=client, npartitions=3)
    assert local.cluster_map.build_info["fold"]["components_cut"] > 0, "the walks should chain"
    assert dask.cluster_ids.tolist() == local.cluster_ids.tolist()
    assert dask.is_representative.tolist() == local.is_representative.tolist()


def test_source_thresholds_are_refused_on_dask_with_a_clear_error(client):
    cfg = BuildConfig(source_thresholds={"a": 0.9})
    with pytest.raises(ConfigError, match="source_thresholds.*engine='dask'"):
        build_dask(["a b c d e f"], config=cfg, client=client)


def test_a_given_id_field_missing_in_a_record_is_an_error_on_every_input_kind(client, tmp_path, capsys):
    """As the local readers: a given id field must be in every record; not given, ``id`` where present."""
    import dask.bag as db
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from diversify.cli import main

    recs = [{"uid": f"u{i}", "text": f"doc {i} alpha beta gamma delta"} for i in range(6)]
    del recs[4]["uid"]
    jl = tmp_path / "a.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    with pytest.raises(InputError, match=r"`id_field` 'uid' is missing in .*a\.jsonl.*:5"):
        build_dask(str(jl), id_field="uid", client=client)
    pq.write_table(pa.table({"text": [r["text"] for r in recs]}), tmp_path / "p.parquet")
    with pytest.raises(InputError, match="`id_field` 'uid' is missing"):
        build_dask(str(tmp_path / "p.parquet"), id_field="uid", client=client)
    with pytest.raises(InputError, match=r"partition row \d has no value there \(got <NA>\)"):
        build_dask(dd.from_pandas(pd.DataFrame(recs), npartitions=2), id_field="uid", client=client)
    with pytest.raises(InputError, match="`id_field` 'uid' is missing in the DataFrame"):
        build_dask(dd.from_pandas(pd.DataFrame({"text": ["a b c"]}), npartitions=1), id_field="uid", client=client)
    with pytest.raises(InputError, match=r"`id_field` 'uid' is missing in bag record \d"):
        build_dask(db.from_sequence(recs, npartitions=2), id_field="uid", client=client)
    out = tmp_path / "o.dvf"
    code = main(["build", str(jl), "--engine", "dask", "--scheduler", client.scheduler.address, "--id-field", "uid",
                 "-o", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists(), err
    assert "uid" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    # not given: the `id` field is optional, and records without it get their index, as before
    plain = tmp_path / "b.jsonl"
    plain.write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in recs), encoding="utf-8")
    res = build_dask(str(plain), client=client)
    assert res.n_docs == len(recs)


def test_borderline_pairs_are_joined_on_the_input_partitions_not_routed_by_the_client(client, corpus_texts):
    """The borderline exchange is a shuffle join: one deciding task per input partition holding a
    pair's second document, whatever the number of pairs or of (partition, partition) blocks."""
    local = local_build(corpus_texts)
    res = build_dask(corpus_texts, client=client, npartitions=6)
    info = res.stats["dask"]
    assert res.stats["exact_checks"]["minhash"] > 4 * info["input_partitions"], "many pairs, few partitions"
    assert 1 <= info["borderline_tasks"] <= info["input_partitions"]
    assert_same_build(res, local, "borderline pairs by a shuffle join, 6 partitions")


def test_the_corpus_is_read_once(client, corpus_texts, tmp_path):
    """Sketching keeps on the workers the texts the borderline join and the cut read: each input
    partition is read once, and only the candidates' texts stay after the filter of shared keys."""
    import dask.bag as db

    reads = str(tmp_path)

    def counted(records):
        records = list(records)
        with open(os.path.join(reads, f"read-{records[0]['id']}"), "a") as f:
            f.write("x")
        return records

    ids = list(range(len(corpus_texts)))
    bag = db.from_sequence([{"id": i, "text": t} for i, t in zip(ids, corpus_texts)], npartitions=4)
    bag = bag.map_partitions(counted)
    res = build_dask(bag, client=client)
    assert_same_build(res, local_build(corpus_texts, ids=ids), "texts kept from the first read")
    info = res.stats["dask"]
    assert res.stats["exact_checks"]["minhash"] > 0 and info["cut_members"] > 0, "both stages that read texts ran"
    counts = {name: len(Path(reads, name).read_text()) for name in os.listdir(reads)}
    assert len(counts) == bag.npartitions and set(counts.values()) == {1}, f"reads per input partition: {counts}"
    assert info["cut_members"] <= info["texts_kept"] < 0.8 * len(corpus_texts), info


@pytest.mark.parametrize("seed", range(40))
def test_the_scan_keeps_the_first_copy_of_each_text_per_bucket_in_scan_order(seed):
    """The bucket scan's rows: in each bucket, of the documents sharing an exact hash only the
    smallest stays; rows in (key, document, band) order. Oracle: a plain loop over the buckets."""
    from diversify.engines.dask.scan import _first_copy_rows, _scan_order

    def _first_copies_in_scan_order(key, doc, band, exact, shared=None):  # as scan_partition composes them
        o = _scan_order(key, doc, band)
        keep = _first_copy_rows(key[o], doc[o], exact[o], None if shared is None else shared[o])
        return key[o][keep], doc[o][keep]

    rng = np.random.default_rng(seed)
    nd, bands = int(rng.integers(1, 40)), int(rng.integers(1, 5))
    texts = rng.integers(0, max(1, nd // 3), nd).astype(np.uint64)  # documents of equal text: exact copies
    docs = np.sort(rng.choice(10**9, nd, replace=False)).astype(np.int64)
    own = rng.integers(0, 6, (nd, bands)).astype(np.uint64)
    keys = np.where(rng.random((nd, 1)) < 0.5, own, texts[:, None] * np.uint64(7) + np.arange(bands, dtype=np.uint64))
    rows = [(int(keys[i, b]), int(docs[i]), b, int(texts[i])) for i in range(nd) for b in range(bands)]
    expected = []
    for k in sorted({r[0] for r in rows}):
        bucket = [r for r in rows if r[0] == k]
        first = {t: min(r[1] for r in bucket if r[3] == t) for t in {r[3] for r in bucket}}
        expected += sorted((r[0], r[1], r[2]) for r in bucket if r[1] == first[r[3]])
    perm = rng.permutation(len(rows))
    key, doc, band, exact = (np.array([rows[i][j] for i in perm], dtype=dt)
                             for j, dt in enumerate((np.uint64, np.int64, np.int16, np.uint64)))
    ex = np.sort(texts)
    shared = np.isin(exact, ex[1:][ex[1:] == ex[:-1]])
    for marks in (None, shared):
        got_key, got_doc = _first_copies_in_scan_order(key, doc, band, exact, marks)
        assert list(zip(got_key.tolist(), got_doc.tolist())) == [(k, d) for k, d, _ in expected]


def test_partitions_of_texts_weigh_their_bytes_for_the_scheduler():
    """Dask places a task next to its largest inputs by their ``sizeof``; a partition of texts that
    reported a few dozen bytes (Python's default for an object) had its texts moved to the tasks
    instead (the borderline join waited seconds on such transfers at 1M documents)."""
    from dask.sizeof import sizeof

    from diversify.engines.dask.inputs import Part
    from diversify.engines.dask.texts import KeptTexts

    texts = [f"document {i} " + "word " * 400 for i in range(300)]
    raw = sum(len(t) for t in texts)
    kept = KeptTexts(texts, len(texts))
    some = KeptTexts(texts[::3], len(texts), np.arange(0, 300, 3))
    assert sizeof(kept) >= raw and sizeof(Part(texts, [str(i) for i in range(300)], None)) >= raw
    assert raw / 3 <= sizeof(some) < raw
    assert some.take(np.array([6, 0, 297])) == [texts[6], texts[0], texts[297]]
    with pytest.raises(LookupError, match="document 4 of this partition is not a candidate"):
        some.take(np.array([3, 4]))
