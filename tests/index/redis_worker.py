"""A writer process the Redis tests SIGKILL (run as ``python redis_worker.py URL MODE [ARGS]``).

``hold NAME``: open a batch of 50 documents (ids NAME-0..49, band rows), print ``inside`` and
wait in the middle of the batch until killed. ``stall NAME``: open a batch of 50 documents, print ``inside``, wait for a line on stdin (the test
SIGSTOPs the process meanwhile, past its lease), read the state if the line is ``read``, then
leave the batch and print ``committed`` or ``refused: <message>``. ``loop NAME K``: commit batches of K documents
(ids NAME-j-i, band rows; the counter state rewritten each time) until killed, printing ``j``
after batch j committed.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from diversify.index.registry import open_storage
from diversify.index.storage import DocRow, State


def batch(tx, name: str, start: int, k: int) -> None:
    rows = [DocRow(seq=start + i, id=f"{name}-{i}", cluster=start + i, is_rep=True, similarity=1.0, stages=0,
                   payload=bytes([i % 256]) * 540) for i in range(k)]
    tx.insert_docs(rows)
    seqs = np.repeat(np.arange(start, start + k, dtype=np.int64), 9)
    tx.insert_bands(seqs * 1_000_003 + np.tile(np.arange(9, dtype=np.int64), k) - 2**40, seqs)


def main(url: str, mode: str, name: str, k: str = "50") -> None:
    with open_storage(url) as s:
        if mode == "hold":
            with s.write() as tx:
                batch(tx, name, tx.state().next_seq, 50)
                print("inside", flush=True)
                time.sleep(600)
        elif mode == "stall":
            from diversify.errors import StorageError

            try:
                with s.write() as tx:
                    batch(tx, name, 1000, 50)
                    print("inside", flush=True)
                    if sys.stdin.readline().strip() == "read":
                        tx.state()
                print("committed", flush=True)
            except StorageError as exc:
                print(f"refused: {exc}", flush=True)
        else:
            j = 0
            while True:
                with s.write() as tx:
                    st = tx.state()
                    batch(tx, f"{name}-{j}", st.next_seq, int(k))
                    tx.set_state(State(next_seq=st.next_seq + int(k), next_cluster=st.next_seq + int(k), id_kind="str"))
                print(j, flush=True)
                j += 1


if __name__ == "__main__":
    main(*sys.argv[1:])
