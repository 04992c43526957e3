"""The helpers every framework plugin shares (diversify.online.plugins), without any framework."""

from __future__ import annotations

import json

import numpy as np
import pytest

from diversify.errors import ConfigError
from diversify.online import Diversifier, Hit
from diversify.online.plugins import (
    check_arguments,
    check_settings,
    cluster_map_setting,
    fetched_once,
    serializable_cluster_map,
    take_deprecated,
)


@pytest.mark.parametrize("mapping", [
    {1: 0, 2: 0, 3: 4},
    {"a": 0, 1: 0},
    {np.int64(7): np.int64(1), np.int64(8): np.int64(1)},
    {(1, 2): 0},  # a tuple id comes back from JSON as a list: refused, not turned into another id
], ids=["int", "mixed", "numpy", "tuple"])
def test_a_mapping_with_non_string_ids_survives_json(mapping):
    written = json.loads(json.dumps(serializable_cluster_map(mapping)))
    if any(isinstance(k, tuple) for k in mapping):
        with pytest.raises(ConfigError, match="cannot be an id"):
            cluster_map_setting(written)
        return
    back = cluster_map_setting(written)
    plain = {k.item() if isinstance(k, np.generic) else k: int(v) for k, v in mapping.items()}
    assert back == plain and [type(k) for k in back] == [type(k) for k in plain]
    d = Diversifier(back)
    assert d.cluster_ids([Hit(k) for k in plain]) == list(plain.values())


def test_string_ids_stay_a_readable_dict_and_str_keys_is_deprecated():
    assert serializable_cluster_map({"a": np.int64(3)}) == {"a": 3}
    with pytest.warns(DeprecationWarning, match="str_keys"):
        assert serializable_cluster_map({1: 0}, str_keys=True) == [[1, 0]]


def test_unknown_arguments_name_the_close_match_or_the_hint():
    with pytest.raises(ConfigError, match="Did you mean `max_per_cluster`"):
        check_arguments("X", ["max_per_clusters"], ["max_per_cluster", "k"])
    with pytest.raises(ConfigError, match="Did you mean `top_n`"):
        check_arguments("X", ["k"], ["top_n"], hints={"k": "top_n"})
    with pytest.raises(ConfigError, match="Remove it"):
        check_arguments("X", ["zzz"], ["top_n"])
    check_arguments("X", ["top_n"], ["top_n"])


def test_take_deprecated_moves_warns_and_refuses_both():
    data = {"top_k": 3}
    with pytest.warns(DeprecationWarning, match="top_n"):
        take_deprecated(data, "top_k", "top_n", owner="X")
    assert data == {"top_n": 3}
    with pytest.raises(ConfigError, match="both"):
        take_deprecated({"top_k": 3, "top_n": 3}, "top_k", "top_n", owner="X")


def test_check_settings_refuses_what_the_diversifier_would_refuse_later():
    for bad in ({"k": 0}, {"k": "3"}, {"fetch_k": 1, "k": 2}, {"max_rounds": 99}, {"fold_threshold": 9}):
        with pytest.raises(ConfigError):
            check_settings({}, **bad)
        with pytest.raises(ConfigError):
            Diversifier({}, **bad)
    check_settings({}, k=3)


def test_fetched_once_is_one_call_and_keeps_the_rest():
    res = Diversifier({"a": 0, "b": 0}).select_items([Hit("a", 0.9), Hit("b", 0.8)], k=2)
    once = fetched_once(res)
    assert (once.backend_calls, once.rounds) == (1, 0) and res.backend_calls == 0
    assert list(once) == list(res) and once.exhausted == res.exhausted is True and once.cursor == res.cursor
