"""Assemble real-text JSONL corpora (fields ``id``, ``text``) from files present on this machine.

Corpora (written to the cache folder, never into the repository):

- ``manpages.jsonl``: every English manual page ``/usr/share/man/man*/*.gz`` (raw roff source,
  gunzipped, decoded as UTF-8 with replacement). Symlinked pages (aliases of another page) are
  kept: they are real exact duplicates a user's corpus would contain.
- ``licenses.jsonl``: ``/usr/share/doc/*/copyright`` plus ``/usr/share/common-licenses/*``.
- ``mixed.jsonl``: both of the above in one file (ids prefixed ``man:`` / ``lic:``).
- ``clough.jsonl``: the 100 Clough & Stevenson short answers from ``../shared/data`` (if present),
  with their human category kept beside the corpus in ``clough.labels.json``.

The quality_real suite assembles them before it measures (``python -m benchmarks run --suite
quality_real``); the index suite streams them.
"""

from __future__ import annotations

import csv
import glob
import gzip
import json
import os
from pathlib import Path

DEFAULT_CACHE = Path(os.environ.get("QUALITY_REAL_CACHE", "/tmp/quality_real_cache"))
CORPORA = ("manpages", "licenses", "mixed", "clough")


def _read(path: str) -> str:
    with open(path, "rb") as fh:
        raw = fh.read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace")


def manpages() -> tuple[list[tuple[str, str]], dict]:
    paths = sorted(glob.glob("/usr/share/man/man*/*.gz"))
    docs, failed, links = [], [], 0
    for p in paths:
        try:
            text = _read(p)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:  # a dangling link or a broken file
            failed.append(f"{p}: {exc}")
            continue
        links += os.path.islink(p)
        docs.append((p.removeprefix("/usr/share/man/"), text))
    return docs, {"files": len(paths), "docs": len(docs), "symlinks": links, "failed": failed}


def licenses() -> tuple[list[tuple[str, str]], dict]:
    paths = sorted(glob.glob("/usr/share/doc/*/copyright")) + sorted(glob.glob("/usr/share/common-licenses/*"))
    docs, failed, links = [], [], 0
    for p in paths:
        if os.path.isdir(p):
            continue
        try:
            text = _read(p)
        except OSError as exc:
            failed.append(f"{p}: {exc}")
            continue
        links += os.path.islink(p)
        docs.append((p.removeprefix("/usr/share/"), text))
    return docs, {"files": len(paths), "docs": len(docs), "symlinks": links, "failed": failed}


def clough(data: Path) -> tuple[list[tuple[str, str]], dict, dict] | None:
    folder = data / "clough_stevenson_plagiarism"
    info = folder / "file_information.csv"
    if not info.exists():
        return None
    labels = {}
    with open(info, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            labels[row["File"]] = {"task": row["Task"], "category": row["Category"]}
    docs = []
    for name in sorted(labels):
        docs.append((name, (folder / name).read_text(encoding="utf-8", errors="replace")))
    return docs, {"docs": len(docs), "source": str(folder)}, labels


def _write(path: Path, docs: list[tuple[str, str]]) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for doc_id, text in docs:
            fh.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def assemble(cache: Path = DEFAULT_CACHE, data: Path | None = None) -> dict:
    from ..paths import data_dir

    data = data_dir() if data is None else data
    if Path(__file__).resolve().parents[2] in [cache.resolve(), *cache.resolve().parents]:
        raise SystemExit(f"the cache folder {cache} is inside the repository; corpora must stay outside it")
    cache.mkdir(parents=True, exist_ok=True)
    manifest = {}
    man, man_info = manpages()
    lic, lic_info = licenses()
    _write(cache / "manpages.jsonl", man)
    _write(cache / "licenses.jsonl", lic)
    _write(cache / "mixed.jsonl", [(f"man:{i}", t) for i, t in man] + [(f"lic:{i}", t) for i, t in lic])
    manifest["manpages"] = man_info
    manifest["licenses"] = lic_info
    manifest["mixed"] = {"docs": len(man) + len(lic)}
    got = clough(data)
    if got is None:
        manifest["clough"] = {"skipped": f"{data}/clough_stevenson_plagiarism not found"}
    else:
        docs, info, labels = got
        _write(cache / "clough.jsonl", docs)
        (cache / "clough.labels.json").write_text(json.dumps(labels, indent=1))
        manifest["clough"] = info
    for name in CORPORA:
        p = cache / f"{name}.jsonl"
        if p.exists():
            manifest[name]["path"] = str(p)
            manifest[name]["bytes"] = p.stat().st_size
    (cache / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest
