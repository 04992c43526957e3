"""`import diversify` and the online path stay light: no numba, no vendor SDK."""

import subprocess
import sys

import pytest

HEAVY = ["numba", "llvmlite", "qdrant_client", "chromadb", "faiss", "lancedb", "langchain_core", "llama_index",
         "haystack", "dask", "pyarrow", "torch", "pymilvus", "milvus_lite", "grpc"]


@pytest.mark.parametrize(
    "stmt",
    [
        "import diversify",
        "import diversify; diversify.Diversifier; diversify.select; diversify.load; diversify.ClusterMap",
        "import diversify.online, diversify.stores, diversify.artifact",
        "import diversify.config, diversify.errors",
        "import diversify; diversify.chunk_paragraphs('a b\\n\\nc d'); diversify.Chunk",
        "import diversify.client, diversify.serve, diversify.serve.limits, diversify.serve.metrics",
    ],
)
def test_no_heavy_imports(stmt):
    code = f"{stmt}\nimport sys, json\nprint(json.dumps(sorted(m for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    import json

    loaded = set(json.loads(out.strip().splitlines()[-1]))
    bad = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert not bad, f"{stmt!r} loaded heavy modules: {bad}"


def test_offline_path_does_load_numba():
    # the check above can fail: the builder really does import numba
    code = "import diversify, sys; diversify.build(texts=['a b c']); print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "True"


def test_every_public_name_resolves_and_the_import_stays_light():
    """Everything a user handles is importable from the top level, lazily (PEP 562)."""
    code = (
        "import sys, diversify\n"
        "names = [n for n in diversify.__all__ if n != '__version__']\n"
        "for n in ['BuildConfig', 'Result', 'Kept', 'Group', 'Hit', 'select', 'Diversifier', 'ArtifactError',"
        " 'StoreError', 'IncompatibleArtifactError', 'TextSimHashConfig', 'BuildResult']:\n"
        "    assert n in names, n\n"
        "online = [n for n in names if n not in ('build', 'add', 'build_chunks', 'BuildResult', 'BuildStats')]\n"
        "for n in online:\n"
        "    getattr(diversify, n)\n"
        "assert 'numba' not in sys.modules, 'resolving the online/config/error names imported numba'\n"
        "import inspect\n"
        "assert inspect.isfunction(diversify.build) and inspect.isfunction(diversify.add)\n"
        "assert issubclass(diversify.ArtifactError, diversify.DiversifyError)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
