"""`diversify build --embed MODEL`: embed the texts before the build, so the SimHash stage runs too;
and the lines of `stats` that say which stage folded what (Jaccard or cosine)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..errors import DiversifyError

EMBED_CACHE_SUFFIX = ".embed-cache.npz"


def add_embed_args(p) -> None:
    p.add_argument("--embed", default=None, metavar="MODEL",
                   help="embed the texts with a local model2vec model (a directory, or an installed package that ships "
                        "one; nothing is downloaded) so the cosine stage runs beside the text stages; the vectors are "
                        f"cached in OUTPUT{EMBED_CACHE_SUFFIX} (needs the [embed] extra) (default: none)")
    p.add_argument("--embed-batch-size", type=int, default=None, metavar="N",
                   help="with --embed: texts per call of the model (default 1024)")


def check_embed_options(a) -> None:
    """--embed needs the texts in memory, on the local engine, and gives the vectors itself."""
    if a.embed is None:
        if a.embed_batch_size is not None:
            raise DiversifyError(f"`--embed-batch-size` applies with --embed; got --embed-batch-size "
                                 f"{a.embed_batch_size} alone. Add --embed MODEL, or drop --embed-batch-size.")
        return
    clash = [flag for flag, given in (("--vectors", a.vectors is not None), ("--engine dask", a.engine == "dask"),
                                      ("--stream", a.stream), ("--parent-field", a.parent_field is not None))
             if given]
    if clash:
        raise DiversifyError(f"`--embed` embeds the texts in memory on this machine and makes the vectors itself; it "
                             f"does not combine with {', '.join(clash)}. Drop {' and '.join(clash)}, or drop --embed.")
    if a.input is None:
        raise DiversifyError("`--embed` embeds the texts of an INPUT file; give one (JSONL, Parquet, CSV or text).")


def embed_inputs(a, texts, ids):
    """(texts, ids, vectors, build_info entry) with the texts embedded by ``--embed``."""
    from ..embedding import DEFAULT_BATCH_SIZE, embed_with_info
    from ..files import check_output_path

    texts, ids = list(texts), list(ids) if ids is not None else None
    cache = a.output + EMBED_CACHE_SUFFIX
    check_output_path(cache, param="-o", what="the vector cache")
    batch = DEFAULT_BATCH_SIZE if a.embed_batch_size is None else a.embed_batch_size
    vectors, info, embedded = embed_with_info(texts, model=a.embed, batch_size=batch, progress=not a.no_progress,
                                              cache=cache, cache_param="-o")
    entry = dict(info.as_dict(), embedded=int(embedded), cached=len(texts) - int(embedded))
    return texts, ids, vectors, entry


def with_embedding(res, entry: dict):
    """The build result whose artifact records the model in ``build_info["embedding"]``."""
    from ..artifact import ClusterMap

    cm = res.cluster_map
    record = {k: entry[k] for k in ("model", "library", "model_sha256", "dim")}
    cmap = ClusterMap.from_arrays(
        cm.ids, np.asarray(cm.cluster_ids), np.asarray(cm.is_representative, dtype=bool), np.asarray(cm.doc_stages),
        np.asarray(cm.doc_lengths), config=cm.config, fingerprint=cm.fingerprint, seed=cm.seed,
        hash_scheme=cm.hash_scheme, build_info=dict(cm.build_info, embedding=record), metadata=cm.metadata,
        created_at=cm.created_at)
    return dataclasses.replace(res, cluster_map=cmap, report=dict(res.report, embedding=record))


def embed_line(entry: dict) -> str:
    return (f"embedded         {entry['embedded']:,} texts with {entry['model']} ({entry['library']}, {entry['dim']}-d; "
            f"{entry['cached']:,} from the cache)")


def fold_stages(cm) -> dict:
    """Folded documents (not representatives) by the stage that joined each: exact, Jaccard
    (MinHash or text SimHash), cosine (SimHash over vectors); a document joined by two counts in both."""
    from ..stages import STAGE_EXACT, STAGE_MINHASH, STAGE_SIMHASH, STAGE_TEXT_SIMHASH

    stages = np.asarray(cm.doc_stages, dtype=np.uint8)
    folded = stages[~np.asarray(cm.is_representative, dtype=bool)]
    return {"folded": int(folded.size), "exact": int(np.count_nonzero(folded & STAGE_EXACT)),
            "jaccard": int(np.count_nonzero(folded & (STAGE_MINHASH | STAGE_TEXT_SIMHASH))),
            "cosine": int(np.count_nonzero(folded & STAGE_SIMHASH))}


def cosine_threshold(cm) -> Optional[float]:
    """The cosine threshold the build applied, or None when its SimHash stage did not run (no vectors)."""
    lsh = cm.build_info.get("lsh") if isinstance(cm.build_info, dict) else None
    if not isinstance(lsh, dict) or "simhash" not in lsh:
        return None
    sim = cm.config.get("simhash") if isinstance(cm.config, dict) else None
    t = sim.get("threshold") if isinstance(sim, dict) else None
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def _shown(value) -> str:
    """A value read from an artifact's header: a number as it is, anything else escaped."""
    from .output import printable

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    return printable(value)


def stats_lines(cm, folds: dict, embedding) -> list[str]:
    """The lines of `stats` about the stages that folded documents and the cosine threshold."""
    mh = cm.config.get("minhash") or {}
    t = cosine_threshold(cm)
    lines = [f"folded by stage  exact {folds['exact']:,}; Jaccard {folds['jaccard']:,} (threshold "
             f"{_shown(mh.get('threshold'))}); cosine {folds['cosine']:,} (threshold "
             f"{'off: no vectors' if t is None else _shown(t)}) of {folds['folded']:,} folded (one joined by two stages counts in "
             "both)"]
    if t is not None and t < 0.85:
        lines.append(f"warning          cosine threshold {t:g} < 0.85 folds paraphrases and topic neighbours, not "
                     "only near-duplicates (docs/paraphrases.md)")
    if isinstance(embedding, dict):
        lines.append(f"embedding        {_shown(embedding.get('model'))} ({_shown(embedding.get('library'))}, "
                     f"{_shown(embedding.get('dim'))}-d, sha256 {_shown(str(embedding.get('model_sha256'))[:12])})")
    return lines
