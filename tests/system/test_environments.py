"""Environments the library runs in: read-only installs and Numba's cache; fork and threads.

Kinds: hostile environment, run for real in subprocesses over a read-only copy of the package:
as an unprivileged process (root without capabilities, whom file permissions bind like anyone;
a plain run when the suite is not root) with an unwritable home, and as root in a mount namespace
whose /tmp and /var/tmp are read-only (``docker run --read-only``: nothing writable anywhere).
Crafted cases for the private cache directory rule (docs/security.md), each with a poisoned cache
index (a pickle that writes a marker file when loaded) planted where a careless fallback would
read it. Fork and thread safety of the parallel kernels: children forked after a build (os.fork,
multiprocessing's fork context, a fork while another thread builds) build and query, threads
build at once, all compared byte for byte with the parent's build.
"""

from __future__ import annotations

import os
import pickle
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CREATED_AT = "2026-01-01T00:00:00Z"
TIMEOUT = 900  # an uncached subprocess compiles every kernel: ~25 s of CPU, minutes on a loaded box

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX permissions and fork: Linux")

# --------------------------------------------------------------------------- helpers


def _unprivileged() -> list[str]:
    """Command prefix that makes file permissions bind the child (root loses every capability)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot drop privileges")
    return ["setpriv", "--inh-caps=-all", "--bounding-set=-all"]


def _read_only(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(stat.S_IMODE(p.stat().st_mode) & ~0o222)


def _writable_again(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        if not p.is_symlink():
            p.chmod(stat.S_IMODE(p.stat().st_mode) | 0o200)


@pytest.fixture
def install(tmp_path):
    """A read-only copy of the package (no __pycache__), a read-only home and a sticky temp dir."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "diversify", site / "diversify", ignore=shutil.ignore_patterns("__pycache__"))
    home = tmp_path / "home"
    home.mkdir()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    _read_only(site)
    _read_only(home)
    yield {"site": site, "home": home, "tmp": tmp, "root": tmp_path}
    _writable_again(tmp_path)


def _env(install, **extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NUMBA_", "XDG_", "PYTHON")) and k not in ("HOME", "TMPDIR", "TEMP", "TMP")}
    env.update(HOME=str(install["home"]), TMPDIR=str(install["tmp"]), PYTHONPATH=str(install["site"]))
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _run(cmd: list[str], env: dict, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)


def _one_warning(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-4000:]}"
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected exactly one warning line on stderr, got {len(lines)}:\n{proc.stderr[-4000:]}"
    for n in needles:
        assert n in lines[0], f"{n!r} not in the warning: {lines[0]}"
    return lines[0]


#: defines and calls the two kernels of _common (compiling them costs a second or two); prints
#: where numba caches them (None: uncached), their cache hits and whether the jitted mixer equals
#: the Python one
ONE_KERNEL = textwrap.dedent("""
    import diversify.hashing as h
    from diversify._kernels import _common as c
    ok = int(c.fmix64(12345)) == h.fmix64(12345) and int(c.splitmix64(7, 3)) == int(h.splitmix64_stream(7, 4)[3])
    hits = sum(c.fmix64.stats.cache_hits.values()) + sum(c.splitmix64.stats.cache_hits.values())
    print(c.fmix64.stats.cache_path, hits, ok)
""")


def _where(proc) -> str:
    """The cache directory a child reported, as the base directory it lives under ("None": uncached):
    the kernels' index files sit in ``<base>/src-<digest of the kernel sources>/_kernels_<...>/``."""
    path = proc.stdout.split()[0]
    if path == "None":
        return path
    sources = os.path.dirname(path)
    assert os.path.basename(sources).startswith("src-"), f"no kernel-sources level in {path}"
    return os.path.dirname(sources)


def _private(install) -> Path:
    return install["tmp"] / f"diversify-numba-{os.geteuid()}"


def _index_files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*.nbi")}


class _Poison:
    """Unpickling this writes a marker file: what a planted cache index could do to the reader."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant_poison(layout: dict[str, bytes], into: Path, marker: Path) -> None:
    """Put a poisoned index wherever numba would look for one of ``layout``'s (relative paths)."""
    for rel in layout:
        p = into / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(pickle.dumps(_Poison(str(marker))))


@pytest.fixture
def index_layout(install):
    """Where numba puts the index files of _common's kernels under a cache directory (relative
    paths), found by a run with a writable NUMBA_CACHE_DIR, which also shows that a user's own
    directory is used, silently, and that no private directory is made then."""
    chosen = install["root"] / "chosen"
    chosen.mkdir()
    proc = _run([*_unprivileged(), sys.executable, "-c", ONE_KERNEL], _env(install, NUMBA_CACHE_DIR=chosen), install["root"])
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr[-3000:]
    assert _where(proc) == str(chosen) and proc.stdout.split()[1:] == ["0", "True"], proc.stdout
    layout = _index_files(chosen)
    assert len(layout) == 2, f"one index per kernel of _common expected under {chosen}: {sorted(layout)}"
    assert not _private(install).exists(), "a private directory was made although NUMBA_CACHE_DIR was usable"
    return {"layout": layout, "chosen": chosen}


# --------------------------------------------------------------------------- the cache


def test_read_only_install_without_home_caches_in_a_private_dir_then_hits_it(install):
    """Read-only package, unwritable home, writable sticky temp dir: one warning, the private
    directory (0700, ours) holds the cache, and a second process loads from it."""
    cmd = [*_unprivileged(), sys.executable, "-c", ONE_KERNEL]
    first = _run(cmd, _env(install), install["root"])
    priv = _private(install)
    _one_warning(first, "cannot write its cache", str(priv), "NUMBA_CACHE_DIR")
    assert _where(first) == str(priv) and first.stdout.split()[1:] == ["0", "True"], first.stdout
    st = priv.lstat()
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
    assert len(_index_files(priv)) == 2
    second = _run(cmd, _env(install), install["root"])
    _one_warning(second, str(priv))
    _, hits, ok = second.stdout.split()
    assert (_where(second), ok) == (str(priv), "True") and int(hits) == 2, f"second process did not load the cache: {second.stdout}"
    assert not any((install["site"] / "diversify" / "_kernels").glob("__pycache__")), "wrote into the read-only package"


UNSAFE = ["world_writable", "group_readable", "other_owner", "symlink", "regular_file", "tmp_not_sticky"]


@pytest.mark.parametrize("case", UNSAFE)
def test_unsafe_private_dir_is_never_used_and_never_read(install, index_layout, case):
    """A private directory that someone else could have written (or that is not what it seems) is
    not used at all: the kernels run uncached with one warning saying why, and a poisoned index
    planted inside is never unpickled. Control: the same poison in a directory numba does read
    fires, so the planted file is one numba would load."""
    priv = _private(install)
    marker = install["root"] / f"marker-{case}"
    if case == "tmp_not_sticky":
        install["tmp"].chmod(0o777)  # anyone may rename the private dir away and put theirs there
        priv.mkdir(mode=0o700)
        _plant_poison(index_layout["layout"], priv, marker)
        why = "not sticky"
    elif case == "symlink":
        target = install["root"] / "elsewhere"
        target.mkdir(mode=0o700)
        _plant_poison(index_layout["layout"], target, marker)
        priv.symlink_to(target)
        why = "symbolic link"
    elif case == "regular_file":
        priv.write_bytes(b"")
        why = "not a directory"
    else:
        priv.mkdir()
        _plant_poison(index_layout["layout"], priv, marker)
        if case == "world_writable":
            for p in [priv, *priv.rglob("*")]:
                p.chmod(0o777)
            why = "not 0700"
        elif case == "group_readable":
            priv.chmod(0o750)
            why = "not 0700"
        else:
            if os.geteuid() != 0:
                pytest.skip("planting a directory owned by another user needs root")
            for p in [priv, *priv.rglob("*")]:
                os.chown(p, 65534, 65534)
            priv.chmod(0o755)
            why = "owned by uid 65534"
    before = sorted(str(p) for p in priv.rglob("*")) if priv.is_dir() and not priv.is_symlink() else None
    proc = _run([*_unprivileged(), sys.executable, "-c", ONE_KERNEL], _env(install), install["root"])
    _one_warning(proc, "not safe to use", why, "uncached")
    assert proc.stdout.split() == ["None", "0", "True"], proc.stdout
    assert not marker.exists(), f"{case}: the planted cache index was unpickled"
    if before is not None:
        assert sorted(str(p) for p in priv.rglob("*")) == before, f"{case}: wrote into the unsafe directory"
    if case != "regular_file":  # control: numba itself reads whatever a chosen directory holds
        chosen = index_layout["chosen"]
        _plant_poison(index_layout["layout"], chosen, marker)
        ctl = _run([*_unprivileged(), sys.executable, "-c", ONE_KERNEL], _env(install, NUMBA_CACHE_DIR=chosen), install["root"])
        assert ctl.returncode == 0, ctl.stderr[-3000:]
        assert marker.exists(), "control: the poisoned index did not fire in a directory numba reads"


def test_unwritable_numba_cache_dir_is_respected_uncached(install):
    """A user-set NUMBA_CACHE_DIR that cannot be written: uncached with one warning naming it; no
    other place is picked (the private directory is not made although the temp dir is writable)."""
    chosen = install["root"] / "chosen_ro"
    chosen.mkdir()
    chosen.chmod(0o555)
    proc = _run([*_unprivileged(), sys.executable, "-c", ONE_KERNEL], _env(install, NUMBA_CACHE_DIR=chosen), install["root"])
    _one_warning(proc, f"NUMBA_CACHE_DIR={chosen}", "uncached")
    assert proc.stdout.split() == ["None", "0", "True"], proc.stdout
    assert not _private(install).exists()


def test_private_dir_rule_crafted_cases(tmp_path):
    """:func:`private_dir` in process, on every rule of docs/security.md."""
    from diversify._kernels._runtime import private_dir

    base = tmp_path / "t"
    base.mkdir()
    base.chmod(0o1777)
    fresh = base / "fresh"
    assert private_dir(str(fresh)) is None and stat.S_IMODE(fresh.stat().st_mode) == 0o700
    assert private_dir(str(fresh)) is None, "an existing private directory of ours is accepted again"
    loose = base / "loose"
    loose.mkdir(mode=0o700)
    loose.chmod(0o701)
    assert "not 0700" in private_dir(str(loose))
    link = base / "link"
    link.symlink_to(fresh)
    assert "symbolic link" in private_dir(str(link))
    plain = base / "plain"
    plain.write_text("")
    assert "not a directory" in private_dir(str(plain))
    open_parent = tmp_path / "open"
    open_parent.mkdir()
    open_parent.chmod(0o777)
    assert "not sticky" in private_dir(str(open_parent / "x"))
    assert not (open_parent / "x").exists(), "created a directory under an unsafe parent"
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (tmp_path / "a").chmod(0o757)
    assert "not sticky" in private_dir(str(deep / "x")), "an unsafe ancestor above the parent is refused too"
    if os.geteuid() == 0:
        theirs = base / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 65534, 65534)
        assert "owned by uid 65534" in private_dir(str(theirs))
        their_parent = tmp_path / "their_parent"
        their_parent.mkdir(mode=0o755)
        os.chown(their_parent, 65534, 65534)
        assert "owned by uid 65534" in private_dir(str(their_parent / "x"))


BUILD = textwrap.dedent("""
    import hashlib, sys
    import diversify
    from diversify.corpus.datagen import generate_corpus
    from diversify._kernels import _common
    c = generate_corpus(300, words_per_doc=60, dup_fraction=0.3, edit_rate=(0.0, 0.02), seed=3)
    res = diversify.build(c.texts, ids=c.ids, created_at=@CREATED_AT@)
    res.save(sys.argv[1])
    print(_common.fmix64.stats.cache_path, hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())
""").replace("@CREATED_AT@", repr(CREATED_AT))


def _reference_digest() -> str:
    import hashlib
    import tempfile

    import diversify
    from diversify.corpus.datagen import generate_corpus

    c = generate_corpus(300, words_per_doc=60, dup_fraction=0.3, edit_rate=(0.0, 0.02), seed=3)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ref.dvf")
        diversify.build(c.texts, ids=c.ids, created_at=CREATED_AT).save(path)
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_read_only_install_full_build_and_demo(install):
    """The whole offline path on a read-only install without a home: a build writes the same bytes
    as this process's build, then `python -m diversify demo` (warm from the private cache) exits 0;
    each process warns once."""
    out = install["root"] / "out"
    out.mkdir()
    proc = _run([*_unprivileged(), sys.executable, "-c", BUILD, str(out / "a.dvf")], _env(install), install["root"])
    _one_warning(proc, str(_private(install)))
    assert (_where(proc), proc.stdout.split()[1]) == (str(_private(install)), _reference_digest()), proc.stdout
    demo = _run([*_unprivileged(), sys.executable, "-m", "diversify", "demo", "--n", "300"], _env(install), install["root"])
    _one_warning(demo, str(_private(install)))
    assert "built in" in demo.stdout, demo.stdout[-2000:]


def test_nothing_writable_anywhere_builds_uncached(install):
    """Root in a mount namespace whose /tmp and /var/tmp are read-only (the package, the home and
    the temp dirs all live there): no cache place at all, so the build runs uncached, warns once,
    and writes (to /dev/shm) the same bytes as this process's build. The process starts in a
    writable directory (on /dev/shm), which must not become a cache place either (tempfile's last
    resort is the current directory)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a read-only mount namespace")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {probe.stderr.decode()[-200:]}")
    cwd = Path("/dev/shm") / f"diversify-env-test-{os.getpid()}"
    cwd.mkdir()
    out = cwd.with_suffix(".dvf")
    script = ('mount --make-rprivate / && for d in /tmp /var/tmp; do mount --bind $d $d && '
              'mount -o remount,bind,ro $d; done && exec "$@"')
    try:
        proc = _run(["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-c", BUILD, str(out)],
                    _env(install), cwd)
        _one_warning(proc, "no writable temporary directory", "uncached")
        assert proc.stdout.split() == ["None", _reference_digest()], proc.stdout
        assert not any(cwd.iterdir()), f"wrote into the current directory: {list(cwd.iterdir())}"
    finally:
        out.unlink(missing_ok=True)
        shutil.rmtree(cwd, ignore_errors=True)


def _user_cache(install) -> Path:
    return install["home"] / ".cache" / "diversify" / "numba"


def test_writable_install_and_home_cache_in_the_user_dir_never_in_the_package(install):
    """A writable package and a writable home (a plain `pip install .`). Numba's own rule
    put the cache in the package's `__pycache__`, which `pip uninstall` leaves behind; now it goes
    to ~/.cache/diversify/numba (each level created 0700), silently, and a second process loads it.
    XDG_CACHE_HOME, when absolute, moves it; a relative one is ignored."""
    _writable_again(install["site"])
    install["home"].chmod(0o755)
    cmd = [*_unprivileged(), sys.executable, "-c", ONE_KERNEL]
    first = _run(cmd, _env(install), install["root"])
    assert first.returncode == 0 and not first.stderr.strip(), first.stderr[-3000:]
    user = _user_cache(install)
    assert (_where(first), first.stdout.split()[1:]) == (str(user), ["0", "True"]), first.stdout
    for d in (user.parent.parent, user.parent, user):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    second = _run(cmd, _env(install), install["root"])
    assert second.returncode == 0 and second.stdout.split()[1] == "2", second.stdout
    assert not [p for p in install["site"].rglob("*") if p.suffix in (".nbi", ".nbc")], "numba wrote into the package"
    xdg = install["root"] / "xdg"
    moved = _run(cmd, _env(install, XDG_CACHE_HOME=xdg), install["root"])
    assert _where(moved) == str(xdg / "diversify" / "numba") and not moved.stderr.strip(), moved.stdout
    relative = _run(cmd, _env(install, XDG_CACHE_HOME="rel"), install["root"])
    assert _where(relative) == str(user) and not (install["root"] / "rel").exists(), relative.stdout


def test_user_dir_others_could_replace_is_never_read(install, index_layout):
    """A ~/.cache that other users may write (no sticky bit) could have had its diversify folder
    swapped for theirs: the per-user directory is refused without being read (a poisoned index
    planted in it never fires), the private temp directory takes over, one warning says why."""
    install["home"].chmod(0o755)
    cache = install["home"] / ".cache"
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    marker = install["root"] / "marker-user-dir"
    _plant_poison(index_layout["layout"], _user_cache(install), marker)
    proc = _run([*_unprivileged(), sys.executable, "-c", ONE_KERNEL], _env(install), install["root"])
    _one_warning(proc, "cannot write its cache", str(_user_cache(install)), "not sticky", str(_private(install)))
    assert _where(proc) == str(_private(install)) and proc.stdout.split()[1:] == ["0", "True"], proc.stdout
    assert not marker.exists(), "the planted cache index in the refused user directory was unpickled"


# --------------------------------------------------------------------------- fork and threads

FORK = textwrap.dedent("""
    import hashlib, multiprocessing, os, signal, sys, tempfile, threading
    import numba
    import diversify
    from diversify.corpus.datagen import generate_corpus
    from diversify.errors import ConfigError

    c = generate_corpus(400, words_per_doc=60, dup_fraction=0.3, edit_rate=(0.0, 0.02), seed=5)
    tmp = tempfile.mkdtemp()

    def build_digest(name):
        path = os.path.join(tmp, name)
        diversify.build(c.texts, ids=c.ids, created_at=@CREATED_AT@).save(path)
        return hashlib.sha256(open(path, "rb").read()).hexdigest()

    def child_work(name):
        signal.alarm(120)  # a hang fails the test instead of blocking it
        try:
            if build_digest(name) != parent:
                return 11
            cmap = diversify.load(os.path.join(tmp, name))
            if [cmap.cluster_of(i) for i in c.ids[:50]] != ref:
                return 12
            return 0
        except ConfigError as exc:
            print("ConfigError:", exc, file=sys.stderr, flush=True)
            return 13

    def mp_target(name):
        sys.exit(child_work(name))

    parent = build_digest("parent.dvf")
    ref = [diversify.load(os.path.join(tmp, "parent.dvf")).cluster_of(i) for i in c.ids[:50]]
    print("layer", numba.threading_layer(), flush=True)
    codes = []
    for k in range(2):
        pid = os.fork()
        if pid == 0:
            os._exit(child_work(f"fork{k}.dvf"))
        codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    ctx = multiprocessing.get_context("fork")
    for k in range(2):
        p = ctx.Process(target=mp_target, args=(f"mp{k}.dvf",))
        p.start()
        p.join(300)
        codes.append(p.exitcode)
    if sys.argv[1:] != ["--no-busy"]:
        # forks while another thread is inside a parallel kernel (holding the launch lock if the
        # layer needs one): a kernel of >= 0.3 s, the fork as soon as the thread is in it
        import time
        import numpy as np
        from diversify._kernels import _runtime
        from diversify._kernels.minhash import fill_minhash_classic
        a = np.arange(1, 129, dtype=np.uint64); b = np.arange(128, dtype=np.uint64)
        n = 64
        while True:
            hashes = np.arange(n * 1000, dtype=np.uint64); indptr = np.arange(0, n * 1000 + 1, 1000, dtype=np.int64)
            out = np.empty((n, 128), dtype=np.uint32)
            t0 = time.perf_counter(); fill_minhash_classic(hashes, indptr, a, b, out)
            if time.perf_counter() - t0 >= 0.3:
                break
            n *= 2
        for k in range(2):
            t = threading.Thread(target=fill_minhash_classic, args=(hashes, indptr, a, b, out))
            t.start()
            while t.is_alive() and not (_runtime._launch_lock.locked() or _runtime._concurrent):
                time.sleep(0.001)
            pid = os.fork()
            if pid == 0:
                os._exit(child_work(f"busy{k}.dvf"))
            inside = t.is_alive()
            t.join()
            codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
            print("inside", k, inside, flush=True)
    print("codes", *codes, flush=True)
""").replace("@CREATED_AT@", repr(CREATED_AT))


def _repo_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def test_children_forked_after_a_build_build_and_query():
    """Default environment: the parent builds (parallel kernels ran, so numba's threads started),
    then 2 os.fork children, 2 multiprocessing 'fork' children and 2 children forked while another
    thread of the parent is inside a parallel kernel each build and query: all exit 0, their
    artifacts equal the parent's."""
    proc = subprocess.run([sys.executable, "-c", FORK], env=_repo_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = dict(ln.split(" ", 1) for ln in proc.stdout.splitlines())
    assert lines["codes"].split() == ["0"] * 6, f"child exit codes {lines['codes']} (negative: killed by that signal)\n{proc.stderr[-3000:]}"
    assert lines["layer"] in ("tbb", "workqueue"), f"not a fork-safe layer: {lines['layer']}"
    inside = [ln for ln in proc.stdout.splitlines() if ln.startswith("inside")]
    assert inside == ["inside 0 True", "inside 1 True"], f"the forks did not happen inside a kernel: {inside}"


def test_user_chosen_gnu_openmp_is_kept_and_a_forked_child_gets_a_clear_error():
    """NUMBA_THREADING_LAYER=omp is respected in the parent; a child forked after it started would be
    killed by numba at its first parallel kernel: each of 2 os.fork and 2 multiprocessing children
    gets a ConfigError naming the fix instead."""
    from numba.np.ufunc import omppool  # noqa: F401 - the layer must exist for the case

    if getattr(omppool, "openmp_vendor", "") != "GNU":
        pytest.skip("OpenMP here is not GNU's, which is fork-safe")
    proc = subprocess.run([sys.executable, "-c", FORK, "--no-busy"], env=_repo_env(NUMBA_THREADING_LAYER="omp"),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = dict(ln.split(" ", 1) for ln in proc.stdout.splitlines())
    assert lines["layer"] == "omp"
    assert lines["codes"].split() == ["13"] * 4, f"child exit codes {lines['codes']}\n{proc.stderr[-3000:]}"
    assert proc.stderr.count("ConfigError: this process was forked") == 4, proc.stderr[-3000:]
    assert "NUMBA_THREADING_LAYER=workqueue" in proc.stderr and "'spawn'" in proc.stderr


THREADS = textwrap.dedent("""
    import hashlib, os, tempfile, threading
    import numba
    import diversify
    from diversify.corpus.datagen import generate_corpus

    c = generate_corpus(400, words_per_doc=60, dup_fraction=0.3, edit_rate=(0.0, 0.02), seed=5)
    tmp = tempfile.mkdtemp()
    def digest(name):
        path = os.path.join(tmp, name)
        diversify.build(c.texts, ids=c.ids, created_at=@CREATED_AT@).save(path)
        return hashlib.sha256(open(path, "rb").read()).hexdigest()
    got, errors = [], []
    def work(k):
        try:
            for j in range(3):
                got.append(digest(f"t{k}-{j}.dvf"))
        except BaseException as exc:
            errors.append(repr(exc))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    ref = digest("serial.dvf")
    print(numba.threading_layer(), len(got), sum(g == ref for g in got), errors)
""").replace("@CREATED_AT@", repr(CREATED_AT))


@pytest.mark.parametrize("layer", [None, "workqueue"])
def test_threads_build_at_once(layer):
    """4 threads x 3 builds at once, with diversify's default layer and with the user's
    NUMBA_THREADING_LAYER=workqueue (which aborts the process when two threads launch parallel
    work together): no abort, 12 artifacts equal to a serial build's."""
    env = _repo_env(**({"NUMBA_THREADING_LAYER": layer} if layer else {}))
    proc = subprocess.run([sys.executable, "-c", THREADS], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    name, n, same, errors = proc.stdout.split(maxsplit=3)
    assert (n, same, errors.strip()) == ("12", "12", "[]"), proc.stdout
    if layer:
        assert name == layer
