"""The peers: every tool diversify is measured against, each beside diversify's own runner, one
module per route: text MinHash (diversify, datasketch, rensa), vectors (diversify SimHash, FAISS),
text SimHash (simhash), text-dedup, LangChain filters.

Each exposes plain runners and, where a suite measures it in a worker process, a
:class:`benchmarks.protocol.Task` named ``TASK``. Peers are imported inside the runners only.
"""
