"""Hypothesis property over random tampering of the state an ``add`` reads (run by
``tests/system/test_add_tampered_state.py``; by hand: ``python state_fuzz.py SECONDS SEED WORKDIR``).

Each example takes one of the three artifacts of ``state_corpus.py``, edits one array that
``add`` reads (values, rows, columns, dtype, removal, a row permutation; a cluster id edit gets its
derived arrays recomputed so that it reaches more than the load checks), rewrites the file with
correct checksums and runs ``add``. The property:

* the process never dies and nothing but a :class:`~diversify.errors.DiversifyError` escapes;
* a refusal is one line, and an ``ArtifactError`` names the array or header key it is about;
* an edit of values the spec leaves free (hashes, signatures, lengths) is never refused;
* an accepted add gives an artifact that loads verified and takes a further add, keeps every
  old document in its old cluster (components: in the cluster its old one merged into, which the
  old id resolves to) and gives the same bytes when repeated.

Prints ``TRY <case>`` before each example (so a crash names it) and one JSON line of counts.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import state_corpus as S

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
SEED = int(sys.argv[2]) if len(sys.argv) > 2 else 20261130
WORK = Path(sys.argv[3]) if len(sys.argv) > 3 else Path("/tmp/state-fuzz")
#: arrays whose every value the spec allows: an edit of their values must never be refused
FREE = ("extra/exact_hash", "extra/minhash", "extra/text_simhash", "extra/simhash", "doc/length")
CORE = ("doc/cluster_id", "doc/is_representative", "doc/stages", "doc/length")
OPS = ("values", "truncate", "extend", "columns", "dtype", "delete", "permute", "free")
DTYPES = ("u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f4", "f8", "bool")

report: dict = {"tried": 0, "refused": 0, "accepted": 0, "benign": 0, "input_errors": 0, "failures": [], "seconds": 0.0,
                "accepted_edits": {}}


def _pool(x: np.ndarray, n: int) -> list:
    if x.dtype.kind == "f":
        return [np.nan, np.inf, -np.inf, 0.0, 1.0, -1.0, 2.0, 1e30, 0.5]
    if x.dtype.kind == "b":
        return [True, False]
    return [0, 1, -1, n - 1, n, n + 1, 2**31, 2**32 - 1, 2**63 - 1, -(2**63), 2**64 - 1]


def _cast(values, dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.array([np.array(v).astype(dtype, casting="unsafe") for v in values], dtype=dtype)


def mutate(data, header: dict, arrays: dict, name: str, op: str) -> None:
    x = arrays[name]
    n = header["counts"]["n_docs"]
    if op == "delete":
        arrays.pop(name)
        return
    if op == "free":
        k = data.draw(st.integers(1, max(1, min(8, x.size))))
        flat = x.reshape(-1).copy()
        pos = data.draw(st.lists(st.integers(0, flat.size - 1), min_size=k, max_size=k))
        raw = np.frombuffer(data.draw(st.binary(min_size=k * flat.itemsize, max_size=k * flat.itemsize)), dtype=flat.dtype)
        flat[pos] = raw
        arrays[name] = flat.reshape(x.shape)
        return
    if op == "values" and x.size:
        k = data.draw(st.integers(1, min(4, x.size)))
        flat = x.reshape(-1).copy()
        pos = data.draw(st.lists(st.integers(0, flat.size - 1), min_size=k, max_size=k))
        vals = data.draw(st.lists(st.sampled_from(_pool(x, n)), min_size=k, max_size=k))
        flat[pos] = _cast(vals, flat.dtype)
        arrays[name] = flat.reshape(x.shape)
    elif op == "truncate" and x.ndim:
        r = data.draw(st.integers(1, max(1, min(3, x.shape[0]))))
        arrays[name] = x[: x.shape[0] - r].copy()
    elif op == "extend" and x.ndim:
        r = data.draw(st.integers(1, 3))
        arrays[name] = np.concatenate([x, x[:r]])
    elif op == "columns":
        if x.ndim == 2 and x.shape[1] > 1:
            keep = data.draw(st.integers(0, x.shape[1] - 1))
            arrays[name] = x[:, :keep].copy()
        elif x.ndim == 2:
            arrays[name] = np.concatenate([x, x], axis=1)
        else:
            arrays[name] = x.reshape(-1, 1).copy() if data.draw(st.booleans()) else np.stack([x, x], axis=1)
    elif op == "dtype":
        code = data.draw(st.sampled_from(DTYPES))
        with np.errstate(all="ignore"):
            arrays[name] = x.astype("bool" if code == "bool" else "<" + code, casting="unsafe")
    elif op == "permute" and x.ndim and x.shape[0] > 1:
        perm = np.array(data.draw(st.permutations(range(x.shape[0]))))
        arrays[name] = x[perm].copy()
    if name == "doc/cluster_id":  # reach past the CSR checks: recompute what derives from the labels
        cl = arrays["doc/cluster_id"]
        if cl.dtype == np.int64 and cl.shape == (n,) and n and int(cl.min()) >= 0 and int(cl.max()) < n:
            S.recluster(header, arrays, cl)


def _fail(case: str, what: str) -> None:
    report["failures"].append(f"{case}: {what}"[:1500])


def check_accepted(case: str, kind: str, art: dict, path: Path, res) -> None:
    import diversify
    from diversify.artifact import load

    out1, out2 = path.with_suffix(".out1.dvf"), path.with_suffix(".out2.dvf")
    res.save(out1)
    again = diversify.add(path, **S.add_kwargs(art["add"]), created_at=S.CREATED)
    again.save(out2)
    if out1.read_bytes() != out2.read_bytes():
        _fail(case, "the same add gave different bytes twice")
    cm = load(out1)
    more = dict(art["add"], texts=["one more document about nothing in particular"], ids=[art["add"]["ids"][0] + "-2"])
    diversify.add(out1, **S.add_kwargs(more), created_at=S.CREATED)
    old = load(path, verify=False)
    n_old = old.n_docs
    before = np.asarray(old.cluster_ids)
    after = np.asarray(cm.cluster_ids)[:n_old]
    if kind != "components":
        if not np.array_equal(before, after):
            _fail(case, f"old documents changed cluster: {np.flatnonzero(before != after)[:5].tolist()}")
        return
    pairs = np.unique(np.stack([before, after], axis=1), axis=0)
    if np.unique(pairs[:, 0]).size != pairs.shape[0]:
        _fail(case, "an old cluster was split")
        return
    for c, now in pairs.tolist():
        if cm.resolve_cluster(c) != now:
            _fail(case, f"old cluster id {c} resolves to {cm.resolve_cluster(c)}, its documents are in {now}")
            return


def main() -> None:
    import diversify
    from diversify.errors import ArtifactError, DiversifyError

    arts = S.build_artifacts(WORK / "artifacts", pairs=40)
    bases = {kind: S.read(art["path"]) for kind, art in arts.items()}
    names = {kind: sorted([nm for nm in a if nm.startswith("extra/")] + list(CORE)) for kind, (_, a) in bases.items()}
    deadline = time.time() + SECONDS
    t0 = time.time()

    @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def prop(data):
        kind = data.draw(st.sampled_from(sorted(arts)))
        op = data.draw(st.sampled_from(OPS))
        pool = [nm for nm in names[kind] if nm in FREE] if op == "free" else names[kind]
        name = data.draw(st.sampled_from(pool))
        header, arrays = json.loads(json.dumps(bases[kind][0])), {k: v.copy() for k, v in bases[kind][1].items()}
        mutate(data, header, arrays, name, op)
        if time.time() > deadline:  # after every draw: a replayed example draws the same
            return
        i = report["tried"]
        case = f"#{i} {kind} {name} {op}"
        print(f"TRY {case}", flush=True)
        report["tried"] += 1
        path = WORK / f"case-{i}.dvf"
        try:
            S.write(path, header, arrays)
        except DiversifyError:
            report["refused"] += 1  # the writer refuses it already (e.g. a dtype outside the whitelist)
            return
        art = arts[kind]
        try:
            res = diversify.add(path, **S.add_kwargs(art["add"]), created_at=S.CREATED)
        except DiversifyError as exc:
            msg = str(exc)
            if "\n" in msg:
                _fail(case, f"a multi-line message: {msg!r}")
            if op == "free":
                _fail(case, f"an edit of free values was refused: {msg}")
            if isinstance(exc, ArtifactError):
                report["refused"] += 1
                if not any(s in msg for s in ("extra/", "doc/", "cluster/", "lookup/", "`config`", "checksum")):
                    _fail(case, f"the refusal names no array: {msg}")
            else:
                report["input_errors"] += 1
            return
        except Exception:  # noqa: BLE001 - the property under test
            _fail(case, traceback.format_exc()[-1500:])
            return
        report["accepted"] += 1
        edit = f"{kind} {name} {op}"
        report["accepted_edits"][edit] = report["accepted_edits"].get(edit, 0) + 1
        report["benign"] += op == "free"
        try:
            check_accepted(case, kind, art, path, res)
        except Exception:  # noqa: BLE001 - a valid result that cannot be reloaded or extended
            _fail(case, "accepted, but its result " + traceback.format_exc()[-1500:])

    chunk = 0
    while time.time() < deadline:
        seed(SEED + chunk)(prop)()
        chunk += 1
    report["seconds"] = time.time() - t0
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
