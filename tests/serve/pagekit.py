"""What the page tests share: a corpus of planted near-duplicate families (one of them hostile), its
artifact, the page served by uvicorn on a free loopback port, and headless Chromium driven from its
command line (the DOM after the script ran, screenshots)."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import threading
import time
import types
import urllib.parse
from pathlib import Path

import pytest

#: the words the planted texts are drawn from
_WORDS = ("river stone market winter garden lantern harbor copper meadow signal orchard canvas thunder velvet "
          "compass timber glacier ember falcon marble willow beacon saddle prism tundra quarry ribbon cactus "
          "anchor violet summit pebble cobalt shadow maple crystal meteor fossil island jasmine kettle ledger "
          "mirror nectar oyster pepper quiver raven spruce tulip umber vessel walnut yonder zephyr").split()

#: text a browser would run if the page put it into the DOM as markup
HOSTILE = ("<script>document.title='pwned';document.body.setAttribute('data-pwned','script')</script>"
           "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\"> ")
HOSTILE_ID = "<b id=\"pwned-id\">bold</b>"


def _text(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(_WORDS) for _ in range(n)]


def _variant(rng: random.Random, words: list[str], changes: int) -> list[str]:
    out = list(words)
    for i in rng.sample(range(len(out)), changes):
        out[i] = out[i].upper() + "x"
    return out


def planted_records(seed: int = 7) -> list[dict]:
    """Family ``a`` (6 documents), family ``h`` (3, hostile text and one hostile id), family ``c`` (2)
    and 12 documents alone (``s-*``): the largest cluster is ``a``'s."""
    rng = random.Random(seed)
    recs = []
    base = _text(rng, 300)
    recs += [{"id": f"a-{i}", "text": " ".join(base if i == 0 else _variant(rng, base, 1))} for i in range(6)]
    hb = _text(rng, 300)
    recs.append({"id": "h-0", "text": HOSTILE + " ".join(hb)})
    recs.append({"id": HOSTILE_ID, "text": HOSTILE + " ".join(_variant(rng, hb, 1))})
    recs.append({"id": "h-2", "text": HOSTILE + " ".join(_variant(rng, hb, 1))})
    cb = _text(rng, 300)
    recs += [{"id": f"c-{i}", "text": " ".join(cb if i == 0 else _variant(rng, cb, 1))} for i in range(2)]
    recs += [{"id": f"s-{i}", "text": " ".join(_text(rng, 60)) + f" needle{i}"} for i in range(12)]
    return recs


def write_jsonl(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


def build_artifact(path: Path, recs: list[dict]):
    import diversify

    res = diversify.build([r["text"] for r in recs], ids=[r["id"] for r in recs])
    res.cluster_map.save(path)
    return diversify.load(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PageServer:
    """``Starlette(routes=page_routes(...))`` under uvicorn in a thread, serving ``snapshot``
    (a SimpleNamespace the test may change between requests)."""

    def __init__(self, **snapshot) -> None:
        import uvicorn
        from starlette.applications import Starlette

        from diversify.serve.page import page_routes

        self.snapshot = types.SimpleNamespace(cluster_map=None, index=None, corpus_path=None, generation=1)
        self.snapshot.__dict__.update(snapshot)
        self.port = free_port()
        app = Starlette(routes=page_routes(lambda: self.snapshot))
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                     lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the page server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)


def need(module: str):
    """Import ``module`` (the serve extra's starlette, uvicorn): skip without it (the fast subset
    installs ``.[test]`` only), fail under DIVERSIFY_CI=1 (CI installs it with ``integrations``)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("DIVERSIFY_CI") == "1":
            pytest.fail(f"DIVERSIFY_CI=1 but {module} is not installed: CI installs it with the integrations extra")
        pytest.skip(f"{module} is not installed (pip install diversify-retrieval[serve])", allow_module_level=True)


def chromium() -> str:
    """The headless browser: fails in CI (DIVERSIFY_CI=1) when it is missing, skips elsewhere."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("DIVERSIFY_CI") == "1":
            pytest.fail("DIVERSIFY_CI=1 but chromium is not installed: .ci/run installs Debian's chromium")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return exe


def _browser_args(exe: str, profile: Path) -> list[str]:
    return [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}", "--virtual-time-budget=8000"]


def dump_dom(exe: str, url: str, profile: Path) -> str:
    """The page's DOM once its script has run (fetches included: virtual time waits for them)."""
    out = subprocess.run([*_browser_args(exe, profile), "--dump-dom", url], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def screenshot(exe: str, url: str, path: Path, profile: Path, size: str = "1280,860") -> Path:
    out = subprocess.run([*_browser_args(exe, profile), f"--window-size={size}", f"--screenshot={path}", url],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0 and path.exists() and path.stat().st_size > 1000, out.stderr[-2000:]
    return path


def call(url: str, *, data: bytes | None = None, headers: dict | None = None) -> tuple[int, dict, dict]:
    """(status, JSON body or {}, headers by lower-case name) of one request (stdlib client: no HTTP library needed)."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, body, hdrs = r.status, r.read(), {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as exc:
        status, body, hdrs = exc.code, exc.read(), {k.lower(): v for k, v in exc.headers.items()}
    try:
        parsed = json.loads(body) if body else {}
    except ValueError:
        parsed = {"raw": body.decode("utf-8", "replace")}
    return status, parsed, hdrs


#: two texts written for the docs' screenshots, each copied with small edits (as syndicated news and
#: re-posted notices are)
_DOC_TEXTS = {
    "harbor": (
        "The city council voted on Tuesday to extend the harbor ferry service through the winter months, "
        "after a season in which ridership rose by almost a third. The extension adds two evening crossings "
        "on weekdays and one on Saturdays, and keeps the fare at its current level until the end of March. "
        "Council members said the decision followed a petition signed by more than four thousand residents "
        "of the island neighbourhoods, many of whom rely on the ferry to reach jobs and schools on the "
        "mainland. The harbor authority will review the timetable in April, when it publishes the figures "
        "for the winter service and decides whether the extra crossings should become permanent."),
    "library": (
        "The central library will close its reading rooms for renovation from the first of June until the "
        "end of September. During the closure, books can still be borrowed and returned at the temporary "
        "counter in the east wing, which opens every day from nine in the morning until six in the evening. "
        "The renovation replaces the heating system, adds quiet study rooms on the second floor and makes "
        "every entrance accessible to wheelchairs. Members who have reserved a study desk for the summer "
        "will be offered a place at one of the branch libraries instead, and the online catalogue and "
        "lending service are not affected by the works."),
}
_DOC_EDITS = {
    "harbor": [("Tuesday", "Monday"), ("almost a third", "nearly a third"), ("four thousand", "3,900"),
               ("in April", "next April"), ("two evening", "three evening")],
    "library": [("first of June", "1st of June"), ("nine in the morning", "8:30 in the morning"),
                ("second floor", "top floor")],
}


def docs_records() -> list[dict]:
    """The corpus of the docs' screenshots: each text of :data:`_DOC_TEXTS` and its edited copies,
    the hostile family of :func:`planted_records`, and documents alone."""
    recs = []
    for name, text in _DOC_TEXTS.items():
        recs.append({"id": f"{name}-wire", "text": text})
        for i, (old, new) in enumerate(_DOC_EDITS[name]):
            recs.append({"id": f"{name}-copy-{i + 1}", "text": text.replace(old, new, 1)})
    planted = planted_records()
    recs += [r for r in planted if r["id"].startswith(("h-", "<b")) or r["id"].startswith("s-")]
    return recs


def docs_screenshots(out: str | Path) -> list[Path]:
    """Write the screenshots docs/page.md shows (``python -c "from serve.pagekit import
    docs_screenshots; docs_screenshots('docs/img')"`` from tests/, with the package importable)."""
    import tempfile

    exe = chromium()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        recs = docs_records()
        corpus = write_jsonl(d / "corpus.jsonl", recs)
        cm = build_artifact(d / "docs.dvf", recs)
        srv = PageServer(cluster_map=cm, corpus_path=str(corpus))
        try:
            big = int(cm.lookup(["harbor-wire"])[0])
            views = [("page-home", "/", "1280,760"), ("page-cluster", f"/#/cluster/{big}", "1280,900"),
                     ("page-search", "/#/search?q=ferry", "1280,560"),
                     ("page-hostile", f"/#/cluster/{int(cm.lookup([HOSTILE_ID])[0])}", "1280,560")]
            paths = [screenshot(exe, srv.url + url, out / f"{name}.png", d / "profile", size)
                     for name, url, size in views]
        finally:
            srv.close()
        import diversify

        index = diversify.Index(f"sqlite:///{d / 'live.db'}")
        index.add([r["text"] for r in recs], ids=[r["id"] for r in recs])
        srv = PageServer(index=index, corpus_path=str(corpus))
        try:
            pasted = _DOC_TEXTS["library"].replace("quiet study rooms", "silent study rooms")
            url = "/#/near?" + urllib.parse.urlencode({"text": pasted})
            paths.append(screenshot(exe, srv.url + url, out / "page-near.png", d / "profile", "1280,760"))
        finally:
            srv.close()
            index.close()
    return paths
