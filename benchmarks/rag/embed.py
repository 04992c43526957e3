"""Local embeddings, nothing downloaded: TF-IDF over the corpus vocabulary, projected to ``DIM``
dimensions by a randomized truncated SVD (numpy / scipy.sparse, fixed seed), L2-normalized.
scikit-learn is not installed here; this is the same computation written out.

A text's vector is ``normalize(tfidf(text) @ components.T)``; documents and queries go through
the same ``encode``, so a stored vector and a re-computed one are identical. ``Embedder`` counts
its calls (the frameworks embed the query themselves; a hosted model bills each call).
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter

import numpy as np

DIM = 128
TOKEN = re.compile(r"[a-z0-9]{2,}")
MIN_DF, MAX_DF_SHARE, MAX_FEATURES = 2, 0.5, 50_000
OVERSAMPLE, POWER_ITERATIONS = 16, 4


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


class TfidfSvd:
    """``fit(texts)`` learns the vocabulary, idf and the SVD components; ``encode(texts)``."""

    def __init__(self, dim: int = DIM, seed: int = 0):
        self.dim, self.seed = dim, seed
        self.vocab: dict[str, int] = {}
        self.idf = np.zeros(0, dtype=np.float32)
        self.components = np.zeros((0, 0), dtype=np.float32)
        self.info: dict = {}

    def _tfidf(self, texts):
        from scipy import sparse

        indptr, indices, data = [0], [], []
        for text in texts:
            counts = Counter(self.vocab[t] for t in tokens(text) if t in self.vocab)
            cols = sorted(counts)
            vals = np.array([(1.0 + math.log(counts[c])) * self.idf[c] for c in cols], dtype=np.float32)
            norm = float(np.linalg.norm(vals)) if cols else 0.0
            indices += cols
            data += (vals / norm).tolist() if norm > 0 else vals.tolist()
            indptr.append(len(indices))
        return sparse.csr_matrix((np.array(data, dtype=np.float32), np.array(indices, dtype=np.int64),
                                  np.array(indptr, dtype=np.int64)), shape=(len(indptr) - 1, len(self.vocab)))

    def fit(self, texts: list[str]) -> TfidfSvd:
        t0 = time.perf_counter()
        df: Counter = Counter()
        for text in texts:
            df.update(set(tokens(text)))
        n = len(texts)
        kept = [(t, d) for t, d in df.items() if MIN_DF <= d <= MAX_DF_SHARE * n]
        kept.sort(key=lambda td: (-td[1], td[0]))
        kept = sorted(kept[:MAX_FEATURES])
        self.vocab = {t: j for j, (t, _) in enumerate(kept)}
        self.idf = np.array([math.log((1 + n) / (1 + d)) + 1.0 for _, d in kept], dtype=np.float32)
        a = self._tfidf(texts)
        self.components = _randomized_svd_components(a, self.dim, self.seed)
        self.info = {"vocabulary": len(self.vocab), "dim": self.dim, "min_df": MIN_DF, "max_df_share": MAX_DF_SHARE,
                     "max_features": MAX_FEATURES, "svd": f"randomized, oversample {OVERSAMPLE}, "
                     f"{POWER_ITERATIONS} power iterations, seed {self.seed}",
                     "fit_s": round(time.perf_counter() - t0, 2)}
        return self

    def encode(self, texts: list[str]) -> np.ndarray:
        x = np.asarray(self._tfidf(texts) @ self.components.T, dtype=np.float32)
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _orthonormal(y: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the columns of ``y`` (Cholesky QR, twice: cheap and stable enough)."""
    y = np.asarray(y, dtype=np.float64)
    for _ in range(2):
        g = y.T @ y
        g[np.diag_indices_from(g)] += 1e-12 * float(np.trace(g))
        y = np.linalg.solve(np.linalg.cholesky(g), y.T).T
    return y


def _randomized_svd_components(a, dim: int, seed: int) -> np.ndarray:
    """Top ``dim`` right singular vectors of sparse ``a`` (rows: documents), shape (dim, n_features)."""
    rng = np.random.default_rng(seed)
    omega = rng.standard_normal((a.shape[1], dim + OVERSAMPLE))
    q = _orthonormal(a @ omega)
    for _ in range(POWER_ITERATIONS):
        q = _orthonormal(a @ _orthonormal(a.T @ q))
    b = np.asarray((a.T @ q).T)  # (l, n_features) = q.T @ a
    w, u = np.linalg.eigh(b @ b.T)  # b = u s vt, so b b.T = u s^2 u.T
    top = np.argsort(-w)[:dim]
    vt = (u[:, top].T @ b) / np.sqrt(np.maximum(w[top], 1e-30))[:, None]
    signs = np.sign(vt[np.arange(vt.shape[0]), np.abs(vt).argmax(axis=1)])  # a fixed sign per component
    return np.ascontiguousarray(vt * signs[:, None], dtype=np.float32)


class Embedder:
    """The model as the frameworks see it: ``query(text)`` and ``documents(texts)``, counted; a
    ``probe`` (see :mod:`.probe`) times each call as backend work."""

    def __init__(self, model: TfidfSvd, probe):
        self.model, self.probe = model, probe

    def query(self, text: str) -> list[float]:
        with self.probe.backend("embed"):
            return self.model.encode([text])[0].tolist()

    def documents(self, texts: list[str]) -> list[list[float]]:
        with self.probe.backend("embed_documents"):
            return self.model.encode(list(texts)).tolist()


def langchain_embeddings(embedder: Embedder):
    from langchain_core.embeddings import Embeddings

    class LocalEmbeddings(Embeddings):
        """TF-IDF + SVD vectors computed here (no download)."""

        def embed_documents(self, texts):
            return embedder.documents(texts)

        def embed_query(self, text):
            return embedder.query(text)

    return LocalEmbeddings()


def llamaindex_embedding(embedder: Embedder):
    from llama_index.core.embeddings import BaseEmbedding

    class LocalEmbedding(BaseEmbedding):
        """TF-IDF + SVD vectors computed here (no download)."""

        def _get_query_embedding(self, query: str) -> list[float]:
            return embedder.query(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return embedder.query(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return embedder.documents([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return embedder.documents(texts)

    return LocalEmbedding(model_name="local-tfidf-svd", embed_batch_size=256)
