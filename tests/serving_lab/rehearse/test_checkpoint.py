"""The real-format checkpoint's layout (shards, names, index) and its command's one-line refusals."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from serving_lab.rehearse import checkpoint
from serving_lab.rehearse.checkpoint import Tensor

# Not tests/helpers.py's ROOT: that imports the CDK app, and these tests run where torch is too (the GPU host)
ROOT = Path(__file__).resolve().parents[3]


def _tensors(*sizes_in_bf16_elements):
    return [Tensor(f"t{i}", (n,), "bfloat16") for i, n in enumerate(sizes_in_bf16_elements)]


def test_shards_fill_in_order_up_to_the_limit():
    shards = checkpoint.shard_plan(_tensors(40, 40, 40, 200, 10), max_bytes=160)
    assert [[t.name for t in shard] for shard in shards] == [["t0", "t1"], ["t2"], ["t3"], ["t4"]]


def test_shard_names_follow_huggingface_hubs_pattern():
    assert checkpoint.shard_names(1) == ["model.safetensors"]
    assert checkpoint.shard_names(4)[2] == "model-00003-of-00004.safetensors"


def test_the_index_maps_every_tensor_to_its_shard_and_counts_the_bytes():
    shards = checkpoint.shard_plan(_tensors(40, 40, 40) + [Tensor("a_log", (3,), "float32")], max_bytes=160)
    found = checkpoint.index(shards)
    assert found["metadata"]["total_size"] == 3 * 80 + 12
    assert found["weight_map"] == {
        "a_log": "model-00002-of-00002.safetensors",
        "t0": "model-00001-of-00002.safetensors",
        "t1": "model-00001-of-00002.safetensors",
        "t2": "model-00002-of-00002.safetensors",
    }


def test_a_folder_is_a_checkpoint_by_its_index(tmp_path):
    assert not checkpoint.is_checkpoint(tmp_path)
    (tmp_path / checkpoint.INDEX).write_text(json.dumps({"weight_map": {}}))
    assert checkpoint.is_checkpoint(tmp_path)


def test_an_existing_checkpoint_is_not_overwritten(tmp_path, capsys):
    (tmp_path / checkpoint.INDEX).write_text("{}")
    assert checkpoint.main(["--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_without_torch_or_a_gpu_nothing_is_written(tmp_path, capsys):
    pytest.importorskip("numpy")  # the CPU venv: no torch, no CUDA
    try:
        import torch  # noqa: F401

        pytest.skip("torch is installed here")
    except ImportError:
        pass
    out = tmp_path / "ckpt"
    assert checkpoint.main(["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("checkpoint: needs torch") and err.count("\n") == 1
    assert not out.exists()  # no half-written folder


# --- The tensors of the committed configs (tensor_plan), without a GPU -------------------------------------------

PINS = ROOT / "serving_lab" / "pins"
ORACLE_RUN = ROOT / "evidence" / "2026-12-04-h200-oracle" / "runs"


def _config(model: str) -> dict:
    return json.loads((PINS / f"{model}-config.json").read_text())


def _pattern(name: str) -> str:
    return re.sub(r"\.\d+\.", ".N.", name)


def test_the_9b_plan_is_the_checkpoint_the_rehearsal_host_wrote():
    # transformers 5.17 on the H200 host wrote it from this config, and vLLM's strict loader took it
    # (evidence/2026-12-04-h200-oracle): the same names, sizes, order and so the same shards and index
    plan = checkpoint.tensor_plan(_config("qwen3.5-9b"))
    record = json.loads((ORACLE_RUN / "checkpoint-0.json").read_text())
    shards = checkpoint.shard_plan(plan)
    assert checkpoint.index(shards) == json.loads((ORACLE_RUN / "index-0.json").read_text())
    assert (len(plan), sum(t.nbytes for t in plan)) == (record["tensors"], record["bytes"]) == (760, 18_819_627_488)
    assert checkpoint.shard_names(len(shards)) == record["shards"]


def _mtp(text: dict) -> list[tuple[str, tuple[int, ...]]]:
    # The checkpoint's mtp.* (vLLM 0.26 qwen3_5_mtp.py): fc over [embedding; hidden], one full-attention layer, norms
    h, hd = text["hidden_size"], text["head_dim"]
    heads, kv, ffn = text["num_attention_heads"], text["num_key_value_heads"], text["intermediate_size"]
    layer = "mtp.layers.0"
    return [
        ("mtp.fc.weight", (h, 2 * h)),
        *((f"mtp.{n}.weight", (h,)) for n in ("norm", "pre_fc_norm_embedding", "pre_fc_norm_hidden")),
        (f"{layer}.self_attn.q_proj.weight", (heads * hd * 2, h)),
        (f"{layer}.self_attn.k_proj.weight", (kv * hd, h)),
        (f"{layer}.self_attn.v_proj.weight", (kv * hd, h)),
        (f"{layer}.self_attn.o_proj.weight", (h, heads * hd)),
        (f"{layer}.self_attn.q_norm.weight", (hd,)),
        (f"{layer}.self_attn.k_norm.weight", (hd,)),
        (f"{layer}.mlp.gate_proj.weight", (ffn, h)),
        (f"{layer}.mlp.up_proj.weight", (ffn, h)),
        (f"{layer}.mlp.down_proj.weight", (h, ffn)),
        (f"{layer}.input_layernorm.weight", (h,)),
        (f"{layer}.post_attention_layernorm.weight", (h,)),
    ]


def test_the_27b_plan_is_the_official_checkpoint_less_its_mtp_layer():
    config = _config("qwen3.5-27b")
    plan = checkpoint.tensor_plan(config)
    shapes = {t.name: t.shape for t in plan}
    assert len(plan) == len(shapes) == 1_184 and {t.dtype for t in plan} == {"bfloat16"}
    # the 9B's names, 64 layers instead of 32: what vLLM's loader maps (Qwen3_5ForConditionalGeneration.load_weights)
    assert {_pattern(n) for n in shapes} == {_pattern(t.name) for t in checkpoint.tensor_plan(_config("qwen3.5-9b"))}
    full = [i for i in range(64) if f"model.language_model.layers.{i}.self_attn.q_proj.weight" in shapes]
    assert full == list(range(3, 64, 4))
    layer0, layer3 = "model.language_model.layers.0.linear_attn", "model.language_model.layers.3.self_attn"
    assert (shapes[f"{layer0}.in_proj_qkv.weight"], shapes[f"{layer0}.in_proj_z.weight"]) == (
        (10_240, 5_120),
        (6_144, 5_120),
    )
    assert (shapes[f"{layer0}.in_proj_a.weight"], shapes[f"{layer0}.conv1d.weight"]) == ((48, 5_120), (10_240, 1, 4))
    assert (shapes[f"{layer3}.q_proj.weight"], shapes[f"{layer3}.k_proj.weight"]) == ((12_288, 5_120), (1_024, 5_120))
    assert shapes["model.visual.merger.linear_fc2.weight"] == (5_120, 4_608)
    assert shapes["lm_head.weight"] == shapes["model.language_model.embed_tokens.weight"] == (248_320, 5_120)
    assert sum(t.nbytes for t in plan) == 54_713_457_120 and len(checkpoint.shard_plan(plan)) == 12
    # The official Qwen/Qwen3.5-27B index (serving_lab/pins/qwen3.5-27b-config.SOURCES.txt): 1,199 tensors and
    # total_size 55,562,872,800 = these, its 15 mtp.* tensors, and A_log and linear_attn.norm kept in float32
    mtp = _mtp(config["text_config"])
    fp32 = [t for t in plan if t.name.endswith((".A_log", ".linear_attn.norm.weight"))]
    mtp_bytes = sum(2 * math.prod(shape) for _, shape in mtp)
    assert len(plan) + len(mtp) == 1_199
    assert sum(t.nbytes for t in plan) + mtp_bytes + sum(t.nbytes for t in fp32) == 55_562_872_800


@pytest.mark.parametrize("model", ["qwen3.5-9b", "qwen3.5-27b"])
def test_the_plan_is_what_transformers_builds(model, tmp_path):
    # where torch and transformers are (the rehearsal host; skipped in .venv): the model on the meta device
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    (tmp_path / "config.json").write_bytes((PINS / f"{model}-config.json").read_bytes())
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    with torch.device("meta"):
        built = getattr(transformers, checkpoint.ARCHITECTURE)._from_config(config, dtype=torch.bfloat16)
    assert checkpoint._tensors(built.state_dict()) == checkpoint.tensor_plan(_config(model))


def test_another_architecture_has_no_plan():
    with pytest.raises(checkpoint.CheckpointError, match="'LlamaForCausalLM', not Qwen3_5ForConditionalGeneration"):
        checkpoint.tensor_plan({"architectures": ["LlamaForCausalLM"]})


@pytest.mark.parametrize(
    ("disk", "gpu", "said"),
    [
        (10**9, 10**12, "has 1.0 GB free; the checkpoint is 54.7 GB"),
        (10**12, 24 * 10**9, "the GPU has 24.0 GB free; the values (54.7 GB) are drawn on one GPU"),
    ],
)
def test_a_disk_or_gpu_without_room_is_refused_before_anything_is_written(
    monkeypatch, tmp_path, capsys, disk, gpu, said
):
    monkeypatch.setattr(checkpoint, "require_gpu", lambda: None)
    monkeypatch.setattr(checkpoint, "_free_bytes", lambda path: disk)
    monkeypatch.setattr(checkpoint, "_gpu_free_bytes", lambda: gpu)
    out = tmp_path / "ckpt"
    assert checkpoint.main(["--out", str(out), "--config", str(PINS / "qwen3.5-27b-config.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("checkpoint: ") and said in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize("body, problem", [("[" * 100_000, "JSON nested too deeply"), ("{", "Expecting property name")])
def test_a_config_that_is_no_json_object_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, body, problem):
    monkeypatch.setattr(checkpoint, "require_gpu", lambda: None)  # the config is read before any GPU work
    config = tmp_path / "config.json"
    config.write_text(body)
    assert checkpoint.main(["--out", str(tmp_path / "ckpt"), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"checkpoint: --config: {config}: ") and problem in err and err.count("\n") == 1
