"""diversify.serve.limits: the JSON reader holds a body to its limits and names the field at fault;
diversify.serve.metrics writes the Prometheus text format. Neither needs the serve extra."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diversify.errors import DiversifyError
from diversify.serve.limits import Limits, RequestError, check_keys, need_id, need_int, need_number, parse_body
from diversify.serve.metrics import LATENCY_BUCKETS, Metrics

SMALL = Limits(max_body_bytes=1000, max_json_depth=4, max_id_chars=8)


def _refused(raw: bytes, limits: Limits = SMALL) -> RequestError:
    with pytest.raises(RequestError) as exc:
        parse_body(raw, limits)
    return exc.value


def test_a_request_error_is_a_diversify_error_and_a_value_error():
    err = RequestError("x", field="hits", status=422)
    assert isinstance(err, DiversifyError) and isinstance(err, ValueError)
    assert err.body() == {"error": {"status": 422, "field": "hits", "message": "x"}}


def test_size_depth_encoding_and_constants_are_refused():
    assert _refused(b"[" + b"1," * 600 + b"1]").status == 413
    deep = _refused(b'{"a": [[[[1]]]]}')
    assert deep.status == 400 and deep.field == "a[0][0][0]" and "at most 4 levels" in str(deep)
    assert "far deeper" in str(_refused(b"[" * 100_000, Limits(max_body_bytes=1 << 20)))
    assert "UTF-8" in str(_refused(b'"\xff"'))
    assert "finite" in str(_refused(b"[NaN]")) and "finite" in str(_refused(b"[-Infinity]"))
    assert "one JSON value" in str(_refused(b"{} {}"))


def test_depth_at_the_limit_is_accepted():
    assert parse_body(b'{"a": [[[1]]]}', SMALL) == {"a": [[[1]]]}


@pytest.mark.parametrize("raw,field", [(b'"\\ud800"', None), (b'{"a": ["ok", "x\\udc00"]}', "a[1]"),
                                       (b'{"a": {"\\ud83d": 1}}', "a"), (b'[{"id": "\\udfff\\ud800"}]', "[0].id")])
def test_lone_surrogates_are_refused_where_they_are(raw, field):
    err = _refused(raw)
    assert err.status == 400 and err.field == field and "lone surrogate" in str(err)


def test_a_surrogate_pair_is_one_character_and_passes():
    assert parse_body(b'["\\ud83d\\ude00"]', SMALL) == ["\U0001f600"]


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=20))
def test_any_well_formed_json_within_the_limits_reads_back_as_itself(value):
    raw = json.dumps(value).encode()
    limits = Limits(max_body_bytes=1 << 20, max_json_depth=64)
    assert parse_body(raw, limits) == value


def test_field_checks_name_the_field():
    with pytest.raises(RequestError, match=r"`hits\[0\]\.sc0re` is not a field") as exc:
        check_keys({"sc0re": 1}, "hits[0]", frozenset({"id", "score"}))
    assert exc.value.field == "hits[0].sc0re" and exc.value.status == 422
    with pytest.raises(RequestError, match="`k` must be an integer; got boolean true"):
        need_int(True, "k", least=1, most=10)
    with pytest.raises(RequestError, match=r"must be in \[1, 10\]; got 11"):
        need_int(11, "k", least=1, most=10)
    with pytest.raises(RequestError, match="within"):
        need_number(2**60, "score")
    assert need_number(3, "score") == 3.0 and isinstance(need_number(3, "score"), float)
    with pytest.raises(RequestError, match="at most 8 characters") as exc:
        need_id("a" * 9, "ids[2]", SMALL)
    assert exc.value.status == 413 and exc.value.field == "ids[2]"
    with pytest.raises(RequestError, match="int64"):
        need_id(2**63, "ids[0]", SMALL)
    assert need_id(-(2**63), "ids[0]", SMALL) == -(2**63) and need_id("abc", "x", SMALL) == "abc"


def test_metrics_render_the_prometheus_text_format():
    m = Metrics()
    m.observe("/v1/diversify", "POST", 200, 0.0007)
    m.observe("/v1/diversify", "POST", 200, 0.3)
    m.observe("/v1/diversify", "POST", 422, 0.0001)
    m.observe("/v1/clusters", "POST", 500, 0.001)
    m.add_folded(5)
    m.reloaded(True)
    m.reloaded(False)
    text = m.render(generation=2)
    lines = text.splitlines()
    assert 'diversify_requests_total{route="/v1/diversify",method="POST",status="200"} 2' in lines
    assert 'diversify_request_duration_seconds_bucket{route="/v1/diversify",le="0.0005"} 1' in lines
    assert 'diversify_request_duration_seconds_bucket{route="/v1/diversify",le="0.001"} 2' in lines
    assert 'diversify_request_duration_seconds_bucket{route="/v1/diversify",le="0.25"} 2' in lines
    assert 'diversify_request_duration_seconds_bucket{route="/v1/diversify",le="+Inf"} 3' in lines
    assert 'diversify_request_duration_seconds_count{route="/v1/diversify"} 3' in lines
    assert "diversify_folded_total 5" in lines and "diversify_reloads_total 1" in lines
    assert "diversify_reload_failures_total 1" in lines and "diversify_generation 2" in lines
    assert 'diversify_errors_total{kind="client"} 1' in lines and 'diversify_errors_total{kind="server"} 1' in lines
    assert 'diversify_errors_total{kind="reload"} 1' in lines
    assert text.endswith("\n") and list(LATENCY_BUCKETS) == sorted(LATENCY_BUCKETS)
    names = {line.split()[2] for line in lines if line.startswith("# TYPE")}
    assert all(line.startswith("#") or line.split("{")[0].split(" ")[0].startswith(tuple(names)) for line in lines)
