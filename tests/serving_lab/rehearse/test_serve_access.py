"""serving_lab/rehearse/serve_access.py: Ray Serve's access lines, as an H200 rehearsal logged them and as Ray 2.58's
own formatter writes them, give each hop of one request by its id."""

from __future__ import annotations

import logging
from datetime import datetime

from serving_lab.rehearse import serve_access

REQUEST = "ffafc507-0a25-4950-a78e-07a17e40fcda"
# One PD request of evidence/2026-12-01-h200-tuned/runs/tuned-pd-workers.txt (lines 222, 306 and 421), among lines of
# other requests and the replicas' other lines.
WORKERS = f"""\
INFO 2026-12-04 20:43:20,891 llm_LLMServer:qwen3_5-9b wivtfax3 -- Running tasks to download model files on worker nodes
INFO 2026-12-01 12:35:21,875 llm_Prefill:qwen3_5-9b qah0pe1k {REQUEST} -- CALL chat OK 122.2ms
INFO 2026-12-01 12:35:21,985 llm_Prefill:qwen3_5-9b qah0pe1k 948df140-0515-4468-ade9-d3cef0c980e4 -- CALL chat OK 208.7ms
INFO 2026-12-01 12:35:26,840 llm_OpenAiIngress c0p1dglx {REQUEST} -- POST /v1/chat/completions 200 5161.8ms
INFO 2026-12-01 12:35:26,820 llm_Decode:qwen3_5-9b nrdts7n9 {REQUEST} -- CALL chat OK 5073.8ms
"""


def test_the_hops_of_one_h200_request_by_its_id():
    (hops,) = serve_access.hops({"worker-1.err": WORKERS}, "llm", [REQUEST]).values()
    assert hops == {
        "prefill": serve_access.Hop("prefill", datetime(2026, 12, 1, 12, 35, 21, 875000), 0.1222),
        "ingress": serve_access.Hop("ingress", datetime(2026, 12, 1, 12, 35, 26, 840000), 5.1618),
        "decode": serve_access.Hop("decode", datetime(2026, 12, 1, 12, 35, 26, 820000), 5.0738),
    }


def test_each_hop_starts_after_the_ingress_by_its_end_less_its_latency():
    figures = serve_access.serve_figures({"worker-1.err": WORKERS}, "llm", [REQUEST])
    assert figures == {
        REQUEST: {
            "prefill_s": 0.1222,
            "ingress_s": 5.1618,
            "decode_s": 5.0738,
            "prefill_start_s": 0.0746,  # 21.875 - 0.1222 - (26.840 - 5.1618)
            "decode_start_s": 0.068,
        }
    }


def test_a_line_of_rays_own_formatter_is_read():
    from ray.serve._private.logging_utils import ServeFormatter, access_log_msg

    message = access_log_msg(method="CALL", route="chat", status="OK", latency_ms=12.34)
    record = logging.LogRecord("ray.serve", logging.INFO, "replica.py", 1, message, None, None)
    record.request_id = "r1"
    line = ServeFormatter("llm_LLMServer:qwen3_5-9b", "wivtfax3").format(record)
    (hop,) = serve_access.hops({"worker-2.err": line + "\n"}, "llm", ["r1"])["r1"].values()
    assert (hop.role, hop.seconds) == ("engine", 0.0123)


def test_a_client_address_before_the_method_is_read():
    line = "INFO 2026-12-01 12:35:26,840 llm_OpenAiIngress c0p1dglx r1 -- 127.0.0.1:50312 POST /v1/chat/completions 200 5.0ms"
    assert serve_access.serve_figures({"w": line}, "llm", ["r1"]) == {"r1": {"ingress_s": 0.005}}


def test_other_applications_and_other_requests_are_left_out():
    assert serve_access.hops({"worker-1.err": WORKERS}, "other", [REQUEST]) == {}
    assert serve_access.hops({"worker-1.err": WORKERS}, "llm", ["not-sent"]) == {}
