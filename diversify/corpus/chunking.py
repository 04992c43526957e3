"""Paragraph-aligned chunks of one page, with their offsets: :func:`chunk_paragraphs`.

Fixed-size windows of near-duplicate pages (a reference page in its alpha, beta and GA versions)
start at different words as soon as one version adds a line, so chunk *i* of one version and chunk
*i* of the other share few shingles. Chunks made here end only at paragraph breaks, and a chunk
that has reached ``min_words`` ends at the first paragraph whose last words are an *anchor* (a
fixed hash of those words, about one paragraph in four). The anchor depends on the paragraph's own
words, not on how many came before, so two versions of a page that differ by a paragraph cut their
chunks at the same places again after it (docs/recipes/chunked-rag.md has the measurements).

The rules, in order:

1. Paragraphs are the spans between matches of ``breaks`` (by default one or more blank lines).
2. A word is a maximal run of non-whitespace characters (``str.split``'s words); a paragraph
   without a word is skipped.
3. A paragraph longer than ``max_words`` is cut into the fewest pieces of at most ``max_words``
   words, of equal size give or take one word; each piece counts as a paragraph below.
4. Paragraphs are added to the open chunk in order. If the next one would take the chunk over
   ``max_words``, the chunk ends before it. After adding a paragraph, the chunk ends if it holds at
   least ``min_words`` words and the paragraph is an anchor.
5. A chunk's ``text`` is ``page[start:end]``: from its first word's first character to its last
   word's last character (the breaks between its paragraphs included as they are).

Pure Python, no dependency: importing this module loads nothing heavy.
"""

from __future__ import annotations

import re
import zlib
from typing import NamedTuple, Union

from ..errors import InputError, InputTypeError

__all__ = ["Chunk", "chunk_paragraphs", "BLANK_LINES", "ANCHOR_EVERY"]

#: the default paragraph break: a line break, any blank lines (whitespace only), a line break
BLANK_LINES = r"\n\s*\n"
#: a paragraph is an anchor when the hash of its last words is 0 modulo this (about one in four)
ANCHOR_EVERY = 4
_ANCHOR_WORDS = 3
_WORD = re.compile(r"\S+")


class Chunk(NamedTuple):
    """One chunk of a page: ``text == page[start:end]``; ``words`` counts its whitespace-separated words."""

    start: int
    end: int
    text: str
    words: int


def _check(text: object, max_words: object, min_words: object, breaks: object) -> tuple[int, int, re.Pattern]:
    if not isinstance(text, str):
        raise InputTypeError(f"`text` must be a str (one page); got {type(text).__name__}. Decode bytes first "
                             "(e.g. data.decode('utf-8')).")
    for name, value in (("max_words", max_words), ("min_words", min_words)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputTypeError(f"`{name}` must be an int; got {type(value).__name__} {value!r}. Pass a whole "
                                 "number of words, e.g. 200.")
    if max_words is None or max_words < 1:  # type: ignore[operator]
        raise InputError(f"`max_words` must be at least 1; got {max_words!r}. Chunks of 100 to 300 words suit "
                         "most embedding models (e.g. max_words=200).")
    low = max_words // 2 if min_words is None else min_words  # type: ignore[operator]
    if not 0 <= low <= max_words:  # type: ignore[operator]
        raise InputError(f"`min_words` must be between 0 and max_words ({max_words}); got {min_words!r}. Leave it "
                         "unset for max_words // 2.")
    if isinstance(breaks, re.Pattern):
        pattern = breaks
    elif isinstance(breaks, str):
        try:
            pattern = re.compile(breaks)
        except re.error as e:
            raise InputError(f"`breaks` must be a regular expression; {breaks!r} is not ({e}). The default is "
                             f"{BLANK_LINES!r} (blank lines).") from None
    else:
        raise InputTypeError(f"`breaks` must be a regular expression (str or re.Pattern); got "
                             f"{type(breaks).__name__}.")
    if pattern.search("") is not None:
        raise InputError(f"`breaks` must not match the empty string (it would break everywhere); got "
                         f"{pattern.pattern!r}. Match at least one character, e.g. {BLANK_LINES!r}.")
    return max_words, low, pattern  # type: ignore[return-value]


def _paragraphs(text: str, pattern: re.Pattern) -> list[list[tuple[int, int]]]:
    """The word spans of each paragraph that has words, in order."""
    out = []
    pos = 0
    for m in [*pattern.finditer(text), None]:
        end = len(text) if m is None else m.start()
        spans = [(w.start(), w.end()) for w in _WORD.finditer(text, pos, end)]
        if spans:
            out.append(spans)
        if m is not None:
            pos = max(m.end(), pos)
    return out


def _pieces(spans: list[tuple[int, int]], max_words: int) -> list[list[tuple[int, int]]]:
    if len(spans) <= max_words:
        return [spans]
    n = -(-len(spans) // max_words)
    size, extra = divmod(len(spans), n)
    out, at = [], 0
    for i in range(n):
        step = size + (i < extra)
        out.append(spans[at:at + step])
        at += step
    return out


def _is_anchor(text: str, spans: list[tuple[int, int]]) -> bool:
    tail = " ".join(text[a:b].casefold() for a, b in spans[-_ANCHOR_WORDS:])
    return zlib.crc32(tail.encode("utf-8", "surrogatepass")) % ANCHOR_EVERY == 0


def chunk_paragraphs(text: str, *, max_words: int = 200, min_words: Union[int, None] = None,
                     breaks: Union[str, re.Pattern] = BLANK_LINES) -> list[Chunk]:
    """Cut one page into paragraph-aligned chunks of at most ``max_words`` words (rules: module docstring).

    Parameters
    ----------
    text : str
        The page.
    max_words : int, default 200
        No chunk has more words (whitespace-separated) than this.
    min_words : int, optional
        A chunk ends at an anchor paragraph only once it has this many words; default
        ``max_words // 2``. 0 ends a chunk at every anchor.
    breaks : str or re.Pattern, default blank lines
        What separates paragraphs. For raw roff (man pages without blank lines) a pattern such
        as ``r"\\n(?=\\.(?:SH|SS|PP|P|LP|TP|IP)\\b)"`` breaks before each paragraph macro.

    Returns
    -------
    list of Chunk
        In page order, none empty, ``chunk.text == text[chunk.start:chunk.end]``; the same page
        and arguments give the same chunks on every platform and process.
    """
    max_words, low, pattern = _check(text, max_words, min_words, breaks)
    chunks: list[Chunk] = []
    open_: list[tuple[int, int]] = []

    def close() -> None:
        start, end = open_[0][0], open_[-1][1]
        chunks.append(Chunk(start, end, text[start:end], len(open_)))
        open_.clear()

    for paragraph in _paragraphs(text, pattern):
        for piece in _pieces(paragraph, max_words):
            if open_ and len(open_) + len(piece) > max_words:
                close()
            open_.extend(piece)
            if len(open_) >= low and _is_anchor(text, piece):
                close()
    if open_:
        close()
    return chunks
