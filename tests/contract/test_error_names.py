"""The two errors of outside systems have names that say their layer: ``VectorStoreError`` (a
vector store adapter or the search it wraps failed) is ``StoreError``, and ``IndexStorageError``
(the storage of a live index failed) is ``StorageError``; the first names stay."""

from __future__ import annotations

import pytest

import diversify
from diversify import Diversifier
from diversify.errors import DiversifyError, IndexStorageError, StorageError, StoreError, VectorStoreError


def test_the_clear_names_are_the_same_classes_and_public():
    assert VectorStoreError is StoreError and diversify.VectorStoreError is StoreError
    assert IndexStorageError is StorageError and diversify.IndexStorageError is StorageError
    assert {"VectorStoreError", "IndexStorageError", "StoreError", "StorageError"} <= set(diversify.__all__)
    assert VectorStoreError is not IndexStorageError  # two layers, two errors
    for cls in (VectorStoreError, IndexStorageError):
        assert issubclass(cls, DiversifyError) and issubclass(cls, RuntimeError)


def test_a_failing_search_is_caught_as_a_vector_store_error():
    def broken(query, k):
        raise RuntimeError("connection reset")

    with pytest.raises(VectorStoreError, match="connection reset"):
        Diversifier({"a": 1}).wrap(broken)("q")


def test_a_missing_index_is_caught_as_an_index_storage_error(tmp_path):
    url = f"sqlite:///{tmp_path / 'none.db'}"
    with pytest.raises(IndexStorageError, match="there is no index"):
        diversify.Index(url, create=False)
