"""The SQLite backend's band filter is the library's one Bloom filter,
:class:`diversify.linking.keyfilter.KeyFilter`; the backend imports it from here."""

from __future__ import annotations

from ..linking.keyfilter import BITS_PER_KEY, MIN_BITS, MIN_BITS_PER_KEY, PROBES, KeyFilter, bits_for

__all__ = ["BITS_PER_KEY", "MIN_BITS", "MIN_BITS_PER_KEY", "PROBES", "KeyFilter", "bits_for"]
