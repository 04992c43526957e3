"""Shared contract tests.

``StoreContract`` is subclassed once per store adapter (tests/integration/test_stores*.py);
``PluginContract`` once per framework plugin (integrations/*/tests). Both draw on the same
seeded corpus (:func:`make_corpus`) and the same slow, obvious oracle (:func:`oracle_select`).

Import from any test module (``tests`` is on pytest's ``pythonpath``) as ``from contract import StoreContract``.
"""

from .corpus import Corpus, StubClusterMap, make_cluster_map, make_corpus, oracle_select
from .plugin_contract import PluginContract
from .store_contract import StoreContract

__all__ = ["Corpus", "StubClusterMap", "make_cluster_map", "make_corpus", "oracle_select",
           "StoreContract", "PluginContract"]
