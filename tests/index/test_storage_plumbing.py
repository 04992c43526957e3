"""Contract tests of the live index's shared storage plumbing, without a server: which module imports
which (the interface knows no backend), the Redis scripts shipped as package data, the URL
parameters diversify removes before a driver sees the URL, and the error messages the three
backends share."""

from __future__ import annotations

import ast
import pathlib
import sqlite3
import subprocess
import sys

import pytest
import tomllib

import diversify
from diversify.errors import ConfigError, StorageError

INDEX = pathlib.Path(diversify.__file__).parent / "index"
ROOT = pathlib.Path(diversify.__file__).parent.parent
BACKENDS = {"sqlite", "sqlite_checkpoint", "postgres", "redis", "redis_view", "redis_buffer", "redis_wire"}
#: the modules below the backends: they import neither a backend nor the registry
SHARED = ("storage", "urls", "records", "failures")


def _imports(module: str) -> set[str]:
    """The diversify.index modules ``module`` imports, at any depth of its code (function-level too)."""
    tree = ast.parse((INDEX / f"{module}.py").read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("diversify.index."):
            out.add(node.module.split(".")[2])
    return out


def test_importing_the_storage_interface_loads_no_backend_nor_client():
    code = ("import sys, diversify.index.storage\n"
            "print(sorted(m for m in sys.modules if m.startswith('diversify.index.') or m.split('.')[0] in "
            "('sqlite3', 'psycopg', 'redis')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = eval(out.stdout)  # a list of module names printed by the child
    assert loaded == ["diversify.index.storage"], loaded


@pytest.mark.parametrize("module", SHARED)
def test_the_shared_modules_import_no_backend_and_not_the_registry(module):
    wrong = _imports(module) & (BACKENDS | {"registry", "core"})
    assert not wrong, f"diversify/index/{module}.py imports {sorted(wrong)}: the backends import it, not vice versa"


@pytest.mark.parametrize("module", sorted(BACKENDS))
def test_backends_import_the_interface_never_the_registry(module):
    assert "registry" not in _imports(module)


def test_no_import_circle_among_the_storage_modules():
    graph = {m: _imports(m) & (BACKENDS | set(SHARED) | {"registry"}) for m in BACKENDS | set(SHARED) | {"registry"}}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph[start]:
            if nxt == goal or (nxt not in seen and (seen.add(nxt) or reaches(nxt, goal, seen))):
                return True
        return False

    circles = [m for m in graph if reaches(m, m, set())]
    assert not circles, f"import circles through {circles}: {graph}"


def test_every_lua_script_is_package_data_and_loads():
    from diversify.index import redis_wire

    files = sorted(p.stem for p in (INDEX / "lua").glob("*.lua"))
    assert files == sorted(redis_wire.SCRIPTS)
    for name in redis_wire.SCRIPTS:
        source = redis_wire.lua(name)
        assert "redis.call" in source and source == (INDEX / "lua" / f"{name}.lua").read_text(encoding="utf-8")
        assert redis_wire.lua(name) is source  # read once
    with pytest.raises(KeyError, match="no Lua script 'nope'"):
        redis_wire.lua("nope")
    # a non-editable install ships what pyproject.toml's package data lists
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["diversify"]
    shipped = {p.stem for pattern in patterns for p in (ROOT / "diversify").glob(pattern) if p.suffix == ".lua"}
    assert shipped == set(redis_wire.SCRIPTS)


def test_the_scripts_load_without_the_redis_client():
    code = ("import sys; sys.modules['redis'] = None\n"  # an installation without redis-py
            "from diversify.index import redis_wire\n"
            "print(sum(len(redis_wire.lua(n)) > 0 for n in redis_wire.SCRIPTS))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert int(out.stdout) == 7


@pytest.mark.parametrize(("url", "expected"), [
    # the unix-socket form: urlunsplit wrote postgresql:/db, which libpq refuses
    ("postgresql:///db?host=/tmp&index=a", "postgresql:///db?host=/tmp"),
    # a value is passed on as written (urlencode wrote %20 as '+', which libpq keeps as a '+')
    ("postgresql://u@h/db?password=a%20b&index=x&sslmode=require", "postgresql://u@h/db?password=a%20b&sslmode=require"),
    ("postgres://h:5432/db", "postgres://h:5432/db"),
    ("postgresql://h/db?index=only", "postgresql://h/db"),
])
def test_libpq_gets_the_url_without_our_parameters_and_otherwise_as_written(url, expected):
    pytest.importorskip("psycopg")
    from diversify.index.postgres import libpq_url

    assert libpq_url(url) == expected


def test_redis_py_gets_the_url_without_our_parameters():
    pytest.importorskip("redis")
    from diversify.index.redis import _split_url

    assert _split_url("unix:///run/r.sock?db=2&index=mine&lease=3") == ("unix:///run/r.sock?db=2", "mine", 3.0)
    assert _split_url("redis://h:6379/1") == ("redis://h:6379/1", "default", 10.0)
    with pytest.raises(ConfigError, match="`lease` parameter"):
        _split_url("redis://h/0?lease=soon&lease=5")  # every value is checked, not only the last


def test_a_driver_failure_reads_the_same_in_every_backend():
    from diversify.index.failures import ROLLED_BACK, failed, lock_timeout, storage_errors

    with pytest.raises(StorageError) as err, storage_errors("redis://u:***@h/0", "writing a batch to", rolled_back=True):
        raise ConnectionResetError("peer\n   went away.")
    assert str(err.value) == (f"writing a batch to redis://u:***@h/0 failed: ConnectionResetError: peer went away. "
                              f"{ROLLED_BACK}")
    msg = str(failed("connecting to", "postgresql://u:***@h/db", RuntimeError("bad password hunter2"),
                     secrets=["hunter2"]))
    assert "hunter2" not in msg and "bad password ***" in msg
    with pytest.raises(ZeroDivisionError), storage_errors("sqlite:///x.db", "reading"):
        raise ZeroDivisionError  # a bug of ours is not a storage failure
    with pytest.raises(sqlite3.InterfaceError), storage_errors("sqlite:///x.db", "reading",
                                                              kinds=(sqlite3.DatabaseError,)):
        raise sqlite3.InterfaceError("bad binding")
    assert str(lock_timeout("sqlite:///x.db", 0.5)) == (
        "the writer lock of sqlite:///x.db was not acquired within 0.5 s: another process is writing a long batch; "
        "nothing was written. Retry, or raise lock_timeout.")


def test_sqlite_lock_timeout_uses_the_shared_message(tmp_path):
    from diversify.index.registry import open_storage
    from diversify.index.storage import SCHEMA_VERSION, Meta, StorageOptions

    url = f"sqlite:///{tmp_path}/lock.db"
    meta = Meta(schema_version=SCHEMA_VERSION, config_json="{}", fingerprint="f" * 64, created_by="test")
    with open_storage(url) as holder, open_storage(url, StorageOptions(lock_timeout=0.2)) as waiter:
        holder.initialize(meta)
        with holder.write():
            with pytest.raises(StorageError) as err, waiter.write():
                pass
    assert str(err.value).startswith(f"the writer lock of {url} was not acquired within 0.2 s: another process")
    assert str(err.value).endswith("nothing was written. Retry, or raise lock_timeout.")


def test_meta_and_state_codecs_round_trip():
    from diversify.index.records import checked_meta, checked_state, meta_fields, state_fields
    from diversify.index.storage import Meta, State

    meta = Meta(schema_version=3, config_json='{"a": 1}', fingerprint="ab" * 32, created_by="0.9")
    assert checked_meta(meta_fields(meta), "u") == meta
    for state in (State(), State(next_seq=7, next_cluster=2, id_kind="int", layout='{"texts": true}')):
        f = state_fields(state)
        assert all(isinstance(v, str) for v in f.values())
        assert checked_state("u", f["next_seq"], f["next_cluster"], f["id_kind"], f["layout"]) == state
