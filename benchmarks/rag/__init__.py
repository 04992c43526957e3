"""The integrations suite: diversify inside the frameworks and stores RAG engineers use, on a real
chunked corpus. ``corpus`` (files on this machine, a real text splitter, tenants), ``embed``
(local TF-IDF + SVD vectors), ``shingles`` (the independent near-duplicate check), ``probe``
(store calls and CPU), ``systems_*`` (what is measured), ``run`` (the loop) and ``report``."""
