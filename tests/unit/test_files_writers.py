"""Writers: concurrent writers of one path, orphaned temp files, and what an output path may be.

Concurrent writers (docs/security.md, "Writes"): every write of a path holds an flock on
``<name>.lock``; ``diversify add`` holds it from the read of the artifact to the write, so
concurrent adds serialize and every batch lands; an API ``add`` result saved back onto a file that
changed since it was read raises ``WriteConflictError``. A lock is only held by a live process
(the kernel drops it when the holder dies); waiting ends in ``LockTimeoutError`` naming the holder.
Killed writers' temp files are removed by the next writer of the same target, never a live one's.

Output paths (docs/security.md, "CLI paths"): a target that is a device, FIFO, socket, directory or
symlink (to anything, or dangling) is refused by every writer, and left as it was; an output that is
one of the command's inputs (same path, relative spelling, hardlink, symlink) is refused; the output
is checked before the work starts; files are created ``0666 & ~umask``.

Processes that run concurrently are forked from one warmed-up "zygote" (as in
``test_crash_during_writes.py``) so that each round costs milliseconds, not an interpreter start.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import diversify
from diversify.artifact import load
from diversify.cli import main as cli
from diversify.corpus.export import write_export
from diversify.errors import ArtifactError, ConfigError, DiversifyError, InputError

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "fork"), reason="POSIX locks, fork, FIFOs")

CA = "2026-01-01T00:00:00Z"
ENV = dict(os.environ, NUMBA_THREADING_LAYER="workqueue", OPENBLAS_NUM_THREADS="1")


def doc(i: int, tag: str = "base") -> str:
    return f"{tag} document {i} about " + " ".join(f"{tag}{i * 13 + j}" for j in range(24))


def write_jsonl(path: Path, rows) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for i, t in rows:
            f.write(json.dumps({"id": i, "text": t}) + "\n")
    return path


def run_cli(args, cwd: Path, capsys):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        rc = cli([str(a) for a in args])
    finally:
        os.chdir(old)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def temps(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".tmp-"))


# --------------------------------------------------------------------------- zygote

ZYGOTE = r'''
import json, os, shutil, sys, time
work, mode, rounds, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.chdir(work)
import diversify
from diversify.cli.main import main
from diversify import errors
Conflict = getattr(errors, "WriteConflictError", ())   # () catches nothing
main(["add", "base.dvf", "batch0.jsonl", "-o", "warm.dvf", "--no-progress"])   # JIT warm-up
os.unlink("warm.dvf")
out = []
for r in range(rounds):
    shutil.copyfile("base.dvf", "target.dvf")
    go_r, go_w = os.pipe()
    kids = []
    for k in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            err = os.open(f"err{k}.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(err, 2)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            rc = 99
            try:
                if mode == "cli":
                    os.read(go_r, 1)                       # every child starts at once
                    rc = main(["add", "target.dvf", f"batch{k}.jsonl", "--no-progress"])
                else:                                      # api: read, wait for all reads, then write
                    res = diversify.add("target.dvf", [t for _, t in BATCHES[k]], ids=[i for i, _ in BATCHES[k]])
                    os.write(ready_w, b"x")
                    os.read(go_r, 1)
                    try:
                        res.save("target.dvf")
                        rc = 0
                    except Conflict as exc:
                        os.write(2, str(exc).encode())
                        rc = 3
            finally:
                os._exit(rc)
        kids.append(pid)
    os.close(go_r)
    if mode == "api":
        for _ in range(n):
            os.read(ready_r, 1)
    t0 = time.perf_counter()
    os.write(go_w, b"x" * n)
    os.close(go_w)
    codes = []
    deadline = time.monotonic() + 120
    for pid in kids:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                codes.append(os.waitstatus_to_exitcode(status))
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
            time.sleep(0.01)
    cm = diversify.load("target.dvf")
    ids = cm.ids if isinstance(cm.ids, list) else cm.ids.tolist()
    errs = [open(f"err{k}.txt").read() for k in range(n)]
    out.append({"codes": codes, "ids": ids, "seconds": time.perf_counter() - t0, "errors": errs,
                "leftover": sorted(p for p in os.listdir(".") if p.startswith(".tmp-") or p.endswith(".lock"))})
print(json.dumps(out))
'''

ZYGOTE_API_PRELUDE = r'''
import json as _j
BATCHES = [[(r["id"], r["text"]) for r in map(_j.loads, open(f"batch{k}.jsonl"))] for k in range(n)]
ready_r, ready_w = os.pipe()
'''


def corpus_dir(tmp_path: Path, n_batches: int, per_batch: int = 20) -> Path:
    d = tmp_path / "w"
    d.mkdir()
    write_jsonl(d / "base.jsonl", [(f"b{i}", doc(i)) for i in range(200)])
    for k in range(n_batches):
        # batch k: new documents plus a near-copy of base document k (so an add also merges)
        rows = [(f"n{k}_{i}", doc(i, f"k{k}x")) for i in range(per_batch)] + [(f"n{k}_dup", doc(k) + " tail")]
        write_jsonl(d / f"batch{k}.jsonl", rows)
    diversify.build([doc(i) for i in range(200)], ids=[f"b{i}" for i in range(200)], created_at=CA).save(d / "base.dvf")
    return d


def run_zygote(d: Path, mode: str, rounds: int, n: int) -> list[dict]:
    script = ZYGOTE if mode == "cli" else ZYGOTE.replace("out = []", ZYGOTE_API_PRELUDE + "out = []")
    p = subprocess.run([sys.executable, "-c", script, str(d), mode, str(rounds), str(n)], capture_output=True,
                       text=True, env=ENV, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def batch_ids(d: Path, k: int) -> set:
    return {json.loads(line)["id"] for line in open(d / f"batch{k}.jsonl")}


# --------------------------------------------------------------------------- class 5: concurrent writers


def test_concurrent_cli_adds_keep_every_batch(tmp_path):
    """4 `diversify add` processes of disjoint batches on one artifact at once, 10 rounds: every batch lands."""
    n, rounds = 4, 10
    d = corpus_dir(tmp_path, n)
    base = {f"b{i}" for i in range(200)}
    t0 = time.perf_counter()
    results = run_zygote(d, "cli", rounds, n)
    lost_rounds = []
    for r, res in enumerate(results):
        assert res["codes"] == [0] * n, (r, res["codes"], res["errors"])
        got = set(res["ids"])
        missing = [k for k in range(n) if not batch_ids(d, k) <= got]
        if missing or not base <= got or len(res["ids"]) != 200 + n * 21:
            lost_rounds.append((r, missing, len(res["ids"])))
        assert res["leftover"] == [], (r, res["leftover"])
        assert res["seconds"] < 120
    assert not lost_rounds, f"{len(lost_rounds)} of {rounds} rounds lost a batch (round, batches lost, docs): {lost_rounds}"
    print(f"{rounds} rounds x {n} concurrent adds: all batches kept; {time.perf_counter() - t0:.1f}s in all, "
          f"slowest round {max(r['seconds'] for r in results):.2f}s")


def test_concurrent_adds_as_separate_commands(tmp_path):
    """The same with 3 real `python -m diversify add` commands (no fork): every batch lands."""
    d = corpus_dir(tmp_path, 3)
    procs = [subprocess.Popen([sys.executable, "-m", "diversify", "add", "base.dvf", f"batch{k}.jsonl", "--no-progress"],
                              cwd=d, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for k in range(3)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errs
    got = set(load(d / "base.dvf").ids)
    assert all(batch_ids(d, k) <= got for k in range(3)) and len(got) == 200 + 3 * 21, len(got)
    assert not [p for p in d.iterdir() if p.name.endswith(".lock") or p.name.startswith(".tmp-")]


def test_api_add_save_race_exactly_one_wins(tmp_path):
    """Processes that all read one version, then all save onto it: one wins, every other gets WriteConflictError."""
    n, rounds = 3, 4
    d = corpus_dir(tmp_path, n)
    for r, res in enumerate(run_zygote(d, "api", rounds, n)):
        assert sorted(res["codes"]) == [0] + [3] * (n - 1), (r, res["codes"], res["errors"])
        winner = res["codes"].index(0)
        got = set(res["ids"])
        assert batch_ids(d, winner) <= got and len(got) == 200 + 21, (r, len(got))
        for k, code in enumerate(res["codes"]):
            if code == 3:
                assert "target.dvf" in res["errors"][k] and "changed since" in res["errors"][k]


def test_add_result_is_compare_and_swap(tmp_path):
    from diversify.errors import WriteConflictError

    d = corpus_dir(tmp_path, 2)
    p = d / "base.dvf"
    b0 = [json.loads(line) for line in open(d / "batch0.jsonl")]
    b1 = [json.loads(line) for line in open(d / "batch1.jsonl")]
    r0 = diversify.add(p, [r["text"] for r in b0], ids=[r["id"] for r in b0], created_at=CA)
    r1 = diversify.add(p, [r["text"] for r in b1], ids=[r["id"] for r in b1], created_at=CA)
    r0.save(p)
    r0.save(p)  # saving the same result again is no conflict: the file holds it
    after0 = p.read_bytes()
    with pytest.raises(WriteConflictError, match=r"base\.dvf.*changed since.*overwrite=True"):
        r1.save(p)
    with pytest.raises(WriteConflictError):
        r1.cluster_map.save(p, expect=r1.origin)
    assert p.read_bytes() == after0 and temps(d) == [] and not (d / "base.dvf.lock").exists()
    r1.save(d / "elsewhere.dvf")  # another path: no conflict
    # a writer that is not diversify, in place (same inode, new bytes): still a conflict
    r2 = diversify.add(p, ["one more text about nothing"], ids=["x1"], created_at=CA)
    with open(p, "r+b") as f:
        f.seek(40)
        f.write(b"\xff")
    with pytest.raises(WriteConflictError):
        r2.save(p)
    r0.save(p, overwrite=True)
    r3 = diversify.add(p, ["one more text about nothing"], ids=["x1"], created_at=CA)
    os.unlink(p)
    with pytest.raises(WriteConflictError, match="no longer exists"):
        r3.save(p)
    r1.save(p, overwrite=True)
    assert set(load(p).ids) >= {r["id"] for r in b1}
    # a loaded map: the write-back is guarded from the add on
    cm = load(p)
    r4 = diversify.add(cm, ["yet another text"], ids=["x2"], created_at=CA)
    r0.save(p, overwrite=True)
    with pytest.raises(WriteConflictError):
        r4.save(p)
    # ... and from its load: a change between load and add is a conflict too
    r1.save(p, overwrite=True)
    cm = load(p)
    r0.save(p, overwrite=True)
    r5 = diversify.add(cm, ["yet another text"], ids=["x3"], created_at=CA)
    with pytest.raises(WriteConflictError):
        r5.save(p)


HOLDER = r'''
import sys, time
from diversify.files import file_lock
with file_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(300)
'''


def start_holder(target: Path) -> subprocess.Popen:
    h = subprocess.Popen([sys.executable, "-c", HOLDER, str(target)], stdout=subprocess.PIPE, text=True, env=ENV)
    assert h.stdout.readline().strip() == "locked"
    return h


def test_lock_timeout_names_the_holder(tmp_path, capsys):
    from diversify.errors import LockTimeoutError

    d = corpus_dir(tmp_path, 1)
    p = d / "base.dvf"
    before = p.read_bytes()
    h = start_holder(p)
    try:
        cm = load(p)
        t0 = time.perf_counter()
        with pytest.raises(LockTimeoutError) as ei:
            cm.save(p, lock_timeout=0.3)
        took = time.perf_counter() - t0
        msg = str(ei.value)
        assert 0.3 <= took < 5, took
        assert f"pid {h.pid}" in msg and "base.dvf.lock" in msg and "lock_timeout" in msg and "0.3 s" in msg, msg
        assert isinstance(ei.value, TimeoutError) and isinstance(ei.value, DiversifyError)
        rc, out, err = run_cli(["add", "base.dvf", "batch0.jsonl", "--no-progress", "--lock-timeout", "0.2"], d, capsys)
        assert rc != 0 and err.startswith("diversify add: error: ") and err.count("\n") <= 2, err
        assert f"pid {h.pid}" in err and "--lock-timeout" in err, err
        assert p.read_bytes() == before and temps(d) == []
        for bad in (-1.0, float("nan")):
            with pytest.raises(ConfigError, match="lock_timeout"):
                cm.save(p, lock_timeout=bad)
    finally:
        h.kill()
        h.wait()


def test_lock_of_a_killed_holder_does_not_block(tmp_path):
    d = corpus_dir(tmp_path, 1)
    p = d / "base.dvf"
    cm = load(p, mmap=False)
    h = start_holder(p)
    try:
        with pytest.raises(DiversifyError):  # held: proves the lock is real
            cm.save(p, lock_timeout=0.1)
    finally:
        h.send_signal(signal.SIGKILL)
        h.wait()
    assert (d / "base.dvf.lock").exists()  # the killed holder could not remove it
    t0 = time.perf_counter()
    cm.save(p, lock_timeout=5)
    assert time.perf_counter() - t0 < 2
    assert not (d / "base.dvf.lock").exists()


# --------------------------------------------------------------------------- orphaned temp files

WRITER = r'''
import sys
from diversify.files import atomic_replace
target = sys.argv[1]
with atomic_replace(target, suffix=".dvf") as f:
    f.write(b"partial " * 100000)
    f.flush()
    print("writing", flush=True)
    line = sys.stdin.readline()          # killed here, or told to finish
    f.write(b"done")
print("finished", flush=True)
'''


def start_writer(target: Path) -> subprocess.Popen:
    w = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=ENV)
    assert w.stdout.readline().strip() == "writing"
    return w


def test_temp_files_of_killed_writers_are_removed(tmp_path):
    d = tmp_path
    target, other = d / "a.dvf", d / "b.dvf"
    cm = diversify.build([doc(i) for i in range(20)], created_at=CA).cluster_map
    cm.save(target)
    for t in (target, other):  # a killed writer of each
        w = start_writer(t)
        w.send_signal(signal.SIGKILL)
        w.wait()
    left = temps(d)
    assert len(left) == 2, left
    (d / ".tmp-abcdefgh.dvf").write_bytes(b"not ours: another naming")
    (d / "notes.txt").write_bytes(b"unrelated")
    cm.save(target)
    now = temps(d)
    assert len(now) == 2 and ".tmp-abcdefgh.dvf" in now and not set(left) <= set(now), (left, now)
    assert (d / "notes.txt").exists() and load(target).n_docs == 20
    cm.save(other)  # b.dvf's orphan goes with the next write of b.dvf
    assert temps(d) == [".tmp-abcdefgh.dvf"]
    # a writer that starts removes the orphan of the one before it, before it writes
    w = start_writer(target)
    w.send_signal(signal.SIGKILL)
    w.wait()
    w = start_writer(target)
    try:
        assert len(temps(d)) == 2  # its own and the foreign file
    finally:
        w.kill()
        w.wait()


def test_temp_file_of_a_live_writer_is_never_removed(tmp_path):
    from diversify.files import remove_orphaned_temps

    target = tmp_path / "a.dvf"
    cm = diversify.build([doc(i) for i in range(20)], created_at=CA).cluster_map
    w = start_writer(target)
    try:
        live = temps(tmp_path)
        assert len(live) == 1
        assert remove_orphaned_temps(target, ".dvf") == [] and temps(tmp_path) == live
        # even when someone deletes the lock file by hand, a second writer leaves the live temp alone
        os.unlink(tmp_path / "a.dvf.lock")
        cm.save(target)
        assert set(live) <= set(temps(tmp_path))
        w.stdin.write("go\n")
        w.stdin.flush()
        assert w.stdout.readline().strip() == "finished"
    finally:
        w.communicate(timeout=30)
    assert w.returncode == 0
    assert target.read_bytes().endswith(b"done") and temps(tmp_path) == []


# --------------------------------------------------------------------------- class 6: output targets

TARGETS = ["char-device", "fifo", "socket", "directory", "symlink-to-file", "dangling-symlink", "symlink-to-device",
           "symlink-to-directory"]


def make_target(kind: str, d: Path) -> tuple[Path, callable]:
    """Create a target of ``kind`` in ``d``; return it and a function that asserts it is unchanged."""
    t = d / "target.out"
    if kind == "char-device":
        if os.geteuid() != 0:
            # never a risk to the real device: a non-root writer cannot create files in /dev
            return Path("/dev/null"), lambda: stat.S_ISCHR(os.lstat("/dev/null").st_mode)
        os.mknod(t, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a null device of our own, not /dev/null
        return t, lambda: stat.S_ISCHR(os.lstat(t).st_mode) and os.lstat(t).st_rdev == os.makedev(1, 3)
    if kind == "fifo":
        os.mkfifo(t)
        return t, lambda: stat.S_ISFIFO(os.lstat(t).st_mode)
    if kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(t))
        s.close()
        return t, lambda: stat.S_ISSOCK(os.lstat(t).st_mode)
    if kind == "directory":
        t.mkdir()
        return t, lambda: t.is_dir() and not t.is_symlink() and not any(t.iterdir())
    real = d / "real.out"
    dest = {"symlink-to-file": real, "dangling-symlink": d / "missing.out", "symlink-to-device": Path("/dev/null"),
            "symlink-to-directory": d / "realdir"}[kind]
    if kind == "symlink-to-file":
        real.write_bytes(b"precious")
    if kind == "symlink-to-directory":
        dest.mkdir()
    t.symlink_to(dest)

    def unchanged():
        ok = t.is_symlink() and os.readlink(t) == str(dest)
        if kind == "symlink-to-file":
            ok = ok and real.read_bytes() == b"precious"
        if kind == "dangling-symlink":
            ok = ok and not dest.exists()
        if kind == "symlink-to-device":
            ok = ok and stat.S_ISCHR(os.lstat("/dev/null").st_mode)
        return ok
    return t, unchanged


@pytest.fixture()
def setup(tmp_path):
    d = tmp_path
    write_jsonl(d / "corpus.jsonl", [(f"d{i}", doc(i)) for i in range(30)])
    write_jsonl(d / "more.jsonl", [(f"m{i}", doc(i, "more")) for i in range(5)])
    diversify.build([doc(i) for i in range(30)], ids=[f"d{i}" for i in range(30)], created_at=CA).save(d / "art.dvf")
    with open(d / "pairs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text_a", "text_b", "label"])
        for i in range(12):
            w.writerow([doc(i), doc(i) + (" tail" if i % 2 else " entirely other words here and there"), i % 2])
    return d


# writer -> (function(target, dir, capsys) that writes to target and returns the raised error or CLI result)
def _api(fn):
    def run(t, d, capsys):
        with pytest.raises(DiversifyError) as ei:
            fn(t, d)
        return str(ei.value), ei.value
    return run


def _cli(args):
    def run(t, d, capsys):
        rc, out, err = run_cli([a.replace("{T}", str(t)) for a in args], d, capsys)
        assert rc == 2 and err.startswith("diversify ") and err.count("\n") == 1, (rc, out, err)
        return err, None
    return run


def _add_in_place(t, d, capsys):
    # the artifact path itself is the odd target (in-place add)
    rc, out, err = run_cli(["add", str(t), "more.jsonl", "--no-progress"], d, capsys)
    assert rc == 2 and err.count("\n") == 1, (rc, out, err)
    return err, None


WRITERS = {
    "ClusterMap.save": (_api(lambda t, d: load(d / "art.dvf").save(t)), ArtifactError, "`path`"),
    "BuildResult.save": (_api(lambda t, d: diversify.build(["a b c d e f"], created_at=CA).save(t)), ArtifactError,
                         "`path`"),
    "write_export": (_api(lambda t, d: write_export(load(d / "art.dvf"), str(t), "csv")), InputError, "`--output`"),
    "build -o": (_cli(["build", "corpus.jsonl", "-o", "{T}", "--no-progress"]), None, "`-o`"),
    "add -o": (_cli(["add", "art.dvf", "more.jsonl", "-o", "{T}", "--no-progress"]), None, "`-o`"),
    "export -o": (_cli(["export", "art.dvf", "-o", "{T}", "--format", "jsonl"]), None, "`--output`"),
    "tune --plot": (_cli(["tune", "--pairs", "pairs.csv", "--plot", "{T}"]), None, "`--plot`"),
}

KIND_WORDS = {"char-device": "character device", "fifo": "named pipe", "socket": "socket", "directory": "directory",
              "symlink-to-file": "symbolic link", "dangling-symlink": "dangling", "symlink-to-device": "character device",
              "symlink-to-directory": "symbolic link"}


@pytest.mark.parametrize("kind", TARGETS)
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_non_regular_target_is_refused_and_left_alone(writer, kind, setup, capsys):
    if writer == "tune --plot":
        pytest.importorskip("matplotlib")
    d = setup
    t, unchanged = make_target(kind, d)
    before = sorted(p.name for p in d.iterdir())
    art = (d / "art.dvf").read_bytes()
    run, cls, param = WRITERS[writer]
    msg, exc = run(t, d, capsys)
    if cls is not None:
        assert isinstance(exc, cls), type(exc)
    assert param in msg and str(t) in msg and KIND_WORDS[kind] in msg, msg
    assert unchanged(), f"{writer} changed the {kind} target"
    assert sorted(p.name for p in d.iterdir()) == before and (d / "art.dvf").read_bytes() == art


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink-to-file", "dangling-symlink", "symlink-to-device"])
def test_add_in_place_onto_a_non_regular_artifact_path(kind, setup, capsys):
    d = setup
    t, unchanged = make_target(kind, d)
    if kind == "symlink-to-file":  # a link to a real artifact: refused too (documented rule)
        (d / "real.out").write_bytes((d / "art.dvf").read_bytes())
        unchanged = lambda: t.is_symlink() and (d / "real.out").read_bytes() == (d / "art.dvf").read_bytes()  # noqa: E731
    err, _ = _add_in_place(t, d, capsys)
    assert "`artifact`" in err and KIND_WORDS[kind] in err, err
    assert unchanged()


def _same_file_variants(d: Path, name: str) -> dict[str, str]:
    os.link(d / name, d / f"hard-{name}")
    (d / f"sym-{name}").symlink_to(d / name)
    sub = d / "sub"
    sub.mkdir(exist_ok=True)
    return {"same path": name, "absolute": str(d / name), "relative": f"sub/../{name}", "hardlink": f"hard-{name}"}


# command -> (args with {OUT} and {IN}, the input file name, the flag that names the input)
SAME_FILE = {
    "build INPUT": (["build", "{IN}", "-o", "{OUT}", "--no-progress"], "corpus.jsonl", "INPUT"),
    "build --vectors": (["build", "--vectors", "{IN}", "-o", "{OUT}", "--no-progress"], "vecs.npy", "--vectors"),
    "build --ids": (["build", "--vectors", "vecs.npy", "--ids", "{IN}", "-o", "{OUT}", "--no-progress"], "ids.txt", "--ids"),
    "add INPUT": (["add", "art.dvf", "{IN}", "-o", "{OUT}", "--no-progress"], "more.jsonl", "INPUT"),
    "export": (["export", "{IN}", "-o", "{OUT}", "--format", "csv"], "art.dvf", "artifact"),
    "tune --pairs": (["tune", "--pairs", "{IN}", "--plot", "{OUT}"], "pairs.csv", "--pairs"),
}


@pytest.mark.parametrize("spelling", ["same path", "absolute", "relative", "hardlink", "input is a symlink"])
@pytest.mark.parametrize("command", sorted(SAME_FILE))
def test_output_equal_to_input_is_refused(command, spelling, setup, capsys):
    if command.startswith("tune"):
        pytest.importorskip("matplotlib")
    d = setup
    np.save(d / "vecs.npy", np.random.default_rng(0).standard_normal((30, 8)))
    (d / "ids.txt").write_text("".join(f"v{i}\n" for i in range(30)))
    args, name, flag = SAME_FILE[command]
    variants = _same_file_variants(d, name)
    src = name
    if spelling == "input is a symlink":  # the command reads through a link to the file it would write
        src, out = f"sym-{name}", name
    else:
        out = variants[spelling]
    before = (d / name).read_bytes()
    rc, o, err = run_cli([a.replace("{IN}", src).replace("{OUT}", out) for a in args], d, capsys)
    assert rc == 2 and err.count("\n") == 1, (rc, o, err)
    assert "same file as" in err and flag in err, err
    assert (d / name).read_bytes() == before


def test_output_is_checked_before_the_input_is_read(setup, capsys):
    """A bad -o fails first: the input's bad last record (which a build reads first) is never reached."""
    d = setup
    with open(d / "corpus.jsonl", "a") as f:
        f.write("{not json\n")
    for target in ("no-such-dir/x.dvf", "corpus.jsonl/x.dvf"):
        rc, _, err = run_cli(["build", "corpus.jsonl", "-o", target, "--no-progress"], d, capsys)
        assert rc == 2 and "`-o`" in err and "not valid JSON" not in err, err
    os.mkfifo(d / "p.dvf")
    rc, _, err = run_cli(["build", "corpus.jsonl", "-o", "p.dvf", "--no-progress"], d, capsys)
    assert rc == 2 and "named pipe" in err, err
    rc, _, err = run_cli(["add", "art.dvf", "corpus.jsonl", "-o", "p.dvf", "--no-progress"], d, capsys)
    assert rc == 2 and "named pipe" in err, err


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_written_files_get_normal_permissions(umask, setup, capsys):
    d = setup
    old = os.umask(umask)
    try:
        load(d / "art.dvf").save(d / "new.dvf")
        rc, _, err = run_cli(["export", "art.dvf", "-o", "new.csv"], d, capsys)
        assert rc == 0, err
        rc, _, err = run_cli(["build", "corpus.jsonl", "-o", "cli.dvf", "--no-progress"], d, capsys)
        assert rc == 0, err
    finally:
        os.umask(old)
    for name in ("new.dvf", "new.csv", "cli.dvf"):
        assert stat.S_IMODE(os.stat(d / name).st_mode) == 0o666 & ~umask, (name, oct(os.stat(d / name).st_mode))


def test_replacing_a_file_keeps_its_permissions(setup, capsys):
    d = setup
    os.chmod(d / "art.dvf", 0o640)
    os.link(d / "art.dvf", d / "hard.dvf")
    # add onto its own artifact through a hardlink is an in-place add (allowed), and keeps the mode
    rc, _, err = run_cli(["add", "art.dvf", "more.jsonl", "-o", "hard.dvf", "--no-progress"], d, capsys)
    assert rc == 0, err
    assert load(d / "hard.dvf").n_docs == 35 and stat.S_IMODE(os.stat(d / "hard.dvf").st_mode) == 0o640
    for mode in (0o600, 0o664, 0o444):
        os.chmod(d / "art.dvf", mode)
        load(d / "art.dvf").save(d / "art.dvf")
        assert stat.S_IMODE(os.stat(d / "art.dvf").st_mode) == mode
