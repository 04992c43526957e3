"""text-dedup (``text_dedup.minhash``), timed as its whole CLI process.

It runs from its own virtualenv (``$TEXT_DEDUP_PYTHON``; its pins — datasets, pyspark, urllib3<2,
rich 13 — conflict with this environment) on a ``datasets`` folder written with ``save_to_disk``
and loaded with ``--local``, offline; clusters come from the union-find it pickles with ``--debug``.
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import numpy as np

from ..paths import CACHE

PYTHON = os.environ.get("TEXT_DEDUP_PYTHON", "/tmp/pv/td-venv/bin/python")
WORK = CACHE / "simhash_text"

_PREPARE = """
import sys, numpy as np
from datasets import Dataset
blob = open(sys.argv[1] + '.bin', 'rb').read()
off = np.load(sys.argv[1] + '.npz')['offsets']
texts = [blob[a:b].decode('utf-8') for a, b in zip(off[:-1].tolist(), off[1:].tolist())]
Dataset.from_dict({'text': texts}).save_to_disk(sys.argv[2])
"""

# text-dedup pickles its union-find (its own format, read in its own interpreter only).
_LABELS = """
import sys, pickle, numpy as np
uf = pickle.load(open(sys.argv[1], 'rb'))
n = int(sys.argv[3])
lab = np.arange(n, dtype=np.int64)
for i in list(uf.parent):
    lab[int(i)] = int(uf.find(i))
np.save(sys.argv[2], lab)
"""


def unavailable() -> str | None:
    """None when text-dedup can run, else why not."""
    if not os.path.exists(PYTHON):
        return (f"no interpreter with text-dedup at {PYTHON} (set TEXT_DEDUP_PYTHON; it is installed in its own "
                "virtualenv because its pins — datasets, pyspark, urllib3<2, rich 13 — conflict with this environment)")
    r = subprocess.run([PYTHON, "-c", "import text_dedup.minhash, importlib.metadata as m; print(m.version('text-dedup'))"],
                       capture_output=True, text=True)
    if r.returncode:
        return "text-dedup does not import: " + r.stderr.strip().splitlines()[-1]
    return None


def version() -> str | None:
    if not os.path.exists(PYTHON):
        return None
    r = subprocess.run([PYTHON, "-c", "import importlib.metadata as m; print(m.version('text-dedup'))"],
                       capture_output=True, text=True)
    return r.stdout.strip() if not r.returncode else None


def _parse_time_v(stderr: str) -> tuple[int, float, dict]:
    """Peak RSS (kB), CPU seconds and text-dedup's own stage times from ``/usr/bin/time -v`` output."""
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr).group(1))
    cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", stderr))
    stages = {m.group(1).strip(): float(m.group(2)) for m in re.finditer(r"\|?\s*([A-Za-z ]+?)\s*:\s*([\d.]+)s", stderr)}
    return peak_kb, cpu, stages


def run(prefix: str, n: int, threshold: float, timeout: float, tag: str, num_perm: int = 128, ngram: int = 5) -> dict:
    """text_dedup.minhash on a corpus file, offline; wall clock and peak RSS of the whole CLI run."""
    work = WORK / f"td-{tag}"
    ds = work / "input"
    if not (ds / "dataset_info.json").exists():
        work.mkdir(parents=True, exist_ok=True)
        subprocess.run([PYTHON, "-c", _PREPARE, prefix, str(ds)], check=True, capture_output=True)
    outdir = work / f"out-{threshold}"
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TQDM_DISABLE="1")
    cmd = [PYTHON, "-m", "text_dedup.minhash", "--path", str(ds), "--local", "--column", "text",
           "--output", str(outdir), "--num_perm", str(num_perm), "--threshold", str(threshold), "--ngram", str(ngram),
           "--min_length", "0", "--debug", "--cache_dir", str(work / "hfcache")]
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env=env, timeout=timeout,
                       cwd=str(work))
    wall = time.perf_counter() - t0
    load1 = os.getloadavg()
    if r.returncode:
        return dict(skipped="text-dedup failed: " + (r.stderr.strip().splitlines() or ["?"])[-1][:300],
                    command=" ".join(cmd))
    peak_kb, cpu, stages = _parse_time_v(r.stderr)
    lab_path = work / f"labels-{threshold}.npy"
    subprocess.run([PYTHON, "-c", _LABELS, str(outdir / "uf.pkl"), str(lab_path), str(n)], check=True,
                   capture_output=True)
    bands = re.search(r"[Bb]ands?\D+(\d+)", r.stderr)
    return dict(labels=np.load(lab_path),
                rec=dict(tool="text-dedup minhash", n_docs=n, timings=dict(stages, total=wall), process_s=wall,
                         cpu_s=cpu, rss_peak_mb=peak_kb / 1024, loadavg_before=load0, loadavg_after=load1,
                         peak_method="/usr/bin/time -v (largest process)",
                         params=dict(num_perm=num_perm, threshold=threshold, ngram=ngram,
                                     verification="none (every shared bucket merges)",
                                     num_proc=os.cpu_count(), bands_line=bands.group(0) if bands else None),
                         command=" ".join(cmd[1:])))
