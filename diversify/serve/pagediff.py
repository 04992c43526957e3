"""The word-level differences the page marks between a cluster's representative and a member.

A text is cut into words, each with the spaces and punctuation after it (:func:`words`), so joining
the pieces gives the text back exactly. Words are compared by their letters and digits alone, case
folded, so a changed comma or capital does not break a run of equal words; the pieces keep the
original characters. :func:`word_diff` returns the runs of a shortest edit script over those words
(Myers' algorithm, after the common first and last words): ``"="`` (in both: the member's
characters), ``"-"`` (only in the shown document) and ``"+"`` (only in the member). Joining the ``"="`` and ``"+"`` runs gives the member's text; the
``"-"`` and ``"="`` runs give the shown document's, but for the case and punctuation of equal words
(the ``"="`` runs carry the member's).

Both texts are compared over their first :data:`DIFF_WORDS` words; what follows is one ``"="`` or
``"+"`` run of the member's rest, flagged ``cut``; a middle part that needs more than
:data:`MAX_EDITS` word edits is marked replaced whole, flagged ``coarse``. So a request costs what
two texts of that many words cost, whatever the documents.
"""

from __future__ import annotations

import re

__all__ = ["DIFF_WORDS", "MAX_EDITS", "words", "word_diff"]

#: words of each text compared at most
DIFF_WORDS = 2000
#: word edits looked for between the common first and last words at most
MAX_EDITS = 400

# a word with what follows it up to the next word; a text's leading non-word characters are a piece of their own
_PIECE = re.compile(r"[^\W_]+[\W_]*|[\W_]+", re.UNICODE)
_LETTERS = re.compile(r"[\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    """The pieces of ``text``: a word and the characters up to the next word (``"".join`` gives ``text``)."""
    return _PIECE.findall(text)


def _key(piece: str) -> str:
    return _LETTERS.sub("", piece).casefold() or piece


def _edits(a: list[str], b: list[str], max_d: int) -> list[tuple[str, int]] | None:
    """A shortest edit script from ``a`` to ``b`` (Myers' greedy algorithm): ``("=", j)``, ``("-", i)``
    and ``("+", j)`` in order; None when it needs more than ``max_d`` edits. Work grows with
    ``(len(a) + len(b)) * max_d`` at most."""
    n, m = len(a), len(b)
    off = max_d + 1
    v = [0] * (2 * max_d + 3)
    trace = []
    for d in range(max_d + 1):
        trace.append(v[:])
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[off + k - 1] < v[off + k + 1]):
                x = v[off + k + 1]
            else:
                x = v[off + k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            v[off + k] = x
            if x >= n and y >= m:
                return _backtrack(trace, n, m, off)
    return None


def _backtrack(trace: list[list[int]], x: int, y: int, off: int) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for d in range(len(trace) - 1, -1, -1):
        v, k = trace[d], x - y
        if d == 0:
            px = py = 0
        else:
            pk = k + 1 if (k == -d or (k != d and v[off + k - 1] < v[off + k + 1])) else k - 1
            px = v[off + pk]
            py = px - pk
        while x > px and y > py:
            x, y = x - 1, y - 1
            out.append(("=", y))
        if d > 0:
            out.append(("+", py) if x == px else ("-", px))
        x, y = px, py
    out.reverse()
    return out


def word_diff(shown: str, member: str) -> dict:
    """``{"ops": [[op, text], ...], "cut": bool, "coarse": bool}``: the runs of the member against
    the shown document (see the module docstring); adjacent runs of one op are merged. ``coarse``:
    the middle part (between the common first and last words) needed more than :data:`MAX_EDITS`
    word edits, so it is marked as replaced whole."""
    a, b = words(shown), words(member)
    cut = len(a) > DIFF_WORDS or len(b) > DIFF_WORDS
    a_in, b_in = a[:DIFF_WORDS], b[:DIFF_WORDS]
    ka, kb = [_key(p) for p in a_in], [_key(p) for p in b_in]
    lo = 0
    while lo < len(ka) and lo < len(kb) and ka[lo] == kb[lo]:
        lo += 1
    hi = 0
    while hi < len(ka) - lo and hi < len(kb) - lo and ka[-1 - hi] == kb[-1 - hi]:
        hi += 1
    ops: list[list[str]] = []

    def put(op: str, text: str) -> None:
        if not text:
            return
        if ops and ops[-1][0] == op:
            ops[-1][1] += text
        else:
            ops.append([op, text])

    put("=", "".join(b_in[:lo]))
    mid = _edits(ka[lo:len(ka) - hi], kb[lo:len(kb) - hi], MAX_EDITS)
    if mid is None:
        put("-", "".join(a_in[lo:len(a_in) - hi]))
        put("+", "".join(b_in[lo:len(b_in) - hi]))
    else:
        for op, i in mid:
            put(op, a_in[lo + i] if op == "-" else b_in[lo + i])
    put("=", "".join(b_in[len(b_in) - hi:]))
    rest = "".join(b[DIFF_WORDS:])
    if rest:
        put("=" if "".join(a[DIFF_WORDS:]) == rest else "+", rest)
    return {"ops": ops, "cut": cut, "coarse": mid is None}
