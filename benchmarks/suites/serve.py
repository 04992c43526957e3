"""serve: `diversify serve` under load on loopback, with the artifact replaced every second.

Two artifacts over the same ``--n`` ids (clusters of two and of three members). The server runs
as a process (``python -m diversify serve``, reloading on replacement); ``--clients`` concurrent
keep-alive connections (one asyncio loop sending pre-encoded HTTP/1.1 requests, so the client
costs little next to the server) send ``--requests`` ``POST /v1/diversify`` requests of
``--hits`` hits, k = ``--k``, while a thread replaces the served file with the other artifact
every ``--replace-every`` seconds (write a copy, rename it over). Every answer is checked against
the in-process :func:`diversify.select` answer of both artifacts: "torn" counts answers that equal
neither. Reported per run: throughput, p50/p99/max latency, errors, torn, reloads, the server's
CPU per request; beside it the in-process ``lookup + select`` per request and the server's
overhead (server CPU per request minus that); and the time from starting the process to its
first answered lookup (fast start), best and median of ``--starts`` starts.

``python -m benchmarks run --suite serve [--n 100000] [--requests 20000] [--clients 16,4]``
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from ..markdown import command, table
from . import Suite

SUITE = Suite(
    name="serve",
    summary="diversify serve on loopback: 20,000 requests from 16 clients (top-50 hits, k=10) with the artifact "
            "replaced every second: throughput, p50/p99, torn answers, server overhead vs in-process select, "
            "start to first answer",
    results=("serve.json",), render="benchmarks.suites.serve:render",
    quick={"n": 10_000, "requests": 2000, "clients": "16,2", "starts": 1, "index_docs": 400}, takes="~4 min")


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=100_000, help="documents in the served artifact")
    p.add_argument("--requests", type=int, default=20_000, help="requests of the first (largest) client count")
    p.add_argument("--clients", default="16,4", help="comma-separated concurrent connections, one run each")
    p.add_argument("--hits", type=int, default=50)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--replace-every", type=float, default=1.0,
                   help="seconds between artifact replacements (a last run at the smallest client count never "
                        "replaces it, for the latency without reload pauses)")
    p.add_argument("--starts", type=int, default=3, help="server starts timed to their first answer")
    p.add_argument("--index-docs", type=int, default=2000,
                   help="documents 4 writers add to a live SQLite index over HTTP while 4 readers query it "
                        "(0: skip that run)")


def _artifacts(n: int, d: Path):
    from diversify.artifact import ClusterMap

    ids = [f"doc-{j:07d}" for j in range(n)]
    maps = {}
    for name, size in (("pairs", 2), ("triples", 3)):
        cids = (np.arange(n, dtype=np.int64) // size) * size
        rep = np.arange(n) % size == 0
        cm = ClusterMap.from_arrays(ids, cids, rep, np.where(rep, 0, 2).astype(np.uint8), np.zeros(n, np.uint32),
                                    config={}, fingerprint=name, seed=0, hash_scheme="bench", build_info={})
        cm.save(d / f"{name}.dvf")
        maps[name] = cm
    return ids, maps


def _bodies(ids: list, count: int, hits: int, k: int) -> list[dict]:
    rnd = random.Random(0)
    out = []
    for _ in range(count):
        start = rnd.randrange(len(ids) - 4 * hits)
        chosen = sorted(rnd.sample(range(start, start + 4 * hits), hits))  # near neighbours: clusters meet
        out.append({"hits": [{"id": ids[j], "score": round(1.0 - i / 100, 4)} for i, j in enumerate(chosen)],
                    "k": k})
    return out


def _expected(cm, body: dict):
    from diversify.online import Hit, select

    hits = body["hits"]
    cids = [None if c < 0 else c for c in cm.lookup([h["id"] for h in hits]).tolist()]
    res = select([Hit(h["id"], h["score"]) for h in hits], cids, k=body["k"])
    return [[kp.id, kp.cluster_id, [f.id for f in kp.folded]] for kp in res.hits]


def _in_process(cm, bodies: list) -> dict:
    """``lookup + select`` per request in this process, as the server runs it."""
    from diversify.online import Hit, select

    times = []
    cpu = time.process_time()
    for body in bodies:
        t = time.perf_counter()
        hits = [Hit(h["id"], h["score"]) for h in body["hits"]]
        cids = [None if c < 0 else c for c in cm.lookup([h.id for h in hits]).tolist()]
        select(hits, cids, k=body["k"])
        times.append(time.perf_counter() - t)
    cpu = time.process_time() - cpu
    a = np.array(times) * 1e6
    return {"p50_us": round(float(np.percentile(a, 50)), 1), "p99_us": round(float(np.percentile(a, 99)), 1),
            "cpu_us_per_request": round(cpu / len(bodies) * 1e6, 1)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(source: Path | str, *extra: str, env_add: dict | None = None
           ) -> tuple[subprocess.Popen, int, float, float]:
    """A server process; returns it, its port, the seconds from start to its first answered lookup and
    the CPU seconds the process had used by then."""
    import diversify

    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(Path(diversify.__file__).resolve().parents[1]), **(env_add or {}))
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "diversify", "serve", str(source), "--port", str(port),
                             "--poll", "0.1", *extra], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    body = json.dumps({"ids": ["doc-0000000"]}).encode()  # a lookup every source answers
    req = (f"POST /v1/clusters HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
           "\r\nConnection: close\r\n\r\n").encode() + body
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {proc.stderr.read().decode()[-500:] if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(req)
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return proc, port, time.perf_counter() - t, _cpu_s(proc.pid)
        except OSError:
            time.sleep(0.005)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _one_connection(port: int, raw: list, queue: list, lat: list, answers: dict, errors: list) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while queue:
            i = queue.pop()
            t = time.perf_counter()
            writer.write(raw[i])
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            body = await reader.readexactly(length)
            lat.append(time.perf_counter() - t)
            if not head.startswith(b"HTTP/1.1 200"):
                errors.append(body[:200].decode(errors="replace"))
            else:
                answers[i] = body
    finally:
        writer.close()


def _load(port: int, bodies: list, clients: int) -> tuple[list, dict, list, float]:
    raw = []
    for b in bodies:
        data = json.dumps(b).encode()
        raw.append((f"POST /v1/diversify HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(data)}\r\n\r\n").encode() + data)
    queue = list(range(len(bodies)))[::-1]
    lat: list = []
    answers: dict = {}
    errors: list = []

    async def main() -> None:
        await asyncio.gather(*(_one_connection(port, raw, queue, lat, answers, errors) for _ in range(clients)))

    t = time.perf_counter()
    asyncio.run(main())
    return lat, answers, errors, time.perf_counter() - t


def _replacer(d: Path, every: float, stop: threading.Event, count: list) -> None:
    names = ["triples", "pairs"]
    while not stop.wait(every):
        name = names[len(count) % 2]
        tmp = d / f"next-{len(count)}.dvf"
        tmp.write_bytes((d / f"{name}.dvf").read_bytes())
        os.replace(tmp, d / "served.dvf")
        count.append(name)


def _check(bodies: list, answers: dict, maps: dict) -> tuple[int, dict]:
    torn = 0
    seen = {"pairs": 0, "triples": 0}
    for i, raw in answers.items():
        got = [[h["id"], h["cluster_id"], h["omitted_ids"]] for h in json.loads(raw)["hits"]]
        which = [name for name, cm in maps.items() if _expected(cm, bodies[i]) == got]
        if not which:
            torn += 1
        for name in which:
            seen[name] += 1
    return torn, seen


def _run_one(d: Path, maps: dict, bodies: list, clients: int, every: float) -> dict:
    """One load run; ``every`` 0: the artifact is not replaced (the baseline without reload pauses)."""
    from ..paths import log

    (d / "served.dvf").write_bytes((d / "pairs.dvf").read_bytes())
    proc, port, _, _ = _start(d / "served.dvf")
    try:
        cpu0 = _cpu_s(proc.pid)
        stop, count = threading.Event(), []
        th = threading.Thread(target=_replacer, args=(d, every, stop, count))
        if every > 0:
            th.start()
        try:
            lat, answers, errors, wall = _load(port, bodies, clients)
        finally:
            stop.set()
            if every > 0:
                th.join()
        cpu = _cpu_s(proc.pid) - cpu0
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
            metrics = b""
            while chunk := s.recv(65536):
                metrics += chunk
    finally:
        _stop(proc)
    reloads = next(int(line.split()[-1]) for line in metrics.decode().splitlines()
                   if line.startswith("diversify_reloads_total"))
    torn, seen = _check(bodies, answers, maps)
    a = np.array(lat) * 1000
    row = {"clients": clients, "replace_every_s": every, "requests": len(bodies), "wall_s": round(wall, 2),
           "throughput_rps": round(len(bodies) / wall, 1), "p50_ms": round(float(np.percentile(a, 50)), 2),
           "p99_ms": round(float(np.percentile(a, 99)), 2), "max_ms": round(float(a.max()), 2),
           "errors": len(errors), "torn": torn, "answers_pairs": seen["pairs"], "answers_triples": seen["triples"],
           "replacements": len(count), "reloads": reloads, "server_cpu_s": round(cpu, 2),
           "server_cpu_us_per_request": round(cpu / len(bodies) * 1e6, 1)}
    log(f"serve: {clients} clients: {row['throughput_rps']} req/s, p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms, "
        f"errors {row['errors']}, torn {torn}, reloads {reloads}, server {row['server_cpu_us_per_request']} us CPU/req")
    return row


def _live_index(d: Path, n_docs: int) -> dict:
    """4 writers add ``n_docs`` documents (batches of 50) to a live SQLite index over HTTP while 4
    readers query it; then every added id is looked up: ``lost`` counts those without a cluster."""
    import httpx

    import diversify

    from ..paths import log

    url = f"sqlite:///{d / 'live.db'}"
    diversify.Index(url).close()
    token = "bench-token-0123456789abcdef"
    proc, port, _, _ = _start(url, env_add={"DIVERSIFY_SERVE_TOKEN": token})
    base = f"http://127.0.0.1:{port}"
    rnd = random.Random(1)
    words = [f"w{i}" for i in range(2000)]
    texts = [" ".join(rnd.choice(words) for _ in range(60)) for _ in range(n_docs // 2)]
    docs = [{"id": f"live-{j:06d}", "text": texts[j // 2] + ("" if j % 2 else " end")} for j in range(n_docs)]
    added, errors, query_lat, stop = {}, [], [], threading.Event()

    def write(w: int) -> None:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
            mine = docs[w::4]
            for lo in range(0, len(mine), 50):
                r = c.post("/v1/index/add", json={"documents": mine[lo:lo + 50]})
                if r.status_code != 200:
                    errors.append(r.text[:200])
                    continue
                added.update({m["id"]: m["cluster"] for m in r.json()["matches"]})

    def read(q: int) -> None:
        with httpx.Client(base_url=base, timeout=120) as c:
            while not stop.is_set():
                t = time.perf_counter()
                r = c.post("/v1/index/query", json={"documents": [{"text": texts[rnd.randrange(len(texts))]}]})
                query_lat.append(time.perf_counter() - t)
                if r.status_code != 200:
                    errors.append(r.text[:200])

    try:  # a first add of a near-copy pair and a query: the server compiles the kernels they use (sketch,
        # verification, the cut; numba keeps them on disk) outside the timing, as a long-running server would
        warm = [{"id": "warm-0", "text": texts[0] + " warm"}, {"id": "warm-1", "text": texts[0] + " up"}]
        httpx.post(base + "/v1/index/add", json={"documents": warm}, headers={"Authorization": f"Bearer {token}"},
                   timeout=600).raise_for_status()
        httpx.post(base + "/v1/index/query", json={"documents": [{"text": texts[1]}]}, timeout=600).raise_for_status()
        writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        readers = [threading.Thread(target=read, args=(q,)) for q in range(4)]
        t = time.perf_counter()
        for th in writers + readers:
            th.start()
        for th in writers:
            th.join()
        wall = time.perf_counter() - t
        stop.set()
        for th in readers:
            th.join()
        ids = [doc["id"] for doc in docs]
        got = httpx.post(base + "/v1/clusters", json={"ids": ids}, timeout=120).json()["cluster_ids"]
    finally:
        _stop(proc)
    lost = sum(1 for i, c in zip(ids, got) if c is None and i in added)  # acknowledged, then not found
    moved = sum(1 for i, c in zip(ids, got) if c is not None and added.get(i) != c)
    a = np.array(query_lat) * 1000 if query_lat else np.zeros(1)
    row = {"documents": n_docs, "writers": 4, "readers": 4, "wall_s": round(wall, 2),
           "docs_per_s": round(n_docs / wall, 1), "queries": len(query_lat),
           "query_p50_ms": round(float(np.percentile(a, 50)), 2), "query_p99_ms": round(float(np.percentile(a, 99)), 2),
           "errors": len(errors), "error_sample": errors[:2], "not_added": n_docs - len(added), "lost": lost,
           "cluster_changed": moved}
    log(f"serve: live index: {row['docs_per_s']} docs/s added by 4 writers, {len(query_lat)} queries "
        f"(p50 {row['query_p50_ms']} ms, p99 {row['query_p99_ms']} ms), errors {len(errors)}, lost {lost}")
    return row


def run(args, ctx) -> list:
    from ..env import environment
    from ..paths import log, now, shown, write_json

    d = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    ids, maps = _artifacts(args.n, d)
    counts = [int(c) for c in str(args.clients).split(",") if c.strip()]
    bodies = _bodies(ids, args.requests, args.hits, args.k)
    inproc = _in_process(maps["pairs"], bodies[:5000])
    starts, start_cpu = [], []
    for _ in range(args.starts):
        proc, _port, first, cpu = _start(d / "pairs.dvf")
        _stop(proc)
        starts.append(round(first, 3))
        start_cpu.append(round(cpu, 3))
    log(f"serve: start to first answer {starts} s ({start_cpu} CPU-s); in-process lookup+select {inproc['p50_us']} us p50")
    rows = []
    for j, clients in enumerate(counts):
        part = bodies if j == 0 else bodies[: max(1000, args.requests // 4)]
        rows.append(_run_one(d, maps, part, clients, args.replace_every))
    rows.append(_run_one(d, maps, bodies[: max(1000, args.requests // 4)], counts[-1], 0.0))  # no reloads
    live = _live_index(d, args.index_docs) if args.index_docs > 0 else None
    shutil.rmtree(d, ignore_errors=True)
    for r in rows:
        r["overhead_us_per_request"] = round(r["server_cpu_us_per_request"] - inproc["cpu_us_per_request"], 1)
    path = write_json(ctx.results / "serve.json", {
        "suite": "serve", "command": ctx.command, "created": now(), "env": environment(), "n": args.n,
        "hits": args.hits, "k": args.k, "replace_every_s": args.replace_every, "in_process": inproc,
        "start_to_first_answer_s": starts, "start_cpu_s": start_cpu, "rows": rows, "live_index": live})
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

def render(d: dict) -> list[str]:
    starts = sorted(d.get("start_to_first_answer_s") or [0])
    ip = d["in_process"]
    L = [f"## diversify serve under load ({d['n']:,} documents, {d['hits']} hits per request, k={d['k']})", "",
         f"The artifact is replaced every {d['replace_every_s']:g} s during each run; every answer is checked "
         "against in-process `select` on both artifacts (torn: equal to neither). Latency is the client's, "
         "request sent to answer read, on loopback. Command: "
         f"`{command(d.get('command'), 'python -m benchmarks run --suite serve')}`, {d.get('created')}.", ""]
    rows = [[r["clients"], "every {:g} s".format(r["replace_every_s"]) if r.get("replace_every_s", 1) else "never",
             f"{r['requests']:,}", f"{r['throughput_rps']:,.0f}", f"{r['p50_ms']:.2f}",
             f"{r['p99_ms']:.2f}", f"{r['max_ms']:.1f}", r["errors"], r["torn"], r["reloads"],
             f"{r['server_cpu_us_per_request']:.0f}", f"{r['overhead_us_per_request']:.0f}"] for r in d["rows"]]
    L += table(["clients", "artifact replaced", "requests", "req/s", "p50 ms", "p99 ms", "max ms", "errors", "torn", "reloads",
                "server CPU µs/req", "overhead µs/req"], "rlrrrrrrrrrr", rows)
    L += ["", f"In-process `lookup + select` of the same requests: p50 {ip['p50_us']:.0f} µs, p99 {ip['p99_us']:.0f} µs, "
          f"{ip['cpu_us_per_request']:.0f} µs of CPU per request (overhead = the server's CPU per request minus "
          "that: HTTP, JSON both ways, the checks of every field). Start of "
          f"`diversify serve` to its first answered lookup: best {starts[0]:.2f} s, median "
          f"{starts[len(starts) // 2]:.2f} s, using {min(d.get('start_cpu_s') or [0]):.2f} CPU-s (the wall time "
          "beyond that is waiting for a core on a shared machine).", ""]
    live = d.get("live_index")
    if live:
        L += [f"Live SQLite index over HTTP: {live['writers']} writers added {live['documents']:,} documents "
              f"(batches of 50, half of them near-copies) at {live['docs_per_s']:,.0f} documents/s while "
              f"{live['readers']} readers sent {live['queries']:,} `/v1/index/query` requests (p50 "
              f"{live['query_p50_ms']:.1f} ms, p99 {live['query_p99_ms']:.1f} ms); errors {live['errors']} "
              f"({live.get('not_added', 0):,} documents refused, not acknowledged), acknowledged documents lost "
              f"{live['lost']}, cluster changed after its add {live['cluster_changed']}.", ""]
        if live.get("error_sample"):
            L += ["First error: `" + str(live["error_sample"][0]).replace("`", "'")[:300] + "`", ""]
    return L
