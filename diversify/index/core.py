"""``diversify.Index``: a persistent near-duplicate index over a storage URL.

>>> import diversify
>>> idx = diversify.Index("sqlite:///news.db")                          # doctest: +SKIP
>>> idx.add(["breaking: the river flooded the old town last night"], ids=["a1"])   # doctest: +SKIP

Every operation is batched. ``add`` runs in three steps:

1. outside any lock, in parallel across processes: validate and sketch the batch (the build's own
   validation and kernels);
2. under the index-wide writer lock, in ONE transaction (:meth:`Storage.write`): look up the stored
   representatives sharing a band key with the batch, run the build's assignment on them plus the
   batch (:func:`diversify.index.assign.assign`), insert the documents and the representatives'
   band rows, advance the counters;
3. commit. A failure (or a kill) before the commit leaves the index as it was.

Because step 2 is serialized, two near-duplicates added at the same moment by two processes are
assigned one after the other: the second sees the first as a representative and joins it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Optional, Union

import numpy as np

from ..config import BuildConfig, canonical_json, fingerprint
from ..errors import DuplicateIdError, InputError, StorageError
from .compat import check_index_config, stored_config
from .match import Match
from .payload import Docs, Layout, band_rows, decode, encode, with_sets, without_sets
from .records import stored_id
from .registry import open_storage
from .storage import (
    SCHEMA_VERSION,
    Assignment,
    DocRow,
    Meta,
    State,
    Storage,
    StorageOptions,
    Transaction,
    View,
)
from .urls import mask_url

__all__ = ["Index", "Match"]



class Index:
    """A persistent LSH index of near-duplicate clusters (see docs/index.md).

    Parameters
    ----------
    url : str
        ``sqlite:///path.db``, ``postgresql://user:pass@host/db``, ``redis://host:6379/0``
        (optionally ``?index=name`` on a server, for several indexes in one database).
    config : BuildConfig or dict, optional
        For a new index, its config (default ``BuildConfig()``). For an existing one, if given, it
        must equal the stored config (else :class:`IncompatibleIndexError` naming the fields).
    create : bool
        Create the index when it does not exist (default). False: StorageError instead.
    lock_timeout, connect_timeout : float
        Seconds to wait for the writer lock / a server connection.

    One ``Index`` object is used by one thread at a time; open one per process (or thread).
    """

    def __init__(self, url: str, config: Union[BuildConfig, dict, None] = None, *, create: bool = True,
                 lock_timeout: float = 30.0, connect_timeout: float = 5.0) -> None:
        from ..config import resolve_config

        self.url = mask_url(url)
        self._options = StorageOptions(lock_timeout=lock_timeout, connect_timeout=connect_timeout)
        self._open_again = lambda: open_storage(url, self._options)  # a second connection (live lookups)
        self._storage: Storage = open_storage(url, self._options)
        try:
            given = resolve_config(config) if config is not None else None
            meta = self._storage.read_meta()
            if meta is None:
                if not create:
                    raise StorageError(f"there is no index at {self.url}. Create it with diversify.Index(url) or "
                                       "`diversify index add URL corpus.jsonl`.")
                cfg = given if given is not None else BuildConfig()
                check_index_config(cfg)
                from .. import __version__

                meta = self._storage.initialize(Meta(schema_version=SCHEMA_VERSION, config_json=canonical_json(cfg),
                                                     fingerprint=fingerprint(cfg), created_by=__version__))
            self.config = stored_config(meta, given, self.url)
        except BaseException:
            self._storage.close()
            raise
        self.meta = meta

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self._storage.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Index({self.url!r})"

    @property
    def storage(self) -> Storage:
        return self._storage

    # ------------------------------------------------------------------ helpers

    def _sketch(self, texts, ids, vectors, keys, sources=None) -> Docs:
        """A batch validated and sketched as ``build`` does: its sketches, each document's threshold
        (stored in its payload under ``source_thresholds``) and its texts at hand."""
        from ..staging import doc_thresholds, sketch_inputs

        if texts is None and vectors is None:
            raise InputError("`texts` or `vectors` (or both) must be given; got neither. Pass texts=[...].")
        if isinstance(texts, (str, bytes)):
            raise InputError("`texts` must be an iterable of documents, not one str. Wrap it: texts=[text].")
        if texts is not None and not isinstance(texts, Sequence):
            texts = list(texts)
        if ids is not None and not isinstance(ids, (Sequence, np.ndarray)):
            ids = list(ids)
        mh = self.config.minhash
        sets32 = texts is not None and mh is not None and mh.verify in ("auto", "exact")  # stored: Layout.of
        sk, source = sketch_inputs(texts, ids, vectors, keys, self.config, progress=False, chunk_size=16384,
                                   timings={}, sets32=sets32)
        if sk.n == 0:
            raise InputError("the batch is empty: `texts`/`vectors` held no documents. Pass at least one document.")
        return Docs(sk, doc_thresholds(self.config, sources, sk.n), source)

    def _layout(self, st: State) -> Optional[Layout]:
        return Layout.loads(st.layout, self.url)

    def _reps_near(self, view: View, new: Docs, layout: Layout, exclude: frozenset = frozenset()):
        """The stored representatives sharing a band key with documents of ``new``: (rows by seq,
        their :class:`Docs`, owner/key arrays of ``new``, candidate key/seq arrays)."""
        owner, keys = band_rows(new.sketches, np.arange(new.n), self.config)
        ck, cs = view.candidates(keys) if keys.size else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        seqs = sorted(set(cs.tolist()) - exclude)
        rows = [r for r in view.docs_by_seq(seqs) if r.is_rep] if seqs else []
        rows.sort(key=lambda r: r.seq)
        old = decode([r.payload for r in rows], self.config, layout, self.url)
        return rows, old, owner, keys, ck, cs

    def _id_out(self, text: str, kind: Optional[str]) -> Any:
        return stored_id(text, kind, self.url)

    # ------------------------------------------------------------------ add

    def add(self, texts: Optional[Iterable[str]] = None, *, ids: Optional[Iterable] = None, vectors: Any = None,
            keys: Any = None, sources: Any = None) -> list[Match]:
        """Add a batch of documents; returns one :class:`Match` per document, in input order.

        ``ids``: one unique str or int per document, none already in the index
        (:class:`DuplicateIdError` otherwise, and nothing is added); default: the documents'
        sequence numbers in the index (int ids). ``vectors``, ``keys`` and ``sources`` (one source
        name per document, for an index created with ``source_thresholds``) as in ``build``.
        """
        from .assign import assign

        prepared = self._prepare(texts, ids, vectors, keys, sources)
        with self._storage.write() as tx:
            return self._add_locked(tx, *prepared, assign)

    def _prepare(self, texts, ids, vectors, keys, sources=None) -> tuple[Any, bool, Layout, list[bytes]]:
        """Everything of ``add`` that needs no lock: validate, sketch, shingle sets, payloads."""
        from ..ids import check_index_ids

        if ids is not None and not isinstance(ids, (Sequence, np.ndarray)):
            ids = list(ids)
        if ids is not None:
            check_index_ids(ids)  # the index's own limit, before sketching and any write
        batch = self._sketch(texts, ids, vectors, keys, sources)
        layout = Layout.of(batch.sketches, self.config)
        if layout.shingles and batch.sketches.sets32 is None:  # sketched without them (not the fused kernel's config)
            batch = with_sets(batch, self.config)
        return batch, ids is None, layout, encode(batch, self.config, layout)

    def _add_locked(self, tx: Transaction, batch: Docs, default_ids: bool, layout: Layout,
                    payloads: list[bytes], assign) -> list[Match]:
        st = tx.state()
        known = self._layout(st)
        if known is not None:
            known.check_same(layout)
            if known.shingles != layout.shingles:  # an index created before the stored sets: none stored
                layout = known
                batch = without_sets(batch)
                payloads = encode(batch, self.config, layout)
        seq0 = st.next_seq
        n = batch.n
        ids: Any = list(range(seq0, seq0 + n)) if default_ids else batch.sketches.ids
        kind = "str" if ids and isinstance(ids[0], str) else "int"
        if st.id_kind is not None and st.id_kind != kind:
            raise InputError(f"`ids` must be of the index's id kind ({st.id_kind}); got {kind} ids"
                             f"{' (the default ids are ints)' if default_ids else ''}. Convert the ids to "
                             f"{st.id_kind}.")
        id_text = [str(i) for i in ids]
        dup = tx.docs_by_id(id_text, payload=False)
        if dup:
            shown = sorted(self._id_out(r.id, kind) for r in dup)[:5]
            raise DuplicateIdError(f"`ids` must not be in the index already; {len(dup)} are, e.g. {shown}. Delete "
                                   "them first to replace them, or leave them out of the batch; nothing was added.")
        rows, old, owner, bkeys, _, _ = self._reps_near(tx, batch, layout)
        res = assign(old, batch, self.config)
        n_old = old.n
        labels, rep = res.labels, res.rep
        # new clusters in order of their first member: deterministic ids
        new_labels = sorted({int(v) for v in labels[n_old:].tolist() if v >= n_old})
        cluster_of_label = {lab: st.next_cluster + i for i, lab in enumerate(new_labels)}
        rep_of_label = {int(labels[n_old + j]): n_old + j for j in np.flatnonzero(rep[n_old:]).tolist()}
        out: list[Match] = []
        docs: list[DocRow] = []
        # plain Python values once (numpy scalar access per document costs more than the rest)
        new_labels_l = labels[n_old:].tolist()
        new_rep_l = rep[n_old:].tolist()
        sim_l = res.similarity[n_old:].tolist()
        stages_l = res.stages[n_old:].tolist()
        old_out = {lab: (rows[lab].cluster, self._id_out(rows[lab].id, kind))
                   for lab in set(new_labels_l) if lab < n_old}
        for j in range(n):
            lab = new_labels_l[j]
            if lab < n_old:
                cluster, rep_id = old_out[lab]
                joined = True
            else:
                cluster = cluster_of_label[lab]
                joined = not new_rep_l[j]
                rep_id = ids[rep_of_label[lab] - n_old]
            if joined:
                s = sim_l[j]
                stages = stages_l[j]
            else:
                s, stages = 1.0, 0
            out.append(Match(ids[j], cluster, joined, rep_id, s, ((rep_id, s),) if joined else ()))
            docs.append(DocRow(seq=seq0 + j, id=id_text[j], cluster=cluster, is_rep=not joined, similarity=s,
                               stages=stages, payload=payloads[j]))
        tx.insert_docs(docs)
        is_new_rep = rep[n_old:]
        sel = is_new_rep[owner]
        if sel.any():
            tx.insert_bands(bkeys[sel], owner[sel] + seq0)
        tx.set_state(State(next_seq=seq0 + n, next_cluster=st.next_cluster + len(new_labels), id_kind=kind,
                           layout=layout.dumps()))
        return out

    # ------------------------------------------------------------------ query

    def query(self, texts: Optional[Iterable[str]] = None, *, vectors: Any = None, keys: Any = None,
              ids: Optional[Iterable] = None, sources: Any = None) -> list[Match]:
        """Is each document a near-duplicate of an indexed one, of which, how similar? Nothing is
        written. Each document is checked against the index alone (not against the others of the
        batch): the answer for a test set against a train set. ``ids`` only label the answers;
        ``sources`` as in :meth:`add` (a pair must meet the stricter of its two thresholds)."""
        from .assign import verify_pairs

        batch = self._sketch(texts, ids, vectors, keys, sources)
        labels = list(ids) if ids is not None else list(range(batch.n))
        with self._storage.read() as view:
            st = view.state()
            layout = self._layout(st)
            if layout is None:  # an empty index matches nothing
                return [Match(labels[j], None, False, None, 0.0) for j in range(batch.n)]
            layout.check_same(Layout.of(batch.sketches, self.config))
            rows, old, owner, bkeys, ck, cs = self._reps_near(view, batch, layout)
        if not layout.shingles:  # an index created before the stored sets: none to compare with
            batch = without_sets(batch)
        elif rows and batch.sketches.sets32 is None:  # the sets only matter when there is something to verify against
            batch = with_sets(batch, self.config)
        pos = {r.seq: i for i, r in enumerate(rows)}
        order = np.argsort(bkeys, kind="stable")
        sk_sorted = bkeys[order]
        pairs: list[list[int]] = [[] for _ in range(batch.n)]
        lo = np.searchsorted(sk_sorted, ck, side="left")
        hi = np.searchsorted(sk_sorted, ck, side="right")
        for a, b, s in zip(lo.tolist(), hi.tolist(), cs.tolist()):
            p = pos.get(s)
            if p is None:
                continue
            for q in owner[order[a:b]].tolist():
                pairs[q].append(p)
        found = verify_pairs(old, batch, self.config, pairs)
        out = []
        for j, hits in enumerate(found):
            if not hits:
                out.append(Match(labels[j], None, False, None, 0.0))
                continue
            matched = tuple((self._id_out(rows[p].id, st.id_kind), s) for p, _, s in hits)
            best = rows[hits[0][0]]
            out.append(Match(labels[j], best.cluster, True, self._id_out(best.id, st.id_kind), hits[0][2], matched))
        return out

    # ------------------------------------------------------------------ delete

    def delete(self, ids: Iterable) -> dict:
        """Remove documents. A deleted representative's remaining members are re-assigned by the
        representative rule (the first of them, in priority order, that no other representative
        claims becomes the representative and keeps the cluster id); other clusters are untouched.

        Returns ``{"deleted": n, "missing": [ids not in the index], "reassigned": n}``.
        """
        from ..ids import check_ids
        from .assign import assign

        if isinstance(ids, (str, bytes)):
            raise InputError("`ids` must be an iterable of ids, not one str. Wrap it: ids=[id].")
        id_list = list(ids)
        if not id_list:
            return {"deleted": 0, "missing": [], "reassigned": 0}
        try:  # an id listed twice is deleted once
            id_list = list(dict.fromkeys(id_list))
        except TypeError:  # unhashable: the id rules name it
            check_ids(id_list, param="ids")
            raise
        check_ids(id_list, param="ids")
        with self._storage.write() as tx:
            st = tx.state()
            layout = self._layout(st)
            kind = st.id_kind
            given_kind = "str" if isinstance(id_list[0], str) else "int"
            if kind is not None and kind != given_kind:
                raise InputError(f"`ids` must be of the index's id kind ({kind}); got {given_kind} ids.")
            rows = tx.docs_by_id([str(i) for i in id_list])
            found = {r.id for r in rows}
            missing = [i for i in id_list if str(i) not in found]
            if not rows:
                return {"deleted": 0, "missing": missing, "reassigned": 0}
            assert layout is not None, "an index with documents has a layout"
            gone = {r.seq for r in rows}
            reps = [r for r in rows if r.is_rep]
            tx.delete_docs(sorted(gone))
            if reps:
                rep_sk = decode([r.payload for r in reps], self.config, layout, self.url).sketches
                owner, bkeys = band_rows(rep_sk, np.arange(len(reps)), self.config)
                tx.delete_bands(bkeys, np.array([reps[i].seq for i in owner.tolist()], dtype=np.int64))
            orphans = [r for r in tx.docs_in_clusters([r.cluster for r in reps]) if r.seq not in gone] if reps else []
            orphans.sort(key=lambda r: r.seq)
            if orphans:
                self._reassign(tx, st, layout, orphans, gone, assign)
        return {"deleted": len(rows), "missing": missing, "reassigned": len(orphans)}

    def _reassign(self, tx: Transaction, st: State, layout: Layout, orphans: list[DocRow], gone: set,
                  assign) -> None:
        new = decode([r.payload for r in orphans], self.config, layout, self.url)
        rows, old, owner, bkeys, _, _ = self._reps_near(tx, new, layout, exclude=frozenset(gone))
        res = assign(old, new, self.config)
        n_old = old.n
        labels, rep = res.labels, res.rep
        # a deleted cluster's id goes to the new cluster (of its former members) whose representative
        # ranks first under the representative rule; the others get fresh ids, in that order too
        new_reps = sorted((n_old + np.flatnonzero(rep[n_old:])).tolist(), key=lambda loc: int(res.rank[loc]))
        inherit: dict[int, int] = {}
        taken: set[int] = set()
        next_cluster = st.next_cluster
        for loc in new_reps:
            lab = int(labels[loc])
            old_cluster = orphans[loc - n_old].cluster
            if old_cluster not in taken:
                inherit[lab] = old_cluster
                taken.add(old_cluster)
            else:
                inherit[lab] = next_cluster
                next_cluster += 1
        changes: list[Assignment] = []
        for j, r in enumerate(orphans):
            loc = n_old + j
            lab = int(labels[loc])
            if lab < n_old:
                cluster, is_rep = rows[lab].cluster, False
            else:
                cluster, is_rep = inherit[lab], bool(rep[loc])
            s = 1.0 if is_rep else float(res.similarity[loc])
            changes.append(Assignment(seq=r.seq, cluster=cluster, is_rep=is_rep, similarity=s,
                                      stages=0 if is_rep else int(res.stages[loc])))
        tx.update_docs(changes)
        sel = rep[n_old:][owner]
        if sel.any():
            tx.insert_bands(bkeys[sel], np.array([orphans[i].seq for i in owner[sel].tolist()], dtype=np.int64))
        if next_cluster != st.next_cluster:
            tx.set_state(State(next_seq=st.next_seq, next_cluster=next_cluster, id_kind=st.id_kind,
                               layout=st.layout))

    # ------------------------------------------------------------------ lookups

    def cluster_of(self, ids: Iterable) -> list[Optional[int]]:
        """The cluster of each id (None for an id not in the index, or that no index of its id kind
        can hold: the online id rule, :func:`diversify.ids.lookup_id` — ``1`` never matches ``"1"`` —
        and the live index's id-length limit). An id that is not a str or an int is an
        InputTypeError, as in ``ClusterMap.cluster_of``."""
        from ..ids import check_id_type, lookup_id, storable_index_id

        id_list = list(ids)
        for pos, x in enumerate(id_list):
            check_id_type(x, param="ids", position=pos)
        with self._storage.read() as view:
            kind = view.state().id_kind
            keys = [k if (k := lookup_id(i, kind)) is not None and storable_index_id(k) else None for i in id_list]
            asked = list(dict.fromkeys(str(k) for k in keys if k is not None))
            got = {r.id: r.cluster for r in view.docs_by_id(asked, payload=False)} if asked else {}
        return [None if k is None else got.get(str(k)) for k in keys]

    def members(self, cluster: int) -> list:
        """The ids of a cluster, its representative first, then in order of addition; ``[]`` for an
        int64 id that names no cluster. ``cluster`` must be an int in the int64 range
        (:func:`diversify.ids.check_cluster_id`: InputTypeError / InputError otherwise)."""
        from ..ids import check_cluster_id

        cid = check_cluster_id(cluster)
        with self._storage.read() as view:
            kind = view.state().id_kind
            rows = view.docs_in_clusters([cid], payload=False)
        rows.sort(key=lambda r: (not r.is_rep, r.seq))
        return [self._id_out(r.id, kind) for r in rows]

    def stats(self) -> dict:
        """Documents, clusters, folded documents, band rows, bytes (per document) and the config."""
        with self._storage.read() as view:
            c = view.counts()
            st = view.state()
        return {"url": self.url, "documents": c.documents, "clusters": c.representatives,
                "folded": c.documents - c.representatives, "band_rows": c.band_rows, "bytes": c.size_bytes,
                "bytes_per_document": (round(c.size_bytes / c.documents, 1) if c.size_bytes and c.documents else None),
                "next_seq": st.next_seq, "schema_version": self.meta.schema_version,
                "fingerprint": self.meta.fingerprint, "created_by": self.meta.created_by,
                "config": json.loads(self.meta.config_json)}

    def scan(self) -> Iterable[DocRow]:
        """Every live document in order of addition, from one consistent read (SQL backends)."""
        with self._storage.read() as view:
            yield from view.rows()

    def band_rows_of(self, rows: Sequence[DocRow]) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, seqs)``: the band rows the given stored documents have as representatives."""
        st = self._layout_now()
        sk = decode([r.payload for r in rows], self.config, st, self.url).sketches
        owner, keys = band_rows(sk, np.arange(len(rows)), self.config)
        return keys, np.array([rows[i].seq for i in owner.tolist()], dtype=np.int64)

    def _layout_now(self) -> Layout:
        with self._storage.read() as view:
            layout = self._layout(view.state())
        if layout is None:
            raise InputError(f"the index at {self.url} has no documents yet.")
        return layout

    def check(self) -> list[str]:
        """The invariants that do not hold (empty: consistent); see :mod:`diversify.index.check`."""
        from .check import check

        return check(self)

    # ------------------------------------------------------------------ export and live serving

    def export(self, path, *, created_at: Optional[str] = None, metadata: Optional[dict] = None):
        """Write the live documents as a normal ClusterMap artifact (the ``.dvf`` a build writes).

        Returns the :class:`~diversify.ClusterMap` written. See :func:`diversify.index.export.export`.
        """
        from .export import export

        return export(self, path, created_at=created_at, metadata=metadata)

    def live_lookup(self, *, cache_size: int = 4096, max_age: float = 1.0):
        """A cluster lookup for :class:`~diversify.Diversifier` that reads this index live (see
        :class:`diversify.index.live.LiveLookup`); ``Diversifier(index)`` calls it."""
        from .live import LiveLookup

        return LiveLookup(self, cache_size=cache_size, max_age=max_age)

