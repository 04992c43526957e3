"""What a build costs, as the CLI reports it (diversify/cli/clock.py), and what a fresh install
compiles (diversify/_kernels): one specialization per kernel whatever the corpus."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np

from diversify.cli import main
from diversify.cli.clock import cpu_seconds, process_age


def _corpus(path, n=60):
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(300)]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"d{i}", "text": " ".join(rng.choice(words, 40))}) + "\n")


def test_build_reports_cpu_seconds_and_verbose_breakdown(tmp_path, capsys):
    src = tmp_path / "c.jsonl"
    _corpus(src)
    assert main(["build", str(src), "-o", str(tmp_path / "a.dvf"), "--no-progress", "--verbose"]) == 0
    out = capsys.readouterr().out
    wrote = re.search(r"^wrote .* in ([0-9.]+)s \([0-9,]+ docs/s; ([0-9.]+) CPU-s user\+sys \(([0-9.]+) CPU-s per "
                      r"100k docs\)\)$", out, re.M)
    assert wrote, out
    cpu, per = float(wrote.group(2)), float(wrote.group(3))
    assert cpu > 0 and abs(per - cpu / 60 * 100_000) <= 0.01 * per + 0.01
    assert re.search(r"^process\s+.*; peak RSS [0-9,]+ MiB$", out, re.M), out
    for label in ("process", "per 100k docs", "phases", "build stages", "kernels"):
        assert re.search(rf"^{label}\s{{2,}}\S", out, re.M), (label, out)
    # a JSONL file is read while the build sketches it (diversify.corpus.filetexts)
    assert re.search(r"^phases\s+open [0-9.]+s, read\+build [0-9.]+s, write [0-9.]+s \(CPU-s: open [0-9.]+, "
                     r"read\+build [0-9.]+, write [0-9.]+\)$", out, re.M), out
    csv = tmp_path / "c.csv"  # a CSV file is read into memory first
    csv.write_text("id,text\n" + "".join(f"c{i},words of document {i} here\n" for i in range(20)))
    capsys.readouterr()
    assert main(["build", str(csv), "-o", str(tmp_path / "b.dvf"), "--no-progress", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^phases\s+read [0-9.]+s, build [0-9.]+s, write [0-9.]+s \(CPU-s: read [0-9.]+, build [0-9.]+, "
                     r"write [0-9.]+\)$", out, re.M), out
    assert re.search(r"^kernels\s+compiled \d+ in [0-9.]+s, loaded from the numba cache in [0-9.]+s", out, re.M)


def test_add_reports_cpu_seconds(tmp_path, capsys):
    src = tmp_path / "c.jsonl"
    _corpus(src)
    art = tmp_path / "a.dvf"
    assert main(["build", str(src), "-o", str(art), "--no-progress"]) == 0
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"id": "new", "text": "a brand new document of words"}) + "\n")
    capsys.readouterr()
    assert main(["add", str(art), str(more), "--no-progress", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^wrote .* in [0-9.]+s \([0-9.]+ CPU-s user\+sys \([0-9.]+ CPU-s per 100k docs\)\)$", out, re.M)
    assert re.search(r"^phases\s+open [0-9.]+s, read\+add [0-9.]+s, write [0-9.]+s \(CPU-s: open ", out, re.M), out


def test_summary_total_counts_sketch_stages_once(tmp_path):
    import diversify

    res = diversify.build(["a b c d e f", "a b c d e f g", "x y z"])
    t = res.timings
    assert "sketch_total" in t and "encode" in t
    total = float(re.search(r"\(total ([0-9.]+)s\)", res.summary()).group(1))
    inner = sum(v for k, v in t.items() if k in ("encode", "sketch", "ids", "signatures"))
    assert abs(total - (sum(t.values()) - inner)) < 0.011, (total, t)


def test_cpu_seconds_include_finished_children():
    before = cpu_seconds()
    subprocess.run([sys.executable, "-c", "x = 0\nfor i in range(3_000_000): x += i"], check=True)
    assert cpu_seconds() - before > 0.05
    age = process_age()
    assert age is None or 0 < age < 24 * 3600


# One fresh process, empty numba cache: ASCII and non-ASCII corpora, the fused sketch path and the
# exact borderline checks (fill_sorted_unique) all run. Each kernel must come out with one signature:
# a second one (a literal argument, a writable buffer) is a second compilation on a fresh install.
SPECIALIZATIONS = textwrap.dedent("""
    import json
    from numba.core import event
    compiled, depth = [], []
    class Names(event.Listener):  # the kernels this process compiled (outermost only)
        def on_start(self, ev):
            depth.append(getattr(ev.data.get("dispatcher"), "__name__", "?"))
        def on_end(self, ev):
            name = depth.pop()
            if not depth:
                compiled.append(name)
    event.register("numba:compile", Names())
    import diversify
    from diversify._kernels.ahead import ahead_kernels
    from diversify._kernels import text as kt
    from diversify._kernels import strings as ks
    from diversify._kernels._common import sort_run, sort_unique_run
    from diversify._kernels._runtime import compile_clock
    CONFIG = dict(minhash=dict(threshold=0.5, verify="auto", borderline=0.5))
    base = " ".join(f"w{i}" for i in range(60))
    ascii_docs = [base, base + " w999", "something else entirely here"]
    # batches under strview.FOLD_FROM characters are encoded by Python: mostly ASCII (numpy fold scan,
    # NFKC pieces) and over 4 KiB of dense text (the splice kernel); larger ones are read in place
    accented = ["Ölçü " + base, "İstanbul " + base + " w999", "x …" + base]
    dense_small = ["日本語のテキスト：…" * 150]
    dense = ["Привет мир τα ελληνικά " * 80, "日本語のテキスト：… İstanbul " * 120,
             "Привет мир τα ελληνικά " * 80 + "ﬁ"]
    for docs in (ascii_docs, accented, dense_small, dense):
        diversify.build(docs, config=CONFIG)
    print(json.dumps(dict(
        sketch_oph=len(kt.sketch_oph.dispatcher.signatures),
        fill_sorted_unique=len(kt.fill_sorted_unique.dispatcher.signatures),
        count_scripts=len(kt.count_scripts.dispatcher.signatures),
        unstable_pieces=len(kt.unstable_pieces.signatures), nfkc_fold_compact=len(kt.nfkc_fold_compact.signatures),
        join_pieces=len(kt.join_pieces.signatures),
        splice_pieces=len(kt.splice_pieces.signatures), str_layouts=len(ks.str_layouts.signatures),
        fold_scan=len(ks.fold_scan.signatures), fold_write=len(ks.fold_write.signatures),
        _pass=len(kt._pass.signatures), _word_pass=len(kt._word_pass.signatures),
        sort_run=len(sort_run.signatures), sort_unique_run=len(sort_unique_run.signatures),
        compiled=compile_clock.compiled, compiled_names=compiled,
        ran_ahead=[k.__name__ for k in ahead_kernels() if k.signatures])))
""")
CONFIG = dict(minhash=dict(threshold=0.5, verify="auto", borderline=0.5))


def test_fresh_install_compiles_each_kernel_once(tmp_path):
    """...and the cold-cache helper (diversify.engines.ahead), run first into the same empty cache,
    compiles the linking kernels with the very signatures a real build calls them with: the build
    runs them, loaded from the cache, and compiles none of them itself."""
    from diversify.config import BuildConfig

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    helper = subprocess.run([sys.executable, "-m", "diversify.engines.ahead", BuildConfig(**CONFIG).model_dump_json()],
                            capture_output=True, text=True, env=env, timeout=900)
    assert helper.returncode == 0, helper.stderr[-3000:]
    got = subprocess.run([sys.executable, "-c", SPECIALIZATIONS], capture_output=True, text=True, env=env,
                         timeout=900)
    assert got.returncode == 0, got.stderr[-3000:]
    counts = json.loads(got.stdout.strip().splitlines()[-1])
    names, ran_ahead = counts.pop("compiled_names"), counts.pop("ran_ahead")
    assert counts == dict(sketch_oph=1, fill_sorted_unique=1, count_scripts=1, unstable_pieces=1,
                          nfkc_fold_compact=1, join_pieces=1, splice_pieces=1, str_layouts=1, fold_scan=1,
                          fold_write=1, _pass=1, _word_pass=1, sort_run=1, sort_unique_run=1,
                          compiled=counts["compiled"]), counts
    assert counts["compiled"] >= 3 and counts["compiled"] == len(names)  # the clock saw the compilations
    assert {"link_scan", "_scatter_top", "_sort_buckets", "roots", "clique_groups"} <= set(ran_ahead), ran_ahead  # the build ran them...
    assert not set(ran_ahead) & set(names), (ran_ahead, names)  # ...from the helper's cache entries
    assert {"_sketch_oph_docs", "_fill_sorted_unique_docs"} <= set(names)  # what the helper leaves to the command


def test_sort_run_sorts_exactly_its_range():
    from diversify._kernels._common import sort_run

    rng = np.random.default_rng(0)
    cases = {
        "random": lambda n: rng.integers(0, 2**64 - 1, n, dtype=np.uint64),
        "sorted": lambda n: np.sort(rng.integers(0, 2**64 - 1, n, dtype=np.uint64)),
        "reversed": lambda n: np.sort(rng.integers(0, 2**64 - 1, n, dtype=np.uint64))[::-1].copy(),
        "constant": lambda n: np.full(n, 7, dtype=np.uint64),
        "few values": lambda n: rng.integers(0, 3, n).astype(np.uint64),
        "organ pipe": lambda n: np.concatenate([np.arange(n // 2), np.arange(n - n // 2)[::-1]]).astype(np.uint64),
        "extremes": lambda n: rng.choice(np.array([0, 2**64 - 1, 2**63], dtype=np.uint64), n),
    }
    for name, make in cases.items():
        for n in (0, 1, 2, 3, 5, 16, 17, 100, 1001):
            x = make(n)
            a = np.concatenate([np.full(4, 11, np.uint64), x, np.full(4, 5, np.uint64)])
            sort_run(a, 4, 4 + n)
            assert np.array_equal(a[4:4 + n], np.sort(x)), (name, n)
            assert (a[:4] == 11).all() and (a[4 + n:] == 5).all(), (name, n)  # nothing outside the range moves


def test_sort_unique_run_equals_np_unique_on_every_shape_of_input():
    """The bucket sort of the exact checks' shingle sets, against np.unique: uniform hashes (the
    usual case), repeats, values whose top bits all agree (every value in one bucket: the heapsort
    fallback), runs longer than the scratch (heapsort in place) and the ends of the range."""
    from diversify._kernels._common import sort_unique_run

    rng = np.random.default_rng(1)
    top = np.uint64(0xABCD) << np.uint64(48)
    cases = {
        "uniform": lambda n: rng.integers(0, 2**64 - 1, n, dtype=np.uint64),
        "repeats": lambda n: rng.choice(rng.integers(0, 2**64 - 1, max(1, n // 5), dtype=np.uint64), n),
        "one bucket": lambda n: top | rng.integers(0, 2**20, n).astype(np.uint64),
        "two buckets": lambda n: rng.choice(np.array([top, top | np.uint64(1), np.uint64(5)], dtype=np.uint64), n),
        "sorted": lambda n: np.sort(rng.integers(0, 2**64 - 1, n, dtype=np.uint64)),
        "extremes": lambda n: rng.choice(np.array([0, 2**64 - 1, 2**63], dtype=np.uint64), n),
    }
    scratch, heads = np.empty(4096, np.uint64), np.empty(2049, np.int64)
    for name, make in cases.items():
        for n in (0, 1, 2, 47, 48, 49, 64, 100, 551, 4096, 4097, 20000):
            x = make(n)
            a = np.concatenate([np.full(3, 11, np.uint64), x, np.full(3, 5, np.uint64)])
            count = sort_unique_run(a, 3, 3 + n, scratch, heads)
            want = np.unique(x)
            assert count == want.size and np.array_equal(a[3:3 + count], want), (name, n)
            assert (a[:3] == 11).all() and (a[3 + n:] == 5).all(), (name, n)
