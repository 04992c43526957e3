"""State read back from an artifact for ``add``: every rule of docs/artifact-format.md section 2.1, tampered one at a time.

Each case builds a real artifact with the API (tests/hostile/state_corpus.py), breaks one rule of
the stored state in one array, rewrites the file with every checksum recomputed, and runs ``add``
on it through the API and through the CLI (``diversify add``) in a worker process
(tests/hostile/state_worker.py), so that a crash inside a kernel shows as a negative return code.
Both must refuse with a one-line ``ArtifactError`` / exit status 2 that names the array and says to
rebuild, before any kernel runs, and leave the file unchanged. A hypothesis property
(tests/hostile/state_fuzz.py) tampers at random under a time budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import diversify
from diversify.artifact import ClusterMap, load
from diversify.errors import ArtifactError, InputError

HOSTILE = Path(__file__).resolve().parents[1] / "hostile"
sys.path.insert(0, str(HOSTILE))
import state_corpus as S  # noqa: E402

ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")


# --------------------------------------------------------------------------- the crafted cases


def _set(name, fn):
    def change(h, a):
        a[name] = fn(a[name])
    return change


def _drop(*names):
    def change(h, a):
        for name in names:
            a.pop(name)
    return change


def _both(*changes):
    def change(h, a):
        for c in changes:
            c(h, a)
    return change


def _config(path, value):
    return lambda h, a: S.set_config(h, path, value)


def _poke(name, index, value):
    def fn(x):
        x = x.copy()
        x[index] = value
        return x
    return _set(name, fn)


def _or(name, index, bits):
    def fn(x):
        x = x.copy()
        x[index] |= np.uint8(bits)
        return x
    return _set(name, fn)


def _swap_rows_10_11(ip):
    ip = ip.copy()
    r = int(np.flatnonzero(np.diff(ip) > 0)[10])  # a non-empty row: its end > its start
    ip[r], ip[r + 1] = ip[r + 1], ip[r]
    return ip


def _row3(fn):
    def change(h, a):
        ip, hs = a["extra/shingle_indptr"], a["extra/shingle_hashes"].copy()
        lo, hi = int(ip[3]), int(ip[4])
        assert hi - lo >= 3
        hs[lo:hi] = fn(hs[lo:hi])
        a["extra/shingle_hashes"] = hs
    return change


def _dup_first(row):
    row = row.copy()
    row[1] = row[0]
    return row


def _dense(h, a):
    """Dense labels 0..k-1 in order of first appearance: what a writer in another language would produce."""
    _, first, inv = np.unique(a["doc/cluster_id"], return_index=True, return_inverse=True)
    S.recluster(h, a, np.argsort(np.argsort(first))[inv])


def _pairs_of(a):
    """Cluster ids of the two-member clusters (label c, other member c + 1) after the first few documents."""
    cl = a["doc/cluster_id"]
    ids, counts = np.unique(cl, return_counts=True)
    return [int(c) for c in ids[(counts == 2) & (ids > 10)] if cl[c + 1] == c]


def _label_not_member(h, a):
    p = _pairs_of(a)
    cl = a["doc/cluster_id"].copy()
    cl[cl == p[0]] = p[1] + 1  # cluster p0 renamed after a document of cluster p1
    S.recluster(h, a, cl)


def _aliases(rows_of):
    def change(h, a):
        a["extra/aliases"] = np.array(rows_of(a), dtype=np.int64).reshape(-1, 2)
    return change


def _live_alias(a):
    return [[1, 0], [_pairs_of(a)[0], 0]]


def _wrong_target(a):
    return [[1, _pairs_of(a)[0]]]


def _cycle(a):
    p = _pairs_of(a)
    return [[1, 0], [p[0] + 1, p[1] + 1], [p[1] + 1, p[0] + 1]]


# (case id, artifact kind, change, regex the messages must match, load with verify)
CASES = [
    # MinHash signatures: (n, num_perm) u4
    ("minhash-one-row-short", "text", _set("extra/minhash", lambda x: x[:-1]), "extra/minhash", True),
    ("minhash-64-of-128-columns", "text", _set("extra/minhash", lambda x: x[:, :64]), "extra/minhash", True),
    ("minhash-as-u8", "text", _set("extra/minhash", lambda x: x.astype(np.uint64)), "extra/minhash", True),
    ("minhash-missing", "text", _drop("extra/minhash"), "extra/minhash", True),
    ("config-num-perm-64", "text", _config(("minhash", "num_perm"), 64), "extra/minhash", True),
    ("config-invalid", "text", _config(("minhash", "num_perm"), -3), "header `config`", True),
    # shingle rows: CSR, offsets monotone from 0 to len(hashes), rows sorted distinct
    ("shingle-indptr-end-past-data", "text", _poke("extra/shingle_indptr", -1, 10**9), "extra/shingle_indptr", True),
    ("shingle-indptr-far-offset", "text", _poke("extra/shingle_indptr", 1, 10**12), "extra/shingle_indptr", True),
    ("shingle-indptr-far-interior", "text", _poke("extra/shingle_indptr", 40, 10**12), "extra/shingle_indptr", True),
    ("shingle-indptr-negative", "text", _poke("extra/shingle_indptr", 0, -64), "extra/shingle_indptr", True),
    ("shingle-indptr-decreasing", "text", _set("extra/shingle_indptr", _swap_rows_10_11), "extra/shingle_indptr", True),
    ("shingle-indptr-one-short", "text", _set("extra/shingle_indptr", lambda x: x[:-1]), "extra/shingle_indptr", True),
    ("shingle-hashes-truncated", "text", _set("extra/shingle_hashes", lambda x: x[:-5]), "extra/shingle_indptr", True),
    ("shingle-hashes-row-unsorted", "text", _row3(lambda r: r[::-1].copy()), "extra/shingle_hashes", True),
    ("shingle-hashes-row-duplicate", "text", _row3(_dup_first), "extra/shingle_hashes", True),
    ("shingle-hashes-as-i8", "text", _set("extra/shingle_hashes", lambda x: x.view(np.int64)), "extra/shingle_hashes", True),
    ("shingle-hashes-missing", "text", _drop("extra/shingle_hashes"), "extra/shingle_hashes", True),
    ("shingle-rows-missing", "text", _drop("extra/shingle_hashes", "extra/shingle_indptr"), "extra/shingle_indptr", True),
    # one row per document
    ("text-simhash-one-short", "text", _set("extra/text_simhash", lambda x: x[:-1]), "extra/text_simhash", True),
    ("text-simhash-missing", "text", _drop("extra/text_simhash"), "extra/text_simhash", True),
    ("exact-hash-one-short", "text", _set("extra/exact_hash", lambda x: x[:-1]), "extra/exact_hash", True),
    ("exact-hash-as-i8", "text", _set("extra/exact_hash", lambda x: x.view(np.int64)), "extra/exact_hash", True),
    # document flags: known bits, the vector bit on all or none, the char bit only under shingle="auto"
    ("doc-flags-unknown-bit", "text", _or("extra/doc_flags", 3, 64), "extra/doc_flags", True),
    ("doc-flags-vector-bit-on-one", "text", _or("extra/doc_flags", 0, 2), "extra/doc_flags", True),
    ("doc-flags-char-bit-under-word", "text", _both(_config(("text", "shingle"), "word"), _or("extra/doc_flags", 0, 4)),
     "extra/doc_flags", True),
    ("doc-flags-one-short", "text", _set("extra/doc_flags", lambda x: x[:-1]), "extra/doc_flags", True),
    ("doc-flags-missing", "text", _drop("extra/doc_flags"), "extra/doc_flags", True),
    # representative keys, per-document thresholds, fold similarities
    ("rep-keys-one-short", "text", _set("extra/rep_keys", lambda x: x[:-1]), "extra/rep_keys", True),
    ("rep-keys-one-column", "text", _set("extra/rep_keys", lambda x: x[:, :1].copy()), "extra/rep_keys", True),
    ("rep-keys-nan", "text", _poke("extra/rep_keys", (4, 0), np.nan), "extra/rep_keys", True),
    ("rep-keys-missing", "text", _drop("extra/rep_keys"), "extra/rep_keys", True),
    ("doc-threshold-not-a-config-threshold", "text", _poke("extra/doc_threshold", 2, 0.5), "extra/doc_threshold", True),
    ("doc-threshold-one-short", "text", _set("extra/doc_threshold", lambda x: x[:-1]), "extra/doc_threshold", True),
    ("doc-threshold-missing", "text", _drop("extra/doc_threshold"), "extra/doc_threshold", True),
    ("fold-similarity-out-of-range", "text", _poke("extra/fold_similarity", 0, 7.0), "extra/fold_similarity", True),
    ("fold-similarity-as-f8", "text", _set("extra/fold_similarity", lambda x: x.astype(np.float64)),
     "extra/fold_similarity", True),
    # stage bits: only those of the stages the config enables
    ("doc-stages-unknown-bit", "text", _or("doc/stages", 1, 16), "doc/stages", True),
    ("doc-stages-disabled-stage", "text", _or("doc/stages", 1, 4), "doc/stages", True),
    # a map loaded without verify: add checks what it relies on itself
    # (the reader's id-binding check at load may see it first: the sampled document's cluster disagrees with the lookup)
    ("unverified-cluster-id-out-of-range", "text", _poke("doc/cluster_id", 5, 10**6), "doc/cluster_id|`lookup/cluster` says", False),
    ("unverified-two-representatives", "text",
     lambda h, a: a.__setitem__("doc/is_representative", np.ones_like(a["doc/is_representative"])),
     "doc/is_representative|cluster/representative", False),
    # vector state: (n, families*bits/64) u8 signatures, finite unit vectors of the verify dtype
    ("simhash-one-row-short", "vectors", _set("extra/simhash", lambda x: x[:-1]), "extra/simhash", True),
    ("simhash-2-of-8-words", "vectors", _set("extra/simhash", lambda x: x[:, :2].copy()), "extra/simhash", True),
    ("simhash-missing", "vectors", _drop("extra/simhash"), "extra/simhash", True),
    ("config-simhash-bits-128", "vectors", _config(("simhash", "bits"), 128), "extra/simhash", True),
    ("vectors-one-row-short", "vectors", _set("extra/vectors", lambda x: x[:-1]), "extra/vectors", True),
    ("vectors-as-f4-under-exact", "vectors", _set("extra/vectors", lambda x: x.astype(np.float32)), "extra/vectors", True),
    ("vectors-nan", "vectors", _poke("extra/vectors", (3, 2), np.nan), "extra/vectors", True),
    ("vectors-not-normalized", "vectors", _set("extra/vectors", lambda x: x * 3.0), "extra/vectors", True),
    ("vectors-zero-dimensions", "vectors", _set("extra/vectors", lambda x: x[:, :0].copy()), "extra/vectors", True),
    ("vectors-missing", "vectors", _drop("extra/vectors"), "extra/vectors", True),
    ("vector-bit-cleared-state-kept", "vectors", _set("extra/doc_flags", lambda x: x & np.uint8(0xFD)), "extra/simhash",
     True),
    ("vector-bit-without-simhash-stage", "vectors", _config(("simhash",), None), "extra/doc_flags", True),
    # cluster labels: a cluster id is the index of one of its members
    ("dense-labels-300-clusters", "components", _dense, "doc/cluster_id", True),
    ("label-not-a-member", "components", _label_not_member, "doc/cluster_id", True),
    # aliases: merged ids are not live, lead (without cycles) to the cluster their document is in
    ("alias-names-a-live-cluster", "components", _aliases(_live_alias), "extra/aliases", True),
    ("alias-wrong-target", "components", _aliases(_wrong_target), "extra/aliases", True),
    ("alias-cycle", "components", _aliases(_cycle), "extra/aliases", True),
    ("alias-out-of-range", "components", _aliases(lambda a: [[1, 0], [10**6, 0]]), "extra/aliases", True),
    ("alias-two-targets", "components", _aliases(lambda a: [[1, 0], [1, _pairs_of(a)[0]]]), "extra/aliases", True),
    ("alias-not-pairs", "components", _set("extra/aliases", lambda x: x.reshape(-1).copy()), "extra/aliases", True),
    ("alias-as-f8", "components", _set("extra/aliases", lambda x: x.astype(np.float64)), "extra/aliases", True),
]


# --------------------------------------------------------------------------- running them


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    return S.build_artifacts(tmp_path_factory.mktemp("state-artifacts"))


def run_worker(cases: list[dict], workdir: Path) -> dict[str, dict]:
    """Results by case name; a case during which the worker died is ``{"crashed": returncode}``."""
    results: dict[str, dict] = {}
    todo = list(cases)
    while todo:
        spec = workdir / "cases.json"
        spec.write_text(json.dumps(todo))
        out = subprocess.run([sys.executable, str(HOSTILE / "state_worker.py"), str(spec)], capture_output=True,
                             text=True, timeout=600, env=ENV, cwd=str(HOSTILE))
        started = None
        for line in out.stdout.splitlines():
            rec = json.loads(line)
            if "start" in rec:
                started = rec["start"]
            else:
                results[rec["name"]] = rec
                started = None
        if started is None:
            assert out.returncode == 0, f"worker failed outside a case (rc {out.returncode}): {out.stderr[-2000:]}"
            break
        results[started] = {"crashed": out.returncode, "stderr": out.stderr[-1500:]}
        todo = [c for c in todo if c["name"] not in results]
    return results


@pytest.fixture(scope="module")
def outcomes(artifacts, tmp_path_factory):
    work = tmp_path_factory.mktemp("state-cases")
    cases, written = [], {}
    for name, kind, change, _, verify in CASES:
        art = artifacts[kind]
        path = work / f"{name}.dvf"
        written[name] = S.tamper(art["path"], path, change)
        cases.append({"name": name, "path": str(path), "verify": verify, "add": art["add"], "cli": art["cli"]})
    for kind, art in artifacts.items():  # controls: the untampered artifacts take the same add
        path = work / f"control-{kind}.dvf"
        path.write_bytes(Path(art["path"]).read_bytes())
        cases.append({"name": f"control-{kind}", "path": str(path), "verify": True, "add": art["add"], "cli": None})
    results = run_worker(cases, work)
    for kind in artifacts:
        got = results[f"control-{kind}"]
        assert got.get("api", {}).get("outcome") == "accepted", f"the untampered {kind} artifact must take the add: {got}"
    return {name: (results.get(name), written[name], work / f"{name}.dvf") for name, *_ in CASES}


def _one_line(text: str) -> bool:
    return len(text.strip().splitlines()) == 1


@pytest.mark.parametrize("name,expected", [(c[0], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_add_refuses_tampered_state(outcomes, name, expected):
    import re

    got, before, path = outcomes[name]
    assert got is not None, f"{name}: no result"
    assert "crashed" not in got, f"{name}: add killed the process (return code {got['crashed']}): {got['stderr']}"
    api, cli = got["api"], got["cli"]
    assert api["outcome"] == "refused" and api["artifact_error"], \
        f"{name}: diversify.add must refuse with ArtifactError; got {api['outcome']} {api.get('type')}: {api.get('msg') or api}"
    msg = api["msg"]
    assert _one_line(msg) and re.search(expected, msg), f"{name}: the message must be one line naming {expected!r}: {msg!r}"
    assert "rebuild" in msg.lower(), f"{name}: the message must say to rebuild: {msg!r}"
    assert cli["rc"] == 2, f"{name}: `diversify add` must exit 2; got {cli}"
    err = cli["stderr"]
    assert _one_line(err) and err.startswith("diversify add: error: artifact ") and re.search(expected, err), \
        f"{name}: the CLI must print one line naming {expected!r}: {err!r}"
    assert path.read_bytes() == before, f"{name}: a refused add changed the artifact file"


# --------------------------------------------------------------------------- cluster labels, for every reader


def test_dense_labels_are_refused_by_every_reader(artifacts, tmp_path):
    """The spec names a cluster by a member's index; a file with dense labels 0..k-1 is refused at
    load (serving, stats, add), and ClusterMap.from_arrays refuses to write one."""
    path = tmp_path / "dense.dvf"
    S.tamper(artifacts["components"]["path"], path, _dense)
    header, arrays = S.read(path)
    assert header["counts"]["n_clusters"] >= 300 and arrays["cluster/id"].tolist() == list(range(header["counts"]["n_clusters"]))
    with pytest.raises(ArtifactError, match=r"doc/cluster_id.*member") as info:
        load(path)
    assert "\n" not in str(info.value)
    with pytest.raises(ArtifactError, match="doc/cluster_id"):
        diversify.Diversifier(path)
    out = subprocess.run([sys.executable, "-m", "diversify.cli", "stats", str(path)], capture_output=True, text=True,
                         env=ENV, timeout=120)
    assert out.returncode == 2 and _one_line(out.stderr) and "doc/cluster_id" in out.stderr, out
    cm = load(artifacts["components"]["path"])
    dense = arrays["doc/cluster_id"]
    with pytest.raises(InputError, match=r"`cluster_ids` must name each cluster"):
        ClusterMap.from_arrays(list(cm.ids), dense, np.asarray(cm.is_representative), np.asarray(cm.doc_stages),
                               np.asarray(cm.doc_lengths), config=cm.config, fingerprint=cm.fingerprint, seed=cm.seed,
                               hash_scheme=cm.hash_scheme, build_info={})


def test_one_unrelated_document_does_not_merge_relabelled_clusters(artifacts, tmp_path):
    """The issue's replay: with dense labels, one unrelated document used to merge 300 clusters into 1."""
    path = tmp_path / "dense.dvf"
    S.tamper(artifacts["components"]["path"], path, _dense)
    before = path.read_bytes()
    out = subprocess.run([sys.executable, "-c", (
        "import sys, diversify\n"
        "from diversify.errors import ArtifactError\n"
        "try:\n"
        f"    res = diversify.add({str(path)!r}, ['quite unrelated words about something else entirely'], ids=['x'])\n"
        "    print('clusters', res.n_clusters)\n"
        "except ArtifactError as e:\n"
        "    print('refused', e)\n")], capture_output=True, text=True, env=ENV, timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("refused") and "doc/cluster_id" in out.stdout, out
    assert path.read_bytes() == before


def test_an_alias_never_resolves_to_a_wrong_cluster_online(artifacts, tmp_path):
    """An alias table that breaks the rules is not used for look-ups: the merged id is then
    unknown ("not a cluster"), never silently another cluster."""
    path = tmp_path / "alias.dvf"
    S.tamper(artifacts["components"]["path"], path, _aliases(_wrong_target))
    cm = load(path)
    assert cm.cluster_of("c1") == 0, "document 1 is in cluster 0"
    with pytest.raises(InputError, match="not a cluster"):
        cm.resolve_cluster(1)
    good = load(artifacts["components"]["path"])
    assert good.resolve_cluster(1) == 0, "the valid alias still resolves"


# --------------------------------------------------------------------------- what the new documents must match


def test_new_documents_must_match_the_stored_widths(artifacts):
    """Vectors of another dimension, keys of another column count, texts for a vectors-only
    artifact: an InputError naming the argument (they used to raise a raw ValueError or KeyError)."""
    vec = artifacts["vectors"]
    with pytest.raises(InputError, match=r"`vectors` must have the artifact's dimension \(16\); got 8"):
        diversify.add(vec["path"], ["another text of a few words"], ids=["n"], vectors=np.ones((1, 8)))
    text = artifacts["text"]
    with pytest.raises(InputError, match=r"`keys` must have the artifact's number of key columns \(2\); got 3"):
        diversify.add(text["path"], ["another text of a few words"], ids=["n"], keys=[[1.0, 2.0, 3.0]], sources=["news"])
    rng = np.random.default_rng(3)
    only = diversify.build(vectors=rng.standard_normal((10, 8)))
    with pytest.raises(InputError, match=r"`texts` cannot be added to this artifact: it was built without texts"):
        diversify.add(only.cluster_map, ["a text with its vector"], ids=[10], vectors=rng.standard_normal((1, 8)))


def test_cli_console_script_refuses_with_one_line(artifacts, tmp_path):
    """The real `python -m diversify.cli add`, for a crash case of each artifact kind."""
    for name in ("minhash-one-row-short", "shingle-indptr-far-offset", "simhash-one-row-short", "alias-names-a-live-cluster"):
        _, kind, change, expected, _ = next(c for c in CASES if c[0] == name)
        path = tmp_path / f"{name}.dvf"
        before = S.tamper(artifacts[kind]["path"], path, change)
        out = subprocess.run([sys.executable, "-m", "diversify.cli", "add", str(path), *artifacts[kind]["cli"]],
                             capture_output=True, text=True, env=ENV, timeout=300)
        assert out.returncode == 2, f"{name}: exit {out.returncode}: {out.stderr[-1500:]}"
        assert _one_line(out.stderr) and expected in out.stderr and "Traceback" not in out.stderr, (name, out.stderr)
        assert path.read_bytes() == before, name


# --------------------------------------------------------------------------- property: random tampering

FUZZ_SECONDS = float(os.environ.get("DIVERSIFY_STATE_FUZZ_SECONDS", "30"))


def test_random_tampering_never_crashes_add_and_accepted_adds_keep_the_contract(tmp_path):
    """Random edits of the state arrays (values, rows, columns, dtypes, removal; tampered labels
    with the derived arrays recomputed) under a time budget, in a worker process. Every add is
    refused with a one-line ArtifactError naming the array (or an InputError when the tampered
    file is consistent but no longer matches the new documents), or succeeds with a result that
    loads verified, takes a further add, keeps every old document in its old cluster (or the
    cluster it merged into, through the aliases) and is byte-identical when repeated. Edits of
    values the spec leaves free (hashes, signatures) are never refused."""
    seed = int(os.environ.get("DIVERSIFY_FUZZ_SEED", "20261130"))
    out = subprocess.run([sys.executable, str(HOSTILE / "state_fuzz.py"), str(FUZZ_SECONDS), str(seed), str(tmp_path)],
                         capture_output=True, text=True, timeout=FUZZ_SECONDS * 6 + 300, env=ENV, cwd=str(HOSTILE))
    last = [line for line in out.stdout.splitlines() if line.startswith("TRY ")][-1:]
    assert out.returncode == 0, f"the fuzz worker died (rc {out.returncode}) during {last}: {out.stderr[-2000:]}"
    report = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"state fuzz: {report['tried']} edits in {report['seconds']:.0f} s: {report['refused']} refused, "
          f"{report['accepted']} accepted ({report['benign']} free-value edits), seed {seed}")
    assert not report["failures"], f"seed {seed}: {report['failures'][:5]}"
    assert report["tried"] >= 20 and report["refused"] >= 5 and report["benign"] >= 2, report


def test_from_arrays_writes_only_what_add_accepts():
    """The writer keeps the reader's rules: no alias leading elsewhere than its document's cluster
    (cluster ids given as merged ids are resolved first, so none stays live); integer alias rows are
    stored as the spec's i8."""
    ids = [f"d{i}" for i in range(6)]
    cl = np.array([0, 0, 2, 2, 4, 5], np.int64)
    rep = np.array([True, False, True, False, True, True])
    args = dict(config={}, fingerprint="f", seed=1, hash_scheme="test", build_info={}, created_at=S.CREATED)

    def make(aliases):
        return ClusterMap.from_arrays(ids, cl, rep, np.zeros(6, np.uint8), np.zeros(6, np.uint32),
                                      extras={"aliases": aliases}, **args)

    with pytest.raises(InputError, match=r"`extras\['aliases'\]` must lead each merged id to the cluster its own document"):
        make(np.array([[1, 2]], np.int64))
    cm = make(np.array([[1, 0], [3, 2]], np.int32))
    assert cm.extras["aliases"].dtype == np.int64 and cm.resolve_cluster(3) == 2
