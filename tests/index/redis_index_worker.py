"""One writer process of the Redis concurrency test: ``python redis_index_worker.py URL JOB.json``.

The job names the documents (texts + ids) and a start time; the writer waits for it, so that
all writers add their batches at the same moment, then adds them in batches of ``batch``.
"""

from __future__ import annotations

import json
import sys
import time

import diversify


def main(url: str, job_path: str) -> None:
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    with diversify.Index(url, lock_timeout=120) as idx:
        time.sleep(max(0.0, job["start"] - time.time()))
        texts, ids, b = job["texts"], job["ids"], job["batch"]
        for lo in range(0, len(texts), b):
            idx.add(texts[lo:lo + b], ids=ids[lo:lo + b])
    print("done", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
