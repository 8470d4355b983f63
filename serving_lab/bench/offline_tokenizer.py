"""A word-level Hugging Face tokenizer built on the spot, so benchmarks against the fake server (tests,
calibration, the sample report) load a tokenizer without downloading anything.

Vocabulary: ``[UNK]`` and ``w0 .. w{size-1}``, the words the fake server streams, split on whitespace,
so the client counts each streamed word as exactly one token. Words of the client's prompt corpus are
unknown and become ``[UNK]``: still one token each, so prompt lengths in tokens stay exact too.
"""

from __future__ import annotations

import json
from pathlib import Path


def build(directory: Path, size: int = 8192) -> Path:
    """Write tokenizer.json and tokenizer_config.json into `directory` (created) and return it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"[UNK]": 0}
    vocab.update({f"w{i}": i + 1 for i in range(size)})
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "unk_token": "[UNK]",
                "model_max_length": 1_000_000,
                "clean_up_tokenization_spaces": False,
            },
            indent=2,
        )
        + "\n"
    )
    return directory
