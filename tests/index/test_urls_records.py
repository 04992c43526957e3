"""Properties of the URL rules (diversify.index.urls) and of the checked record readers
(diversify.index.records), without a server: any text is either refused with a ConfigError /
StorageError or read as exactly what it spells."""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diversify.errors import ConfigError, StorageError
from diversify.index.records import checked_int, checked_meta, checked_state, stored_id
from diversify.index.registry import scheme_of
from diversify.index.sqlite import sqlite_path
from diversify.index.storage import Meta, State
from diversify.index.urls import check_url

_CONTROL = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]}
NAMES = st.text(st.characters(blacklist_characters="/", blacklist_categories=["Cs"]), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(NAMES)
def test_a_quoted_file_name_opens_exactly_that_file(name):
    url = "sqlite:///dir/" + urllib.parse.quote(name)
    if set(name) & _CONTROL or name in (".", ".."):
        with pytest.raises(ConfigError):
            sqlite_path(url)
    else:
        assert sqlite_path(url) == "dir/" + name


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=40))
def test_any_sqlite_url_is_refused_or_names_the_file_its_path_spells(tail):
    url = "sqlite:///" + tail
    try:
        path = sqlite_path(url)
    except ConfigError as exc:
        assert str(exc).startswith(("`url` ", "a sqlite index is one file"))
        return
    assert not set(path) & _CONTROL and "#" not in tail
    assert "?" not in tail or tail.split("?", 1)[1]  # a '?' only before known parameters
    assert path == urllib.parse.unquote(tail.split("?", 1)[0])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["postgresql", "redis", "rediss", "unix", "sqlite"]), st.text(max_size=40))
def test_any_server_url_is_refused_with_a_config_error_or_passes(scheme, rest):
    url = f"{scheme}://{rest}"
    try:
        check_url(url, scheme_of(url))
    except ConfigError:
        return
    assert not set(url) & _CONTROL and "#" not in url


VALUES = st.one_of(st.none(), st.integers(), st.text(max_size=12), st.binary(max_size=12), st.floats(),
                   st.booleans(), st.lists(st.integers(), max_size=2))


@settings(max_examples=400, deadline=None)
@given(VALUES, VALUES, VALUES, VALUES)
def test_a_state_record_is_read_or_refused_naming_a_field(next_seq, next_cluster, id_kind, layout):
    try:
        got = checked_state("u", next_seq, next_cluster, id_kind, layout)
    except StorageError as exc:
        assert any(f"`{f}`" in str(exc) for f in ("next_seq", "next_cluster", "id_kind", "layout")), exc
        return
    assert isinstance(got, State) and 0 <= got.next_seq < 2**63 and 0 <= got.next_cluster < 2**63
    assert got.id_kind in (None, "str", "int") and isinstance(got.layout, str)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["schema_version", "config_json", "fingerprint", "created_by", "x"]), VALUES))
def test_a_meta_record_is_read_or_refused_naming_a_field(fields):
    try:
        got = checked_meta(fields, "u")
    except StorageError as exc:
        assert "the meta record of the index at u is damaged" in str(exc)
        return
    assert isinstance(got, Meta) and got.schema_version >= 1


def test_counters_and_ids_in_decimal_only():
    assert checked_int("u", "state", "n", b"42", 0) == 42 and checked_int("u", "state", "n", 7, 0) == 7
    for bad in ("042", " 42", "4_2", "+4", "٤٢", "4.0", str(2**63), b"\xff", True, None, "-1"):
        with pytest.raises(StorageError, match="`n` must be"):
            checked_int("u", "state", "n", bad, 0)
    assert stored_id("-12", "int", "u") == -12 and stored_id("x", "str", "u") == "x"
    for bad in ("01", "1.0", "x", "", " 1", "١"):
        with pytest.raises(StorageError, match="contradicts the stored ids"):
            stored_id(bad, "int", "u")
