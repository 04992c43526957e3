"""diversify.client: httpx loads only when a Client is made; hits are sent as the server takes them."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from diversify.client import RequestRejected, ServiceError, _hit
from diversify.errors import DiversifyError
from diversify.online import Hit


def test_importing_the_client_loads_no_http_library():
    code = "import json, sys, diversify.client, diversify.serve; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    assert not [m for m in loaded if m.split(".")[0] in ("httpx", "starlette", "uvicorn", "anyio", "numba")]


def test_hits_are_sent_as_the_server_takes_them():
    assert _hit({"id": "a", "score": 0.5}) == {"id": "a", "score": 0.5}
    assert _hit(Hit("a", 0.5)) == {"id": "a", "score": 0.5}
    sent = _hit(Hit(7, None, vector=np.array([1, 0], dtype=np.float32), text="t"))
    assert sent == {"id": 7, "score": None, "vector": [1.0, 0.0], "text": "t"}
    assert all(type(x) is float for x in sent["vector"])


def test_the_client_errors_are_diversify_errors_of_the_builtin_kind():
    err = RequestRejected("m", status=422, field="k")
    assert isinstance(err, DiversifyError) and isinstance(err, ValueError) and (err.status, err.field) == (422, "k")
    assert issubclass(ServiceError, DiversifyError) and issubclass(ServiceError, RuntimeError)
