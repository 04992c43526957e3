"""`diversify build --parent-field`: a chunked corpus built with its pages (docs/recipes/chunked-rag.md)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from diversify.cli import main
from diversify.corpus.chunking import chunk_paragraphs

VOCAB = [f"flag{i}" for i in range(2500)]


def _corpus(path, seed: int = 7) -> list[dict]:
    """Two versions of one reference page (the beta has a paragraph more at the top and in the middle)
    and two unrelated pages, chunked by paragraphs: one JSONL record per chunk with its page."""
    rng = random.Random(seed)

    def paragraphs(n):
        return [" ".join(rng.choice(VOCAB) for _ in range(rng.randint(25, 70))) for _ in range(n)]

    ga = paragraphs(16)
    pages = {"ga": ga, "beta": paragraphs(1) + ga[:8] + paragraphs(1) + ga[8:], "x": paragraphs(8),
             "y": paragraphs(8)}
    rows = [{"id": f"{page}#{i}", "text": c.text, "page": page}
            for page, ps in pages.items() for i, c in enumerate(chunk_paragraphs("\n\n".join(ps), max_words=120))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def _clusters(tmp_path, artifact) -> dict:
    out = tmp_path / "export.jsonl"
    assert main(["export", str(artifact), "-o", str(out)]) == 0
    return {r["id"]: r["cluster_id"] for r in map(json.loads, out.read_text().splitlines())}


def _folded_across_pages(clusters: dict) -> int:
    by: dict = {}
    for doc, c in clusters.items():
        by.setdefault(c, set()).add(doc.split("#")[0])
    return sum(1 for doc, c in clusters.items() if len(by[c]) > 1) - sum(1 for p in by.values() if len(p) > 1)


def test_the_recipe_from_the_command_line_folds_more_chunks_of_the_near_duplicate_page(tmp_path):
    corpus = tmp_path / "chunks.jsonl"
    _corpus(corpus)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
    run = [sys.executable, "-m", "diversify", "build", str(corpus), "--no-progress"]
    plain = subprocess.run(run + ["-o", str(tmp_path / "plain.dvf")], capture_output=True, text=True, env=env)
    assert plain.returncode == 0, plain.stderr
    scoped = subprocess.run(run + ["-o", str(tmp_path / "scoped.dvf"), "--parent-field", "page"],
                            capture_output=True, text=True, env=env)
    assert scoped.returncode == 0, scoped.stderr
    assert "chunks           4 pages, 1 page clusters with copies;" in scoped.stdout
    a, b = _clusters(tmp_path, tmp_path / "plain.dvf"), _clusters(tmp_path, tmp_path / "scoped.dvf")
    assert _folded_across_pages(b) > _folded_across_pages(a)
    for doc, c in b.items():  # the unrelated pages stay alone, and nothing folds inside one page
        if doc[0] in "xy":
            assert list(b.values()).count(c) == 1
    members: dict = {}
    for doc, c in b.items():
        members.setdefault(c, []).append(doc.split("#")[0])
    assert all(len(set(m)) == len(m) for m in members.values())


def test_containment_changes_what_folds(tmp_path):
    corpus = tmp_path / "chunks.jsonl"
    _corpus(corpus, seed=11)
    arts = {}
    for c in ("0.5", "1.0"):
        arts[c] = tmp_path / f"c{c}.dvf"
        assert main(["build", str(corpus), "-o", str(arts[c]), "--no-progress", "--parent-field", "page",
                     "--containment", c]) == 0
    loose, strict = _clusters(tmp_path, arts["0.5"]), _clusters(tmp_path, arts["1.0"])
    assert len(set(loose.values())) < len(set(strict.values()))


@pytest.mark.parametrize("extra, words", [
    (["--stream"], "does not combine with --stream"),
    (["--engine", "dask"], "does not combine with --engine dask"),
    (["--key-field", "n"], "does not combine with --key-field"),
    (["--containment", "1.5"], "`containment` must be a number in (0, 1]; got 1.5"),
])
def test_parent_field_refuses_what_it_cannot_do(tmp_path, capsys, extra, words):
    corpus = tmp_path / "chunks.jsonl"
    _corpus(corpus)
    assert main(["build", str(corpus), "-o", str(tmp_path / "o.dvf"), "--no-progress", "--parent-field", "page",
                 *extra]) != 0
    assert words in capsys.readouterr().err
    assert not (tmp_path / "o.dvf").exists()


def test_containment_alone_and_a_record_without_its_page_are_named(tmp_path, capsys):
    corpus = tmp_path / "chunks.jsonl"
    rows = _corpus(corpus)
    assert main(["build", str(corpus), "-o", str(tmp_path / "o.dvf"), "--containment", "0.7"]) != 0
    assert "`--containment` applies with --parent-field" in capsys.readouterr().err
    rows[3].pop("page")
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["build", str(corpus), "-o", str(tmp_path / "o.dvf"), "--parent-field", "page"]) != 0
    err = capsys.readouterr().err
    assert "`--parent-field` 'page': record 3" in err and "has no page id there (got None)" in err
