"""Where the harness reads and writes, cache keys, logging and result files."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = HERE / ".cache"  # git-ignored: generated corpora, truth, per-run outputs, quick results
RESULTS = HERE / "results"
PLOTS = HERE / "plots"


def data_dir() -> Path:
    """The real labeled data sets: ``$DIVERSIFY_DATA``, else ``../shared/data`` next to the repository."""
    env = os.environ.get("DIVERSIFY_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def key(obj) -> str:
    """A short stable digest of a JSON-able object, the same in every process (never ``hash()``,
    which Python salts per process)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:12]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def write_json(path: Path, payload: dict) -> Path:
    """Write ``payload`` as JSON (temp file + rename, so a crash never leaves half a result)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, default=float) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)
