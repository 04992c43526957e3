"""The clique benchmark suite measures what it says: its references, scores, chunkers and the large
family are checked here against brute force on small inputs (all pairs, exact Jaccard on shingle
strings), and its options and renderer on hand-made inputs. No build runs here."""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not (ROOT / "benchmarks").is_dir(), reason="benchmarks/ is not shipped with this checkout")
pytest.importorskip("scipy")  # the truth join's sparse products (the benchmarks' own dependency)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import reference  # noqa: E402
from benchmarks import truth as truthmod  # noqa: E402
from benchmarks.suites import _clique_corpora as corpora  # noqa: E402
from benchmarks.suites import _clique_scores as scores  # noqa: E402
from benchmarks.suites import clique  # noqa: E402

T = 0.8
VOCAB = [f"w{i}" for i in range(400)]


def _corpus(tmp_path: Path, seed: int) -> tuple[Path, list[str]]:
    """Families of near-copies (a few words edited) of random base texts, written as JSONL."""
    rng = random.Random(seed)
    texts = []
    for _ in range(rng.randint(2, 5)):
        base = [rng.choice(VOCAB) for _ in range(rng.randint(80, 150))]
        for _ in range(rng.randint(2, 9)):
            doc = list(base)
            for _ in range(rng.randint(0, 3)):
                doc[rng.randrange(len(doc))] = rng.choice(VOCAB)
            texts.append(" ".join(doc))
    rng.shuffle(texts)
    path = tmp_path / f"c{seed}.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{k}", "text": t}) + "\n" for k, t in enumerate(texts)))
    return path, texts


def _brute(texts: list[str]) -> np.ndarray:
    sets = [reference.shingle_set(t) for t in texts]
    n = len(sets)
    j = np.eye(n)
    for a, b in itertools.combinations(range(n), 2):
        j[a, b] = j[b, a] = len(sets[a] & sets[b]) / len(sets[a] | sets[b])
    return j


def _oracle_clique_cover(adj: np.ndarray, lengths: list[int]) -> list[int]:
    """The greedy clique cover written out plainly over an adjacency matrix."""
    n = len(lengths)
    deg = [int(adj[v].sum()) for v in range(n)]
    key = {v: (-deg[v], -lengths[v], v) for v in range(n)}
    label, free = list(range(n)), set(range(n))
    for c in sorted(range(n), key=key.get):
        if c not in free:
            continue
        free.discard(c)
        members = [c]
        for v in sorted((v for v in free if adj[c, v]), key=key.get):
            if all(adj[v, m] for m in members):
                members.append(v)
                free.discard(v)
        for m in members:
            label[m] = c
    return label


@pytest.mark.parametrize("seed", range(12))
def test_references_and_scores_match_brute_force(tmp_path, seed):
    path, texts = _corpus(tmp_path, seed)
    truth = truthmod.Truth(truthmod.compute(path, T))
    jm = _brute(texts)
    adj = (jm >= T) & ~np.eye(len(texts), dtype=bool)
    lengths = np.array([len(t) for t in texts])
    refs = scores.references(truth, lengths)
    assert refs["clique-ref"].tolist() == _oracle_clique_cover(adj, lengths.tolist())
    comps = truthmod.components(truth.n, np.stack([truth.pi, truth.pj], axis=1))
    exact = scores.ExactJaccard(truth)
    for name, labels in refs.items():
        same = [(a, b) for a, b in itertools.combinations(range(len(texts)), 2) if labels[a] == labels[b]]
        got = scores.score_all(labels, None, truth, comps, lengths, exact)
        want_true = sum(jm[a, b] >= T for a, b in same)
        assert got["purity"] == pytest.approx(want_true / len(same) if same else 1.0)
        assert got["true_pair_recall"] == pytest.approx(want_true / adj.sum() * 2 if adj.any() else 1.0)
        assert got["min_pair_jaccard"] == (pytest.approx(min(jm[a, b] for a, b in same)) if same else None)
        assert got["clusters"] == len(set(labels.tolist()))
        size = {v: int((comps == comps[v]).sum()) for v in range(len(texts))}
        for b in got["recall_by_component_size"]:
            lo, _, hi = b["sizes"].partition("-")
            pick = [(a, c) for a, c in itertools.combinations(range(len(texts)), 2) if adj[a, c]
                    and (size[a] >= int(lo) and size[a] <= int(hi) if hi else size[a] > int(lo.lstrip(">")))]
            assert b["pairs"] == len(pick)
            if pick:
                assert b["recall"] == pytest.approx(sum(labels[a] == labels[c] for a, c in pick) / len(pick))
        if name == "clique-ref":
            assert all(adj[a, b] for a, b in same), "a clique-ref cluster holds a pair below t"
            assert scores.is_clique_cover(labels, truth)
        if name == "star-ref":  # every member similar to the longest member
            for c in set(labels.tolist()):
                m = np.flatnonzero(labels == c)
                top = m[np.argmax(lengths[m])]
                assert all(jm[top, v] >= T for v in m)
    assert (comps == refs["components-ref"]).all()


def test_is_clique_cover_refuses_a_chain():
    truth = truthmod.Truth({"ids": np.array(["a", "b", "c"]), "indptr": np.zeros(4, np.int64),
                            "tokens": np.zeros(0, np.uint64), "pi": np.array([0, 1]), "pj": np.array([1, 2]),
                            "inter": np.array([4, 4]), "union": np.array([5, 5]), "meta": json.dumps({"t": T})})
    assert not scores.is_clique_cover(np.array([0, 0, 0]), truth)
    assert scores.is_clique_cover(np.array([0, 0, 2]), truth)


def test_same_cluster_pairs_all_and_sampled():
    labels = np.array([5, 1, 5, 5, 2, 1, 9])
    i, j, sampled = scores.same_cluster_pairs(labels)
    want = {(a, b) for a, b in itertools.combinations(range(labels.size), 2) if labels[a] == labels[b]}
    assert not sampled and set(zip(i.tolist(), j.tolist())) == want and i.size == len(want)
    i, j, sampled = scores.same_cluster_pairs(labels, cap=3, seed=1)
    assert sampled and i.size == 3
    assert all((a, b) in want for a, b in zip(i.tolist(), j.tolist()))


_RNG = random.Random(7)
PAGE = ".TH LS 1\n.SH NAME\nls \\- list directory contents\n.SH DESCRIPTION\n" + "\n".join(
    f".PP\n{' '.join(_RNG.choice(VOCAB) for _ in range(_RNG.randint(5, 120)))}"
    for k in range(30)) + "\n\nA last paragraph after a blank line.\n"


def test_para_chunks_keep_every_word_in_order_within_the_size():
    for target in (20, 60, 180):
        chunks = corpora.para_chunks(PAGE, target)
        assert " ".join(chunks).split() == PAGE.split()
        assert all(len(c.split()) <= 1.5 * target for c in chunks)
        assert len(chunks) > 1


def test_window_chunks_are_fixed_windows_covering_the_page():
    words = PAGE.split()
    got = corpora.window_chunks(PAGE, 200, 50)
    assert [len(c.split()) for _, c in got] == [200] * len(got)
    assert [s for s, _ in got[:-1]] == list(range(0, 50 * (len(got) - 1), 50))
    assert got[-1][0] + 200 == len(words)
    assert all(c.split() == words[s : s + 200] for s, c in got)
    assert corpora.window_chunks("a b c", 200, 50) == [(0, "a b c")]
    assert len(corpora.window_chunks(PAGE, 200, 50, max_windows=2)) == 2


def test_family_copies_are_really_at_least_0_9_to_the_page():
    rng = random.Random(3)
    page = " ".join(rng.choice(VOCAB) for _ in range(600))
    texts, info = corpora.make_family(page, 300, seed=2)
    assert texts[0] == page and len(texts) == 301
    ref = reference.shingle_set(page)
    js = [len(ref & s) / len(ref | s) for s in map(reference.shingle_set, texts[1:])]
    assert min(js) >= 0.9 and info["min_jaccard_to_page"] == pytest.approx(min(js))
    assert info["distinct_texts"] > 250
    assert corpora.audit_family(texts, sample=50)["min_jaccard"] >= 0.9


def test_family_audit_refuses_a_copy_below_0_9():
    page = " ".join(VOCAB[:100])
    with pytest.raises(AssertionError, match="below 0.9"):
        corpora.audit_family([page, " ".join(VOCAB[50:150])], sample=1)


def test_clusterings_option_takes_both_spellings_and_refuses_others():
    assert clique._clusterings("clique,star,components") == ["clique", "star", "components"]
    assert clique._clusterings("guaranteed,components") == ["star", "components"]
    with pytest.raises(argparse.ArgumentTypeError, match="clique, star, components"):
        clique._clusterings("clique,stars")


def test_unknown_clustering_is_reported_unavailable_not_fatal():
    from benchmarks.suites._clique_runs import resolve

    spelling, note = resolve("star")
    assert spelling in ("star", "guaranteed")
    assert note == "accepted" if spelling == "star" else "spelled 'guaranteed'" in note
    spelling, note = resolve("no-such-clustering")
    assert spelling is None and "refuses 'no-such-clustering'" in note


def _row(kind, purity, recall, ratio, **run):
    s = {"docs": 10, "clusters": 4, "folded": 6, "purity": purity, "min_pair_jaccard": 0.81, "min_sampled": False,
         "true_pair_recall": recall, "recall_vs_clique_ref": ratio, "fold_fidelity": 1.0}
    return {"kind": kind, "scores": s, **({"run": run} if run else {})}


def test_renderer_reports_targets_met_and_not_met():
    env = {"date": "d", "diversify": "0", "git_head": "0" * 40, "library_source_sha256": "x", "cpu_count": 2,
           "loadavg_start": [0], "rensa": "r", "datasketch": "s"}
    results = {"environment": env, "threshold": T, "command": "", "default_clustering": "clique",
               "clusterings": {"clique": {"spelling": "clique", "note": "accepted"},
                               "star": {"spelling": None, "note": "refused"}},
               "chunks": {}, "family": {}, "cli": {},
               "corpora": {"manpages": {"truth": {"docs": 10, "components": 4, "pairs": 7}, "rows": {
                   "clique-ref": _row("reference", 1.0, 0.8, 1.0),
                   "diversify-clique": _row("diversify", 1.0, 0.796, 0.995, wall_seconds=1, cpu_seconds=1,
                                            pairs_checked=12, library_purity={"purity": 0.999, "pairs_similar": 999,
                                                                              "pairs_sampled": 1000}),
                   "diversify-components": _row("diversify", 0.6, 0.9, 1.125, wall_seconds=1, cpu_seconds=1)}}}}
    text = "\n".join(clique.render(results))
    assert "| manpages | **diversify-clique** | 10 | 4 | 6 | 1.0000 | 0.810 | 0.7960 | 0.9950 |" in text
    assert "| manpages | diversify-clique | 0.9950 | met | 1.0000 | met |" in text
    assert "| manpages | diversify-components | 1.1250 | met | 0.6000 | **not met** |" in text
    assert "`star`: unavailable (refused)" in text
    assert "verification): manpages clique 0.999 (999/1000)." in text
    assert "True-pair recall by the size" not in text  # rows without the split: no table
    assert "Peers not run here" in text
    results["corpora"]["manpages"]["rows"]["diversify-clique"]["scores"]["recall_by_component_size"] = [
        {"sizes": "2-16", "pairs": 5, "recall": 1.0}, {"sizes": ">256", "pairs": 2, "recall": 0.5}]
    text = "\n".join(clique.render(results))
    assert "| corpus | clustering | components of 2-16 | components of >256 |" in text
    assert "| manpages | truth pairs | 5 | 2 |" in text and "| manpages | diversify-clique | 1.0000 | 0.5000 |" in text
    assert "Issue 40's targets (recall >= 0.99 x the clique reference's, pairwise purity >= 0.999)" in text
