"""The exclusion budgets have one home (kind: contract): diversify/online/budget.py.

``max_exclude_members`` (members of excluded clusters the Diversifier adds to a refetch) and
``max_exclude`` (ids one store call pushes down) are different quantities, each with one default
owned by the online layer and passed down; no signature in the package or its plugins spells
its own number for either, so the two layers cannot drift apart again.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from diversify import Diversifier
from diversify.online import budget
from diversify.online.plugins import check_settings
from diversify.stores import NumpyStore
from diversify.stores.exclusion import check_refill

ROOT = Path(__file__).resolve().parents[2]
BUDGETS = {"max_exclude", "max_exclude_members"}


def _literal_defaults(source: str, label: str) -> list[str]:
    """``label:line name=value`` for every parameter named like a budget whose default is a number."""
    out = []
    for node in ast.walk(ast.parse(source, filename=label)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        pairs = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            if arg.arg in BUDGETS and isinstance(default, ast.Constant) and isinstance(default.value, int):
                out.append(f"{label}:{node.lineno} {arg.arg}={default.value}")
    return out


def test_no_signature_spells_its_own_exclusion_budget():
    files = sorted((ROOT / "diversify").rglob("*.py")) + sorted(
        p for p in (ROOT / "integrations").rglob("*.py") if "tests" not in p.parts)
    found = [hit for p in files for hit in _literal_defaults(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, (f"exclusion budgets with their own default: {found}. Use "
                       "diversify.online.budget.MAX_EXCLUDE_MEMBERS / MAX_EXCLUDE_PER_CALL")


def test_the_check_sees_a_literal_default():
    """The scan above is not vacuous: the spelling the online layer used to have is reported."""
    source = ("def f(q, max_exclude=256, *, max_exclude_members=1000, k=3):\n    pass\n"
              "def g(max_exclude=None, max_exclude_members=MAX_EXCLUDE_MEMBERS):\n    pass\n")
    assert _literal_defaults(source, "probe.py") == ["probe.py:1 max_exclude=256", "probe.py:1 max_exclude_members=1000"]


def test_every_layer_takes_the_online_defaults():
    assert Diversifier().max_exclude_members == budget.MAX_EXCLUDE_MEMBERS == 1000
    assert check_refill("auto", None) == ("auto", budget.MAX_EXCLUDE_PER_CALL)
    store = NumpyStore(np.eye(4, dtype=np.float32), ids=["a", "b", "c", "d"])
    assert store.max_exclude == budget.MAX_EXCLUDE_PER_CALL == 256
    assert NumpyStore(np.eye(4, dtype=np.float32), ids=["a", "b", "c", "d"], max_exclude=7).max_exclude == 7
    check_settings(cluster_field="cluster_id")  # the plugins' validation accepts the shared default


def test_the_per_call_budget_bounds_what_one_store_call_carries():
    """A refetch may ask to leave out more ids than one call carries: the adapter pushes down at most
    ``max_exclude`` and asks for that many more hits, dropping them itself."""
    vectors = np.eye(8, dtype=np.float32)
    store = NumpyStore(vectors, ids=[f"d{i}" for i in range(8)], refill="exclude", max_exclude=2)
    hits = store.search(vectors[0], 3, exclude_ids=["d0", "d1", "d2", "d3"])
    ids = [h.id for h in hits]
    assert len(ids) == 3 and not {"d0", "d1", "d2", "d3"} & set(ids)
