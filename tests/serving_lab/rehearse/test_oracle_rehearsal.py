"""`ops rehearse --mode both --weights CHECKPOINT` end to end on the CPU: Ray stands in (a fake head), the endpoint is a
local server that answers greedily with token ids and candidates, the metrics are canned. The oracle's answers, the
PD bytes accounted, the verdict and its files; the negative control's divergences fail it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from serving_lab.rehearse import checkpoint, checks, cli, oracle, oracle_run, ray_cluster
from serving_lab.rehearse import host as host_facts
from serving_lab.rehearse.host import Gpu, Host
from serving_lab.rehearse.kv_accounting import Layout

from ...helpers import ROOT
from .arguments import rehearse_args

ONE_H200 = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),), efa_devices=())
CONFIG = Path(__file__).parents[3] / "serving_lab" / "pins" / "qwen3.5-9b-config.json"
PROMPT_TOKENS = 100  # every request's, as the fake engine reports it
LAYOUT = Layout.from_config(json.loads(CONFIG.read_text()))


class _Engine(BaseHTTPRequestHandler):
    """Greedy answers that depend on the prompt only; `flip` makes another checkpoint's answers (token 3 changes)."""

    flip = False
    served = 0  # requests answered: what the engines' counters count

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Engine.served += 1
        seed = sum(map(ord, json.dumps(body["messages"]))) % 1000
        ids = [(seed + i) % 1000 + (500 if _Engine.flip and i >= 3 else 0) for i in range(body["max_tokens"])]
        content = [
            {
                "token": f"token_id:{t}",
                "logprob": -1.0,
                "top_logprobs": [
                    {"token": f"token_id:{t}", "logprob": -1.0},
                    {"token": "token_id:9999", "logprob": -3.0},
                ],
            }
            for t in ids
        ]
        answer = {
            "choices": [{"message": {"content": "x"}, "logprobs": {"content": content}}],
            "usage": {"prompt_tokens": PROMPT_TOKENS, "prompt_tokens_details": {"cached_tokens": PROMPT_TOKENS - 1}},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _metrics() -> str:
    """Ray's head metrics as a decode engine that served every request so far would count them."""
    n = _Engine.served
    decode = '{engine="1",model_name="m"}'
    rows = [
        f'ray_vllm_prompt_tokens_by_source_total{{engine="1",model_name="m",source="{s}"}} {v}'
        for s, v in (("local_compute", n), ("local_cache_hit", 0), ("external_kv_transfer", n * (PROMPT_TOKENS - 1)))
    ]
    for name, total in (
        ("e2e_request_latency_seconds", n * 0.5),
        ("request_generation_tokens", n * 64.0),
        ("nixl_xfer_time_seconds", n * 0.01),
        ("nixl_bytes_transferred", n * 83886080.0),
    ):
        rows += [f"ray_vllm_{name}_sum{decode} {total}", f"ray_vllm_{name}_count{decode} {n}"]
    rows += [
        f'ray_vllm_nixl_bytes_transferred_bucket{{engine="1",model_name="m",le="{le}"}} {c}'
        for le, c in (("8388608.0", 0), ("33554432.0", 0), ("134217728.0", n), ("+Inf", n))
    ]
    return "\n".join(rows) + "\n"


def _exporter(url: str) -> str:
    """NIXL's exporter on the decode worker: every request so far moved its layout's bytes in 10 ms."""
    n = _Engine.served
    moved = n * LAYOUT.request_bytes(PROMPT_TOKENS, 528)
    return (
        f'agent_rx_bytes_total{{agent_name="a",hostname="h"}} {moved}\nagent_xfer_time_total{{agent_name="a"}} '
        f'{n * 10_000}\nagent_rx_requests_num_total{{agent_name="a"}} {n}\n'
    )


class _Head:
    def __init__(self, *, num_gpus, env, temp_dir, metrics_port=8080, **kwargs):
        logs = Path(temp_dir) / "session_latest" / "logs"
        logs.mkdir(parents=True)
        (logs / "worker-1.out").write_text("INFO Setting attention block size to 528 tokens to ensure that ...\n")

    def start(self):
        pass

    def wait_for_dashboard(self):
        pass

    def deploy(self, config):
        pass

    def stop(self):
        pass


@pytest.fixture
def engine(monkeypatch):
    _Engine.flip, _Engine.served = False, 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(cli, "SERVE_PORT", server.server_address[1])
    monkeypatch.setattr(cli, "_metrics_text", _metrics)
    monkeypatch.setattr(cli, "_exporter_text", _exporter)
    monkeypatch.setattr(oracle_run, "EXPORT_WAIT_S", 0.0)
    monkeypatch.setattr(ray_cluster, "RayHead", _Head)
    monkeypatch.setattr(ray_cluster, "wait_until_running", lambda head, app, timeout, progress: None)
    monkeypatch.setattr(ray_cluster, "install_signal_handlers", lambda: None)
    monkeypatch.setattr(host_facts, "detect", lambda: ONE_H200)
    monkeypatch.setattr(checks, "openai", lambda report, base, model: None)
    monkeypatch.setattr(checks, "token_field_probe", lambda report, base, model: None)
    ucx = (ROOT / "tests" / "ops" / "fixtures" / "ucx.log").read_text()  # the plan's UCX, as on the H200
    logs = ray_cluster.worker_logs
    monkeypatch.setattr(ray_cluster, "worker_logs", lambda temp, *more: {**logs(temp, *more), "worker-9.err": ucx})
    yield server
    server.shutdown()


def _checkpoint(folder: Path, seed: int = 0) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(CONFIG.read_text())
    (folder / checkpoint.INDEX).write_text(json.dumps({"metadata": {"total_size": 1}, "weight_map": {}}))
    (folder / checkpoint.RECORD).write_text(json.dumps({"seed": seed, "tensors": 760, "bytes": 18_819_627_488}))
    return folder


def _rehearse(tmp_path, **options) -> tuple[int, Path]:
    args = rehearse_args(tmp_path, weights=str(tmp_path / "ckpt"), share_gpus=True, **options)
    return cli.run(args, say=lambda line: None), tmp_path / "out" / "dev"


def test_both_modes_answer_the_same_and_every_pd_level_is_accounted(tmp_path, engine):
    _checkpoint(tmp_path / "ckpt")
    code, out = _rehearse(tmp_path, mode="both")
    verdict = json.loads((out / "oracle-dev.json").read_text())
    requests = len(oracle.prompt_set()) + 16
    assert (code, verdict["ok"], verdict["identical"], verdict["requests"]) == (0, True, requests, requests)
    assert verdict["prompts"] == [p["name"] for p in oracle.prompt_set()]
    levels = json.loads((out / "oracle-accounting-pd.json").read_text())["levels"]
    assert [(level["concurrency"], level["ok"], level["decode"]["local_compute"]) for level in levels] == [
        (1, True, 6),
        (16, True, 16),
    ]
    assert levels[0]["predicted"] == 6 * LAYOUT.request_bytes(PROMPT_TOKENS, 528) == levels[0]["moved"]
    assert [t["ok"] for t in levels[0]["per_request"]] == [True] * 6 and levels[1]["per_request"] == []
    assert levels[0]["rate_gbps"]["median"] == round(LAYOUT.request_bytes(PROMPT_TOKENS, 528) * 8 / 0.01 / 1e9, 3)
    answers = json.loads((out / "oracle-answers-colocated.json").read_text())
    assert answers["checkpoint"]["seed"] == 0 and set(answers["levels"]) == {"1", "16"}


def test_the_other_modes_answers_from_an_earlier_command_complete_the_verdict(tmp_path, engine):
    _checkpoint(tmp_path / "ckpt")
    assert _rehearse(tmp_path, mode="colocated")[0] == 0
    earlier = tmp_path / "colocated-answers.json"
    earlier.write_text((tmp_path / "out" / "dev" / "oracle-answers-colocated.json").read_text())
    code, out = _rehearse(tmp_path, mode="pd", oracle_against=str(earlier))
    assert code == 0 and json.loads((out / "report-oracle.json").read_text())["ok"] is True


def test_the_negative_control_fails_with_its_divergences(tmp_path, engine):
    _checkpoint(tmp_path / "ckpt")
    assert _rehearse(tmp_path, mode="colocated")[0] == 0
    earlier = tmp_path / "colocated-answers.json"
    earlier.write_text((tmp_path / "out" / "dev" / "oracle-answers-colocated.json").read_text())
    _checkpoint(tmp_path / "ckpt-1", seed=1)
    _Engine.flip = True  # the decode engine's other weights: its answers change from token 3
    code, out = _rehearse(tmp_path, mode="pd", oracle_against=str(earlier), decode_weights=str(tmp_path / "ckpt-1"))
    verdict = json.loads((out / "oracle-dev.json").read_text())
    assert code == 1 and verdict["ok"] is False and verdict["identical"] == 0
    assert {(d["position"], d["regret"], d["within_noise"]) for d in verdict["divergences"]} == {(3, None, False)}
    decode = json.loads((out / "plan-pd.json").read_text())["serve_config"]["applications"][0]["args"]["decode_config"]
    assert decode["model_loading_config"]["model_source"] == str(tmp_path / "ckpt-1")
    # vLLM's handshake hashes the model path: without this the KV would not cross and the control prove nothing
    assert (
        decode["engine_kwargs"]["kv_transfer_config"]["kv_connector_extra_config"]["enforce_handshake_compat"] is False
    )


def test_answers_of_another_checkpoint_are_refused_in_one_line(tmp_path, engine, capsys):
    _checkpoint(tmp_path / "ckpt")
    assert _rehearse(tmp_path, mode="colocated")[0] == 0
    earlier = tmp_path / "colocated-answers.json"
    data = json.loads((tmp_path / "out" / "dev" / "oracle-answers-colocated.json").read_text())
    data["checkpoint"]["seed"] = 7
    earlier.write_text(json.dumps(data))
    capsys.readouterr()
    assert _rehearse(tmp_path, mode="pd", oracle_against=str(earlier))[0] == 2
    err = capsys.readouterr().err
    assert err.startswith("rehearse: --oracle-against: ") and "answered another checkpoint" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"decode_weights": "/nowhere"}, "--decode-weights: /nowhere has no model.safetensors.index.json"),
        ({"mode": "colocated", "decode_weights": "ckpt"}, "--decode-weights: a negative control of PD"),
    ],
)
def test_a_negative_control_it_cannot_run_is_refused_in_one_line(tmp_path, engine, capsys, options, message):
    _checkpoint(tmp_path / "ckpt")
    options = {k: str(tmp_path / v) if v == "ckpt" else v for k, v in options.items()}
    assert _rehearse(tmp_path, **options)[0] == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
