"""Invalid stage files: (id, change to config/dev.yaml or raw YAML text, field the error names,
a phrase the error must contain). Shared by the validator tests and the synth tests."""

from __future__ import annotations

from ..helpers import DELETE

FOUNDATION = [
    ("wrong-type", {"gpu_nodegroup": {"count": "two"}}, "gpu_nodegroup.count", "expected"),
    ("bool-as-string", {"gpu_nodegroup": {"efa": "yes"}}, "gpu_nodegroup.efa", "expected"),
    ("unknown-top-key", {"regoin": "us-west-2"}, "regoin", "unknown key, did you mean region? (allowed:"),
    ("unknown-nested-key", {"gpu_nodegroup": {"efa_count": 2}}, "gpu_nodegroup.efa_count", "unknown key"),
    ("missing-region", {"region": DELETE}, "region", "required key is missing"),
    ("bad-region", {"region": "mars-1"}, "region", "does not match"),
    (
        "gpu-az-outside-stage",
        {"gpu_availability_zone": "us-west-2d"},
        "gpu_availability_zone",
        "not one of the stage's availability_zones",
    ),
    (
        "az-of-other-region",
        {"availability_zones": ["us-east-1a", "us-east-1b"], "gpu_availability_zone": "us-east-1a"},
        "availability_zones[0]",
        "is not an AZ of region us-west-2",
    ),
    ("duplicate-az", {"availability_zones": ["us-west-2a", "us-west-2a"]}, "availability_zones", "listed twice"),
    (
        "efa-on-type-without-efa",
        {"gpu_nodegroup": {"instance_type": "g6.xlarge"}},
        "gpu_nodegroup.efa",
        "has no EFA interface",
    ),
    (
        "unknown-gpu-type",
        {"gpu_nodegroup": {"instance_type": "g9.huge"}},
        "gpu_nodegroup.instance_type",
        "not a known GPU instance type",
    ),
    (
        "unknown-system-type",
        {"system_nodegroup": {"instance_type": "m9.huge"}},
        "system_nodegroup.instance_type",
        "not a known CPU instance type",
    ),
    (
        "gpu-type-as-system",
        {"system_nodegroup": {"instance_type": "g6.8xlarge"}},
        "system_nodegroup.instance_type",
        "not a known CPU instance type",
    ),
    (
        "system-min-above-max",
        {"system_nodegroup": {"min_size": 3, "desired_size": 3, "max_size": 2}},
        "system_nodegroup",
        "min <= desired <= max",
    ),
    ("gpu-min-above-count", {"gpu_nodegroup": {"min_size": 3}}, "gpu_nodegroup", "min <= desired <= max"),
    ("negative-count", {"gpu_nodegroup": {"count": -1}}, "gpu_nodegroup.count", "greater than or equal to 1"),
    ("huge-count", {"gpu_nodegroup": {"count": 10**12}}, "gpu_nodegroup.count", "less than or equal to 1000"),
    (
        "tiny-root-volume",
        {"gpu_nodegroup": {"root_volume_gib": 10}},
        "gpu_nodegroup.root_volume_gib",
        "greater than or equal to 50",
    ),
    (
        "system-root-volume-below-two-images",
        {"system_nodegroup": {"root_volume_gib": 67}},
        "system_nodegroup.root_volume_gib",
        "cannot hold two serving images below kubelet's 85 % image-GC threshold (allowed: 68 or more;",
    ),
    (
        "gpu-root-volume-below-two-images-and-weights",
        {"gpu_nodegroup": {"root_volume_gib": 88}},
        "gpu_nodegroup.root_volume_gib",
        (
            "cannot hold two serving images and the model's weights below kubelet's 85 % image-GC threshold "
            "(allowed: 89 or more;"
        ),
    ),
    (
        "unsupported-k8s",
        {"cluster": {"kubernetes_version": "1.29"}},
        "cluster.kubernetes_version",
        "is not allowed (allowed: '1.34' or '1.35')",
    ),
    (
        "k8s-version-as-float",
        {"cluster": {"kubernetes_version": 1.35}},
        "cluster.kubernetes_version",
        'YAML read 1.35 as a number, not the text "1.35"',
    ),
    (
        "open-endpoint",
        {"cluster": {"endpoint": {"public_access_cidrs": ["0.0.0.0/0"]}}},
        "cluster.endpoint.public_access_cidrs[0]",
        "whole internet",
    ),
    (
        "bad-cidr",
        {"cluster": {"endpoint": {"public_access_cidrs": ["10.0.0.300/24"]}}},
        "cluster.endpoint.public_access_cidrs",
        "not a network in CIDR form",
    ),
    (
        "unreachable-endpoint",
        {"cluster": {"endpoint": {"public_access_cidrs": [], "private_access": False}}},
        "cluster.endpoint",
        "nobody could reach the API",
    ),
    ("more-nat-than-azs", {"network": {"nat_gateways": 4}}, "network.nat_gateways", "one per AZ at most"),
    (
        "bad-vpc-cidr",
        {"network": {"vpc_cidr": "10.0.0.0/8"}},
        "network.vpc_cidr",
        "prefix must be /16, or /17 with 1 or 2 AZs",
    ),
    (
        "broken-nvidia-plugin",
        {"addons": {"nvidia_device_plugin": "0.19.1"}},
        "addons.nvidia_device_plugin",
        "conflicts with the EFA device plugin",
    ),
    ("short-account", {"account": "12345"}, "account", "does not match"),
    ("account-as-number", {"account": 123456789012}, "account", "YAML read 123456789012 as a number, and only text"),
    (  # the "Norway problem": `namespace: no` is YAML 1.1's boolean False
        "namespace-as-boolean",
        {"serving": {"namespace": False}},
        "serving.namespace",
        "YAML read an unquoted yes/no, on/off or true/false as the boolean False, and only text is allowed here",
    ),
    (
        "bad-admin-arn",
        {"cluster": {"admin_principal_arns": ["admin"]}},
        "cluster.admin_principal_arns[0]",
        "does not match",
    ),
    ("stage-name-differs", {"stage": "dev2"}, "stage", "differs from the file name"),
    ("unicode-key", {"gpu_nodegroup": {"cöunt": 2}}, "gpu_nodegroup.cöunt", "unknown key"),
    ("control-char-key", {"gpu_nodegroup": {"co\x1b[2Junt": 2}}, "gpu_nodegroup.co\\x1b[2Junt", "unknown key"),
]

SERVING = [
    ("mode", {"serving": {"mode": "split"}}, "serving.mode", "allowed: 'pd' or 'colocated'"),
    ("ucx-on-efa", {"serving": {"kv_backend": "UCX"}}, "serving.kv_backend", "runs at TCP speed"),
    (
        "ray-version-mismatch",
        {"serving": {"ray_version": "2.60.0"}},
        "serving.ray_version",
        "differs from the image's Ray 2.58.0",
    ),
    (
        "zero-context",
        {"serving": {"engine": {"max_model_len": 0}}},
        "serving.engine.max_model_len",
        "greater than or equal to 1",
    ),
    ("too-many-replicas", {"serving": {"prefill": {"replicas": 2}}}, "serving.prefill", "need up to 3 GPUs"),
    (
        "autoscaling-beyond-nodes",
        {"serving": {"decode": {"replicas": None, "min_replicas": 1, "max_replicas": 3}}},
        "serving.decode",
        "need up to 4 GPUs (4 replicas x TP 1), the Ray cluster has 2",
    ),
    (
        "tp-beyond-node",
        {"serving": {"engine": {"tensor_parallel_size": 2}}},
        "serving.engine.tensor_parallel_size",
        "has 1",
    ),
    (
        "replicas-both-forms",
        {"serving": {"prefill": {"replicas": 1, "min_replicas": 1, "max_replicas": 1}}},
        "serving.prefill",
        "either replicas, or min_replicas and max_replicas",
    ),
    (
        "autoscaling-min-above-max",
        {"serving": {"decode": {"replicas": None, "min_replicas": 2, "max_replicas": 1}}},
        "serving.decode",
        "min_replicas 2 > max_replicas 1",
    ),
    (
        "privilege-mode",
        {"serving": {"worker_privilege": "root"}},
        "serving.worker_privilege",
        "allowed: 'privileged' or 'ipc_lock'",
    ),
    (
        "serve-ingress",
        {"serving": {"serve_ingress": "nginx"}},
        "serving.serve_ingress",
        "allowed: 'serve_proxy' or 'haproxy'",
    ),
    (
        "stream-batching-range",
        {"serving": {"stream_batching_ms": 1001}},
        "serving.stream_batching_ms",
        "less than or equal to 1000 (got 1001)",
    ),
    (
        "stream-batching-unit",
        {"serving": {"stream_batching_ms": "50ms"}},
        "serving.stream_batching_ms",
        "expected integer, got str '50ms'",
    ),
    (
        "memory-fraction",
        {"serving": {"engine": {"gpu_memory_utilization": 1.5}}},
        "serving.engine.gpu_memory_utilization",
        "less than or equal to 0.99",
    ),
    (
        "upgrade-strategy-missing",
        {"serving": {"upgrade_strategy": DELETE}},
        "serving.upgrade_strategy",
        "required key is missing",
    ),
    (
        "worker-cpu-beyond-node",
        {"serving": {"worker_resources": {"cpu_limit": 40}}},
        "serving.worker_resources.cpu_limit",
        "allowed: 1 to 31",
    ),
    (
        "worker-request-above-limit",
        {"serving": {"worker_resources": {"memory_request_gib": 100}}},
        "serving.worker_resources.memory_request_gib",
        "request <= limit",
    ),
    (
        "secret-other-region",
        {"serving": {"hf_token_secret": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:hf-AbCdEf"}},
        "serving.hf_token_secret",
        "the secret is in eu-west-1",
    ),
    (
        "unknown-engine-key",
        {"serving": {"engine": {"quantisation": "fp8"}}},
        "serving.engine.quantisation",
        "unknown key",
    ),
    ("bad-namespace", {"serving": {"namespace": "Inference_NS"}}, "serving.namespace", "does not match"),
    ("bad-model-source", {"serving": {"model": {"source": "not a repo"}}}, "serving.model.source", "does not match"),
    ("dtype", {"serving": {"engine": {"dtype": "int3"}}}, "serving.engine.dtype", "is not allowed"),
    ("serving-missing", {"serving": DELETE}, "serving", "required key is missing"),
    # vLLM engine settings: names and types from vLLM 0.26's EngineArgs (config/vllm_engine_args.json)
    (
        "max-num-seqs-string",
        {"serving": {"engine": {"max_num_seqs": "64"}}},
        "serving.engine.max_num_seqs",
        "'64' is quoted, so YAML reads it as text: write the number without quotes",
    ),
    (
        "prefix-caching-number",
        {"serving": {"engine": {"enable_prefix_caching": 1}}},
        "serving.engine.enable_prefix_caching",
        "expected boolean",
    ),
    (
        "gdn-backend-unknown",
        {"serving": {"engine": {"gdn_prefill_backend": "cuda"}}},
        "serving.engine.gdn_prefill_backend",
        "'flashinfer', 'triton' or 'cutedsl'",
    ),
    (
        "extra-arg-unknown",
        {"serving": {"engine": {"extra_args": {"max_num_seq": 8}}}},
        "serving.engine.extra_args",
        "did you mean max_num_seqs",
    ),
    (
        "extra-arg-wrong-type",
        {"serving": {"engine": {"extra_args": {"enable_chunked_prefill": "yes"}}}},
        "serving.engine.extra_args",
        "'yes' (allowed: bool | None)",
    ),
    (
        "extra-arg-bad-choice",
        {"serving": {"engine": {"extra_args": {"kv_cache_dtype": "fp7"}}}},
        "serving.engine.extra_args",
        "'fp7' (allowed: 'auto'",
    ),
    (
        "extra-arg-reserved",
        {"serving": {"engine": {"extra_args": {"kv_transfer_config": "x"}}}},
        "serving.engine.extra_args",
        "set by the project",
    ),
    (
        "extra-arg-structure",
        {"serving": {"engine": {"extra_args": {"attention_config": 3}}}},
        "serving.engine.extra_args",
        "not a single value",
    ),
    (  # pydantic cannot parse it against the listed integers: "exceeded maximum size" said nothing of them
        "huge-integer-for-listed-values",
        {"cluster": {"log_retention_days": 10**25}},
        "cluster.log_retention_days",
        "10000000000000000000000000 is far larger than this field takes (allowed: 1, 3, 5, 7, 14, 30, 60, 90",
    ),
    (
        "cidr-listed-twice",
        {"cluster": {"endpoint": {"public_access_cidrs": ["198.51.100.0/24", "198.51.100.0/24"]}}},
        "cluster.endpoint.public_access_cidrs",
        "'198.51.100.0/24' is listed twice: list each range once",
    ),
    (  # the same network, written with a padded prefix length
        "cidr-written-twice",
        {"cluster": {"endpoint": {"public_access_cidrs": ["198.51.100.0/24", "198.51.100.0/024"]}}},
        "cluster.endpoint.public_access_cidrs",
        "'198.51.100.0/024' is '198.51.100.0/24' written another way: list each range once",
    ),
    (  # one problem, not one per scalar type a union tried ("tokenizer_mode.bool: expected boolean")
        "extra-arg-mapping-value",
        {"serving": {"engine": {"extra_args": {"tokenizer_mode": {"a": {"b": 1}}}}}},
        "serving.engine.extra_args.tokenizer_mode",
        "expected true/false, a number or text, got <a mapping of 1 keys>",
    ),
    (
        "extra-arg-null-value",
        {"serving": {"engine": {"extra_args": {"tokenizer_mode": None}}}},
        "serving.engine.extra_args.tokenizer_mode",
        "expected true/false, a number or text, got null",
    ),
    (
        "extra-arg-long-text",
        {"serving": {"engine": {"extra_args": {"tokenizer_mode": "x" * 5000}}}},
        "serving.engine.extra_args.tokenizer_mode",
        "text of 5000 characters (allowed: at most 256)",
    ),
    (
        "gdn-on-hopper-without-triton",
        {
            "gpu_nodegroup": {"instance_type": "p5.48xlarge", "efa": False},
            "serving": {
                "kv_transfer_floor_gbps": 1,
                "worker_resources": {
                    "cpu_request": 8,
                    "cpu_limit": 16,
                    "memory_request_gib": 32,
                    "memory_limit_gib": 64,
                },
            },
        },
        "serving.engine.gdn_prefill_backend",
        "SM90 GDN prefill kernel is unavailable",
    ),
]


def _profile(**fields):
    return {
        "benchmark": {
            "profiles": [{"name": "chat", "input_tokens": 256, "output_tokens": 256, "concurrency": [1, 8], **fields}]
        }
    }


BENCHMARK = [
    (
        "bench-context-overflow",
        _profile(input_tokens=4000, output_tokens=200),
        "benchmark.profiles[0].input_tokens",
        "4000 in + 200 out = 4200 tokens, more than the served context serving.engine.max_model_len 4096",
    ),
    (
        "bench-concurrency-unsorted",
        _profile(concurrency=[8, 1]),
        "benchmark.profiles[0].concurrency",
        "in ascending order",
    ),
    (
        "bench-concurrency-zero",
        _profile(concurrency=[0, 8]),
        "benchmark.profiles[0].concurrency[0]",
        "greater than or equal to 1",
    ),
    ("bench-no-concurrency", _profile(concurrency=[]), "benchmark.profiles[0].concurrency", "at least 1 item"),
    (
        "bench-duplicate-profile",
        {"benchmark": {"profiles": [_profile()["benchmark"]["profiles"][0]] * 2}},
        "benchmark.profiles",
        "two profiles share a name",
    ),
    ("bench-unknown-key", {"benchmark": {"warmup": 3}}, "benchmark.warmup", "unknown key"),
    (
        "bench-tokens-as-string",
        _profile(output_tokens="256"),
        "benchmark.profiles[0].output_tokens",
        "'256' is quoted, so YAML reads it as text",
    ),
    (  # PyYAML's floats need a point: 2e0 stays text
        "float-without-point",
        {"observability": {"ttft_p99_slo_seconds": "2e0"}},
        "observability.ttft_p99_slo_seconds",
        "YAML 1.1 reads '2e0' as text, not a number: write it with a point (e.g. 2.0)",
    ),
    (  # an integer field: the hint a point would give fails next as a float
        "integer-in-exponent-form",
        {"serving": {"stream_batching_ms": "1e1"}},
        "serving.stream_batching_ms",
        "YAML 1.1 reads '1e1' as text, not a number: write it in decimal digits (e.g. 10)",
    ),
    (
        "fraction-in-exponent-form-for-an-integer",
        {"serving": {"stream_batching_ms": "15e-1"}},
        "serving.stream_batching_ms",
        "YAML 1.1 reads '15e-1' as text, not a number: write a whole number in decimal digits",
    ),
]

RAW = [
    ("broken-yaml", "stage: dev\nregion: [us-west-2\n", "(file)", "not valid YAML"),
    ("list-document", "- stage\n- dev\n", "(root)", "expected a mapping of stage settings, got list"),
    ("scalar-document", "just text\n", "(root)", "expected a mapping of stage settings, got str"),
    ("empty-file", "", "(root)", "the file is empty"),
    ("duplicate-key", "stage: dev\nstage: dev\n", "(file)", "duplicate key 'stage'"),
    ("two-documents", "stage: dev\n---\nstage: dev\n", "(file)", "2 YAML documents"),
    (
        "python-tag",
        "stage: !!python/object:os.system ls\n",
        "(file)",
        "an explicit YAML tag '!!python/object:os.system'",
    ),
    # keys YAML reads as something else than a name: refused where they stand, not as pydantic's "[1]" or "None"
    ("number-key", "stage: dev\n1: x\n", "(file)", "the key '1' is read as a number: quote it at line 2, column 1"),
    ("boolean-key", "stage: dev\non: x\n", "(file)", "the key 'on' is read as a boolean: quote it at line 2"),
    ("date-key", "stage: dev\n2001-12-14: x\n", "(file)", "the key '2001-12-14' is read as a date: quote it"),
    ("null-key", "stage: dev\n~: x\n", "(file)", "the key '~' is read as null: quote it"),
    (
        "nul-character",
        "stage: dev\x00\n",
        "(file)",
        "character U+0000, which YAML does not allow, at line 1, column 11",
    ),
    # numbers YAML 1.1 reads otherwise than they look: 010 is octal 8, 1:20 sexagesimal 80, 0x1F and 1_000 as such
    ("octal-number", "stage: dev\ngpu_nodegroup:\n  count: 010\n", "(file)", "'010' is 8 to YAML 1.1"),
    ("sexagesimal-number", "stage: dev\ngpu_nodegroup:\n  count: 1:20\n", "(file)", "'1:20' is 80 to YAML 1.1"),
    ("hex-number", "stage: dev\ngpu_nodegroup:\n  count: 0x1F\n", "(file)", "'0x1F' is 31 to YAML 1.1"),
    ("underscore-number", "stage: dev\ngpu_nodegroup:\n  count: 1_000\n", "(file)", "'1_000' is 1000 to YAML 1.1"),
    ("explicit-int-tag", 'stage: dev\ngpu_nodegroup:\n  count: !!int "2"\n', "(file)", "an explicit YAML tag '!!int'"),
]


# --- Unsafe and undeployable stage files (issue "Refuse unsafe and undeployable stage files") -------------
# Secret-shaped values are assembled here, never written out whole, so no scanner flags this file.
FAKE_HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"[:34]
FAKE_KEY_ID = "AKIA" + "ABCDEFGHIJKLMNOP"
FAKE_SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzq8t3Kd9LmN2"[:18]
FAKE_GITHUB_TOKEN = "gh" + "p_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
FAKE_PRIVATE_KEY = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow...\n-----END RSA PRIVATE KEY-----\n"


def _endpoint(*cidrs, **fields):
    return {"cluster": {"endpoint": {"public_access_cidrs": list(cidrs), **fields}}}


def _tags(count):
    return {"tags": {f"team-{index}": "x" for index in range(count)}}


FOUNDATION += [
    # 1. the API endpoint opened to the internet in pieces, or to ranges EKS or the internet never use
    (
        "endpoint-internet-in-halves",
        _endpoint("0.0.0.0/1", "128.0.0.0/1"),
        "cluster.endpoint.public_access_cidrs",
        "0.0.0.0/1, 128.0.0.0/1 together open the Kubernetes API to the whole internet",
    ),
    (
        "endpoint-pieces-beyond-a-slash-8",
        _endpoint("11.0.0.0/8", "12.0.0.0/16"),
        "cluster.endpoint.public_access_cidrs",
        "the ranges together cover 16,842,752 public addresses",
    ),
    (
        "endpoint-one-range-beyond-a-slash-8",
        _endpoint("198.51.100.0/24", "16.0.0.0/4"),
        "cluster.endpoint.public_access_cidrs[1]",
        "16.0.0.0/4 covers 268,435,456 public addresses",
    ),
    (
        "endpoint-ipv6",
        _endpoint("2001:db8::/32"),
        "cluster.endpoint.public_access_cidrs[0]",
        "is IPv6: EKS takes no IPv6 CIDR",
    ),
    (
        "endpoint-ipv6-everything",
        _endpoint("198.51.100.0/24", "::/0"),
        "cluster.endpoint.public_access_cidrs[1]",
        "::/0 is IPv6",
    ),
    (
        "endpoint-private-range",
        _endpoint("10.0.0.0/8"),
        "cluster.endpoint.public_access_cidrs[0]",
        "10.0.0.0/8 is a private or reserved range",
    ),
    (
        "endpoint-cgnat-range",
        _endpoint("198.51.100.0/24", "100.64.0.0/16"),
        "cluster.endpoint.public_access_cidrs[1]",
        "private or reserved range",
    ),
    # 2. a secret value where a name belongs, in any string of the file (never echoed)
    (
        "secret-hf-token-as-name",
        {"serving": {"hf_token_secret": FAKE_HF_TOKEN}},
        "serving.hf_token_secret",
        "looks like a Hugging Face token, a secret value where none belongs (the value is not shown",
    ),
    ("secret-access-key-id-in-tag", {"tags": {"owner": FAKE_KEY_ID}}, "tags.owner", "looks like an AWS access key id"),
    (
        "secret-access-key-under-key-name",
        {"tags": {"deploy-secret": FAKE_SECRET_KEY}},
        "tags.deploy-secret",
        "looks like an AWS secret access key",
    ),
    (
        "secret-private-key-as-tokenizer",
        {"benchmark": {"tokenizer": FAKE_PRIVATE_KEY}},
        "benchmark.tokenizer",
        "looks like a private key",
    ),
    (
        "secret-github-token-as-image",
        {"serving": {"image": FAKE_GITHUB_TOKEN}},
        "serving.image",
        "looks like a GitHub token",
    ),
    ("secret-as-a-key", {"tags": {FAKE_HF_TOKEN: "x"}}, "tags", "a key looks like a Hugging Face token"),
    # 4. tags AWS refuses
    ("tag-aws-prefix", {"tags": {"aws:owner": "me"}}, "tags", "the aws: prefix is reserved"),
    ("tag-aws-prefix-any-case", {"tags": {"AWS:Owner": "me"}}, "tags", "the aws: prefix is reserved"),
    (
        "tag-key-too-long",
        {"tags": {"k" * 129: "x"}},
        "tags." + "k" * 61 + "...",
        "the key: String should have at most 128",
    ),
    ("tag-value-too-long", {"tags": {"owner": "v" * 257}}, "tags.owner", "at most 256 characters"),
    ("tag-value-bad-character", {"tags": {"owner": "a<b>"}}, "tags.owner", "does not match"),
    ("tag-value-newline", {"tags": {"owner": "team\n"}}, "tags.owner", "does not match"),
    (
        "too-many-tags",
        _tags(45),
        "tags",
        "47 tags (allowed: at most 46: AWS takes 50 per resource and the app adds up to 4",
    ),
    # 5. a derived name longer than AWS allows (the S3 bucket of the verify runner has the region in it)
    # (a bucket name too long for a real region: test_safety.py, the stage name too long for the bucket)
    (
        "region-that-does-not-exist",
        {
            "region": "us-northwestcentralsouthern-1",
            "availability_zones": ["us-northwestcentralsouthern-1a", "us-northwestcentralsouthern-1b"],
            "gpu_availability_zone": "us-northwestcentralsouthern-1a",
            "network": {"vpc_cidr": "10.0.0.0/17"},
        },
        "region",
        "'us-northwestcentralsouthern-1' is not an AWS region (config/regions.json, from botocore",
    ),
    # 6. a VPC too small for the subnet layout (synth used to die in a jsii traceback)
    (
        "vpc-too-small-for-three-azs",
        {"network": {"vpc_cidr": "10.0.0.0/17"}},
        "network.vpc_cidr",
        "10.0.0.0/17 is too small for the subnets of 3 AZs",
    ),
    (
        "vpc-too-small-for-two-azs",
        {"availability_zones": ["us-west-2a", "us-west-2b"], "network": {"vpc_cidr": "10.0.0.0/18"}},
        "network.vpc_cidr",
        "(allowed: a /17 or larger for 2 AZs)",
    ),
    ("vpc-slash-20", {"network": {"vpc_cidr": "10.8.0.0/20"}}, "network.vpc_cidr", "a /16 or larger for 3 AZs"),
    # 7. identifiers with trailing whitespace or newlines
    ("region-trailing-newline", {"region": "us-west-2\n"}, "region", "does not match"),
    ("stage-trailing-newline", {"stage": "dev\n"}, "stage", "does not match"),
    ("account-trailing-newline", {"account": "123456789012\n"}, "account", "does not match"),
    ("cluster-name-trailing-space", {"cluster": {"name": "pd-dev "}}, "cluster.name", "does not match"),
    (
        "az-trailing-newline",
        {"availability_zones": ["us-west-2a\n", "us-west-2b", "us-west-2c"]},
        "availability_zones[0]",
        "is not an AZ of region us-west-2",
    ),
    (
        "admin-arn-trailing-newline",
        {"cluster": {"admin_principal_arns": ["arn:aws:iam::123456789012:role/Admin\n"]}},
        "cluster.admin_principal_arns[0]",
        "does not match",
    ),
    # 10. a misspelt key is reported as such (not as the key it hides), with a suggestion
    (
        "misspelt-top-key",
        {"gpu_availability_zone": DELETE, "gpu_availabilty_zone": "us-west-2a"},
        "gpu_availabilty_zone",
        "unknown key, did you mean gpu_availability_zone?",
    ),
]

SERVING += [
    # 3. namespaces the serving stack must not own, and a host path that is the node's own
    (
        "namespace-kube-system",
        {"serving": {"namespace": "kube-system"}},
        "serving.namespace",
        "kube-system is a Kubernetes system namespace",
    ),
    ("namespace-default", {"serving": {"namespace": "default"}}, "serving.namespace", "system namespace"),
    (
        "namespace-kube-prefix",
        {"serving": {"namespace": "kube-inference"}},
        "serving.namespace",
        "not default, kube-*, amazon-* or aws-*, nor kuberay-system)",
    ),
    (
        "namespace-of-the-operator",
        {"serving": {"namespace": "kuberay-system"}},
        "serving.namespace",
        "the KubeRay operator's namespace",
    ),
    (
        "client-namespace-is-serving",
        {"serving": {"client_namespaces": ["gateway", "inference"]}},
        "serving.client_namespaces[1]",
        "is the serving namespace itself",
    ),
    (
        "client-namespace-twice",
        {"serving": {"client_namespaces": ["gateway", "gateway"]}},
        "serving.client_namespaces[1]",
        "listed twice",
    ),
    # the host path is an allowlist (config/rules/weight_cache.py): /var/lib/model-cache or below, in normal form
    (
        "host-path-root-in-disguise",
        {"serving": {"weight_cache": {"host_path": "//"}}},
        "serving.weight_cache.host_path",
        "has an empty segment ('//' or a trailing '/')",
    ),
    (
        "host-path-etc",
        {"serving": {"weight_cache": {"host_path": "/etc/"}}},
        "serving.weight_cache.host_path",
        "'/etc/' has an empty segment",
    ),
    (
        "host-path-var-lib",
        {"serving": {"weight_cache": {"host_path": "/var/lib"}}},
        "serving.weight_cache.host_path",
        "/var/lib is outside the node's weight cache folder",
    ),
    (
        "host-path-kubelet",
        {"serving": {"weight_cache": {"host_path": "/var/lib/kubelet/pods/cache"}}},
        "serving.weight_cache.host_path",
        "is outside the node's weight cache folder",
    ),
    (
        "host-path-proc",
        {"serving": {"weight_cache": {"host_path": "/proc/1/root"}}},
        "serving.weight_cache.host_path",
        "is outside the node's weight cache folder",
    ),
    (
        "host-path-tmpfs",
        {"serving": {"weight_cache": {"host_path": "/tmp/models"}}},
        "serving.weight_cache.host_path",
        "(allowed: /var/lib/model-cache, or a folder under /var/lib/model-cache/)",
    ),
    (
        "host-path-data",
        {"serving": {"weight_cache": {"host_path": "/data/model-cache"}}},
        "serving.weight_cache.host_path",
        "is outside the node's weight cache folder",
    ),
    (
        "host-path-dot-dot",
        {"serving": {"weight_cache": {"host_path": "/var/lib/model-cache/../../../etc"}}},
        "serving.weight_cache.host_path",
        "has a '..' segment",
    ),
    (
        "mount-path-dot-dot",
        {"serving": {"weight_cache": {"mount_path": "/model-cache/../etc"}}},
        "serving.weight_cache.mount_path",
        "which Kubernetes refuses",
    ),
    # 7. trailing whitespace in serving identifiers
    ("namespace-trailing-space", {"serving": {"namespace": "inference "}}, "serving.namespace", "does not match"),
    ("model-id-leading-tab", {"serving": {"model": {"id": "\tx"}}}, "serving.model.id", "does not match"),
    (
        "model-source-trailing-newline",
        {"serving": {"model": {"source": "Qwen/Qwen3.5-9B\n"}}},
        "serving.model.source",
        "does not match",
    ),
    (
        "service-name-trailing-newline",
        {"serving": {"service_name": "ray-llm\n"}},
        "serving.service_name",
        "does not match",
    ),
    (
        "secret-name-trailing-newline",
        {"serving": {"hf_token_secret": "hf/token\n"}},
        "serving.hf_token_secret",
        "does not match",
    ),
    (
        "host-path-trailing-newline",
        {"serving": {"weight_cache": {"host_path": "/data/cache\n"}}},
        "serving.weight_cache.host_path",
        "does not match",
    ),
    # 10. too many decode replicas are reported under decode
    ("decode-beyond-nodes", {"serving": {"decode": {"replicas": 2}}}, "serving.decode", "need up to 3 GPUs"),
    (
        "misspelt-engine-key",
        {"serving": {"engine": {"max_model_length": 4096}}},
        "serving.engine.max_model_length",
        "did you mean max_model_len?",
    ),
    # 11. a model that cannot fit one engine's GPUs
    (
        "model-72b-on-one-l4",
        {"serving": {"model": {"source": "Qwen/Qwen3.5-72B"}}},
        "serving.model.source",
        "Qwen/Qwen3.5-72B needs at least 121.7 GiB per engine (64.80e9 parameters (90% of the 72B in its name)",
    ),
    (
        "model-27b-on-one-l4",
        {"serving": {"model": {"source": "Qwen/Qwen3.5-27B"}}},
        "serving.model.source",
        "(Qwen3.5-27B's config.json) x 2 bytes = 51.7 GiB of weights",
    ),
    (
        "model-declared-size",
        {"serving": {"model": {"source": "my-org/house-model", "parameters_billion": 40}}},
        "serving.model.source",
        "(serving.model.parameters_billion)",
    ),
    (
        "model-in-float32",
        {"serving": {"engine": {"dtype": "float32"}}},
        "serving.model.source",
        "9.65e9 parameters (Qwen3.5-9B's config.json) x 4 bytes = 35.9 GiB",
    ),
    (
        "model-context-beyond-memory",
        {
            "serving": {
                "model": {"source": "meta-llama/Llama-3.1-8B-Instruct"},
                "engine": {"max_model_len": 131072},
                "hf_token_secret": "pd-inference/hf-token",  # a gated model: refused without one
            }
        },
        "serving.engine.max_model_len",
        "131072 tokens of KV cache (16.0 GiB for one sequence)",
    ),
    (
        "model-parameters-as-string",
        {"serving": {"model": {"parameters_billion": "72"}}},
        "serving.model.parameters_billion",
        "'72' is quoted, so YAML reads it as text",
    ),
    # hostile input, round five (issue #52): every numeric engine argument finite and in vLLM's range
    (
        "extra-arg-nan",
        {"serving": {"engine": {"extra_args": {"cpu_offload_gb": float("nan")}}}},
        "serving.engine.extra_args",
        "cpu_offload_gb: nan is not a finite number",
    ),
    (
        "extra-arg-negative-timeout",
        {"serving": {"engine": {"extra_args": {"shutdown_timeout": -5}}}},
        "serving.engine.extra_args",
        "shutdown_timeout: -5 is outside vLLM's range",
    ),
    (
        "extra-arg-zero-loading-workers",
        {"serving": {"engine": {"extra_args": {"max_parallel_loading_workers": 0}}}},
        "serving.engine.extra_args",
        "max_parallel_loading_workers: 0 is outside vLLM's range",
    ),
    (
        "extra-arg-parser-path",
        {"serving": {"engine": {"extra_args": {"reasoning_parser": "../../tmp/evil"}}}},
        "serving.engine.extra_args",
        "reasoning_parser: '../../tmp/evil' (allowed: '', 'cohere_command3'",
    ),
    (
        "endpoint-cidr-netmask",
        {"cluster": {"endpoint": {"public_access_cidrs": ["198.51.100.0/255.255.255.0"]}}},
        "cluster.endpoint.public_access_cidrs[0]",
        "is not in prefix-length form (allowed: 198.51.100.0/24",
    ),
    (
        "vpc-cidr-hostmask",
        {"network": {"vpc_cidr": "10.0.0.0/0.0.255.255"}},
        "network.vpc_cidr",
        "is not in prefix-length form (allowed: 10.0.0.0/16",
    ),
    (
        "image-port-beyond-65535",
        {"serving": {"image": "registry.example.com:70000/ray:2.58.0"}},
        "serving.image",
        "names registry port 70000, not a TCP port",
    ),
    (
        "image-explicit-latest",
        {"serving": {"image": "registry.example.com/ray:latest"}},
        "serving.image",
        "is tagged latest, which moves",
    ),
    (
        "admin-role-without-a-name",
        {
            "cluster": {
                "admin_principal_arns": ["arn:aws:iam::123456789012:role/ops/"],
                "allow_no_admin_principals": False,
            }
        },
        "cluster.admin_principal_arns[0]",
        "names no role after its path '/ops/'",
    ),
    (
        "admin-role-name-too-long",
        {
            "cluster": {
                "admin_principal_arns": ["arn:aws:iam::123456789012:role/" + "r" * 65],
                "allow_no_admin_principals": False,
            }
        },
        "cluster.admin_principal_arns[0]",
        "has a role name of 65 characters, more than IAM's 64",
    ),
    (
        "short-password-in-a-tag",
        {"tags": {"db_password": "hunter2"}},
        "tags.db_password",
        "looks like a value under a secret-like key",
    ),
    (
        "unsigned-jwt-in-a-tag",
        {"tags": {"note": "ey" + "JhbGciOiJub25lIn0.ey" + "JzdWIiOiJhZG1pbiJ9."}},
        "tags.note",
        "looks like a JSON Web Token",
    ),
]


def _alias_bomb(levels: int, fanout: int) -> str:
    lines = [f"a0: &a0 [{', '.join(['x'] * fanout)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fanout)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


RAW += [
    # 9. inputs that used to raise a traceback or run for minutes
    (
        "integer-of-5000-digits",
        "stage: dev\nregion: us-west-2\nnetwork: {nat_gateways: " + "9" * 5000 + "}\n",
        "(file)",
        "a number of 5000 characters (allowed: up to 40)",
    ),
    (
        "hex-integer-of-5000-digits",
        "stage: dev\nnetwork: {nat_gateways: 0x" + "f" * 5000 + "}\n",
        "(file)",
        "a number of 5002 characters",
    ),
    ("billion-laughs-8-by-8", _alias_bomb(8, 8), "(file)", "the YAML expands to more than 20000 values"),
    ("billion-laughs-9-by-9", _alias_bomb(9, 9), "(file)", "more than 64 YAML aliases"),
    (
        "nested-10000-deep",
        "stage: " + "[" * 10000 + "]" * 10000 + "\n",
        "(file)",
        "YAML nested more than 20 levels deep",
    ),
    ("recursive-alias", "stage: dev\ntags: &t {a: *t}\n", "(file)", "a YAML alias refers to a node that contains it"),
    # hostile input, round five (issue #52): invisible bidirectional controls, comments included
    ("bidi-in-a-comment", "stage: dev  # \u202e note\n", "(file)", "line 1, column 15: U+202E RIGHT-TO-LEFT OVERRIDE"),
    (
        "bidi-in-a-value",
        'stage: dev\nregion: "us-west-2\u2066"\n',
        "(file)",
        "line 2, column 19: U+2066 LEFT-TO-RIGHT ISOLATE",
    ),
]
