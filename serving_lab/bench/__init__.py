"""`python -m ops bench`: load a stage's OpenAI endpoint with aiperf, save the run as JSON, compare runs.

results.py           the saved run (JSON): stage, image, model, hardware, settings, time, metrics
aiperf.py            the benchmark client: command line in, parsed metrics out
calibration.py       the client's own overhead, measured against the local fake server
runner.py            one stage, every profile at each concurrency level and request rate
goodput.py           requests/s within the TTFT and ITL objectives, from aiperf's per-request records
report.py            two runs -> Markdown table and PNG plots, ranked by goodput
endpoint.py          reaching the in-cluster Serve endpoint (kubectl port-forward) or a given URL
fake_server.py       a local OpenAI streaming server with injected latencies (tests, calibration)
offline_tokenizer.py a word-level tokenizer built on the spot (nothing downloaded)
"""
