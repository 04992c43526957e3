"""What the Dask scheduler receives during a build, on a real LocalCluster with two worker processes.

A scheduler plugin records every task the client submits (its pickled spec: the graph the
scheduler holds), and the scheduler's ``gather`` and ``scatter`` handlers are wrapped to record the
bytes that pass through it. Oracles: the corpus's own texts (no slice of one may appear in
anything the scheduler holds or relays), and the same build at two corpus sizes over the same
number of input partitions (the graph must not grow with the documents).
"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from diversify.config import BuildConfig  # noqa: E402
from diversify.corpus.datagen import generate_corpus  # noqa: E402
from diversify.engines.dask import build_dask  # noqa: E402


class Watch(distributed.diagnostics.plugin.SchedulerPlugin):
    """Every task spec the scheduler is given, and the data it relays for gathers and scatters."""

    name = "diversify-watch"

    def __init__(self) -> None:
        self.needles: list[bytes] = []
        self.reset()

    def reset(self) -> None:
        self.seen: set = set()  # the keys of the graph: a future that later graphs depend on is touched again
        self.spec_bytes = 0
        self.largest_spec = 0
        self.relayed = 0  # bytes of results and scattered data the scheduler passed on
        self.hits: list[str] = []

    def _look(self, what: str, blob: bytes) -> None:
        for n in self.needles:
            if n in blob:
                self.hits.append(f"{what}: {n[:30]!r}...")
                return

    def update_graph(self, scheduler, *, client, keys, tasks, annotations, priority, stimulus_id, **kwargs):
        for k in tasks:
            ts = scheduler.tasks.get(k)
            if ts is None or ts.run_spec is None or k in self.seen:
                continue
            blob = _bytes(ts.run_spec)
            self.seen.add(k)
            self.spec_bytes += len(blob)
            self.largest_spec = max(self.largest_spec, len(blob))
            self._look(f"task {k!r}", blob)

    @property
    def tasks(self) -> int:
        """Distinct tasks of the graph the scheduler was given."""
        return len(self.seen)

    def relay(self, what: str, data) -> None:
        blob = _bytes(data)
        self.relayed += len(blob)
        self._look(what, blob)


def _bytes(obj) -> bytes:
    import cloudpickle

    try:
        return cloudpickle.dumps(obj, protocol=5)
    except Exception as exc:  # a spec that cannot be pickled here is reported, not skipped
        raise AssertionError(f"cannot measure {type(obj).__name__}: {exc}") from exc


@pytest.fixture(scope="module")
def watch(client):
    sched = client.cluster.scheduler  # a LocalCluster's scheduler runs in this process
    w = Watch()
    sched.add_plugin(w)
    gather, scatter = sched.handlers["gather"], sched.handlers["scatter"]

    async def spy_gather(*args, **kwargs):
        out = await gather(*args, **kwargs)
        w.relay("gather", out)
        return out

    async def spy_scatter(*args, **kwargs):
        w.relay("scatter", kwargs.get("data", args[0] if args else None))
        return await scatter(*args, **kwargs)

    sched.handlers["gather"], sched.handlers["scatter"] = spy_gather, spy_scatter
    yield w
    sched.handlers["gather"], sched.handlers["scatter"] = gather, scatter
    sched.remove_plugin(name=w.name)


def _corpus(n: int, seed: int) -> list[str]:
    c = generate_corpus(n, words_per_doc=60, dup_fraction=0.3, edit_rate=(0.0, 0.02), seed=seed)
    return list(c.texts)


def _needles(texts: list[str]) -> list[bytes]:
    """Slices of 48 characters from texts spread over the corpus (any of them would show a text)."""
    picks = np.linspace(0, len(texts) - 1, 24).astype(int)
    return [texts[i][5:53].encode() for i in picks if len(texts[i]) > 60]


def _jsonl(tmp_path, name: str, texts: list[str], files: int) -> str:
    d = tmp_path / name
    d.mkdir()
    bounds = np.linspace(0, len(texts), files + 1).astype(int)
    for f in range(files):
        with open(d / f"part-{f}.jsonl", "w", encoding="utf-8") as out:
            for i in range(bounds[f], bounds[f + 1]):
                out.write(json.dumps({"id": f"d{i}", "text": texts[i]}) + "\n")
    return str(d / "*.jsonl")


@pytest.mark.parametrize("clustering, verify", [("clique", "auto"), ("star", "estimate")])
def test_no_text_reaches_the_scheduler(client, watch, tmp_path, clustering, verify):
    texts = _corpus(3000, seed=7)
    cfg = BuildConfig(clustering=clustering, minhash={"verify": verify})
    watch.needles = _needles(texts)
    assert len(watch.needles) >= 20
    for source, kwargs in ((_jsonl(tmp_path, "files", texts, 3), {"id_field": "id"}),
                           (texts, {"npartitions": 3})):
        watch.reset()
        res = build_dask(source, config=cfg, client=client, output_dir=str(tmp_path / f"out{type(source).__name__}"),
                         **kwargs)
        assert res.n_clusters < len(texts) - 300, "the corpus must have components to cut"
        assert watch.tasks > 20, "the plugin must see the build's graph"
        assert not watch.hits, f"texts reached the scheduler: {watch.hits[:3]}"
        # results go from the workers to the client directly; only the scheduler's own answers remain
        assert watch.relayed == 0, f"{watch.relayed} bytes of data passed through the scheduler"
        assert watch.largest_spec < 64 * 1024, f"a task spec of {watch.largest_spec} bytes: data in the graph?"


def test_the_graph_grows_with_partitions_not_documents(client, watch, tmp_path):
    """The same partitions at two corpus sizes (3x the documents): the same tasks, and spec bytes that
    differ by less than the purity sample's bound (its at most 1,000 pairs travel in the check tasks
    as 3 int64 each: a constant, not a function of the corpus)."""
    seen = []
    for n in (2000, 6000):
        texts = _corpus(n, seed=n)
        watch.needles = _needles(texts)
        watch.reset()
        build_dask(_jsonl(tmp_path, f"n{n}", texts, 4), client=client, output_dir=str(tmp_path / f"o{n}"))
        assert not watch.hits, watch.hits[:3]
        seen.append((watch.tasks, watch.spec_bytes))
    (t1, b1), (t2, b2) = seen
    assert t1 == t2, f"tasks {t1} at 2,000 documents, {t2} at 6,000 over the same 4 partitions"
    assert abs(b2 - b1) < 1000 * 3 * 8 + 4096, f"task specs of {b1} bytes at 2,000 documents, {b2} at 6,000"
    assert b2 < 1024 * t2, f"{b2} bytes of task specs for {t2} tasks: data in the graph?"
    more = []
    for files in (4, 8):
        texts = _corpus(4000, seed=3)
        watch.reset()
        build_dask(_jsonl(tmp_path, f"f{files}", texts, files), client=client, output_dir=str(tmp_path / f"of{files}"))
        more.append(watch.tasks)
    assert more[1] > more[0], "twice the partitions must add tasks"
    assert more[1] <= 3 * more[0], f"tasks {more}: more than linear in the partitions"


def test_pickled_results_are_what_the_spy_measures():
    """The measure itself: bytes of a result the size of its payload; a needle found in it."""
    w = Watch()
    w.needles = [b"a needle of text"]
    w.relay("gather", {"k": "a needle of text and more"})
    assert w.hits and 20 < w.relayed < 200
    w.reset()
    w.relay("gather", {"k": np.zeros(10_000)})
    assert not w.hits and w.relayed > 80_000
    assert len(pickle.dumps("x" * 1000)) > 1000


class Placement(distributed.diagnostics.plugin.SchedulerPlugin):
    """Where each task of a build finished, its worker restrictions and its scheduling priority."""

    name = "diversify-placement"

    def __init__(self, scheduler) -> None:
        self.scheduler = scheduler
        self.done: dict = {}  # key -> (worker, restrictions, loose, priority)

    def transition(self, key, start, finish, *args, **kwargs):
        if finish != "memory":
            return
        ts = self.scheduler.tasks.get(key)
        if ts is not None and ts.who_has:
            worker = next(iter(ts.who_has)).address
            self.done[key] = (worker, set(ts.worker_restrictions or ()), bool(ts.loose_restrictions), ts.priority)


def _prefix(key) -> str:
    return distributed.utils.key_split(key)


def test_shuffle_receivers_are_spread_and_splits_are_read_first(client, tmp_path, monkeypatch):
    """Each receiving task of a shuffle (it reads a piece of every split) is meant for worker
    j mod w, loosely (another worker may take it); the cut partitions run on every worker. The
    ``getitem`` tasks that take pieces out of a split come before every other task."""
    from diversify.engines.dask import cut
    from diversify.engines.dask.run import PIECE_PRIORITY

    monkeypatch.setattr(cut, "CUT_PARTITION_BYTES", 1 << 19)  # several cut partitions at this size
    sched = client.cluster.scheduler
    plugin = Placement(sched)
    sched.add_plugin(plugin)
    try:
        texts = _corpus(4000, seed=11)
        res = build_dask(_jsonl(tmp_path, "spread", texts, 4), client=client, output_dir=str(tmp_path / "o"))
    finally:
        sched.remove_plugin(name=plugin.name)
    workers = sorted(sched.workers)
    assert len(workers) == 2 and res.stats["dask"]["cut_partitions"] >= 4, res.stats["dask"]
    by_prefix: dict = {}
    for key, got in plugin.done.items():
        by_prefix.setdefault(_prefix(key), []).append(got)
    for name in ("cut_partition", "scan_partition", "exact_edges", "shared_keys"):
        ran = by_prefix.get(name, [])
        assert ran, f"no {name} task seen: {sorted(by_prefix)}"
        meant = [r[1] for r in ran]
        assert all(len(m) == 1 and r[2] for m, r in zip(meant, ran)), f"{name}: restrictions {meant}"
        if len(ran) >= len(workers):
            assert set().union(*meant) == set(workers), f"{name} meant for {meant}, workers {workers}"
    assert {r[0] for r in by_prefix["cut_partition"]} == set(workers), "every worker must cut some partitions"
    pieces = by_prefix.get("getitem", [])
    others = [r[3] for p, rs in by_prefix.items() if p != "getitem" for r in rs]
    assert len(pieces) > 50, "the shuffles' pieces must be seen"
    assert all(r[3][0] == -PIECE_PRIORITY for r in pieces), {r[3] for r in pieces}
    assert max(r[3] for r in pieces) < min(others), "a piece's priority must come before every other task's"
