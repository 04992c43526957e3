"""The cold-cache helper of the console script (diversify/engines/ahead.py): when it starts, that
it is stopped with the command, and that a build with it writes the same bytes as one without.
(That it compiles the very kernels a build then loads is tests/system/test_build_cost.py's fresh-install test.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from diversify.config import BuildConfig, MinHashConfig
from diversify.engines import ahead

CFG = BuildConfig(minhash=MinHashConfig(threshold=0.8))


@pytest.fixture
def warm_kernels():
    ahead.warm(CFG)  # runs them in this process: compiled (or loaded) here, so they are ready


def test_not_started_when_it_cannot_pay(warm_kernels, monkeypatch):
    monkeypatch.delenv(ahead.ENV, raising=False)
    assert not ahead.worth_starting(CFG)  # every kernel is ready
    monkeypatch.setenv(ahead.ENV, "1")
    assert ahead.worth_starting(CFG)  # forced
    assert not ahead.worth_starting(BuildConfig(minhash=None, simhash={}))  # no MinHash stage: not its kernels
    monkeypatch.setenv(ahead.ENV, "0")
    assert not ahead.worth_starting(CFG)


PROBE = textwrap.dedent("""
    import json, os, sys
    from diversify.engines import ahead
    from diversify.config import BuildConfig, MinHashConfig
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.8))
    worth = ahead.worth_starting(cfg)
    with ahead.compile_ahead(cfg) as proc:
        pid = proc.pid if proc is not None else None
    alive = False
    if pid is not None:
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            pass
    print(json.dumps(dict(worth=worth, pid=pid, ended=ahead.last_helper, code=proc.returncode if proc else None,
                          alive=alive)))
""")


def _probe(env):
    got = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    return json.loads(got.stdout.strip().splitlines()[-1])


def test_cold_cache_starts_a_helper_that_ends_with_the_command(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != ahead.ENV}
    out = _probe(dict(env, NUMBA_CACHE_DIR=str(tmp_path / "empty")))
    assert out["worth"] and out["pid"] is not None, out
    # the body ended at once, long before the helper could compile anything: it was stopped and reaped
    assert out["ended"] == "stopped" and out["code"] != 0 and not out["alive"], out


def test_unwritable_cache_starts_no_helper(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env = {k: v for k, v in os.environ.items() if k != ahead.ENV}
    out = _probe(dict(env, NUMBA_CACHE_DIR=str(blocker / "cache"), TMPDIR=str(blocker)))
    assert out == dict(worth=False, pid=None, ended=None, code=None, alive=False), out


def test_console_build_with_the_helper_writes_the_same_bytes(tmp_path):
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(200)]
    src = tmp_path / "c.jsonl"
    with open(src, "w", encoding="utf-8") as f:
        for i in range(80):
            text = " ".join(rng.choice(words, 50))
            f.write(json.dumps({"id": f"d{i}", "text": text}) + "\n")
            f.write(json.dumps({"id": f"e{i}", "text": text + " w7"}) + "\n")
    outs = {}
    for switch in ("1", "0"):
        env = dict(os.environ, SOURCE_DATE_EPOCH="0", **{ahead.ENV: switch})
        path = tmp_path / f"a{switch}.dvf"
        got = subprocess.run([sys.executable, "-m", "diversify", "build", str(src), "-o", str(path), "--verbose",
                              "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
        assert got.returncode == 0, got.stderr[-2000:]
        outs[switch] = got.stdout
        assert path.stat().st_size > 0
    assert "a helper process compiled the linking kernels alongside" in outs["1"], outs["1"]
    assert "helper" not in outs["0"], outs["0"]
    assert (tmp_path / "a1.dvf").read_bytes() == (tmp_path / "a0.dvf").read_bytes()


def test_warm_cache_loads_the_kernels_in_a_thread_that_ends_with_the_body(warm_kernels, monkeypatch):
    """With nothing to compile, the kernels are loaded in a thread beside the input's reading;
    the thread is joined when the body ends, and the switch turns it off."""
    import threading

    monkeypatch.delenv(ahead.ENV, raising=False)
    loads = []
    real = ahead._load
    monkeypatch.setattr(ahead, "_load", lambda cfg: loads.append(threading.current_thread().name) or real(cfg))

    def loaders():
        return [t for t in threading.enumerate() if t.name == "diversify-kernel-load"]

    with ahead.compile_ahead(CFG) as proc:
        assert proc is None
    assert loads == (["diversify-kernel-load"] if len(os.sched_getaffinity(0)) >= 2 else [])
    assert loaders() == []  # joined
    monkeypatch.setenv(ahead.ENV, "0")
    loads.clear()
    with ahead.compile_ahead(CFG):
        pass
    assert loads == []
    assert not ahead._load_beside(BuildConfig(minhash=None, simhash={}))


FOLD_PROBE = textwrap.dedent("""
    import json
    from diversify._kernels import _runtime
    from diversify._kernels import ahead as kernels_ahead
    from diversify.engines import ahead
    from diversify._kernels.fold import fold_groups
    from diversify.clusters.guarantee import _KERNEL_FROM, _KERNEL_FROM_WHILE_AHEAD, _kernel_pays
    from diversify.config import BuildConfig, MinHashConfig
    sizes = [_KERNEL_FROM - 1, _KERNEL_FROM, _KERNEL_FROM_WHILE_AHEAD - 1, _KERNEL_FROM_WHILE_AHEAD]
    out = dict(alone=[_kernel_pays(n) for n in sizes], ready_before=_runtime.kernel_ready(fold_groups))
    with ahead.compile_ahead(BuildConfig(minhash=MinHashConfig(threshold=0.8), clustering="star")) as proc:
        out["started"] = proc is not None
        out["above_bound"] = _kernel_pays(_KERNEL_FROM_WHILE_AHEAD)  # a build compiles it then: nothing to wait for
        out["awaited_above"] = kernels_ahead.awaited()
        out["with_helper"] = [_kernel_pays(n) for n in sizes[:3]]
    out["ended"] = ahead.last_helper
    out["ready_after"] = _runtime.kernel_ready(fold_groups)
    print(json.dumps(out))
""")


def test_fold_check_left_to_a_running_helper_is_waited_for(tmp_path):
    """Cold cache, a helper compiling: the cut into clusters of fewer than _KERNEL_FROM_WHILE_AHEAD
    components takes the numpy path instead of compiling the kernel the helper compiles, and the
    helper is then waited for (not stopped), so the kernel is in the cache for the next command.
    Without a helper the old bound holds (the kernel is compiled from _KERNEL_FROM components)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "empty"), **{ahead.ENV: "1"})
    got = subprocess.run([sys.executable, "-c", FOLD_PROBE], capture_output=True, text=True, env=env, timeout=900)
    assert got.returncode == 0, got.stderr[-3000:]
    out = json.loads(got.stdout.strip().splitlines()[-1])
    assert out["alone"] == [False, True, True, True] and not out["ready_before"], out
    assert out["started"] and out["above_bound"] and not out["awaited_above"], out
    assert out["with_helper"] == [False, False, False], out
    assert out["ended"] == "finished" and out["ready_after"], out
