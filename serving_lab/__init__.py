"""The serving measured off the cluster's control plane: `bench/` benchmarks a stage's OpenAI endpoint
(aiperf; against EKS or a rehearsal), `rehearse/` runs a stage's rendered serve config on a GPU host's
own Ray and vLLM. Shaped by the GPU host (no AWS SDK, no network), kept apart from `ops/`, which is the
operator's: preflight, verify, diff. The CLI stays one: `python -m ops bench|rehearse`."""
