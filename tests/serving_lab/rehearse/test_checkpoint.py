"""The real-format checkpoint's layout (shards, names, index) and its command's one-line refusals."""

from __future__ import annotations

import json

import pytest

from serving_lab.rehearse import checkpoint
from serving_lab.rehearse.checkpoint import Tensor


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
