"""The tokenizer built in place loads with transformers' AutoTokenizer (what aiperf uses) from a folder,
and counts the fake server's words one token each."""

from __future__ import annotations

import json

from serving_lab.bench import offline_tokenizer


def test_builds_a_word_level_tokenizer_the_fake_server_matches(tmp_path):
    from tokenizers import Tokenizer

    folder = offline_tokenizer.build(tmp_path / "tok", size=100)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert tokenizer.encode("w0 w1 w99").ids == [1, 2, 100]
    assert tokenizer.encode("any other words").ids == [0, 0, 0]  # unknown words: still one token each
    assert tokenizer.decode([1, 2, 3]) == "w0 w1 w2"
    assert json.loads((folder / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
