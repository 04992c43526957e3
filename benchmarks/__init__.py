"""Benchmarks for diversify, side by side with peers (datasketch, rensa), outside the test suite.

Run ``python -m benchmarks run --suite build|scaling|quality`` and ``python -m benchmarks report``.
Each run writes JSON to ``benchmarks/results/`` and ``report`` regenerates ``benchmarks/RESULTS.md``
from those files only. Peers are measurement-only dependencies (``pip install -e .[bench]`` plus
scipy); the library never imports them.
"""
