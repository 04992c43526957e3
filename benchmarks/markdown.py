"""The one formatter for RESULTS.md: numbers, table rows, tables, the machine line, commands."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

NONE = "—"

# Commands recorded by results made before the single entry point, and what runs them now
# (every suite kept its option names, so the rest of the command carries over).
LEGACY_COMMANDS = {
    "python -m benchmarks.peers_vectors": "python -m benchmarks run --suite vectors",
    "python -m benchmarks.peers_simhash": "python -m benchmarks run --suite simhash_text",
    "python -m benchmarks.online": "python -m benchmarks run --suite online",
    "python -m benchmarks.retrieval": "python -m benchmarks run --suite retrieval",
    "python -m benchmarks.plots": "python -m benchmarks run --suite plots",
    "python benchmarks/dask_bench.py": "python -m benchmarks run --suite dask",
}


def num(x, nd: int = 0, none: str = NONE) -> str:
    """``x`` with thousands separators and ``nd`` decimals; ``none`` for a missing value."""
    return none if x is None else f"{x:,.{nd}f}"


def fixed(x, nd: int = 4, none: str = NONE) -> str:
    """``x`` with ``nd`` decimals and no separators (scores, ratios)."""
    return none if x is None else f"{x:.{nd}f}"


def row(cells: Iterable[object]) -> str:
    """One table row; an empty cell stays empty (``| |``)."""
    return "|" + "".join(f" {c} |" if c != "" else " |" for c in cells)


def table(header: Sequence[str], align: str, rows: Iterable[Sequence[object]]) -> list[str]:
    """A markdown table: header, alignment row (``l`` or ``r`` per column), one line per row."""
    if len(align) != len(header):
        raise ValueError(f"table: {len(header)} columns but alignment {align!r}")
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align)
    return [row(header), rule, *(row(r) for r in rows)]


def skipped(lead: Sequence[object], why: str, width: int) -> list[object]:
    """Cells of a row for a measurement that did not run: ``lead``, the reason, empty cells."""
    cells = [*lead, f"skipped: {why}"]
    return cells + [""] * max(0, width - len(cells))


def env_line(env: dict) -> str:
    """CPU, CPUs, threads, memory, Python, versions and the measured commit, on one line."""
    v = env.get("versions", {})
    vs = ", ".join(f"{k} {val}" for k, val in v.items() if val)
    return (f"{env.get('cpu')} · {env.get('usable_cpus')} CPUs (numba threads {env.get('numba_threads')}) · "
            f"{env.get('memory_gb')} GB RAM · Python {env.get('python')} · {vs} · diversify at "
            f"{str(env.get('diversify_commit') or env.get('git_commit'))[:12]}")


def command(cmd: str | None, default: str) -> str:
    """The command that reproduces a result, in today's entry point."""
    cmd = cmd or default
    for old, new in LEGACY_COMMANDS.items():
        cmd = cmd.replace(old, new)
    return cmd


def load(r: dict, nd: int = 1, arrow: str = " → ") -> str:
    """1-minute load average before → after, from a protocol record."""
    if "loadavg_before" not in r:
        return NONE
    return f"{r['loadavg_before'][0]:.{nd}f}{arrow}{r['loadavg_after'][0]:.{nd}f}"


def section(lines: list[str]) -> list[str]:
    """A section's lines with trailing blank lines trimmed to one."""
    while lines and lines[-1] == "":
        lines = lines[:-1]
    return [*lines, ""]
