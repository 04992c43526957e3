"""Looking at an artifact: `diversify show`, the export's columns, ClusterMap.to_pandas() and
_repr_html_, against what the artifact stores and an exact-Jaccard oracle."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest
from reference import shingles

import diversify
from diversify.artifact import load
from diversify.artifact.views import cluster_view, document_columns
from diversify.cli.main import main
from diversify.errors import DiversifyError, InputError, MissingDependencyError
from diversify.stages import STAGE_NAMES, stage_names

CREATED = "2026-01-01T00:00:00Z"
BASE = ("the committee met on tuesday to review the quarterly budget and agreed to fund the new library "
        "wing together with repairs to the old town hall roof before the winter storms")
# hostile ids: a line break, an ESC sequence, a bidi override, a formula, HTML
FAMILY = {
    "plain": BASE,
    "line\nbreak": BASE.upper() + "   ",  # an exact copy after normalization
    "\x1b[31mred": BASE + " and the library",  # near copies
    "rtl\u202eevil": BASE.replace("tuesday", "monday"),
    "=HYPERLINK(1)": BASE + " and the library wing too, said the mayor",
    "copy": (BASE + " and the library wing too, said the mayor").upper(),  # the representative's exact copy
}
LONE = {"<script>x</script>": "an unrelated note about tide tables and the harbour master's schedule",
        "solo": "another unrelated note about choir practice moved to thursday evenings"}


def jaccard(a: str, b: str) -> float:
    x, y = set(shingles(a)), set(shingles(b))
    return len(x & y) / len(x | y)


@pytest.fixture(scope="module")
def corpus():
    docs = {**FAMILY, **LONE}
    return list(docs), list(docs.values())


@pytest.fixture(scope="module")
def art(tmp_path_factory, corpus):
    ids, texts = corpus
    d = tmp_path_factory.mktemp("inspect")
    cfg = {"minhash": {"threshold": 0.5, "verify": "exact"}}
    diversify.build(texts, ids=ids, config=cfg, created_at=CREATED).cluster_map.save(d / "g.dvf")
    diversify.build(texts, ids=ids, config={**cfg, "clustering": "components"}, created_at=CREATED) \
        .cluster_map.save(d / "c.dvf")
    return d


def run(args, capsys):
    rc = main([str(a) for a in args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


# --------------------------------------------------------------------------- the columns


def test_columns_follow_what_the_artifact_stores(art, corpus):
    ids, texts = corpus
    cm = load(art / "g.dvf")
    cols = document_columns(cm)
    assert cols["id"] == ids
    text_of = dict(zip(ids, texts))
    sim = np.asarray(cm._arrays["extra/fold_similarity"], dtype=np.float64)
    folded = 0
    for d, i in enumerate(ids):
        c = cols["cluster_id"][d]
        assert cols["representative_id"][d] == cm.representative_of(c)
        assert cols["is_representative"][d] is bool(cm.is_representative[d])
        assert cols["stages"][d] == [STAGE_NAMES[b] for b in sorted(STAGE_NAMES) if cm.doc_stages[d] & b]
        assert cols["similarity"][d] == pytest.approx(float(sim[d]), abs=1e-6)
        if cols["is_representative"][d]:
            assert cols["similarity"][d] == 1.0
            continue
        folded += 1
        rep = cols["representative_id"][d]
        assert len(cols["stages"][d]) == 1, "a folded document names the one stage that verified it"
        if cols["stages"][d] == ["exact"]:
            assert cols["similarity"][d] == 1.0
        else:  # verify="exact": the cut's exact Jaccard against the representative
            assert cols["stages"][d] == ["minhash"]
            assert cols["similarity"][d] == pytest.approx(jaccard(text_of[i], text_of[rep]), abs=1e-6)
            assert cols["similarity"][d] >= 0.5
    assert folded >= 3, "the family folds"
    assert cols["representative_id"][ids.index("copy")] == "=HYPERLINK(1)", "the longest text, the first of a tie"
    assert cols["stages"][ids.index("copy")] == ["exact"]
    assert cols["stages"][ids.index("solo")] == [] and cols["similarity"][ids.index("solo")] == 1.0


def test_stage_names_of_every_bitmask():
    assert stage_names(0) == []
    assert stage_names(1 | 2 | 4 | 8) == ["exact", "minhash", "simhash", "text_simhash"]
    assert stage_names(2 | 64) == ["minhash", "bit64"], "a newer writer's bit is named, never dropped"


def _read_export(path, fmt):
    if fmt == "jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    if fmt == "csv":
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


@pytest.mark.parametrize("name", ["g", "c"])
def test_export_has_the_new_columns_and_one_boolean_spelling(art, tmp_path, capsys, name):
    pytest.importorskip("pyarrow")
    cm = load(art / f"{name}.dvf")
    cols = document_columns(cm)
    got = {}
    for fmt in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"e.{fmt}"
        rc, _, err = run(["export", art / f"{name}.dvf", "-o", out], capsys)
        assert rc == 0, err
        got[fmt] = _read_export(out, fmt)
    header = (tmp_path / "e.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "id,cluster_id,is_representative,representative_id,similarity,stages"
    assert list(got["jsonl"][0]) == header.split(",") == list(got["parquet"][0])
    assert {r["is_representative"] for r in got["csv"]} == {"true", "false"}, "CSV spells booleans as JSON does"
    assert {r["is_representative"] for r in got["jsonl"]} == {True, False}
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(tmp_path / "e.parquet")
    assert schema.field("is_representative").type == pa.bool_()
    assert schema.field("similarity").type == pa.float64()
    assert schema.field("stages").type == pa.list_(pa.string())
    for fmt in ("jsonl", "parquet"):
        assert [r["representative_id"] for r in got[fmt]] == cols["representative_id"]
        assert [r["similarity"] for r in got[fmt]] == cols["similarity"]
        assert [r["stages"] for r in got[fmt]] == cols["stages"]
    csv_rows = got["csv"]
    assert [r["stages"] for r in csv_rows] == [";".join(s) for s in cols["stages"]]
    assert [r["similarity"] for r in csv_rows] == ["" if s is None else repr(s) for s in cols["similarity"]]
    # a formula id is neutralised in both id columns
    formula = [r for r in csv_rows if r["id"].startswith("'=")]
    assert formula and all(not r["representative_id"].startswith(("=", "+", "-", "@")) for r in csv_rows)
    if name == "c":  # components: no cut, no verified similarity: empty / null, never invented
        assert set(cols["similarity"]) == {None}
        assert {r["similarity"] for r in csv_rows} == {""}
        assert {r["similarity"] for r in got["jsonl"]} == {None}


def test_export_of_an_int_id_artifact_keeps_int_representatives(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    texts = [BASE, BASE + " and more", "a different text entirely about tide tables and the harbour"]
    diversify.build(texts, ids=[-7, 2**63 - 1, 0],
                    config={"minhash": {"threshold": 0.5}, "representative": "first"}).save(tmp_path / "i.dvf")
    for fmt in ("jsonl", "parquet", "csv"):
        out = tmp_path / f"i.{fmt}"
        assert run(["export", tmp_path / "i.dvf", "-o", out], capsys)[0] == 0
        rows = _read_export(out, fmt)
        reps = [r["representative_id"] for r in rows]
        want = [-7, -7, 0] if fmt != "csv" else ["-7", "-7", "0"]
        assert reps == want, fmt  # int ids stay numbers (CSV: never quoted as a formula)


# --------------------------------------------------------------------------- show


def test_show_a_cluster_lists_members_similarity_and_stages(art, capsys):
    cm = load(art / "g.dvf")
    c = cm.cluster_of("plain")
    rc, out, err = run(["show", art / "g.dvf", c], capsys)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    view = cluster_view(cm, cluster_id=c)
    assert lines[0] == f"cluster          #{c}"
    assert lines[1] == f"size             {view['size']}"
    assert lines[2] == "promise          every two members verified similar (clique)"
    assert view["size"] == len(cm.members(c)) >= 4
    for m in view["members"]:
        row = [line for line in lines[5:] if line.endswith(" " + _escaped(m["id"]))]
        assert len(row) == 1, (m["id"], out)
        assert f"{m['similarity']:.3f}" in row[0]
        assert ("representative" if m["is_representative"] else m["stages"][0]) in row[0]
    assert view["members"][0]["is_representative"] and view["members"][0]["id"] == cm.representative_of(c)
    # every line is one line: the ids' line breaks, ESC and bidi override are escaped
    assert "\x1b" not in out and "\u202e" not in out and "line\\x0abreak" in out
    assert len(lines) == 5 + view["size"]


def _escaped(i) -> str:
    from diversify.cli.output import printable

    return printable(i)


def test_show_by_document_id_names_the_cluster(art, capsys):
    cm = load(art / "g.dvf")
    rc, out, _ = run(["show", art / "g.dvf", "--id", "line\nbreak"], capsys)
    assert rc == 0
    c = cm.cluster_of("line\nbreak")
    assert out.splitlines()[0] == f"document line\\x0abreak is in cluster #{c}"
    assert f"cluster          #{c}" in out


def test_show_limit_counts_the_rest_and_json_is_machine_output(art, capsys):
    cm = load(art / "g.dvf")
    c = cm.cluster_of("plain")
    size = len(cm.members(c))
    rc, out, _ = run(["show", art / "g.dvf", c, "--limit", "2"], capsys)
    assert rc == 0 and out.rstrip().splitlines()[-1] == f"  ... {size - 2} more (raise --limit to list them)"
    rc, out, _ = run(["show", art / "g.dvf", c, "--limit", "2", "--json"], capsys)
    view = json.loads(out)
    assert view["more"] == size - 2 and len(view["members"]) == 2 and view["size"] == size
    assert view["representative"] == cm.representative_of(c) and view["similarity_stored"] is True
    assert all(ch.isprintable() or ch == "\n" for ch in out), "JSON escapes every control character"
    rc, out, _ = run(["show", art / "g.dvf", "--id", "solo", "--json", "--limit", "0"], capsys)
    view = json.loads(out)
    assert view["members"] == [] and view["more"] == 1 and view["asked_id"] == "solo"


def test_show_of_a_components_artifact_says_similarity_is_not_stored(art, capsys):
    cm = load(art / "c.dvf")
    rc, out, _ = run(["show", art / "c.dvf", "--id", "plain"], capsys)
    assert rc == 0
    assert "similarity       not stored" in out
    assert "representative" in out and "0.000" not in out
    view = json.loads(run(["show", art / "c.dvf", "--id", "plain", "--json"], capsys)[1])
    assert view["similarity_stored"] is False and {m["similarity"] for m in view["members"]} == {None}
    assert view["size"] == len(cm.members(cm.cluster_of("plain")))


@pytest.mark.parametrize("args, needle", [
    (["99999"], "`cluster_id` 99999 is not a cluster"),
    (["-1"], "`cluster_id` -1 is not a cluster"),
    (["x1"], "`CLUSTER_ID` must be an integer"),
    (["1e3"], "`CLUSTER_ID` must be an integer"),
    (["0_0"], "`CLUSTER_ID` must be an integer"),
    (["\u0660"], "`CLUSTER_ID` must be an integer"),  # ARABIC-INDIC DIGIT ZERO: int() would take it
    ([" 0"], "`CLUSTER_ID` must be an integer"),
    (["--id", "nope\x1b[2J"], "is not a document of this artifact"),
    (["--id", "\udcff"], "is not a document of this artifact"),
    ([], "give a CLUSTER_ID or --id ID"),
    (["0", "--id", "plain"], "give a CLUSTER_ID or --id ID"),
    (["0", "--limit", "-3"], "`--limit` must be a number of members >= 0"),
])
def test_show_errors_are_one_line_and_exit_2(art, capsys, args, needle):
    rc, out, err = run(["show", art / "g.dvf", *args], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("diversify show: error: ") and needle in err, err
    assert "\x1b" not in err


def test_show_int_ids(tmp_path, capsys):
    diversify.build([BASE, BASE + " and more", "tide tables"], ids=[10, 20, 30],
                    config={"minhash": {"threshold": 0.5}}).save(tmp_path / "i.dvf")
    rc, out, _ = run(["show", tmp_path / "i.dvf", "--id", "20", "--json"], capsys)
    assert rc == 0 and [m["id"] for m in json.loads(out)["members"]] == [20, 10]  # the longest first
    for bad in ("abc", "2_0", "+20", "\uff12\uff10"):  # int() reads the last three as 20
        rc, _, err = run(["show", tmp_path / "i.dvf", "--id", bad], capsys)
        assert rc == 2 and "`--id` must be an integer" in err, bad
    rc, _, err = run(["show", tmp_path / "i.dvf", "--id", "40"], capsys)
    assert rc == 2 and "40 is not a document" in err


def test_show_follows_a_merged_cluster_id(tmp_path, capsys):
    """components + add: a document joining two clusters merges them; the old id still shows."""
    a = BASE
    b = "tide tables for the harbour list the high and low water marks for every day of the month ahead"
    cfg = {"minhash": {"threshold": 0.3}, "clustering": "components"}
    diversify.build([a, b], ids=["a", "b"], config=cfg, created_at=CREATED).save(tmp_path / "m.dvf")
    before = load(tmp_path / "m.dvf")
    ca, cb = before.cluster_of("a"), before.cluster_of("b")
    assert ca != cb
    diversify.add(tmp_path / "m.dvf", [a + " " + b], ids=["ab"]).save(tmp_path / "m2.dvf")
    after = load(tmp_path / "m2.dvf")
    if after.cluster_of("a") != after.cluster_of("b"):
        pytest.skip("the bridge did not merge at this threshold")
    gone = ca if after.resolve_cluster(ca) != ca else cb
    rc, out, _ = run(["show", tmp_path / "m2.dvf", gone], capsys)
    assert rc == 0
    assert out.splitlines()[0] == f"cluster #{gone} was merged into cluster #{after.resolve_cluster(gone)}"


def test_show_as_users_run_it(art):
    r = subprocess.run([sys.executable, "-m", "diversify", "show", str(art / "g.dvf"), "--id", "plain"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "representative" in r.stdout and r.stderr == ""
    r = subprocess.run([sys.executable, "-m", "diversify", "show", str(art / "g.dvf"), "777"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "777" in r.stderr


def test_cluster_view_api_refuses_bad_arguments(art):
    cm = load(art / "g.dvf")
    with pytest.raises(InputError, match="give one of"):
        cluster_view(cm)
    with pytest.raises(InputError, match="not a document"):
        cluster_view(cm, doc_id="missing")
    with pytest.raises(DiversifyError, match="`cluster_id`"):
        cluster_view(cm, cluster_id="0")
    with pytest.raises(InputError, match="`limit`"):
        cluster_view(cm, cluster_id=0, limit=-1)


# --------------------------------------------------------------------------- pandas and notebooks


def test_to_pandas_matches_the_export_columns(art):
    pd = pytest.importorskip("pandas")
    for name in ("g", "c"):
        cm = load(art / f"{name}.dvf")
        df = cm.to_pandas()
        assert isinstance(df, pd.DataFrame)
        assert list(df.columns) == ["id", "cluster_id", "is_representative", "representative_id", "similarity",
                                    "stages"]
        cols = document_columns(cm)
        assert df["id"].tolist() == cols["id"] and df["stages"].tolist() == cols["stages"]
        assert df["is_representative"].dtype == bool and df["similarity"].dtype == np.float64
        assert df["cluster_id"].tolist() == cols["cluster_id"]
        sim = df["similarity"].to_numpy()
        if name == "c":
            assert np.isnan(sim).all()
        else:
            assert np.allclose(sim, [s for s in cols["similarity"]])


def test_to_pandas_without_pandas_says_how_to_install(art, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install 'diversify-retrieval\[pandas\]'"):
        load(art / "g.dvf").to_pandas()


def test_repr_html_summarises_and_escapes(art, tmp_path):
    cm = load(art / "g.dvf")
    page = cm._repr_html_()
    assert f"<td>{cm.n_docs:,}</td>" in page and f"<td>{cm.n_clusters:,}</td>" in page
    big = cm.cluster_of("plain")
    assert f"<td>{big}</td><td>{len(cm.members(big))}</td>" in page
    # a representative named with HTML is escaped, never markup
    texts = ["<b>x</b> " + BASE, "<b>x</b> " + BASE + " again"]
    diversify.build(texts, ids=["<img src=x onerror=alert(1)>", "b&c"],
                    config={"minhash": {"threshold": 0.5}, "representative": "first"}).save(tmp_path / "h.dvf")
    page = load(tmp_path / "h.dvf")._repr_html_()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "h.dvf" in page
