"""serving_lab/rehearse/floors.py: the GPU's floors under a first token and a decode step, from the datasheet's peaks,
the weights vLLM loaded and the model's embedding."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving_lab.rehearse import floors

GIB = 2**30
CONFIG = Path(__file__).parents[3] / "serving_lab" / "pins" / "qwen3.5-9b-config.json"  # text_config inside


def test_a_gpu_is_known_by_its_exact_name_only():
    assert floors.peak_of("NVIDIA H200") == floors.Peak(989.5e12, 4.8e12)
    assert floors.peak_of("NVIDIA L4") == floors.Peak(121e12, 300e9)
    assert floors.peak_of("NVIDIA L40S") is None  # not an L4
    assert floors.peak_of("NVIDIA H200 NVL") is None  # an H200 of lower clocks
    assert floors.peak_of("NVIDIA H100 80GB HBM3") == floors.Peak(989.5e12, 3.35e12)  # the SXM part
    assert floors.peak_of("NVIDIA H100 PCIe") is None  # 756 TFLOPS, 2 TB/s: figures of its own


def test_the_h100_of_the_committed_runs_is_named_as_nvidia_smi_printed_it():
    host = Path(__file__).parents[3] / "evidence" / "2026-12-05-h100-compiled-graphs" / "runs" / "host.txt"
    name = host.read_text().splitlines()[1].split(",")[0]
    peak = floors.peak_of(name)
    assert peak is not None, name
    found = floors.Floors.of(peak, floors.Model.of(CONFIG, 16.8), 256)
    assert found.weight_read_s == pytest.approx(4.8e-3, abs=0.05e-3)  # the README's 256-token floor


def test_the_model_is_read_from_the_text_config_of_a_multimodal_checkpoint():
    model = floors.Model.of(CONFIG, 16.8)
    assert model == floors.Model(16.8 * GIB, 248_320 * 4_096, tied_embeddings=False)


def test_an_untied_model_reads_its_lm_head_but_computes_neither_embedding():
    model = floors.Model(weight_bytes=20e9, embedding_params=1e9, tied_embeddings=False)
    assert model.read_bytes == 18e9  # the input embedding's rows only
    assert model.matmul_params == 8e9  # 10e9 parameters less the embedding and the LM head


def test_a_tied_model_reads_its_one_embedding_as_the_lm_head():
    model = floors.Model(weight_bytes=20e9, embedding_params=1e9, tied_embeddings=True)
    assert model.read_bytes == 20e9
    assert model.matmul_params == 9e9


def test_a_short_prompt_is_held_by_the_weight_read_and_a_long_one_by_compute():
    peak = floors.Peak(bf16_flops=1e15, memory_bytes_per_s=4e12)
    model = floors.Model(weight_bytes=20e9, embedding_params=1e9, tied_embeddings=False)  # 8e9 matmul params
    short, long = floors.Floors.of(peak, model, 100), floors.Floors.of(peak, model, 1000)
    assert short.prefill_compute_s == pytest.approx(1.6e-3)  # 2 x 8e9 x 100 / 1e15
    assert short.weight_read_s == pytest.approx(4.5e-3)  # 18e9 / 4e12
    assert short.prefill_s == short.weight_read_s
    assert long.prefill_s == long.prefill_compute_s == pytest.approx(16e-3)


def test_the_issues_figures_for_qwen35_9b_on_an_h200():
    # issue #53: a 256-token prefill of a 9B model, ~5 ms of dense BF16 and ~4 ms of reading the weights
    found = floors.Floors.of(floors.PEAKS["NVIDIA H200"], floors.Model.of(CONFIG, 16.8), 256)
    assert found.prefill_compute_s == pytest.approx(3.6e-3, abs=0.1e-3)  # the layers' 7.0e9 parameters
    assert found.weight_read_s == pytest.approx(3.3e-3, abs=0.1e-3)


def test_each_phase_is_stated_over_its_own_floor():
    found = floors.Floors(750, prefill_compute_s=0.01, weight_read_s=0.004)
    medians = {"client_ttft_s": 0.1, "prefill_compute_s": 0.03, "decode_first_step_s": 0.006, "outside_engines_s": 1}
    assert found.multiples(medians) == {"client_ttft_s": 10.0, "prefill_compute_s": 3.0, "decode_first_step_s": 1.5}
    assert found.multiples({"itl_s": 0.008}) == {"itl_s": 2.0}  # a benchmark level's inter-token latency
    assert found.multiples({}) == {}
    assert found.line({}).endswith("medians over them: none measured")
