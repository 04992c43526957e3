"""A line break read from an artifact or an index never starts a line of the command's output.

Control characters were already escaped; ``\\n`` was not (``say`` splits its text into lines), so a
crafted header (``library_version="1.0\\nfingerprint      forged"``) printed a forged line in
``diversify stats``. Every line break (LF, CR, CRLF, VT, FF, U+0085, U+2028, U+2029) in every header
string an artifact carries (ids, metadata keys and values, library_version, created_at is checked as
ISO-8601, fingerprint, hash_scheme, config values, LSH parameters) is escaped on one line; JSON
output stays valid JSON that decodes to the stored values.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import diversify
from diversify.artifact import ClusterMap

BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\u2028", "\u2029", "\x1c", "\x1d", "\x1e"]
FORGED = "fingerprint      FORGED"


def _texts() -> list[str]:
    base = "the committee approved the new budget for the public library after a long debate on funding"
    return [base] * 3 + ["an unrelated note about trains, timetables and the price of coffee at the station"] * 2


def _crafted(path, brk: str, *, hostile: bool = True) -> None:
    """A valid artifact whose header strings all carry ``brk`` followed by a forged line."""
    diversify.build(_texts(), ids=[f"d{i}" for i in range(5)]).save(path.with_suffix(".base.dvf"))
    cm = diversify.load(path.with_suffix(".base.dvf"))
    s = (lambda v: f"{v}{brk}{FORGED}") if hostile else (lambda v: f"{v}   {FORGED}")
    ids = [s(f"d{i}") for i in range(5)]
    config = json.loads(json.dumps(cm.config))
    config["minhash"]["method"] = s(config["minhash"]["method"])
    config["text"]["shingle"] = s(str(config["text"]["shingle"]))
    config["clustering"] = s(config.get("clustering", "components"))
    build_info = json.loads(json.dumps(cm.build_info))
    build_info["lsh"] = {s("minhash"): {"bands": s("16"), "rows": s("8"), "recall_at_threshold": s("high")}}
    out = ClusterMap.from_arrays(
        ids, np.asarray(cm.cluster_ids), np.asarray(cm.is_representative, dtype=bool), np.asarray(cm.doc_stages),
        np.asarray(cm.doc_lengths), config=config, fingerprint=s(cm.fingerprint), seed=cm.seed,
        hash_scheme=s(cm.hash_scheme), build_info=build_info, metadata={s("key"): s("value")},
        created_at="2024-01-31T12:00:00Z", extras=dict(cm.extras), library_version=s("1.0"))
    out.save(path)


def _stats(path, *extra: str) -> str:
    r = subprocess.run([sys.executable, "-m", "diversify", "stats", str(path), *extra], capture_output=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode("utf-8")


@pytest.mark.parametrize("brk", BREAKS, ids=[f"U+{ord(b[0]):04X}{'+' if len(b) > 1 else ''}" for b in BREAKS])
def test_stats_prints_a_line_break_from_any_header_string_escaped_on_its_own_line(tmp_path, brk):
    _crafted(tmp_path / "clean.dvf", brk, hostile=False)
    _crafted(tmp_path / "h.dvf", brk)
    clean, hostile = _stats(tmp_path / "clean.dvf"), _stats(tmp_path / "h.dvf")
    # str.splitlines() splits on every break above: what a terminal or a log reader may treat as a line
    lines = hostile.splitlines()
    assert len(lines) == len(clean.splitlines()), hostile
    assert not any(line.startswith(FORGED) for line in lines), hostile
    for ch in set(brk):
        assert ch not in hostile.replace("\n", "") and hostile.count("\n") == len(lines)
    escaped = "\\x0d\\x0a" if brk == "\r\n" else "".join(f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                                                          for c in brk)
    assert f"by diversify 1.0{escaped}{FORGED}" in hostile  # library_version: shown, escaped
    assert f"d0{escaped}{FORGED}" in hostile  # ids
    assert f"key{escaped}{FORGED}=value{escaped}{FORGED}" in hostile  # metadata


@pytest.mark.parametrize("brk", ["\n", "\x85", "\u2028", "\r"])
def test_stats_json_stays_valid_one_value_per_key(tmp_path, brk):
    _crafted(tmp_path / "h.dvf", brk)
    out = _stats(tmp_path / "h.dvf", "--json")
    assert not any(line.lstrip().startswith(FORGED) for line in out.splitlines())
    info = json.loads(out)
    assert info["library_version"] == f"1.0{brk}{FORGED}"
    assert info["metadata"] == {f"key{brk}{FORGED}": f"value{brk}{FORGED}"}


def test_index_output_escapes_line_breaks_as_valid_json(tmp_path, capsys):
    from diversify.cli.main import main

    url = f"sqlite:///{tmp_path}/i.db"
    ids = [f"a{b}{FORGED}" for b in BREAKS] + ["nbsp\xa0id", "soft\xadhyphen", "bidi\u202eid", "tag\U000e0001id"]
    corpus = tmp_path / "c.jsonl"
    words = _texts()[0].split()
    with open(corpus, "w", encoding="utf-8") as f:
        for i, doc_id in enumerate(ids):
            f.write(json.dumps({"id": doc_id, "text": " ".join(words[i % 5:] + [f"w{i}"] * 20)}) + "\n")
    for argv in (["index", "add", url, str(corpus)], ["index", "query", url, str(corpus)]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        lines = out.splitlines()  # every Unicode line break counts
        assert len(lines) == len(ids), out
        got = [json.loads(line) for line in lines]  # valid JSON: no \x85-style escapes
        assert [g["id"] for g in got] == ids
        assert all(line.isprintable() for line in lines)
    assert main(["index", "stats", url]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
