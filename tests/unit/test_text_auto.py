"""shingle="auto": scripts written without spaces get character shingles, everything else words.

Kinds: real text (the GnuPG help files in Chinese and Japanese that Debian ships; skipped where
absent, nothing is downloaded), oracle (auto equals the word rule on every non-CJK document and the
char rule on every CJK one, in mixed batches, byte for byte), and the build end to end.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from diversify import TextConfig, build
from diversify.evaluate import jaccard_pairs
from diversify.sketches.minhash import sketch_oph_buffer
from diversify.text import encode_batch, shingle_buffer, sorted_unique_shingles, unspaced_docs

HELP = Path("/usr/share/gnupg")


def _paragraphs(name: str) -> list[str]:
    path = HELP / name
    if not path.exists():
        pytest.skip(f"{path} is absent (Debian's gnupg ships it)")
    text = path.read_text(encoding="utf-8")
    return [p.strip() for p in text.split("\n\n") if len(p.strip()) > 80 and not p.lstrip().startswith("#")]


@pytest.mark.parametrize("name", ["help.zh_CN.txt", "help.ja.txt"])
def test_real_cjk_near_copies_are_similar_under_auto_and_not_under_words(name):
    paras = _paragraphs(name)[:12]
    assert len(paras) >= 5
    edited = [p[: len(p) // 2] + "、" + p[len(p) // 2:] for p in paras]  # one extra mark in the middle
    auto = jaccard_pairs(paras, edited, TextConfig())
    words = jaccard_pairs(paras, edited, TextConfig(shingle="word"))
    assert np.median(auto) >= 0.8, auto
    assert np.median(words) < np.median(auto), (words, auto)
    res = build(paras + edited)
    n = len(paras)
    folded = sum(res.cluster_ids[i] == res.cluster_ids[n + i] for i in range(n))
    # paragraphs that are mostly ASCII (GnuPG keys and English comments) keep word shingles, where
    # the inserted mark splits a word; the CJK ones all fold
    cjk = unspaced_docs(*encode_batch(paras))
    assert all(res.cluster_ids[i] == res.cluster_ids[n + i] for i in np.flatnonzero(cjk)), "a CJK paragraph did not fold"
    assert cjk.sum() >= n // 2 and folded >= cjk.sum()


def test_detection_rule():
    buf, off = encode_batch(["plain ascii words", "Café au lait, s'il vous plaît", "这是一个中文句子，没有空格。",
                             "カタカナとひらがなの文", "ภาษาไทยไม่มีช่องว่างระหว่างคำ", "Ein Satz mit 中 einem Zeichen",
                             "", "한국어는 띄어쓰기를 합니다"])
    assert unspaced_docs(buf, off).tolist() == [False, False, True, True, True, False, False, False]


def test_auto_is_the_word_rule_or_the_char_rule_per_document_byte_for_byte():
    docs = ["the quick brown fox jumps over the lazy dog " * 3, "这是一个中文句子，没有空格。" * 4,
            "Café au lait, s'il vous plaît, merci beaucoup", "カタカナとひらがなの文です。" * 3, "", "x"]
    buf, off = encode_batch(docs)
    auto = shingle_buffer(buf, off, TextConfig(), 7)
    sigs = sketch_oph_buffer(buf, off, TextConfig(), 7, 64)[0]
    su = sorted_unique_shingles(docs, TextConfig(), 7)
    cjk = unspaced_docs(buf, off)
    for i, d in enumerate(docs):
        cfg = TextConfig(shingle="char", k=3) if cjk[i] else TextConfig(shingle="word", k=5)
        b1, o1 = encode_batch([d])
        one = shingle_buffer(b1, o1, cfg, 7)
        assert auto.doc(i).tolist() == one.doc(0).tolist(), i
        assert auto.lengths[i] == one.lengths[0] and auto.exact[i] == one.exact[0]
        assert sigs[i].tolist() == sketch_oph_buffer(b1, o1, cfg, 7, 64)[0][0].tolist(), i
        s1, c1, h1 = sorted_unique_shingles([d], cfg, 7)
        assert su[2][su[0][i]: su[0][i] + su[1][i]].tolist() == h1[s1[0]: s1[0] + c1[0]].tolist(), i


def test_ascii_corpora_are_unchanged_by_auto():
    docs = [f"document {i} with a few words about topic {i % 3}" for i in range(50)]
    a = build(docs)
    w = build(docs, config={"text": {"shingle": "word"}})
    assert a.cluster_ids.tolist() == w.cluster_ids.tolist()
    assert np.array_equal(a.cluster_map.extras["minhash"], w.cluster_map.extras["minhash"])


def test_the_rule_each_document_took_is_recorded_and_kept_by_add():
    from diversify import add
    from diversify.stages import FLAG_CHAR_SHINGLES

    docs = ["plain english words in a row here", "这是一个中文句子，没有空格。" * 3]
    res = build(docs, ids=["en", "zh"])
    flags = res.cluster_map.extras["doc_flags"]
    assert ((flags & FLAG_CHAR_SHINGLES) != 0).tolist() == [False, True]
    more = add(res.cluster_map, ["ภาษาไทยไม่มีช่องว่างระหว่างคำ" * 3, "more english words"], ids=["th", "en2"])
    flags = more.cluster_map.extras["doc_flags"]
    assert ((flags & FLAG_CHAR_SHINGLES) != 0).tolist() == [False, True, True, False]
