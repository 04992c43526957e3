"""Hostile input to the live index, on every backend (SQLite, a real PostgreSQL and a real Redis):
every failure is a DiversifyError naming the rule, never a raw driver, ValueError or OverflowError.

The classes: storage URLs (NUL and other control characters, fragments, %-escapes, ports, paths),
cluster ids (out of int64, wrong types), the id-length limit (one rule, checked before any write),
damaged meta/state records and an ``id_kind`` record that contradicts the stored ids.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

import diversify
from diversify.errors import (
    ConfigError,
    DiversifyError,
    IncompatibleIndexError,
    InputError,
    InputTypeError,
    StorageError,
)
from diversify.ids import INDEX_ID_MAX_BYTES
from diversify.index.registry import open_storage
from index.contract import _doc, _near
from index.servers import postgres_server  # noqa: F401  (session fixture)
from index.servers_redis import redis_server  # noqa: F401  (session fixture)

BACKENDS = ["sqlite", "postgres", "redis"]


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    """(name, a function returning the URL of a new empty index, the server or None)."""
    if request.param == "sqlite":
        count = iter(range(1000))
        return "sqlite", lambda: f"sqlite:///{tmp_path}/i{next(count)}.db", None
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
        return "postgres", server.new_index, server
    server = request.getfixturevalue("redis_server")
    return "redis", server.fresh_url, server


def _filled(url: str, ids=("a", "b", "c")):
    idx = diversify.Index(url)
    idx.add([_doc(0), _near(0), _doc(1)][: len(ids)], ids=list(ids))
    return idx


# --------------------------------------------------------------------------- URLs


SQLITE_BAD = [
    ("a\x00b.db", "control characters"),
    ("a%00b.db", "control characters"),
    ("a\nb.db", "control characters"),  # urllib would drop the newline and open 'ab.db'
    ("a\tb.db", "control characters"),
    ("a\x85b.db", "control characters"),
    ("a#b.db", "fragment"),  # would open 'a'
    ("x.db#", "fragment"),
    ("a?b.db", "parameters"),  # would open 'a'
    ("a?", "query"),
    ("x.db?mode=ro", "parameters"),
    ("%ZZ.db", "%25"),
    ("100%.db", "%25"),
    ("a%FF.db", "UTF-8"),
    ("\ud800.db", "Unicode"),
    ("", "name a file"),
    ("dir/", "name a file"),
    ("dir/.", "name a file"),
    ("..", "name a file"),
    (":memory:", "name a file"),
]


@pytest.mark.parametrize("tail,why", SQLITE_BAD)
def test_sqlite_url_that_would_open_another_file_is_refused_and_creates_nothing(tmp_path, tail, why):
    before = set(os.listdir(tmp_path))
    url = f"sqlite:///{tail}" if tail == ":memory:" else f"sqlite:///{tmp_path}/{tail}"
    with pytest.raises(ConfigError, match=why) as err:
        diversify.Index(url)
    message = str(err.value)
    assert message.startswith("`url` ") and repr(url) in message  # the rule, the URL received...
    assert any(fix in message for fix in ("Use e.g.", "Write", "Remove", "Encode"))  # ...and the fix
    assert set(os.listdir(tmp_path)) == before  # no file named 'a' (or anything) was written


def test_sqlite_url_escapes_name_the_file_they_spell(tmp_path):
    for tail, name in [("a%23b.db", "a#b.db"), ("a%3Fb.db", "a?b.db"), ("100%25.db", "100%.db"),
                       ("sp%20ace.db", "sp ace.db"), ("%C3%A9.db", "\u00e9.db")]:
        diversify.Index(f"sqlite:///{tmp_path}/{tail}").close()
        assert (tmp_path / name).exists(), name


def test_sqlite_url_naming_a_directory_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        diversify.Index(f"sqlite:///{tmp_path}")


def test_server_urls_that_drivers_would_misread_are_refused(postgres_server, redis_server):  # noqa: F811
    pg, rd = postgres_server.url("postgres"), redis_server.url()
    port_pg, port_rd = str(postgres_server.port), str(redis_server.port)
    bad = [
        (pg.replace(port_pg, "99999"), "port"), (pg.replace(port_pg, "abc"), "port"), (pg.replace(port_pg, "-1"), "port"),
        (pg + "\x00", "control"), (pg.replace("/postgres", "/post\ngres"), "control"), (pg + "#x", "fragment"),
        ("postgresql://[::1/db", "parse"), ("postgresql://\ud800/db", "Unicode"),
        (f"postgresql://h1:{port_pg},h2:0/db", "port"),
        (rd.replace(port_rd, "99999"), "port"), (rd.replace(port_rd, "0"), "port"), (rd + "\x00", "control"),
        (rd.rsplit("/", 1)[0] + "/abc", "database"), (rd.rsplit("/", 1)[0] + "/3/4", "database"),
        (rd.rsplit("/", 1)[0] + "/-1", "database"), (rd + "#frag", "fragment"), ("redis://[::1", "parse"),
        ("redis://\ud800/0", "Unicode"),
    ]
    for url, why in bad:
        with pytest.raises(ConfigError, match=why) as err:
            diversify.Index(url, connect_timeout=2)
        assert postgres_server.password not in str(err.value)


def test_unix_socket_redis_url_reaches_redis_py(tmp_path):
    # redis-py used to get 'unix:/path' (urlunsplit drops the empty host) and refused the scheme
    with pytest.raises(StorageError, match="connecting to unix://"):
        open_storage(f"unix://{tmp_path}/none.sock?index=x", None)


# --------------------------------------------------------------------------- cluster ids

CLUSTER_TYPES = [True, False, 1.0, 1.5, float("nan"), "0", b"0", None, [0], np.float64(0), np.bool_(True)]
CLUSTER_OUT_OF_RANGE = [2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), np.uint64(2**63), np.uint64(2**64 - 1)]


def test_cluster_ids_follow_one_rule_on_every_backend(backend):
    _, new_url, _ = backend
    with _filled(new_url()) as idx:
        c = idx.cluster_of(["a"])[0]
        m = idx.members(c)
        assert sorted(m) == ["a", "b"] and idx.members(np.int64(c)) == m
        assert idx.members(np.int32(c)) == m and idx.members(np.uint64(c)) == m
        for unknown in (-1, 10**6, 2**63 - 1, -(2**63)):  # in range, names no cluster: empty
            assert idx.members(unknown) == []
        for x in CLUSTER_TYPES:
            with pytest.raises(InputTypeError, match="`cluster` must be an int"):
                idx.members(x)
        for x in CLUSTER_OUT_OF_RANGE:
            with pytest.raises(InputError, match="int64 range"):
                idx.members(x)
        live = idx.live_lookup(max_age=0)
        try:
            assert live.members(c) == m
            with pytest.raises(InputError, match="int64 range"):
                live.members(2**63)
            with pytest.raises(InputTypeError):
                live.members("0")
        finally:
            live.close()


# --------------------------------------------------------------------------- id length


def _random_id(nbytes: int, seed: int, wide: bool = False) -> str:
    """Incompressible text of exactly ``nbytes`` bytes of UTF-8 (PostgreSQL compresses repetitive ids)."""
    rng = random.Random(seed)
    if wide:  # 4-byte characters
        assert nbytes % 4 == 0
        return "".join(chr(rng.randrange(0x10000, 0x10FFFF)) for _ in range(nbytes // 4))
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(nbytes))


def test_id_length_limit_is_one_rule_checked_before_any_write(backend):
    _, new_url, _ = backend
    with diversify.Index(new_url()) as idx:
        longest = [_random_id(INDEX_ID_MAX_BYTES, 1), _random_id(INDEX_ID_MAX_BYTES, 2, wide=True)]
        got = idx.add([_doc(3), _doc(4)], ids=longest)  # at the limit: stored on every backend
        assert [m.id for m in got] == longest and idx.cluster_of(longest) == [m.cluster for m in got]
        before = idx.stats()["documents"]
        for too_long in (_random_id(INDEX_ID_MAX_BYTES + 1, 3), _random_id(2800, 4), _random_id(10_000, 5),
                         _random_id(INDEX_ID_MAX_BYTES + 4, 6, wide=True)):
            nbytes = len(too_long.encode())
            with pytest.raises(InputError, match=f"at most {INDEX_ID_MAX_BYTES} bytes.*got {nbytes} bytes at position 1"):
                idx.add([_doc(5), _doc(6)], ids=["fine", too_long])  # the whole batch is refused
            assert idx.stats()["documents"] == before and idx.cluster_of(["fine", too_long]) == [None, None]
            assert idx.delete([too_long]) == {"deleted": 0, "missing": [too_long], "reassigned": 0}
        assert idx.check() == []


# --------------------------------------------------------------------------- damaged records


def _corrupt(name: str, url: str, server, record: str, field: str, value) -> None:
    """Overwrite one stored field of an index behind diversify's back."""
    if name == "sqlite":
        import sqlite3

        path = url[len("sqlite:///"):]
        con = sqlite3.connect(path)
        with con:
            if value is None:
                con.execute("DELETE FROM meta WHERE k = ?", (field,))
            else:
                con.execute("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)", (field, value))
        con.close()
    elif name == "postgres":
        import psycopg
        from psycopg import sql

        from diversify.index.postgres import libpq_url

        schema = "diversify_" + url.rsplit("index=", 1)[1]
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            conn.execute(sql.SQL("UPDATE {}.meta SET {} = %s").format(sql.Identifier(schema), sql.Identifier(field)),
                         (value,))
    else:
        with open_storage(url) as st:
            key = st.p + ("meta" if record == "meta" else "state")
            if field == "*":
                st.client.delete(key)
            elif value is None:
                st.client.hdel(key, field)
            else:
                st.client.hset(key, field, value)


#: (record, field, damaged value, the exception, what its message must name); per backend below
DAMAGE = {
    "sqlite": [
        ("meta", "schema_version", "one", StorageError, "schema_version"),
        ("meta", "schema_version", "0", StorageError, "schema_version"),
        ("meta", "schema_version", "-5", StorageError, "schema_version"),
        ("meta", "schema_version", "99", IncompatibleIndexError, "schema version 99"),
        ("meta", "schema_version", b"\xff", StorageError, "schema_version"),
        ("meta", "schema_version", None, StorageError, "schema_version"),
        ("meta", "config_json", "{not json", IncompatibleIndexError, "config"),
        ("meta", "config_json", "[1, 2]", IncompatibleIndexError, "config"),
        ("meta", "config_json", "[" * 100_000, IncompatibleIndexError, "config"),
        ("meta", "config_json", '{"seed": "x"}', IncompatibleIndexError, "config"),
        ("meta", "config_json", b"\xff\xfe", StorageError, "config_json"),
        ("meta", "config_json", None, StorageError, "config_json"),
        ("meta", "fingerprint", "0" * 64, IncompatibleIndexError, "fingerprint"),
        ("meta", "fingerprint", None, StorageError, "fingerprint"),
        ("meta", "created_by", None, StorageError, "created_by"),
        ("state", "next_seq", "x", StorageError, "next_seq"),
        ("state", "next_seq", "-1", StorageError, "next_seq"),
        ("state", "next_seq", str(2**64), StorageError, "next_seq"),
        ("state", "next_seq", None, StorageError, "next_seq"),
        ("state", "next_cluster", "1.5", StorageError, "next_cluster"),
        ("state", "id_kind", "float", StorageError, "id_kind"),
        ("state", "id_kind", "int", StorageError, "id_kind"),  # contradicts the stored str ids
        ("state", "layout", "{", StorageError, "layout"),
        ("state", "layout", '{"texts": true, "vector_dim": -3, "key_columns": 0}', StorageError, "layout"),
        ("state", "layout", "[" * 100_000, StorageError, "layout"),
        ("state", "recent_rows", "many", StorageError, "recent_rows"),
    ],
    "postgres": [
        ("meta", "schema_version", 0, StorageError, "schema_version"),
        ("meta", "schema_version", -5, StorageError, "schema_version"),
        ("meta", "schema_version", 99, IncompatibleIndexError, "schema version 99"),
        ("meta", "config_json", "{not json", IncompatibleIndexError, "config"),
        ("meta", "config_json", "[" * 100_000, IncompatibleIndexError, "config"),
        ("meta", "fingerprint", "0" * 64, IncompatibleIndexError, "fingerprint"),
        ("state", "next_seq", -1, StorageError, "next_seq"),
        ("state", "next_cluster", -7, StorageError, "next_cluster"),
        ("state", "id_kind", "float", StorageError, "id_kind"),
        ("state", "id_kind", "int", StorageError, "id_kind"),
        ("state", "layout", "{", StorageError, "layout"),
    ],
    "redis": [
        ("meta", "schema_version", "one", StorageError, "schema_version"),
        ("meta", "schema_version", b"\xff", StorageError, "schema_version"),
        ("meta", "schema_version", None, StorageError, "schema_version"),
        ("meta", "schema_version", "99", IncompatibleIndexError, "schema version 99"),
        ("meta", "config_json", b"\xff", StorageError, "config_json"),
        ("meta", "config_json", "{not json", IncompatibleIndexError, "config"),
        ("meta", "config_json", None, StorageError, "config_json"),
        ("meta", "fingerprint", None, StorageError, "fingerprint"),
        ("meta", "created_by", b"\xc3", StorageError, "created_by"),
        ("meta", "layout", "new", StorageError, "layout"),
        ("meta", "layout", "9", IncompatibleIndexError, "layout 9"),
        ("state", "next_seq", "x", StorageError, "next_seq"),
        ("state", "next_seq", None, StorageError, "next_seq"),
        ("state", "*", None, StorageError, "next_seq"),  # the whole state hash gone
        ("state", "next_cluster", b"\x00", StorageError, "next_cluster"),
        ("state", "id_kind", b"\xff", StorageError, "id_kind"),
        ("state", "id_kind", "int", StorageError, "id_kind"),
        ("state", "layout", b"\xff", StorageError, "layout"),
        ("state", "max_seq", "top", StorageError, "max_seq"),
        ("state", "docs", "x", StorageError, "docs"),
    ],
}


def _every_operation(url: str) -> None:
    """Open the index and use each operation; the first failure propagates."""
    with diversify.Index(url) as idx:
        idx.cluster_of(["a"])
        idx.members(0)
        idx.query([_doc(0)])
        idx.stats()
        list(idx.scan())
        idx.add([_doc(7)], ids=["z"])
        idx.delete(["a"])


def test_damaged_meta_and_state_fields_name_the_field_on_every_backend(backend, tmp_path):
    name, new_url, server = backend
    for record, field, value, error, says in DAMAGE[name]:
        url = new_url()
        _filled(url).close()
        _corrupt(name, url, server, record, field, value)
        with pytest.raises(error) as err:
            _every_operation(url)
        message = str(err.value)
        assert says in message, (field, value, message)
        assert "index" in message and ("restore it from a backup" in message or "Upgrade" in message
                                       or "open it with" in message or "upgrade" in message), message


def test_id_kind_that_contradicts_the_stored_ids_is_a_storage_error_everywhere(backend, tmp_path):
    name, new_url, server = backend
    url = new_url()
    with _filled(url) as idx:
        c = idx.cluster_of(["a"])[0]
    _corrupt(name, url, server, "state", "id_kind", "int")
    with diversify.Index(url) as idx:
        assert idx.cluster_of(["a"]) == [None]  # a str id is unknown to an int index; reading no stored id still works
        for use in (lambda: idx.members(c), lambda: idx.query([_near(0)]), lambda: idx.export(tmp_path / "x.dvf"),
                    lambda: idx.add([_near(0, 30)], ids=[5])):
            with pytest.raises(StorageError, match="id_kind.*contradicts the stored ids"):
                use()
        live = idx.live_lookup()
        try:
            with pytest.raises(StorageError, match="contradicts"):
                live.members(c)
        finally:
            live.close()
    assert not (tmp_path / "x.dvf").exists()


# --------------------------------------------------------------------------- the whole surface


HOSTILE_IDS = [["x" * 3000], [_random_id(3000, 9)], ["\x00"], ["\ud800"], ["a\nb"], [1], [2**63], [-(2**63) - 1],
               [None], [b"x"], [1.5], [True], [np.float32(1)], [[1]], [{"a": 1}]]
HOSTILE_CLUSTERS = CLUSTER_TYPES + CLUSTER_OUT_OF_RANGE + [-1, 0, 2**63 - 1]


def test_no_hostile_input_raises_anything_but_a_diversify_error(backend, tmp_path):
    _, new_url, _ = backend
    raw = []

    def attempt(what, fn):
        try:
            fn()
        except DiversifyError:
            pass
        except Exception as exc:  # noqa: BLE001 - what this test hunts
            raw.append(f"{what}: {type(exc).__name__}: {exc}"[:200])

    with _filled(new_url()) as idx:
        for c in HOSTILE_CLUSTERS:
            attempt(f"members({c!r})", lambda c=c: idx.members(c))
        for ids in HOSTILE_IDS:
            attempt(f"add {ids!r:.30}", lambda ids=ids: idx.add([_doc(9)], ids=ids))
            attempt(f"delete {ids!r:.30}", lambda ids=ids: idx.delete(ids))
            attempt(f"cluster_of {ids!r:.30}", lambda ids=ids: idx.cluster_of(ids))
            attempt(f"query {ids!r:.30}", lambda ids=ids: idx.query([_doc(9)], ids=ids))
        for texts in ([], [""], ["\x00"], ["\ud800"], [None], [b"bytes"], "one string", [1.5]):
            attempt(f"add texts={texts!r:.30}", lambda texts=texts: idx.add(texts, ids=["t"]))
            attempt(f"query texts={texts!r:.30}", lambda texts=texts: idx.query(texts))
        for path in (tmp_path, tmp_path / "no" / "dir" / "x.dvf", "", "\x00.dvf", "\ud800.dvf", b"x\x00.dvf"):
            attempt(f"export {path!r}", lambda path=path: idx.export(path))
        assert idx.check() == []
    assert raw == []


def _corrupt_doc(name: str, url: str, how: str) -> None:
    """Damage the stored record of the first document (seq 0): its id bytes, or (Redis) its length."""
    if name == "sqlite":
        import sqlite3

        con = sqlite3.connect(url[len("sqlite:///"):])
        with con:
            con.execute("UPDATE docs SET id = CAST(x'ff61' AS TEXT) WHERE seq = 0")
        con.close()
    elif name == "postgres":
        import psycopg
        from psycopg import sql

        from diversify.index.postgres import libpq_url

        schema = "diversify_" + url.rsplit("index=", 1)[1]
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            conn.execute(sql.SQL("UPDATE {}.docs SET id = %s WHERE seq = 0").format(sql.Identifier(schema)),
                         (b"\xff\x61",))
    else:
        with open_storage(url) as st:
            key = st.p.encode() + b"d:" + (0).to_bytes(8, "little", signed=True)
            value = st.client.get(key)
            st.client.set(key, value[:10] if how == "short" else value[:29] + b"\xff" + value[30:])


def test_damaged_document_record_is_a_storage_error(backend, tmp_path):
    name, new_url, _ = backend
    for how in ("id", "short") if name == "redis" else ("id",):  # a SQL row has no length of its own to damage
        url = new_url()
        _filled(url).close()
        _corrupt_doc(name, url, how)
        with diversify.Index(url) as idx:
            c = idx.cluster_of(["c"])[0]
            assert idx.members(c) == ["c"]  # other documents stay readable
            for use in (lambda: idx.members(idx.cluster_of(["b"])[0]), lambda: idx.export(tmp_path / "x.dvf"),
                        lambda: list(idx.scan())):
                with pytest.raises(StorageError, match="document|UTF-8"):
                    use()
