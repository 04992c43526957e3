""""Fold" names what users see, held by reading the source (kind: contract).

A fold is the online act: similar results hidden under the one shown ("N very similar results
omitted"), and the promise that every folded document is verified similar to its representative.
The build's step that cuts components into clusters around representatives is "the cut", not "the
fold check", and the engines' per-document arrays are named for what they hold. The clusters
package and the cut's kernel (diversify/clusters/, diversify/_kernels/fold.py) keep their own names
until they are renamed together; the text rule's Unicode case fold (diversify/text/) is another
word.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "diversify"
#: where the cut's own names still live (renamed in one step with their tests)
NOT_YET = (PACKAGE / "clusters", PACKAGE / "_kernels" / "fold.py")
#: identifiers the engines used for the cut's output
CUT_NAMES = {"fold", "fold_sim"}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts
                  and not any(p == q or q in p.parents for q in NOT_YET))


def test_the_cut_is_not_called_the_fold_check():
    found = [f"{p.relative_to(PACKAGE.parent)}:{i}: {line.strip()}"
             for p in _modules() for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"fold(ing)?\s+check", line, re.IGNORECASE)]
    assert not found, ("the cut of components into clusters is 'the cut' (fold is what users see); found:\n"
                       + "\n".join(found))


def test_the_engines_name_the_cuts_output_for_what_it_holds():
    found = []
    for p in sorted((PACKAGE / "engines").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(), filename=str(p))):
            name = node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.arg) else None
            if name in CUT_NAMES:
                found.append(f"{p.relative_to(PACKAGE.parent)}:{node.lineno}: {name}")
    assert not found, "name the cut's statistics and similarities for what they hold:\n" + "\n".join(found)


def test_the_user_facing_fold_names_stay():
    """The online options and the artifact's keys keep the word: renaming them would break users."""
    from diversify import Diversifier
    from diversify.online.types import Kept

    assert {"fold_threshold", "fold_text_threshold"} <= set(Diversifier.__init__.__code__.co_varnames)
    assert "folded" in dir(Kept)
    finish = (PACKAGE / "engines" / "finish.py").read_text()
    assert 'build_info["fold"]' in finish and 'extras["fold_similarity"]' in finish
