"""A checkpoint of the stage's model in its real format, with seeded random values, made on the GPU host.

  python3 -m serving_lab.rehearse.checkpoint --out DIR [--seed N] [--config JSON]

--config: serving_lab/pins/qwen3.5-9b-config.json (the default: 18.8 GB, 760 tensors in 4 shards) or
qwen3.5-27b-config.json (54.7 GB, 1,184 tensors in 12 shards); tensor_plan() gives the tensors of either without
drawing them, and the command refuses in one line, before it writes anything, a GPU or an --out disk with less
room free than the checkpoint's bytes (the values are drawn on one GPU: 27B needs one larger than an L4).
What it writes (never committed or carried: made on the host in a minute or two):
  the model folder of serving_lab/rehearse/model_folder.py (config.json, tokenizer, processor configurations), and
  model-00001-of-0000N.safetensors ...  every tensor the architecture has, by the name, shape and dtype
                          transformers builds it with (`<architectures[0]>` from config.json, `from_config` with the
                          config's dtype: its `_keep_in_fp32_modules` stay float32), in shards of at most
                          MAX_SHARD_BYTES, named as huggingface_hub names them (`split_torch_state_dict_into_shards`,
                          huggingface_hub/serialization/_base.py: "model-00001-of-00004.safetensors");
  model.safetensors.index.json  {"metadata": {"total_size": bytes}, "weight_map": {name: shard}}, as
                          transformers writes it (transformers/modeling_utils.py save_pretrained);
  checkpoint.json         what was made: the seed, the tensors and bytes, the seconds.
The values are transformers' own initialisation of that architecture (`_init_weights`: normal with the config's
initializer_range for the projections and embeddings, each norm at its identity) under `torch.manual_seed(seed)`
on the GPU, so the model's greedy answers depend on the prompt and a seed makes the same bytes again. vLLM reads
it with its strict loader (`load_format: auto`; `Qwen3_5ForConditionalGeneration.load_weights`,
vllm/model_executor/models/qwen3_5.py: every parameter must be found, mtp.* is skipped): a name or shape the real
repository would not have fails the engine's start-up. The multi-token-prediction head (`mtp.*`), which the real
repository has and vLLM skips, is not written: transformers builds no such module.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clients import kube
from clients.cli_options import OneLineParser, number, output_folder, regular_file

from .model_folder import ModelFolderError, build

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = ROOT / "serving_lab" / "pins" / "qwen3.5-9b-config.json"
MAX_SHARD_BYTES = 5 * 10**9  # transformers' default max_shard_size ("5GB", decimal)
INDEX = "model.safetensors.index.json"
RECORD = "checkpoint.json"
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


class CheckpointError(Exception):
    """One line: why no checkpoint was written."""


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str  # torch's name without "torch.", e.g. "bfloat16"

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count * DTYPE_BYTES[self.dtype]


def shard_plan(tensors: Sequence[Tensor], max_bytes: int = MAX_SHARD_BYTES) -> list[list[Tensor]]:
    """Tensors in order into shards of at most max_bytes (a tensor larger than that alone in its shard), as
    huggingface_hub's split_torch_state_dict_into_shards fills them."""
    shards: list[list[Tensor]] = []
    size = 0
    for tensor in tensors:
        if not shards or (size + tensor.nbytes > max_bytes and shards[-1]):
            shards.append([])
            size = 0
        shards[-1].append(tensor)
        size += tensor.nbytes
    return shards


def shard_names(count: int) -> list[str]:
    if count == 1:
        return ["model.safetensors"]
    return [f"model-{i:05d}-of-{count:05d}.safetensors" for i in range(1, count + 1)]


def index(shards: Sequence[Sequence[Tensor]]) -> dict:
    """model.safetensors.index.json for these shards."""
    names = shard_names(len(shards))
    weight_map = {tensor.name: name for name, shard in zip(names, shards, strict=True) for tensor in shard}
    total = sum(tensor.nbytes for shard in shards for tensor in shard)
    return {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}


ARCHITECTURE = "Qwen3_5ForConditionalGeneration"


def tensor_plan(config: dict) -> list[Tensor]:
    """The tensors, in order, that transformers' Qwen3_5ForConditionalGeneration (5.17, the host's) builds from
    config.json (transformers/models/qwen3_5/modeling_qwen3_5.py): the vision tower, the text model, lm_head; every
    one in the config's dtype (A_log and the DeltaNet norms too: the real checkpoint keeps those in float32, vLLM
    casts them on load), no mtp.* (transformers builds none; vLLM's loader skips them). The order decides the
    shards (shard_plan). For the committed configs: tests/serving_lab/rehearse/test_checkpoint.py."""
    architecture = (config.get("architectures") or [""])[0]
    if architecture != ARCHITECTURE:
        raise CheckpointError(f"config.json: architectures: {architecture!r}, not {ARCHITECTURE}")
    text = config["text_config"]
    shapes = _vision_shapes(config["vision_config"])
    h, vocab = text["hidden_size"], text["vocab_size"]
    shapes.append(("model.language_model.embed_tokens.weight", (vocab, h)))
    for i, kind in enumerate(text["layer_types"][: text["num_hidden_layers"]]):
        shapes += _layer_shapes(text, f"model.language_model.layers.{i}", kind, i)
    shapes.append(("model.language_model.norm.weight", (h,)))
    if not (config.get("tie_word_embeddings") or text.get("tie_word_embeddings")):
        shapes.append(("lm_head.weight", (vocab, h)))
    dtype = str(config.get("dtype", text.get("dtype", "bfloat16")))
    return [Tensor(name, shape, dtype) for name, shape in shapes]


def _vision_shapes(vision: dict) -> list[tuple[str, tuple[int, ...]]]:
    """Qwen3_5VisionModel: patch embedding (Conv3d), learned positions, blocks, merger."""
    vh, patch, ffn = vision["hidden_size"], vision["patch_size"], vision["intermediate_size"]
    shapes = [
        (
            "model.visual.patch_embed.proj.weight",
            (vh, vision["in_channels"], vision["temporal_patch_size"], patch, patch),
        ),
        ("model.visual.patch_embed.proj.bias", (vh,)),
        ("model.visual.pos_embed.weight", (vision["num_position_embeddings"], vh)),
    ]
    for i in range(vision["depth"]):
        block = f"model.visual.blocks.{i}"
        shapes += [(f"{block}.{norm}.{part}", (vh,)) for norm in ("norm1", "norm2") for part in ("weight", "bias")]
        for name, out, inp in (
            ("attn.qkv", 3 * vh, vh),
            ("attn.proj", vh, vh),
            ("mlp.linear_fc1", ffn, vh),
            ("mlp.linear_fc2", vh, ffn),
        ):
            shapes += [(f"{block}.{name}.weight", (out, inp)), (f"{block}.{name}.bias", (out,))]
    merged, out = vh * vision["spatial_merge_size"] ** 2, vision["out_hidden_size"]
    return shapes + [
        ("model.visual.merger.norm.weight", (vh,)),
        ("model.visual.merger.norm.bias", (vh,)),
        ("model.visual.merger.linear_fc1.weight", (merged, merged)),
        ("model.visual.merger.linear_fc1.bias", (merged,)),
        ("model.visual.merger.linear_fc2.weight", (out, merged)),
        ("model.visual.merger.linear_fc2.bias", (out,)),
    ]


def _layer_shapes(text: dict, layer: str, kind: str, index: int) -> list[tuple[str, tuple[int, ...]]]:
    """One decoder layer: Gated DeltaNet or gated full attention, then the MLP and the two norms."""
    h, ffn = text["hidden_size"], text["intermediate_size"]
    if kind == "linear_attention":
        attn, value_heads = f"{layer}.linear_attn", text["linear_num_value_heads"]
        key_dim = text["linear_num_key_heads"] * text["linear_key_head_dim"]
        value_dim = value_heads * text["linear_value_head_dim"]
        shapes = [
            (f"{attn}.dt_bias", (value_heads,)),
            (f"{attn}.A_log", (value_heads,)),
            (f"{attn}.conv1d.weight", (2 * key_dim + value_dim, 1, text["linear_conv_kernel_dim"])),
            (f"{attn}.norm.weight", (text["linear_value_head_dim"],)),
            (f"{attn}.out_proj.weight", (h, value_dim)),
            (f"{attn}.in_proj_qkv.weight", (2 * key_dim + value_dim, h)),
            (f"{attn}.in_proj_z.weight", (value_dim, h)),
            (f"{attn}.in_proj_b.weight", (value_heads, h)),
            (f"{attn}.in_proj_a.weight", (value_heads, h)),
        ]
    elif kind == "full_attention":
        attn, heads, head_dim = f"{layer}.self_attn", text["num_attention_heads"], text["head_dim"]
        kv = text["num_key_value_heads"] * head_dim
        shapes = [
            (f"{attn}.q_proj.weight", (heads * head_dim * 2, h)),  # the queries and their output gate
            (f"{attn}.k_proj.weight", (kv, h)),
            (f"{attn}.v_proj.weight", (kv, h)),
            (f"{attn}.o_proj.weight", (h, heads * head_dim)),
            (f"{attn}.q_norm.weight", (head_dim,)),
            (f"{attn}.k_norm.weight", (head_dim,)),
        ]
    else:
        raise CheckpointError(f"config.json: text_config.layer_types[{index}]: {kind!r}")
    return shapes + [
        (f"{layer}.mlp.gate_proj.weight", (ffn, h)),
        (f"{layer}.mlp.up_proj.weight", (ffn, h)),
        (f"{layer}.mlp.down_proj.weight", (h, ffn)),
        (f"{layer}.input_layernorm.weight", (h,)),
        (f"{layer}.post_attention_layernorm.weight", (h,)),
    ]


def _free_bytes(path: Path) -> int:
    """Bytes free on the disk that holds `path` (or its nearest existing parent)."""
    for folder in (path, *path.parents):
        if folder.exists():
            return shutil.disk_usage(folder).free
    return 0


def _gpu_free_bytes() -> int:
    import torch

    return torch.cuda.mem_get_info()[0]


def require_room(out: Path, nbytes: int) -> None:
    """Refuse, before anything is written, a checkpoint that the GPU (the values are drawn on one) or --out's disk
    cannot hold."""
    free = _free_bytes(out)
    if free < nbytes:
        raise CheckpointError(f"--out: {out} has {free / 1e9:.1f} GB free; the checkpoint is {nbytes / 1e9:.1f} GB")
    free = _gpu_free_bytes()
    if free < nbytes:
        raise CheckpointError(
            f"the GPU has {free / 1e9:.1f} GB free; the values ({nbytes / 1e9:.1f} GB) are drawn on one GPU"
        )


def require_gpu() -> None:
    """torch, transformers, safetensors and a CUDA device, checked before anything is written."""
    try:
        import safetensors  # noqa: F401
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        raise CheckpointError(f"needs torch, transformers and safetensors (the GPU host's own): {exc}") from None
    if not torch.cuda.is_available():
        raise CheckpointError("no CUDA device: the values are drawn on the GPU (minutes there, hours on a CPU)")


def _model(config_dir: Path, seed: int):
    """transformers' model of config.json's architecture, initialised on the GPU under the seed."""
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(config_dir)
    architecture = (getattr(config, "architectures", None) or [""])[0]
    cls = getattr(transformers, architecture, None)
    if cls is None:
        raise CheckpointError(
            f"config.json: architectures: transformers {transformers.__version__} has no {architecture!r}"
        )
    torch.manual_seed(seed)
    with torch.device("cuda"):
        return cls._from_config(config, dtype=getattr(torch, str(config.dtype or "bfloat16").replace("torch.", "")))


def _tensors(state: dict) -> list[Tensor]:
    return [Tensor(name, tuple(value.shape), str(value.dtype).replace("torch.", "")) for name, value in state.items()]


def _check_finite(state: dict) -> None:
    """Every value drawn: a tensor transformers left uninitialised (NaN, inf) would make the oracle meaningless."""
    import torch

    bad = [name for name, value in state.items() if not bool(torch.isfinite(value).all())]
    if bad:
        raise CheckpointError(f"{len(bad)} tensors hold non-finite values after initialisation, e.g. {bad[0]}")


def _save(state: dict, shards: list[list[Tensor]], out: Path) -> None:
    from safetensors.torch import save_file

    for name, shard in zip(shard_names(len(shards)), shards, strict=True):
        part = {tensor.name: state[tensor.name].contiguous().cpu() for tensor in shard}
        save_file(part, str(out / name), metadata={"format": "pt"})


def write(out: Path, *, seed: int, config_path: Path = DEFAULT_CONFIG, say=print) -> dict:
    """The model folder, then the seeded checkpoint in it; returns what checkpoint.json records."""
    started = time.monotonic()
    require_gpu()
    try:
        config = kube.parse_json(Path(config_path).read_text())
    except kube.TooDeep:
        raise CheckpointError(f"--config: {config_path}: JSON nested too deeply") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"--config: {config_path}: {exc}") from None
    if (config.get("architectures") or [""])[0] == ARCHITECTURE:
        require_room(out, sum(tensor.nbytes for tensor in tensor_plan(config)))
    folder = build(out, config_path=config_path)
    model = _model(folder, seed)
    state = {name: value.detach() for name, value in model.state_dict().items()}
    _check_finite(state)
    tensors = _tensors(state)
    shards = shard_plan(tensors)
    drawn = time.monotonic() - started
    say(f"checkpoint: {len(tensors)} tensors, {sum(t.nbytes for t in tensors) / 1e9:.2f} GB in {len(shards)} shards")
    _save(state, shards, folder)
    (folder / INDEX).write_text(json.dumps(index(shards), indent=2) + "\n")
    record = {
        "seed": seed,
        "architecture": type(model).__name__,
        "tensors": len(tensors),
        "bytes": sum(t.nbytes for t in tensors),
        "shards": shard_names(len(shards)),
        "dtypes": _dtype_counts(tensors),
        "seconds": {"model_folder_and_values": round(drawn, 1), "total": round(time.monotonic() - started, 1)},
    }
    (folder / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    return record


def _dtype_counts(tensors: Iterable[Tensor]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for tensor in tensors:
        counts[tensor.dtype] = counts.get(tensor.dtype, 0) + 1
    return dict(sorted(counts.items()))


def is_checkpoint(folder: Path) -> bool:
    """A real-format checkpoint (an index of safetensors shards), not a folder for dummy weights."""
    return (folder / INDEX).is_file()


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python3 -m serving_lab.rehearse.checkpoint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out",
        required=True,
        type=output_folder,
        help="the folder to write (created; an existing checkpoint is refused)",
    )
    parser.add_argument(
        "--seed",
        type=number(int, 0, 2**32 - 1),
        default=0,
        help="torch.manual_seed before the values are drawn (default 0)",
    )
    parser.add_argument(
        "--config",
        type=regular_file,
        default=str(DEFAULT_CONFIG),
        help="the model's config.json (default: the pinned one)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    try:
        if is_checkpoint(out):
            raise CheckpointError(
                f"--out: {out} already holds a checkpoint ({INDEX}); remove it or pick another folder"
            )
        record = write(out, seed=args.seed, config_path=Path(args.config))
    except (CheckpointError, ModelFolderError, OSError) as exc:
        print(f"checkpoint: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, CheckpointError) else 1
    print(f"checkpoint: {out}: seed {record['seed']}, {record['bytes'] / 1e9:.2f} GB, {record['seconds']['total']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
