"""Hardening of the online wrapper: fail-open policy (``on_error``) and hot reload under load."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from diversify.artifact import ClusterMap, load
from diversify.errors import ArtifactError, ArtifactNotFoundError, ConfigError, InputTypeError
from diversify.online import Diversifier

IDS = list(range(40))


def cluster_map(groups, *, fingerprint: str) -> ClusterMap:
    """A real ClusterMap over IDS where equal ``groups`` labels share a cluster (id = first member)."""
    first: dict = {}
    cids = np.empty(len(IDS), np.int64)
    rep = np.zeros(len(IDS), bool)
    for j, g in enumerate(groups):
        if g not in first:
            first[g] = j
            rep[j] = True
        cids[j] = first[g]
    return ClusterMap.from_arrays(
        IDS, cids, rep, np.where(rep, 0, 2).astype(np.uint8), np.zeros(len(IDS), np.uint32),
        config={}, fingerprint=fingerprint, seed=1, hash_scheme="test", build_info={},
        created_at="2026-01-01T00:00:00Z",
    )


# A pairs (0,1),(2,3)...; B pairs (1,2),(3,4)...: any mix of the two in one answer is detectable.
GROUPS_A = [i // 2 for i in IDS]
GROUPS_B = [(i + 1) // 2 for i in IDS]


def oracle(groups, k):
    seen, out = set(), []
    for i in IDS:
        if groups[i] not in seen:
            seen.add(groups[i])
            out.append(i)
        if len(out) == k:
            break
    return out


EXPECT = {"A": oracle(GROUPS_A, 10), "B": oracle(GROUPS_B, 10)}
UNDIVERSIFIED = IDS[:10]


def search(query, k, exclude_ids):
    ex = set(exclude_ids)
    return [(i, 1.0 - i / 100) for i in IDS if i not in ex][:k]


@pytest.fixture()
def paths(tmp_path):
    a, b = tmp_path / "a.dvf", tmp_path / "b.dvf"
    cluster_map(GROUPS_A, fingerprint="A").save(a)
    cluster_map(GROUPS_B, fingerprint="B").save(b)
    bad = tmp_path / "bad.dvf"
    data = a.read_bytes()
    bad.write_bytes(data[: len(data) // 2])  # truncated
    return {"A": a, "B": b, "bad": bad, "missing": tmp_path / "missing.dvf"}


def warnings_of(caplog):
    return [r for r in caplog.records if r.name == "diversify" and r.levelno == logging.WARNING]


# ---------------------------------------------------------------------- fail-open: startup


def test_on_error_is_validated():
    with pytest.raises(ConfigError, match=r"`on_error` must be one of .*got on_error='ignore'"):
        Diversifier(None, on_error="ignore")


@pytest.mark.parametrize("which", ["missing", "bad"])
def test_raise_policy_fails_fast_at_startup(paths, which):
    expected = ArtifactNotFoundError if which == "missing" else ArtifactError
    with pytest.raises(expected):
        Diversifier(paths[which], k=10)


@pytest.mark.parametrize("policy", ["last_good", "passthrough"])
@pytest.mark.parametrize("which", ["missing", "bad"])
def test_fail_open_at_startup_serves_undiversified(paths, caplog, policy, which):
    caplog.set_level(logging.WARNING, logger="diversify")
    d = Diversifier(paths[which], k=10, fetch_k=10, on_error=policy)
    res = d.wrap(search)("q")
    assert res.ids == UNDIVERSIFIED, "no artifact ever loaded: every hit is its own cluster"
    s = d.stats()
    assert s["load_errors"] == 1 and s["serving"] == "passthrough" and s["degraded_queries"] == 1, s
    assert "ArtifactNotFoundError" in s["last_error"] if which == "missing" else "ArtifactError" in s["last_error"]
    (rec,) = warnings_of(caplog)
    assert "at startup" in rec.getMessage() and policy in rec.getMessage()
    # a later good reload recovers
    assert d.reload(paths["A"]) == 1
    assert d.wrap(search)("q").ids == EXPECT["A"]
    assert d.stats()["serving"] == "artifact" and d.stats()["degraded_queries"] == 1


def test_wrong_cluster_map_type_raises_under_every_policy():
    for policy in ("raise", "last_good", "passthrough"):
        with pytest.raises(InputTypeError, match="cluster_map"):
            Diversifier(3.5, on_error=policy)


# ---------------------------------------------------------------------- fail-open: reload


HOSTILE = Path(__file__).resolve().parents[1] / "hostile"


@pytest.mark.parametrize("fixture", ["trunc-array-lookup-key.dvf", "crc-lookup-key.dvf", "msgpack-recursion-bomb-100k.dvf",
                                     "dtype-list.dvf", "header-len-u64-max.dvf", "table-4097-arrays.dvf"])
def test_last_good_survives_hostile_artifacts_on_reload(paths, fixture, caplog):
    """Whatever a hostile file makes the reader raise (even a reader bug), reload fails open."""
    caplog.set_level(logging.WARNING, logger="diversify")
    d = Diversifier(paths["A"], k=10, fetch_k=10, on_error="last_good")
    assert d.reload(HOSTILE / fixture) == 0
    assert d.wrap(search)("q").ids == EXPECT["A"]
    assert d.stats()["load_errors"] == 1 and len(warnings_of(caplog)) == 1
    d2 = Diversifier(HOSTILE / fixture, k=10, fetch_k=10, on_error="passthrough")
    assert d2.wrap(search)("q").ids == UNDIVERSIFIED and d2.stats()["serving"] == "passthrough"


def test_raise_policy_reload_keeps_old_and_counts(paths):
    d = Diversifier(paths["A"], k=10, fetch_k=10)
    with pytest.raises(ArtifactError, match="truncated"):
        d.reload(paths["bad"])
    assert d.generation == 0 and d.wrap(search)("q").ids == EXPECT["A"]
    assert d.stats()["load_errors"] == 1 and d.stats()["serving"] == "artifact"


@pytest.mark.parametrize("which", ["missing", "bad"])
def test_last_good_reload_failure_keeps_serving_old(paths, caplog, which):
    caplog.set_level(logging.WARNING, logger="diversify")
    d = Diversifier(paths["A"], k=10, fetch_k=10, on_error="last_good")
    assert d.reload(paths["B"]) == 1
    assert d.reload(paths[which]) == 1, "a failed reload returns the generation still serving"
    res = d.wrap(search)("q")
    assert res.ids == EXPECT["B"] and res.generation == 1
    s = d.stats()
    assert (s["load_errors"], s["reloads"], s["serving"], s["degraded_queries"]) == (1, 1, "artifact", 0), s
    (rec,) = warnings_of(caplog)
    assert "on reload" in rec.getMessage() and "last good" in rec.getMessage()


def test_passthrough_reload_failure_serves_undiversified_until_recovery(paths, caplog):
    caplog.set_level(logging.WARNING, logger="diversify")
    d = Diversifier(paths["A"], k=10, fetch_k=10, on_error="passthrough")
    assert d.reload(paths["bad"]) == 1
    assert d.wrap(search)("q").ids == UNDIVERSIFIED
    assert d.stats()["serving"] == "passthrough" and d.stats()["degraded_queries"] == 1
    assert d.reload(paths["B"]) == 2
    assert d.wrap(search)("q").ids == EXPECT["B"]
    assert d.stats()["serving"] == "artifact" and d.stats()["load_errors"] == 1
    assert len(warnings_of(caplog)) == 1


# ---------------------------------------------------------------------- fail-open: query path


class BrokenLookup:
    """An artifact whose lookup fails at query time (e.g. a lazily verified array fails its checksum)."""

    fingerprint = "broken"

    def __init__(self, exc):
        self.exc = exc
        self.calls = 0

    def lookup(self, ids):
        self.calls += 1
        raise self.exc

    def members(self, cluster_id):
        raise self.exc


@pytest.mark.parametrize("exc", [ArtifactError("array 'lookup/key' fails its checksum"), RuntimeError("boom"),
                                 MemoryError()])
def test_query_time_lookup_failure_fails_open(caplog, exc):
    caplog.set_level(logging.DEBUG, logger="diversify")
    broken = BrokenLookup(exc)
    d = Diversifier(broken, k=10, fetch_k=10, on_error="last_good")
    w = d.wrap(search)
    for _ in range(3):
        assert w("q").ids == UNDIVERSIFIED
    s = d.stats()
    assert s["lookup_errors"] == broken.calls >= 3 and s["queries"] == 3, s
    assert len(warnings_of(caplog)) == 1, "one WARNING per generation, then DEBUG"
    assert d.select_items([{"id": 0}, {"id": 1}], k=2).ids == [0, 1]


def test_query_time_lookup_failure_raises_when_asked():
    d = Diversifier(BrokenLookup(ArtifactError("bad array")), k=10, fetch_k=10, on_error="raise")
    with pytest.raises(ArtifactError, match="bad array"):
        d.wrap(search)("q")


def test_async_wrapper_fails_open(paths):
    d = Diversifier(paths["missing"], k=10, fetch_k=10, on_error="last_good")

    async def asearch(query, k, exclude_ids):
        return search(query, k, exclude_ids)

    res = asyncio.run(d.awrap(asearch)("q"))
    assert res.ids == UNDIVERSIFIED and d.stats()["load_errors"] == 1


def test_cursor_lookup_failure_fails_open():
    d = Diversifier({i: g for i, g in zip(IDS, GROUPS_A)}, k=5, fetch_k=5, on_error="last_good")
    page1 = d.wrap(search)("q")
    d.reload(BrokenLookup(OSError("EIO")))
    page2 = d.wrap(search)("q", cursor=page1.cursor)
    assert not set(page2.ids) & set(page1.ids), "the cursor still skips what page 1 showed"
    assert d.stats()["lookup_errors"] >= 1


# ---------------------------------------------------------------------- under load


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="needs /proc")
def test_hot_swap_under_eight_threads_no_torn_result_memory_flat(paths):
    """8 threads query while another reloads A/B from disk (real loads, mmap) as fast as it can.

    Every answer must equal the oracle of exactly one artifact (A and B differ in every
    answer), and that artifact must be the one its ``generation`` says; memory (tracemalloc),
    open file descriptors and memory maps must not grow.
    """
    d = Diversifier(paths["A"], k=10, fetch_k=10, max_rounds=5, on_error="raise")
    w = d.wrap(search)
    assert EXPECT["A"] != EXPECT["B"]

    def run(n_queries, n_threads=8, min_reloads=0):
        """Each worker queries ``n_queries`` times, then on until ``min_reloads`` reloads happened
        (faster queries must not make the test see fewer swaps). Returns (errors, reloads, queries)."""
        errors, stop, reloads, made = [], threading.Event(), [0], [0] * n_threads

        def reloader():  # generation g serves A when g is even, B when odd
            g = d.generation
            while not stop.is_set():
                g = d.reload(paths["B"] if g % 2 == 0 else paths["A"])
                reloads[0] += 1

        def worker(j):
            deadline = time.monotonic() + 8
            try:
                while made[j] < n_queries or (reloads[0] < min_reloads and time.monotonic() < deadline):
                    made[j] += 1
                    res = w("q")
                    want = EXPECT["AB"[res.generation % 2]]
                    if res.ids != want:
                        errors.append((res.generation, res.ids))
            except Exception as exc:  # surfaced by the assertion below
                errors.append(repr(exc))

        t = threading.Thread(target=reloader)
        ws = [threading.Thread(target=worker, args=(j,)) for j in range(n_threads)]
        t.start()
        for x in ws:
            x.start()
        for x in ws:
            x.join()
        stop.set()
        t.join()
        return errors, reloads[0], sum(made)

    def footprint():
        gc.collect()
        fds = len(os.listdir("/proc/self/fd"))
        with open("/proc/self/maps") as f:
            maps = sum(1 for line in f if str(paths["A"].parent) in line)
        return tracemalloc.get_traced_memory()[0], fds, maps

    t0 = time.perf_counter()
    errors, _, warm = run(50)  # warm-up: caches, lazy imports, thread stacks
    assert not errors, errors[:5]
    tracemalloc.start()
    try:
        mem0, fds0, maps0 = footprint()
        rss0 = _rss_kb()
        errors, n_reloads, made = run(250, min_reloads=20)
        mem1, fds1, maps1 = footprint()
        rss1 = _rss_kb()
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - t0
    assert not errors, errors[:5]
    s = d.stats()
    assert s["queries"] == warm + made and made >= 8 * 250 and n_reloads >= 20, (s, warm, made, n_reloads)
    tolerance = 2 * 1024 * 1024
    assert mem1 - mem0 < tolerance, f"traced memory grew by {mem1 - mem0} bytes over {n_reloads} reloads (limit {tolerance})"
    assert fds1 <= fds0 + 2, f"open fds {fds0} -> {fds1} over {n_reloads} reloads: a reload leaks its file"
    assert maps1 <= maps0 + 2, f"mapped artifact regions {maps0} -> {maps1}: a reload leaks its mmap"
    assert rss1 - rss0 < 64 * 1024, f"RSS grew by {rss1 - rss0} KiB over {n_reloads} reloads"
    assert elapsed < 20, f"load test took {elapsed:.1f}s (budget 20s)"


def test_reload_from_path_is_a_new_mapping_old_readers_unaffected(paths, tmp_path):
    """A query holding generation g keeps reading g's mapping while the file is replaced."""
    live = tmp_path / "live.dvf"
    live.write_bytes(paths["A"].read_bytes())
    d = Diversifier(live, k=10, fetch_k=10)
    old = d.cluster_map
    os.replace(paths["B"], live)  # what `save` does: a new inode renamed over the path
    d.reload(live)
    assert old.lookup([1]).tolist() == [0] and d.cluster_map.lookup([1]).tolist() == [1]
    assert load(live).fingerprint == "B"
