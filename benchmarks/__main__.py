"""python -m benchmarks list | run --suite NAME [--quick] [suite options] | report | check"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

from .paths import CACHE, PLOTS, RESULTS, ROOT, data_dir


def _reexec_on_snapshot(argv, ref: str = "HEAD") -> int:
    """Run again with ``diversify`` imported from an export of git HEAD (cwd comes first on
    sys.path), and ``benchmarks`` from this checkout. Workers inherit both. The framework plugins
    (``integrations/``) are exported next to it; suites that import them put them first on
    ``sys.path`` (``benchmarks.rag.run.plugin_paths``). The export is :mod:`benchmarks.snapshot`'s."""
    from .snapshot import export

    commit, snap = export(ref)
    env = dict(os.environ, DIVERSIFY_BENCH_LIB=commit,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    print(f"measuring diversify at git {ref} {commit[:12]} (snapshot {snap})", file=sys.stderr, flush=True)
    return subprocess.run([sys.executable, "-m", "benchmarks", *argv], cwd=snap, env=env).returncode


def cmd_list(_args) -> int:
    from .env import version
    from .suites import all_suites

    root = data_dir()
    for s in all_suites():
        missing = [d for d in s.data if not (root / d).is_dir()]
        print(f"{s.name:13s} {s.takes}")
        print(f"{'':13s} {s.summary}")
        if s.peers:
            print(f"{'':13s} peers: " + ", ".join(f"{d} {version(d) or '(not installed here)'}" for d in s.peers))
        if s.data:
            state = f"missing here: {', '.join(missing)}" if missing else "present"
            print(f"{'':13s} data: {', '.join(s.data)} ({state})")
    print(f"\nreal data folder: {root}; quick runs (--quick) write to {CACHE / 'quick'}")
    return 0


def _suite_parser(name: str, quick: bool) -> argparse.ArgumentParser:
    from .suites import module

    mod = module(name)
    p = argparse.ArgumentParser(prog=f"python -m benchmarks run --suite {name}", description=mod.SUITE.summary,
                                allow_abbrev=False)
    mod.add_arguments(p)
    if quick:
        p.set_defaults(**mod.SUITE.quick)
    return p


def cmd_run(args, rest: list[str], argv: list[str]) -> int:
    from . import report
    from .suites import NAMES, Context, module

    names = list(NAMES) if "all" in args.suite else args.suite
    if rest and len(names) > 1:
        raise SystemExit(f"suite options {rest} need a single --suite")
    if args.worktree and args.ref != "HEAD":
        raise SystemExit("--worktree measures the working tree; it cannot be combined with --ref")
    if not args.worktree and not os.environ.get("DIVERSIFY_BENCH_LIB"):
        return _reexec_on_snapshot(argv, args.ref)
    results = CACHE / "quick" / "results" if args.quick else RESULTS
    ctx = Context(results=results, plots=results / "plots" if args.quick else PLOTS, quick=args.quick,
                  command="python -m benchmarks " + shlex.join(argv))
    for n in names:
        module(n).run(_suite_parser(n, args.quick).parse_args(rest), ctx)
    if not args.no_report:
        report.write(results)
    return 0


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    from .suites import NAMES

    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__, allow_abbrev=False)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the suites: what each measures, peers, data, duration")
    r = sub.add_parser("run", add_help=False, allow_abbrev=False, help="run suites; JSON into benchmarks/results/, then RESULTS.md",
                       description="Options after the suite name are the suite's own (see --suite NAME --help).")
    r.add_argument("--suite", nargs="+", choices=(*NAMES, "all"), default=["build"])
    r.add_argument("--quick", action="store_true",
                   help="the suite's small settings; results go to benchmarks/.cache/quick/, not results/")
    r.add_argument("--worktree", action="store_true",
                   help="measure the library as it is in the working tree (default: a snapshot of git HEAD, "
                        "so edits in progress by others cannot change the numbers mid-run)")
    r.add_argument("--ref", default="HEAD",
                   help="measure the library (diversify/ and integrations/) as it is at this git ref: a branch, tag "
                        "or commit (default HEAD); the benchmarks themselves always come from this checkout")
    r.add_argument("--no-report", action="store_true", help="do not regenerate RESULTS.md")
    r.add_argument("-h", "--help", action="store_true", help="this help, or a suite's options with --suite NAME")
    rep = sub.add_parser("report", help="regenerate benchmarks/RESULTS.md from benchmarks/results/*.json")
    rep.add_argument("--results", default=None, help="results folder (default benchmarks/results)")
    sub.add_parser("check", help="self-check: truth join vs brute force, reference tokenizer vs the library, "
                                 "harness layout")
    return p, r


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p, run_parser = _parser()
    args, rest = p.parse_known_args(argv)
    if args.cmd == "run" and args.help:
        run_parser.print_help()
        for n in args.suite if "--suite" in argv else ():
            print()
            _suite_parser(n, args.quick).print_help()
        return 0
    if args.cmd == "run":
        return cmd_run(args, rest, argv)
    if rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.cmd == "list":
        return cmd_list(args)
    if args.cmd == "check":
        from . import check

        return check.main()
    from pathlib import Path

    from . import report

    report.write(Path(args.results) if args.results else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
