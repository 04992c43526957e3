"""Numba kernels: the only modules of diversify that import numba.

Rules (see STYLE.md): kernels take preallocated arrays, never validate, never raise, and return
nothing or plain scalars. Hash arithmetic stays in ``uint64`` with typed constants. Validation and
errors live in the Python modules that call them.
"""
