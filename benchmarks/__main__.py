"""``python -m benchmarks run [--suite build|scaling|quality|all] [--n N] [--tools ...]`` and
``python -m benchmarks report`` and ``python -m benchmarks check``."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _reexec_on_snapshot(argv) -> int:
    """Run again with ``diversify`` imported from an export of git HEAD (cwd comes first on
    sys.path), and ``benchmarks`` from this checkout. Workers inherit both."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    snap = ROOT / "benchmarks" / ".cache" / f"lib-{commit[:12]}"
    if not (snap / "diversify" / "__init__.py").exists():
        snap.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", commit, "diversify"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(snap)], input=archive.stdout, check=True)
    env = dict(os.environ, DIVERSIFY_BENCH_LIB=commit,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    print(f"measuring diversify at git HEAD {commit[:12]} (snapshot {snap})", file=sys.stderr, flush=True)
    return subprocess.run([sys.executable, "-m", "benchmarks", *argv], cwd=snap, env=env).returncode


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a suite and write benchmarks/results/*.json, then RESULTS.md")
    r.add_argument("--suite", choices=("build", "boilerplate", "scaling", "quality", "all"), default="build")
    r.add_argument("--n", type=int, nargs="+", default=None,
                   help="documents: one size for build (default 200000), sizes for scaling (default 10000 100000 1000000)")
    r.add_argument("--tools", nargs="+", default=None,
                   help="build suite tools (default: diversify diversify-exact rensa datasketch)")
    r.add_argument("--no-report", action="store_true", help="do not regenerate RESULTS.md")
    r.add_argument("--worktree", action="store_true",
                   help="measure the library as it is in the working tree (default: a snapshot of git HEAD, "
                        "so edits in progress by others cannot change the numbers mid-run)")
    sub.add_parser("report", help="regenerate benchmarks/RESULTS.md from benchmarks/results/*.json")
    sub.add_parser("check", help="self-check: truth join vs brute force, reference tokenizer vs the library")
    args = p.parse_args(argv)

    if args.cmd == "check":
        from . import check

        return check.main()
    from . import report, suites

    if args.cmd == "report":
        report.write()
        return 0
    if not args.worktree and not os.environ.get("DIVERSIFY_BENCH_LIB"):
        return _reexec_on_snapshot(argv if argv is not None else sys.argv[1:])
    todo = ("build", "boilerplate", "scaling", "quality") if args.suite == "all" else (args.suite,)
    for suite in todo:
        if suite in ("build", "boilerplate"):
            kw = {}
            if args.n:
                kw["n"] = args.n[0]
            if args.tools:
                kw["tools"] = tuple(args.tools)
            suites.SUITES[suite](**kw)
        elif suite == "scaling":
            suites.suite_scaling(**({"ns": tuple(args.n)} if args.n else {}))
        else:
            suites.suite_quality()
    if not args.no_report:
        report.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
