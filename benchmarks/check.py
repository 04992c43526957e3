"""``python -m benchmarks check``: the harness checks itself before anyone trusts its numbers.

1. The similarity join equals brute force on small generated corpora (several thresholds).
2. The reference tokenizer agrees with the library's ``shingle_hashes`` on which shingles
   documents share (pairwise intersection sizes and set sizes), on edge-case texts.
3. Layout: no module of the harness over 500 lines, no function over 80.
4. The integrations suite's pass/fail rows, recomputed from the numbers in
   ``results/integrations.json`` (when present): no filter violation, diversify at least as many
   distinct clusters as the same framework's MMR, ``Result.backend_calls`` equal to the store
   calls counted around the store, no row that raised.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

EDGE_TEXTS = [
    "", "   ", "!!!", "one", "Two words", "three words here", "a b c d", "a b c d e", "A, B. c; D: e!",
    "ﬁne ﬁsh swim in the sea", "fine fish swim in the sea", "Straße ist lang und breit heute",
    "STRASSE IST LANG UND BREIT HEUTE", "ｆｕｌｌ ｗｉｄｔｈ ｔｅｘｔ ｉｓ ｈｅｒｅ", "full width text is here",
    "tab\tseparated\nnew line\u00a0nbsp\u2003em space", "tab separated new line nbsp em space",
    "café naïve résumé coöperate déjà vu", "cafe\u0301 nai\u0308ve résumé coöperate déjà vu",
    "emoji 🙂 in the middle of a sentence", "emoji 🙂in the middle of a sentence",
    "don't stop-believing (ever) [really] {ok}", "don t stop believing ever really ok",
    "Ünïcödé ÀÉÎÕÜ words everywhere now", "ünïcödé àéîõü words everywhere now",
    "x" * 50 + " " + "y" * 3, "ctrl\x01chars\x1fsplit\x7fwords too", "ctrl chars split words too", "numbers 123 456 7.89 10,000 and more",
]


def check_join(seeds=range(3)) -> None:
    from .lib import generate_corpus
    from .reference import ShingleHasher
    from .truth import brute_force, similarity_join

    for seed in seeds:
        c = generate_corpus(500, words_per_doc=40, dup_fraction=0.4, edit_rate=(0.0, 0.12),
                            boilerplate_fraction=0.1, seed=seed)
        ip, hs = ShingleHasher().hash_many(c.texts + EDGE_TEXTS)
        for t in (0.3, 0.5, 0.8, 0.95):
            got = sorted(map(tuple, similarity_join(ip, hs, t)[0].tolist()))
            want = brute_force(ip, hs, t)
            assert got == want, f"join != brute force (seed {seed}, t {t}): {len(got)} vs {len(want)} pairs"
    print("join: OK (equals brute force)")


def check_tokenizer() -> list[str]:
    from .reference import ShingleHasher

    try:
        from .lib import shingle_hashes
    except ImportError as e:
        print(f"tokenizer: skipped ({e})")
        return []
    texts = EDGE_TEXTS
    ip, hs = ShingleHasher().hash_many(texts)
    ours = shingle_hashes(texts)
    ref_sets = [set(hs[ip[i] : ip[i + 1]].tolist()) for i in range(len(texts))]
    our_sets = [set(ours.hashes[ours.indptr[i] : ours.indptr[i + 1]].tolist()) for i in range(len(texts))]
    problems = []
    for i in range(len(texts)):
        if len(ref_sets[i]) != len(our_sets[i]):
            problems.append(f"doc {i} {texts[i]!r:.50}: reference {len(ref_sets[i])} shingles, ours {len(our_sets[i])}")
    for i, j in itertools.combinations(range(len(texts)), 2):
        a, b = len(ref_sets[i] & ref_sets[j]), len(our_sets[i] & our_sets[j])
        if a != b:
            problems.append(f"docs {i},{j} ({texts[i]!r:.30} / {texts[j]!r:.30}): shared reference {a}, ours {b}")
    print("tokenizer: OK (reference == library on shared shingles)" if not problems else
          "tokenizer: DIFFERENCES\n  " + "\n  ".join(problems))
    return problems


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 80


def check_layout(root: Path | None = None) -> list[str]:
    root = root or Path(__file__).resolve().parent
    problems = []
    for path in sorted(p for p in root.rglob("*.py") if ".cache" not in p.parts):
        src = path.read_text(encoding="utf-8")
        name = path.relative_to(root)
        if src.count("\n") > MAX_MODULE_LINES:
            problems.append(f"{name}: {src.count(chr(10))} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    problems.append(f"{name}:{node.lineno} {node.name}() is {length} lines "
                                    f"(at most {MAX_FUNCTION_LINES})")
    print("layout: OK" if not problems else "layout: TOO LONG\n  " + "\n  ".join(problems))
    return problems


def check_integrations(results: Path | None = None) -> list[str]:
    import json

    from .paths import RESULTS
    from .rag.measure import checks

    path = (results or RESULTS) / "integrations.json"
    if not path.exists():
        print(f"integrations: skipped (no {path.name}; python -m benchmarks run --suite integrations)")
        return []
    d = json.loads(path.read_text(encoding="utf-8"))
    rows = checks(d["rows"])  # from the measured numbers, not the flags the run stored
    failed = [c for c in rows if not c["ok"]]
    at = str(d.get("environment", {}).get("diversify_commit", "?"))[:12]
    print(f"integrations (diversify at {at}): {len(rows) - len(failed)} checks passed, {len(failed)} failed" +
          "".join(f"\n  FAIL {c['check']}: {c['row']} ({c['mode']}): {c['got']}" for c in failed))
    return [f"integrations: {c['check']}: {c['row']}" for c in failed]


def main() -> int:
    check_join()
    problems = check_tokenizer() + check_layout() + check_integrations()
    return 1 if problems else 0
