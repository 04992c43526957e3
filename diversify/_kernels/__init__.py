"""Numba kernels: the only modules of diversify that import numba.

Rules (see STYLE.md): kernels take preallocated arrays, never validate, never raise, and return
nothing or plain scalars. Hash arithmetic stays in ``uint64`` with typed constants. Validation and
errors live in the Python modules that call them. A ``parallel=True`` kernel is called from Python
only: its launcher (:mod:`._runtime`) chooses the threading layer and serializes launches where
the layer needs it. The on-disk cache and the fork rules are in :mod:`._runtime`.
"""
