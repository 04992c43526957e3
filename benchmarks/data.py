"""One loader per real data set in ``../shared/data`` (see its README.md; never copied into the
repository). A missing data set raises :class:`DataMissing`, which suites turn into a "skipped"
entry that says why."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from .paths import data_dir


class DataMissing(FileNotFoundError):
    """A data set a suite needs is not on this machine."""


def folder(name: str) -> Path:
    path = data_dir() / name
    if not path.is_dir():
        raise DataMissing(f"{path} not found (set DIVERSIFY_DATA to the folder holding the shared data sets)")
    return path


def _file(path: Path) -> Path:
    if not path.exists():
        raise DataMissing(f"{path} not found")
    return path


def pairs_corpus(triples):
    """Unique sentences (first-seen order) and index pairs from ``(s1, s2, label)`` triples:
    (texts, a int64, b int64, label bool)."""
    index: dict[str, int] = {}
    a, b, y = [], [], []
    for s1, s2, lab in triples:
        a.append(index.setdefault(s1, len(index)))
        b.append(index.setdefault(s2, len(index)))
        y.append(lab)
    return list(index), np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), np.array(y, dtype=bool)


def clough_stevenson() -> dict:
    """Clough & Stevenson: 100 texts with ``category`` (orig/cut/light/heavy/non) and ``task``."""
    root = folder("clough_stevenson_plagiarism")
    with open(root / "file_information.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return dict(files=[r["File"] for r in rows],
                texts=[(root / r["File"]).read_text(encoding="utf-8", errors="replace") for r in rows],
                category=[r["Category"] for r in rows], task=[r["Task"] for r in rows])


def mrpc() -> list[tuple[str, str, bool]]:
    """MRPC train + test: (sentence 1, sentence 2, is paraphrase); the files begin with a BOM."""
    root = folder("mrpc")
    triples = []
    for name in ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt"):
        with open(_file(root / name), encoding="utf-8-sig") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 5 and parts[0] in ("0", "1"):
                    triples.append((parts[3], parts[4], parts[0] == "1"))
    return triples


def twitter_url() -> list[tuple[str, str, bool]]:
    """Twitter URL corpus, test split: (tweet 1, tweet 2, paraphrase = ≥ 4 of 6 votes); pairs with
    3 votes are discarded."""
    path = _file(folder("twitter_url_corpus") / "Twitter_URL_Corpus_test.txt")
    triples = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            votes = int(parts[2].strip("()").split(",")[0])
            if votes == 3:
                continue
            triples.append((parts[0].strip(), parts[1].strip(), votes >= 4))
    return triples


def stsb(split: str = "test"):
    """STS-B (read with ``csv.QUOTE_NONE``): sentences 1, sentences 2, scores 0-5 (float64)."""
    path = _file(folder("stsb") / f"sts-{split}.csv")
    s1, s2, score = [], [], []
    with path.open(encoding="utf-8") as f:
        for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(row) < 7:
                continue
            score.append(float(row[4]))
            s1.append(row[5])
            s2.append(row[6])
    return s1, s2, np.asarray(score)


def _smart_records(path: Path) -> list[tuple[str, dict]]:
    """Split a SMART-style file into records: (.I value, {field letter: text})."""
    records = []
    cur_id, cur, field = None, None, None
    for line in _file(path).read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(".I "):
            if cur is not None:
                records.append((cur_id, cur))
            cur_id, cur, field = line[3:].strip(), {}, None
        elif len(line) == 2 and line[0] == "." and line[1].isalpha():
            field = line[1]
            cur.setdefault(field, [])
        elif field is not None:
            cur[field].append(line)
    if cur is not None:
        records.append((cur_id, cur))
    return [(i, {f: " ".join(v).strip() for f, v in rec.items()}) for i, rec in records]


def cranfield():
    """Cranfield 1400: doc ids 1..1400, texts (``.W``, else ``.T``), queries (``.W``), and qrels
    {query number: {doc id: code}} with query numbers by position in ``cran.qry`` (as ``cranqrel``
    uses them; its ``.I`` numbers are not)."""
    root = folder("cranfield")
    docs = _smart_records(root / "cran.all.1400")
    doc_ids = [int(i) for i, _ in docs]
    if doc_ids != list(range(1, len(docs) + 1)):
        raise RuntimeError("cran.all.1400: .I numbers are not 1..n in order")
    texts = [rec.get("W", "") or rec.get("T", "") for _, rec in docs]
    queries = [rec.get("W", "") for _, rec in _smart_records(root / "cran.qry")]
    qrels: dict[int, dict[int, int]] = {}
    for line in _file(root / "cranqrel").read_text().splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        q, d, code = int(parts[0]), int(parts[1]), int(parts[2])
        qrels.setdefault(q, {})[d] = code
    return doc_ids, texts, queries, qrels


def sick() -> list[tuple[str, str, float]]:
    """SICK (train, trial, test): (sentence A, sentence B, relatedness 1-5)."""
    root = folder("sick")
    triples = []
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        with open(_file(root / name), encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 4 and parts[0].isdigit():
                    triples.append((parts[1], parts[2], float(parts[3])))
    return triples


def sentences() -> list[str]:
    """The unique sentences of MRPC, the Twitter URL corpus, STS-B (every split) and SICK, in that
    order (first seen first): the real short-text corpus of the embedding benchmarks."""
    index: dict[str, None] = {}
    for s1, s2, _ in mrpc() + twitter_url():
        index.setdefault(s1)
        index.setdefault(s2)
    for split in ("train", "dev", "test"):
        s1, s2, _ = stsb(split)
        for a, b in zip(s1, s2):
            index.setdefault(a)
            index.setdefault(b)
    for a, b, _ in sick():
        index.setdefault(a)
        index.setdefault(b)
    return list(index)
