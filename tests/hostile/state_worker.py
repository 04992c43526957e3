"""Run ``add`` (the API, then the CLI's ``main``) on tampered artifacts, one JSON line per case.

Run by ``tests/system/test_add_tampered_state.py`` in a subprocess, so that a crash inside a kernel shows as
a negative return code instead of killing the test run: ``python state_worker.py CASES.json``.
Before each case it prints ``{"start": name}``; after it, the outcome of both calls. If the
process dies, the parent records the started case as crashed and restarts on the rest.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback

import state_corpus as S


def run_api(case: dict) -> dict:
    import diversify
    from diversify.errors import ArtifactError, DiversifyError

    try:
        target = case["path"] if case["verify"] else diversify.load(case["path"], verify=False)
        res = diversify.add(target, **S.add_kwargs(case["add"]), created_at=S.CREATED)
        return {"outcome": "accepted", "n_clusters": res.n_clusters}
    except DiversifyError as exc:
        return {"outcome": "refused", "type": type(exc).__name__, "artifact_error": isinstance(exc, ArtifactError),
                "msg": str(exc)}
    except Exception as exc:  # noqa: BLE001 - what the test is looking for
        return {"outcome": "exception", "type": type(exc).__name__, "msg": traceback.format_exc()[-3000:]}


def run_cli(case: dict) -> dict:
    from diversify.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["add", case["path"], *case["cli"]])
    except BaseException as exc:  # noqa: BLE001 - a traceback from the CLI is a failure the test reports
        return {"rc": None, "stderr": err.getvalue()[-2000:], "exception": traceback.format_exc()[-3000:],
                "type": type(exc).__name__}
    return {"rc": rc, "stderr": err.getvalue()[-2000:]}


def main() -> None:
    cases = json.loads(open(sys.argv[1]).read())
    for case in cases:
        print(json.dumps({"start": case["name"]}), flush=True)
        result = {"name": case["name"], "api": run_api(case)}
        if case.get("cli") is not None:
            result["cli"] = run_cli(case)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
