"""Shared fixtures. Keep this file small.

Add a fixture at the end rather than changing an existing one: tests in test_text/minhash/simhash/
lsh/build/determinism/quality_data rely on the values below.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from dask_cluster import client  # noqa: F401  (the Dask test modules' LocalCluster fixture)

TESTS_DIR = Path(__file__).resolve().parent
# `import reference` (tests/reference.py) from any test module, whatever the rootdir/import mode.
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

#: the one seed every random test input derives from (change it to re-roll all random data)
BASE_SEED = 20261130

#: pinned artifact timestamp, so artifacts are comparable byte for byte
CREATED_AT = "2026-01-01T00:00:00Z"


@pytest.fixture
def seed() -> int:
    """The base seed (an int) for tests that need several independent streams."""
    return BASE_SEED


@pytest.fixture
def rng(seed) -> np.random.Generator:
    """A fresh, seeded numpy Generator per test (no global RNG)."""
    return np.random.default_rng(seed)


@pytest.fixture
def created_at() -> str:
    return CREATED_AT


@pytest.fixture
def one_numba_thread():
    """Run parallel kernels on one thread for the test (many tiny calls: the thread pool's wake-up
    dominates on a loaded 2-core machine). Restores the previous count."""
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(before)


# --------------------------------------------------------------------------- the fast loop
# `pytest -m "not slow"` is the edit-run loop (under a minute warm); `pytest` runs everything.
# Whole modules that start subprocesses, Dask clusters or real-data builds, and single tests
# measured at more than ~1.5 s on 2 cores, are marked here in one place.

SLOW_MODULES = {
    "test_page_browser.py",  # the page of `diversify serve` in headless Chromium, one browser process per view
    "test_dask_engine.py",  # starts local Dask clusters
    "test_dask_cut.py",  # the cut on Dask workers against the local build
    "test_dask_shards.py",  # sharded Dask results, written by the workers
    "test_dask_scheduler.py",  # what the Dask scheduler receives during builds
    "test_write_clusters_sharded.py",  # a Dask build's shards written into stores by the workers
    "test_determinism.py",  # builds in subprocesses at 1 and 2 threads
    "test_crash_during_writes.py",  # SIGKILLs writer subprocesses
    "test_quality_data.py",  # builds real labelled data sets
    "test_golden_bytes.py",  # rebuilds every golden case, the Dask one included
    "test_environments.py",  # read-only installs, forks and threads, each in fresh subprocesses
    "test_cli_embed.py",  # build --embed and stats as users run them, in subprocesses
    "test_install.py",  # the README's install order in a fresh venv: compiles every kernel into an empty cache
    "test_serve.py",  # `diversify serve` in a subprocess, called over HTTP
    "test_serve_reload.py",  # the served artifact replaced under concurrent requests
    "test_serve_index.py",  # the live-index endpoints under 4 writers and 4 readers
    "test_build_from.py",  # fills and reads every kind of real store (Milvus Lite, a Chroma server) per test
    "test_cli_from_store.py",  # `build --from-store` in subprocesses against every kind of store
}
SLOW_TESTS = {
    "test_signatures_are_the_same_bytes_for_any_blas_and_numba_threads",  # three subprocesses
    "test_threshold_separates_above_from_below",
    "test_exact_duplicates_cluster_across_case_and_whitespace",
    "test_hot_swap_under_eight_threads_no_torn_result_memory_flat",
    "test_online_guide_examples_run",
    "test_representative_first",
    "test_100mb_single_document_does_not_crash",
    "test_lookup_matches_dict_oracle",
    "test_vectors_only_build_with_simhash",
    "test_fuzz_load_in_memory_capped_process",
    "test_offline_path_does_load_numba",
    "test_add_equals_a_from_scratch_build",
    "test_fuzz_consistent_checksums_load_or_artifact_error",
    "test_tune_plot",
    "test_help_on_every_command",
    # the frameworks' async twins of the filter contract (each case also runs the sync call): ~10 min
    "test_langchain_async_keeps_the_filter_on_every_refill",
    "test_llamaindex_async_keeps_the_filter_on_every_refill",
    "test_haystack_async_keeps_the_filter_on_every_refill",
    "test_fresh_install_compiles_each_kernel_once",  # compiles the kernels in a fresh numba cache
    "test_fold_check_left_to_a_running_helper_is_waited_for",  # the helper compiles into a fresh cache
    # the live-index contract (tests/index/contract.py, once per backend): real processes
    "test_index_two_processes_add_near_duplicates_at_once",
    "test_index_sigkill_of_writers_leaves_it_consistent",
    "test_any_add_delete_sequence_keeps_the_invariants",
}


# --------------------------------------------------------------------------- kinds
# A test's folder says its kind (CONTRIBUTING.md, "Tests"), and each test gets that kind as a marker
# (`pytest -m unit`, `-m "not system"`): tests/index (the live index on real servers) and every
# plugin's own tests (integrations/*/tests) are integration tests. Kinds that cut across folders are
# markers too: `property` on every hypothesis test, `hostile` and `oracle` on the modules below.

FOLDER_KINDS = {"unit": "unit", "golden": "golden", "contract": "contract", "integration": "integration",
                "index": "integration", "system": "system", "serve": "integration"}
HOSTILE_MODULES = {
    "test_page_api.py",  # the page's endpoints under bad parameters, hostile documents and large bodies
    "test_artifact_hostile_files.py",  # the fixture files of tests/hostile/, fuzzing under a memory cap
    "test_artifact_reader_lies.py",  # artifacts that pass the layout checks but lie or cost
    "test_online_fail_open.py",  # failing stores and artifacts under the online wrapper
    "test_bad_inputs.py",  # bad input at every public entry point and CLI command
    "test_add_tampered_state.py",  # an artifact's stored state broken one rule at a time
    "test_cli_exits.py",  # every failing path of the command
    "test_cli_line_breaks.py",  # line breaks smuggled through headers and ids
    "test_environments.py",  # read-only installs, forks, threads
    "test_numba_threads_env.py",  # NUMBA_NUM_THREADS values numba cannot run with
    "test_hostile_index.py",  # damaged and contradicting live-index records
    "test_request_cost.py",  # forged cursors, flooding stores, ids no store should send: work bounded by the request
    "test_online_ids.py",  # ids of the wrong kind or no kind from a store
    "test_serve.py",  # huge, deep, ill-typed and ill-formed request bodies; slow clients
    "test_online_pages.py",  # forged and stale cursors
    "test_online_cost.py",  # online work per request
}
ORACLE_MODULES = {
    "test_text.py", "test_minhash.py", "test_simhash.py", "test_simhash_products.py", "test_lsh.py", "test_kernels_fold.py",
    "test_clusters_guarantee.py", "test_spill.py", "test_ids_packed.py", "test_online_select.py",
    "test_evaluate.py", "test_inspect.py", "test_dask_engine.py", "test_dask_cut.py", "test_corpus_readers.py",
    "test_text_batch.py", "test_text_strview.py", "test_kernels_argsort_hashes.py", "test_arrays.py",
}


def _kind(path: Path) -> str | None:
    try:
        folder = path.relative_to(TESTS_DIR).parts[0]
    except ValueError:  # outside tests/: a plugin's own tests
        return "integration" if path.parent.name == "tests" and path.parent.parent.parent.name == "integrations" else None
    return FOLDER_KINDS.get(folder)


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.originalname if hasattr(item, "originalname") else item.name
        if item.path.name in SLOW_MODULES or name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        kind = _kind(item.path)
        if kind is not None:
            item.add_marker(getattr(pytest.mark, kind))
        if item.path.name in HOSTILE_MODULES:
            item.add_marker(pytest.mark.hostile)
        if item.path.name in ORACLE_MODULES:
            item.add_marker(pytest.mark.oracle)
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.property)


# --------------------------------------------------------------------------- a real Chroma server
# One per test session, started on first use (tests/contract/chroma_server.py). When it cannot
# start, the tests that need it skip with the reason, except in CI (DIVERSIFY_CI=1): there they fail.


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    import importlib.util
    import os

    if importlib.util.find_spec("chromadb") is None:
        pytest.skip("chromadb is not installed (pip install 'diversify-retrieval[chroma]')")
    from contract.chroma_server import ServerUnavailable, start

    try:
        server = start(tmp_path_factory.mktemp("chroma-server"))
    except ServerUnavailable as exc:
        if os.environ.get("DIVERSIFY_CI") == "1":
            pytest.fail(f"the Chroma server must start in CI: {exc}")
        pytest.skip(f"no Chroma server here: {exc}")
    yield server
    server.stop()
