"""What one measured row is (:class:`System`), what it returns (:class:`Outcome`) and what every
row's builder gets (:class:`Setup`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

K = 10  # results per query
FETCH_K = 25  # what diversify asks for first at k=10 (k + k/n + 5); peers that re-rank get as many


class Skip(Exception):
    """A row (or a whole store) that cannot run here; the message says why."""


@dataclass(frozen=True)
class Query:
    text: str
    tenant: str  # the tenant of the chunk the query was cut from
    source_id: int


@dataclass(frozen=True)
class Outcome:
    ids: list  # returned document ids (the corpus's int ids), rank order
    reported_calls: Optional[int] = None  # Result.backend_calls, for diversify rows
    exhausted: Optional[bool] = None


@dataclass
class System:
    framework: str  # "diversify" (the core adapters), "LangChain", "LlamaIndex", "Haystack"
    store: str
    method: str  # what is called, in words
    kind: str  # "baseline" (the store's own top-k), "diversify", "peer" (the ecosystem's own dedup)
    call: Callable[[Query, Optional[str]], Outcome]  # (query, tenant or None) -> Outcome
    filter: Optional[str] = None  # how the tenant filter is given; None: this row cannot filter
    note: str = ""
    slow: bool = False  # seconds per query: measured on the first ``--slow-queries`` queries only
    unavailable: Optional[str] = None  # why this row cannot be built at the measured commit

    @property
    def name(self) -> str:
        return f"{self.framework} · {self.store} · {self.method}"


@dataclass
class Setup:
    """Everything a row builder needs: the corpus and its vectors, the artifact, the model, the probe."""

    corpus: Any  # corpus.Corpus
    vectors: Any  # (n, DIM) float32, row j = chunk id j
    model: Any  # embed.TfidfSvd
    embedder: Any  # embed.Embedder (counted)
    probe: Any  # probe.Probe
    cluster_map: Any  # diversify.ClusterMap (loaded from the saved artifact)
    workdir: str
    tenants: tuple = ()
    stores: dict = field(default_factory=dict)  # shared store objects (a Qdrant client...) by name

    def per_tenant(self, make: Callable[[Optional[str]], Any]) -> dict:
        """``make(tenant)`` for the open case (None) and every tenant, built once up front."""
        return {t: make(t) for t in (None, *self.tenants)}


def guarded(framework: str, store: str, method: str, kind: str, make: Callable[[], Callable], filt=None,
            note: str = "", slow: bool = False) -> System:
    """A row whose objects ``make()`` builds (returning its call); an API the measured commit does not
    have (a ConfigError for an argument it does not know...) makes the row *unavailable*, not the suite fail."""
    try:
        call = make()
    except Exception as exc:
        return System(framework, store, method, kind, _never, filt, note, slow,
                      unavailable=f"{type(exc).__name__}: {exc}"[:300])
    return System(framework, store, method, kind, call, filt, note, slow)


def _never(q: Query, tenant: Optional[str]) -> Outcome:
    raise RuntimeError("unavailable row called")


def ids_of(items, get: Callable[[Any], Any]) -> list:
    return [int(get(x)) for x in items]
