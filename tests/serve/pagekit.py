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


def chromium() -> str:
    """The headless browser: fails in CI (DIVERSIFY_CI=1) when it is missing, skips elsewhere."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("DIVERSIFY_CI"):
            pytest.fail("chromium must be installed in CI (.ci/run installs Debian's chromium)")
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
