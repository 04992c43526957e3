"""The live-index contract on the embedded SQLite backend, plus what only SQLite has (file URLs)."""

from __future__ import annotations

import pytest

from diversify.index.registry import open_storage
from index.contract import IndexContract


class TestSQLite(IndexContract):
    @pytest.fixture
    def storage_url(self, tmp_path) -> str:
        return f"sqlite:///{tmp_path}/index.db"


# --------------------------------------------------------------------------- SQLite only


def test_sqlite_urls(tmp_path, monkeypatch):
    from diversify.errors import ConfigError
    from diversify.index.sqlite import sqlite_path

    assert sqlite_path("sqlite:///rel/x.db") == "rel/x.db"
    assert sqlite_path("sqlite:////abs/x.db") == "/abs/x.db"
    assert sqlite_path("sqlite:///sp%20ace.db") == "sp ace.db"
    for bad, why in [("sqlite://host/x.db", "local file"), ("sqlite:///:memory:", "in-memory"),
                     ("sqlite:///", "name a file"), ("sqlite:///x.db?index=other", "one file")]:
        with pytest.raises(ConfigError, match=why):
            sqlite_path(bad)
    monkeypatch.chdir(tmp_path)
    with open_storage("sqlite:///rel.db") as s:
        s.initialize(_meta())
    assert (tmp_path / "rel.db").exists()


def _meta():
    from index.contract import META

    return META


def test_sqlite_missing_file_is_not_created_by_a_look(tmp_path):
    import diversify
    from diversify.errors import StorageError

    url = f"sqlite:///{tmp_path}/absent.db"
    with open_storage(url) as s:
        assert s.read_meta() is None
    assert not (tmp_path / "absent.db").exists()
    with pytest.raises(StorageError, match=r"no index at sqlite:///.*absent\.db"):
        diversify.Index(url, create=False)
    assert not (tmp_path / "absent.db").exists()
    with pytest.raises(StorageError, match="does not exist"):
        diversify.Index(f"sqlite:///{tmp_path}/no/such/dir/x.db")


def test_sqlite_a_file_that_is_not_an_index(tmp_path):
    import diversify
    from diversify.errors import StorageError

    (tmp_path / "junk.db").write_bytes(b"this is not an sqlite file at all" * 100)
    with pytest.raises(StorageError, match=r"junk\.db.*(not a database|diversify index)"):
        diversify.Index(f"sqlite:///{tmp_path}/junk.db")


def test_sqlite_band_tiers_merge_and_stay_exact(tmp_path, monkeypatch):
    """With a tiny merge limit every few batches move the recent band rows into the main table;
    lookups, deletes and the invariants hold across both tiers."""
    import diversify
    from diversify.index import sqlite as backend
    from index.contract import _doc, _near

    monkeypatch.setattr(backend, "MERGE_MIN_ROWS", 40)
    url = f"sqlite:///{tmp_path}/tiers.db"
    with diversify.Index(url) as idx:
        for b in range(6):
            idx.add([_doc(100 * b + i) for i in range(5)], ids=[f"d{b}-{i}" for i in range(5)])
        with idx.storage.read() as view:
            con = view.con  # type: ignore[attr-defined]
            main = con.execute("SELECT count(*) FROM bands").fetchone()[0]
            recent = con.execute("SELECT count(*) FROM bands_recent").fetchone()[0]
        assert main > 0 and main + recent == 30 * 16
        got = idx.add([_near(100 * b + 2) for b in range(6)], ids=[f"n{b}" for b in range(6)])
        assert all(m.joined for m in got) and [m.representative for m in got] == [f"d{b}-2" for b in range(6)]
        idx.delete([f"d{b}-2" for b in range(6)])  # representatives whose rows sit in either tier
        assert idx.check() == []
        assert idx.stats()["band_rows"] == 30 * 16  # the promoted members took over the rows


def test_sqlite_an_index_from_before_the_stored_shingle_sets_keeps_working(tmp_path):
    """An index whose layout has no ``shingles`` (created before the sets were stored) takes new
    batches without sets (one payload size per index), and stays consistent."""
    import sqlite3

    import diversify
    from diversify.index.payload import Layout, record_dtype
    from index.contract import _doc, _near

    url = f"sqlite:///{tmp_path}/old.db"
    with diversify.Index(url) as idx:
        idx.add([_doc(i) for i in range(10)], ids=[f"b{i}" for i in range(10)])
        cfg = idx.config
    con = sqlite3.connect(tmp_path / "old.db")
    (text,) = con.execute("SELECT v FROM meta WHERE k = 'layout'").fetchone()
    layout = Layout.loads(text, url)
    assert layout is not None and layout.shingles
    size = record_dtype(cfg, layout).itemsize
    old = Layout(layout.texts, layout.vector_dim, layout.key_columns)
    assert "shingles" not in old.dumps()
    with con:  # what such an index holds: the record alone, and a layout without the key
        con.execute("UPDATE meta SET v = ? WHERE k = 'layout'", (old.dumps(),))
        con.execute("UPDATE docs SET payload = substr(payload, 1, ?)", (size,))
    con.close()
    with diversify.Index(url) as idx:
        got = idx.add([_near(i) for i in range(5)], ids=[f"n{i}" for i in range(5)])
        assert [m.representative for m in got] == [f"b{i}" for i in range(5)]
        assert idx.query([_near(7)])[0].representative == "b7"
        assert idx.check() == []
        assert {len(r.payload) for r in idx.scan()} == {size}


def test_sqlite_new_files_take_32_kib_pages_and_older_files_keep_theirs(tmp_path, monkeypatch):
    """A new index file gets PAGE_SIZE pages (whole document rows per page: 8 KiB pages left a fifth
    of the docs table unused); a file made with 8 KiB pages keeps them, takes adds and stays
    consistent, and gives the same answers as the new file."""
    import sqlite3

    import diversify
    from diversify.index import sqlite as backend
    from index.contract import _doc, _near

    def page_size(path):
        con = sqlite3.connect(path)
        try:
            return con.execute("PRAGMA page_size").fetchone()[0]
        finally:
            con.close()

    texts, ids = [_doc(i) for i in range(30)], [f"b{i}" for i in range(30)]
    with diversify.Index(f"sqlite:///{tmp_path}/new.db") as idx:
        idx.add(texts, ids=ids)
        new_answer = [(m.cluster, m.representative) for m in idx.add([_near(i) for i in range(5)],
                                                                     ids=[f"n{i}" for i in range(5)])]
    assert backend.PAGE_SIZE == 32768 and page_size(tmp_path / "new.db") == 32768
    monkeypatch.setattr(backend, "PAGE_SIZE", 8192)
    with diversify.Index(f"sqlite:///{tmp_path}/old.db") as idx:
        idx.add(texts, ids=ids)
    monkeypatch.undo()
    assert page_size(tmp_path / "old.db") == 8192
    with diversify.Index(f"sqlite:///{tmp_path}/old.db") as idx:  # opened by today's code: keeps its pages
        old_answer = [(m.cluster, m.representative) for m in idx.add([_near(i) for i in range(5)],
                                                                     ids=[f"n{i}" for i in range(5)])]
        assert idx.check() == []
    assert page_size(tmp_path / "old.db") == 8192
    assert old_answer == new_answer and [r for _, r in new_answer] == [f"b{i}" for i in range(5)]


def test_sqlite_mmap_mb_url_parameter(tmp_path):
    """Reads go through a memory map of mmap_mb MiB (default 1024); ?mmap_mb=0 turns it off; a bad
    value is refused naming the parameter."""
    import diversify
    from diversify.errors import ConfigError
    from diversify.index.sqlite import MMAP_MB
    from index.contract import _doc

    for query, want in (("", MMAP_MB << 20), ("?mmap_mb=0", 0), ("?mmap_mb=64", 64 << 20)):
        url = f"sqlite:///{tmp_path}/m{len(query)}.db{query}"
        with diversify.Index(url) as idx:
            idx.add([_doc(1), _doc(2)], ids=["a", "b"])
            (got,) = idx.storage._connect().execute("PRAGMA mmap_size").fetchone()
            assert got == want, (query, got)
            assert idx.query([_doc(2)])[0].representative == "b"
    for bad in ("-1", "lots", "99999999"):
        with pytest.raises(ConfigError, match=rf"`mmap_mb`.*{bad}"):
            diversify.Index(f"sqlite:///{tmp_path}/bad.db?mmap_mb={bad}")


def test_sqlite_commits_are_checkpointed_off_the_writer_path(tmp_path):
    """After a commit the background thread copies the WAL back into the file (a passive checkpoint
    on its own connection); the writer's own automatic checkpoint is raised to the backstop; the
    checkpointer never creates a file that is gone."""
    import sqlite3

    import diversify
    from diversify.index import sqlite as backend
    from index.contract import _doc

    path = tmp_path / "ck.db"
    with diversify.Index(f"sqlite:///{path}") as idx:
        before = backend._CHECKPOINTER.done
        idx.add([_doc(i) for i in range(20)], ids=[f"d{i}" for i in range(20)])
        assert backend._CHECKPOINTER.checkpoint_now(str(path.resolve()))
        assert backend._CHECKPOINTER.done > before
        (auto,) = idx.storage._connect().execute("PRAGMA wal_autocheckpoint").fetchone()
        assert auto == backend.AUTOCHECKPOINT_PAGES
        # every frame of the WAL is in the file already: a reader of the file alone sees the batch
        probe = sqlite3.connect(path)
        busy, log, done = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0 and log == done and log > 0
        probe.close()
        with idx.storage.read() as view:
            assert view.con.execute("SELECT count(*) FROM docs").fetchone()[0] == 20  # type: ignore[attr-defined]
    gone = tmp_path / "gone.db"
    assert backend._CHECKPOINTER.checkpoint_now(str(gone))  # a file that does not exist: nothing happens
    assert not gone.exists()
