"""Lookup tables of the normalizer stay in sync with Python's Unicode data."""


def test_unicode_space_table_is_complete():
    import sys

    from diversify.text import _UNICODE_SPACES

    assert sorted(_UNICODE_SPACES) == [cp for cp in range(128, sys.maxunicode + 1) if chr(cp).isspace()]
