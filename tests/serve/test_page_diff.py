"""The word diff the page marks (diversify.serve.pagediff): it gives both texts back, marks what
changed and nothing else, and costs what DIFF_WORDS words cost whatever the texts."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from diversify.serve.pagediff import DIFF_WORDS, MAX_EDITS, _key, word_diff, words

_texts = st.lists(st.sampled_from(list("ab cD,.\n\té_-") + ["xyz", "Ω", "\u200b"]), max_size=60).map("".join)


def _side(ops, drop: str) -> str:
    return "".join(t for op, t in ops if op != drop)


@given(_texts)
def test_words_join_back_to_the_text(text):
    assert "".join(words(text)) == text


@given(_texts, _texts)
@settings(max_examples=300)
def test_the_member_comes_back_exactly_and_the_shown_text_word_for_word(shown, member):
    d = word_diff(shown, member)
    assert _side(d["ops"], "-") == member
    # the equal runs carry the member's characters: the shown text comes back up to case and punctuation
    # (run by run: a run is whole words of one text, the last of which may lack its trailing space)
    assert [_key(p) for op, t in d["ops"] if op != "+" for p in words(t)] == [_key(p) for p in words(shown)]
    assert all(op in "=+-" and t for op, t in d["ops"])
    assert all(a[0] != b[0] for a, b in zip(d["ops"], d["ops"][1:])), "adjacent runs of one op are merged"
    assert d["cut"] is False


def _lcs(a: list, b: list) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev, row = row, [0]
        for j, y in enumerate(b):
            row.append(prev[j] + 1 if x == y else max(prev[j + 1], row[j]))
    return row[-1]


@given(st.lists(st.sampled_from("abcd"), max_size=30), st.lists(st.sampled_from("abcd"), max_size=30))
@settings(max_examples=300)
def test_the_marks_are_a_shortest_edit_script(a, b):
    shown, member = " ".join(a), " ".join(b)
    d = word_diff(shown, member)
    marked = sum(len(words(t)) for op, t in d["ops"] if op != "=")
    assert marked == len(a) + len(b) - 2 * _lcs(a, b)  # the oracle: every word not in a longest common run
    assert d["coarse"] is False


def test_one_changed_word_is_the_one_mark():
    d = word_diff("The quick brown fox jumps over the lazy dog.", "The quick red fox jumps over the lazy dog.")
    assert d["ops"] == [["=", "The quick "], ["-", "brown "], ["+", "red "], ["=", "fox jumps over the lazy dog."]]


def test_case_and_punctuation_alone_are_not_changes():
    d = word_diff("Hello, world", "hello world!")
    assert [op for op, _ in d["ops"]] == ["="] and d["ops"][0][1] == "hello world!"


def test_identical_texts_are_one_equal_run_and_empty_texts_no_run():
    assert word_diff("a b c", "a b c")["ops"] == [["=", "a b c"]]
    assert word_diff("", "")["ops"] == []
    assert word_diff("", "new words")["ops"] == [["+", "new words"]]
    assert word_diff("old words", "")["ops"] == [["-", "old words"]]


def test_long_texts_are_compared_over_their_first_words_and_flagged():
    shown = " ".join(f"w{i}" for i in range(DIFF_WORDS + 500))
    member = shown.replace("w10 ", "changed ").replace(f"w{DIFF_WORDS + 100} ", "late ")
    d = word_diff(shown, member)
    assert d["cut"] is True
    assert _side(d["ops"], "-") == member
    assert ["-", "w10 "] in d["ops"] and ["+", "changed "] in d["ops"]
    # the rest past the bound differs from the shown text's rest: one added run, not compared word by word
    assert d["ops"][-1][0] == "+" and "late" in d["ops"][-1][1]


def test_repetitive_hostile_texts_cost_bounded_work():
    # the inputs that make an unbounded SequenceMatcher (autojunk off) run for most of a minute
    cases = [(" ".join("x" for _ in range(5000)), " ".join("x" if i % 2 else "y" for i in range(5000))),
             (" ".join("ab"[i % 2] for i in range(5000)), " ".join("ba"[i % 3 % 2] for i in range(5000)))]
    for shown, member in cases:
        t = time.process_time()
        d = word_diff(shown, member)
        assert time.process_time() - t < 2.0
        assert _side(d["ops"], "-") == member and d["cut"] is True
        assert d["coarse"] is True  # more than MAX_EDITS edits: the middle is marked replaced whole


def test_up_to_max_edits_the_diff_is_word_by_word():
    shown = [f"w{i}" for i in range(3 * MAX_EDITS)]
    member = [w if i % 3 else "new" for i, w in enumerate(shown)]  # MAX_EDITS words replaced: 2 * MAX_EDITS edits
    d = word_diff(" ".join(shown), " ".join(member[: 3 * (MAX_EDITS // 2)] + shown[3 * (MAX_EDITS // 2):]))
    assert d["coarse"] is False and sum(1 for op, _ in d["ops"] if op == "+") == MAX_EDITS // 2
    assert word_diff(" ".join(shown), " ".join(member))["coarse"] is True
