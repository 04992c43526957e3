"""A real chunked corpus from text on this machine: licence files and manual pages, split with
LangChain's ``RecursiveCharacterTextSplitter``, each chunk with an int id and a tenant.

Sources (read, never copied into the repository):

- licences: ``/usr/share/common-licenses/*``, ``/usr/share/doc/*/copyright`` and the
  ``LICENSE*`` / ``COPYING*`` files of the installed Python distributions (``*.dist-info``);
  Debian copyright files quote the GPL, Apache and MIT texts again and again, so many chunks are
  near-copies of chunks of other files;
- manual pages: ``/usr/share/man/man*/*.gz`` (raw roff, gunzipped; aliases kept).

Files are taken in a fixed pseudo-random order (SHA-256 of seed and path) until each kind has
its share of the chunks, at most ``MAX_PER_FILE`` chunks per file (so a few huge copyright files
cannot dominate). Chunks of fewer than ``MIN_WORDS`` words are dropped. The tenant of a chunk is
the SHA-256 of its source path modulo ``N_TENANTS``: all chunks of one file share a tenant, and
copies of a text in other files land in other tenants.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import os
import re
import sysconfig
from dataclasses import dataclass, field

CHUNK_SIZE, CHUNK_OVERLAP = 1000, 100
MAX_PER_FILE = 40
MIN_WORDS = 8
N_TENANTS = 4
LICENCE_SHARE = 0.6
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Chunk:
    id: int
    text: str
    source: str  # path of the file it was cut from, relative to its root
    kind: str  # "licence" or "man"
    tenant: str


@dataclass
class Corpus:
    chunks: list[Chunk]
    info: dict = field(default_factory=dict)

    @property
    def texts(self) -> list[str]:
        return [c.text for c in self.chunks]

    @property
    def ids(self) -> list[int]:
        return [c.id for c in self.chunks]

    def __len__(self) -> int:
        return len(self.chunks)


def tenant_of(source: str) -> str:
    return f"t{int(hashlib.sha256(source.encode('utf-8')).hexdigest()[:8], 16) % N_TENANTS}"


def licence_files() -> list[tuple[str, str]]:
    """(absolute path, shown name) of every licence text found here."""
    out = [(p, p.removeprefix("/usr/share/")) for p in
           sorted(glob.glob("/usr/share/common-licenses/*")) + sorted(glob.glob("/usr/share/doc/*/copyright"))]
    purelib = sysconfig.get_paths()["purelib"]
    site = set(glob.glob(os.path.join(purelib, "*.dist-info", "**", "LICEN[CS]E*"), recursive=True))
    site |= set(glob.glob(os.path.join(purelib, "*.dist-info", "**", "COPYING*"), recursive=True))
    out += [(p, "site-packages/" + os.path.relpath(p, purelib)) for p in sorted(site)]
    return [(p, name) for p, name in out if os.path.isfile(p)]


def man_files() -> list[tuple[str, str]]:
    return [(p, p.removeprefix("/usr/share/")) for p in sorted(glob.glob("/usr/share/man/man*/*.gz"))]


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        if path.endswith(".gz"):
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile):  # a dangling link or a broken file
        return None
    return raw.decode("utf-8", errors="replace")


def _ordered(files: list[tuple[str, str]], seed: int) -> list[tuple[str, str]]:
    return sorted(files, key=lambda f: hashlib.sha256(f"{seed}:{f[1]}".encode()).hexdigest())


def _take(files, kind: str, target: int, splitter, start_id: int, seed: int) -> tuple[list[Chunk], dict]:
    chunks: list[Chunk] = []
    used = unreadable = 0
    for path, name in _ordered(files, seed):
        if len(chunks) >= target:
            break
        text = _read(path)
        if text is None:
            unreadable += 1
            continue
        pieces = [t for t in splitter.split_text(text) if len(_WORD.findall(t)) >= MIN_WORDS][:MAX_PER_FILE]
        pieces = pieces[: target - len(chunks)]
        if not pieces:
            continue
        used += 1
        tenant = tenant_of(name)
        chunks += [Chunk(start_id + len(chunks) + j, t, name, kind, tenant) for j, t in enumerate(pieces)]
    info = {"files_found": len(files), "files_used": used, "unreadable": unreadable, "chunks": len(chunks)}
    return chunks, info


def build_corpus(n_chunks: int, seed: int) -> Corpus:
    """About ``n_chunks`` chunks (fewer only if the machine has less text), licences first."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
    lic, lic_info = _take(licence_files(), "licence", round(n_chunks * LICENCE_SHARE), splitter, 0, seed)
    man, man_info = _take(man_files(), "man", n_chunks - len(lic), splitter, len(lic), seed)
    chunks = lic + man
    tenants: dict[str, int] = {}
    for c in chunks:
        tenants[c.tenant] = tenants.get(c.tenant, 0) + 1
    info = {"chunks": len(chunks), "licence": lic_info, "man": man_info, "tenants": dict(sorted(tenants.items())),
            "splitter": f"langchain_text_splitters.RecursiveCharacterTextSplitter(chunk_size={CHUNK_SIZE}, "
                        f"chunk_overlap={CHUNK_OVERLAP})",
            "max_chunks_per_file": MAX_PER_FILE, "min_words_per_chunk": MIN_WORDS, "seed": seed,
            "mean_chars": round(sum(len(c.text) for c in chunks) / max(1, len(chunks)), 1)}
    return Corpus(chunks, info)
