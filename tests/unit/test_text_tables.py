"""Lookup tables of the normalizer stay in sync with Python's Unicode data."""


def test_unicode_space_table_is_complete():
    import sys

    from diversify.text.tables import UNICODE_SPACES

    assert sorted(UNICODE_SPACES) == [cp for cp in range(128, sys.maxunicode + 1) if chr(cp).isspace()]


def test_code_points_is_the_join_of_every_chr_it_replaces():
    """The tables are built from code_points(); it must be exactly the str that one chr() per code
    point gives, lone surrogates and the ends of the ranges included, with and without a separator."""
    import sys

    from diversify.text import code_points

    for lo, hi in ((0, 0), (0, 1), (0xD7F0, 0xE010), (0x10FFF0, sys.maxunicode + 1), (1, 0x20000)):
        assert code_points(lo, hi) == "".join(map(chr, range(lo, hi)))
        assert code_points(lo, hi, sep="\x00") == "\x00".join(map(chr, range(lo, hi)))
    assert code_points(0, sys.maxunicode + 1) == "".join(map(chr, range(sys.maxunicode + 1)))
