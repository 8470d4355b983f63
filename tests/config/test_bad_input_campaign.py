"""Property-based bad-input campaign: mutate valid stage files (types, missing and extra keys,
out-of-range and huge numbers, wrong AZs, unicode, YAML anchors, non-mapping documents, raw bytes) and
assert that loading either succeeds or fails with the one-line config error and exit code 2, never
another exception. Deterministic (derandomized) so CI runs the same cases every time.

The unsafe-input rules get their own generators: endpoint allow-lists (public, private, IPv6, pieces of
the internet), secret-shaped strings anywhere (the line must never contain one), system namespaces and
host paths, tags, long stage names and regions, VPC sizes, models of every size, whitespace around
identifiers, and hostile YAML (alias bombs, deep nesting, huge numbers) that must end quickly."""

from __future__ import annotations

import copy
import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config import ConfigError, load_stage_file
from config.__main__ import main

from ..helpers import stage_data
from .cases import FAKE_GITHUB_TOKEN, FAKE_HF_TOKEN, FAKE_KEY_ID, FAKE_PRIVATE_KEY, FAKE_SECRET_KEY

CASES = {"ran": 0, "valid": 0, "rejected": 0}
SECRETS = [FAKE_HF_TOKEN, FAKE_KEY_ID, FAKE_SECRET_KEY, FAKE_GITHUB_TOKEN, FAKE_PRIVATE_KEY]
HOSTILE_STRINGS = [
    "dev\n",
    "inference ",
    "\tx",
    "kube-system",
    "kuberay-system",
    "default",
    "/",
    "//",
    "/etc",
    "/var/lib/kubelet/x",
    "/tmp/m",
    "/data/../etc",
    "::/0",
    "0.0.0.0/1",
    "10.0.0.0/8",
    "2001:db8::/32",
    "11.0.0.0/8",
    "aws:owner",
    "Qwen/Qwen3.5-72B",
    "meta-llama/Llama-3.1-70B",
    "10.0.0.0/20",
    "a" * 300,
    "line\u2028sep",
] + SECRETS
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(
        [
            "us-west-2z",
            "us-east-1a",
            "g6.xlarge",
            "p5.48xlarge",
            "0.0.0.0/0",
            "1.34",
            "UCX",
            "colocated",
            "ipc_lock",
            "NewCluster",
            "-1",
            "",
            "\u0000",
            "é",
            "🚀",
            "~",
            "null",
        ]
        + HOSTILE_STRINGS
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=8,
)


def _paths(data, prefix=(), above=frozenset()):
    # Two alias steps can make a cycle (a value that holds itself); it is a hostile file too, walked once.
    yield prefix
    if id(data) in above:
        return
    above = above | {id(data)}
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, prefix + (key,), above)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, prefix + (index,), above)


def _set(data, path, value):
    if not path:
        return value
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data


def _merge(data, change):
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            _merge(data[key], value)
        else:
            data[key] = value
    return data


def _delete(data, path):
    if not path:
        return None
    target = data
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return data


IPV4 = st.builds(
    lambda a, p: str(__import__("ipaddress").ip_network(f"{a}/{p}", strict=False)),
    st.ip_addresses(v=4),
    st.integers(min_value=0, max_value=32),
)
IPV6 = st.builds(
    lambda a, p: str(__import__("ipaddress").ip_network(f"{a}/{p}", strict=False)),
    st.ip_addresses(v=6),
    st.integers(min_value=0, max_value=128),
)
PATH_PART = st.sampled_from(
    [
        "",
        ".",
        "..",
        "etc",
        "var",
        "lib",
        "kubelet",
        "containerd",
        "tmp",
        "run",
        "data",
        "model-cache",
        "proc",
        "usr",
        "home",
        "opt",
    ]
)
RULE_CHANGES = st.one_of(
    st.builds(
        lambda cidrs, allow, private: {
            "cluster": {
                "endpoint": {"public_access_cidrs": cidrs, "allow_public_internet": allow, "private_access": private}
            }
        },
        st.lists(st.one_of(IPV4, IPV4, IPV6), max_size=6),
        st.booleans(),
        st.booleans(),
    ),
    st.builds(
        lambda value, key: {"serving": {"hf_token_secret": value}} if key == "secret" else {"tags": {key: value}},
        st.sampled_from(SECRETS),
        st.sampled_from(["secret", "owner", "api-key", "token"]),
    ),
    st.builds(lambda secret: {"tags": {secret: "x"}}, st.sampled_from(SECRETS)),
    st.builds(
        lambda ns, clients: {"serving": {"namespace": ns, "client_namespaces": clients}},
        st.sampled_from(["inference", "kube-system", "default", "kuberay-system", "kube-x", "gateway"]),
        st.lists(st.sampled_from(["inference", "kube-system", "gateway", "default"]), max_size=3),
    ),
    st.builds(
        lambda parts, slash: {"serving": {"weight_cache": {"host_path": "/" + "/".join(parts) + slash}}},
        st.lists(PATH_PART, max_size=4),
        st.sampled_from(["", "/", "//"]),
    ),
    st.builds(
        lambda count, key, value: {"tags": {**{f"t{i}": "v" for i in range(count)}, key: value}},
        st.integers(min_value=0, max_value=60),
        st.sampled_from(["aws:x", "AWS:y", "ok", "k" * 129, "é"]),
        st.sampled_from(["", "v" * 257, "a<b", "fine", "x\n"]),
    ),
    st.builds(
        lambda length, region: {
            "region": region,
            "availability_zones": [f"{region}a", f"{region}b"],
            "gpu_availability_zone": f"{region}a",
            "network": {"vpc_cidr": "10.0.0.0/17"},
            "cluster": {"name": "c" * length},
        },
        st.integers(min_value=1, max_value=101),
        st.sampled_from(["us-west-2", "ap-southeast-5", "us-northwestcentralsouthern-1"]),
    ),
    st.builds(
        lambda prefix, zones: {
            "network": {"vpc_cidr": f"10.0.0.0/{prefix}"},
            "availability_zones": [f"us-west-2{z}" for z in "abcd"[:zones]],
        },
        st.integers(min_value=14, max_value=28),
        st.integers(min_value=2, max_value=4),
    ),
    st.builds(
        lambda size, quant, tp, ctx, declared: {
            "serving": {
                "model": {
                    "source": f"org/Model-{size}B{quant}",
                    **({"parameters_billion": declared} if declared else {}),
                },
                "engine": {"tensor_parallel_size": tp, "max_model_len": ctx},
            }
        },
        st.sampled_from(["0.5", "7", "9", "27", "72", "405"]),
        st.sampled_from(["", "-AWQ", "-FP8"]),
        st.integers(min_value=1, max_value=2),
        st.sampled_from([512, 4096, 131072]),
        st.one_of(st.none(), st.floats(min_value=0.1, max_value=2000)),
    ),
    st.builds(
        lambda field, value, pad: {field: pad.format(value)},
        st.sampled_from(["stage", "region", "account", "gpu_availability_zone"]),
        st.sampled_from(["dev", "us-west-2", "123456789012", "us-west-2a"]),
        st.sampled_from(["{}\n", "{} ", "\t{}", "{}\r\n"]),
    ),
)


@st.composite
def hostile_yaml(draw):
    """Documents that used to raise or run for minutes: alias bombs, deep nesting, huge numbers."""
    kind = draw(st.sampled_from(["bomb", "deep", "number", "cycle"]))
    if kind == "bomb":
        levels, fanout = draw(st.integers(min_value=1, max_value=12)), draw(st.integers(min_value=1, max_value=12))
        lines = [f"a0: &a0 [{', '.join(['x'] * fanout)}]"]
        lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fanout)}]" for i in range(1, levels + 1)]
        return ("\n".join(lines) + "\n").encode()
    if kind == "deep":
        depth, opener = draw(st.integers(min_value=1, max_value=20_000)), draw(st.sampled_from(["[", "{a: "]))
        closer = "]" if opener == "[" else "}"
        return ("stage: " + opener * depth + "1" + closer * depth + "\n").encode()
    if kind == "number":
        digits = draw(st.integers(min_value=1, max_value=6000))
        prefix = draw(st.sampled_from(["", "0x", "-", "1.", "0o"]))
        return f"stage: dev\nnetwork: {{nat_gateways: {prefix}{'7' * digits}}}\n".encode()
    return b"stage: dev\ntags: &t {a: [*t]}\n"


@st.composite
def mutated_files(draw):
    base = {"dev": stage_data("dev"), "prod": stage_data("prod")}[draw(st.sampled_from(["dev", "prod"]))]
    base["stage"] = "dev"  # the file is written as dev.yaml
    kind = draw(
        st.sampled_from(["replace", "delete", "add", "alias", "wrap", "raw", "several", "rule", "rule", "hostile"])
    )
    if kind == "raw":
        return draw(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
    if kind == "hostile":
        return draw(hostile_yaml())
    if kind == "rule":
        data = _merge(copy.deepcopy(base), draw(RULE_CHANGES))
        return yaml.dump(data, Dumper=yaml.SafeDumper, allow_unicode=True).encode()
    data = _mutate(draw, copy.deepcopy(base), kind)
    if kind == "wrap":
        data = draw(st.sampled_from([[data], "text", 42, None]))
    try:
        return yaml.dump(data, Dumper=yaml.SafeDumper, allow_unicode=draw(st.booleans())).encode()
    except (yaml.YAMLError, ValueError, RecursionError):
        return b"stage: [unterminated"


def _mutate(draw, data, kind):
    """`data` after one change of `kind` (replace, delete, add, alias; wrap changes nothing here) or, for
    "several", two to five of any of them."""
    steps = draw(st.integers(min_value=2, max_value=5)) if kind == "several" else 1
    for _ in range(steps):
        paths = list(_paths(data)) if isinstance(data, (dict, list)) else [()]
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "delete", "add", "alias"])) if kind == "several" else kind
        try:
            data = _change(draw, data, path, action)
        except (KeyError, IndexError, TypeError):
            pass
        if not isinstance(data, (dict, list)):
            break
    return data


def _change(draw, data, path, action):
    """`data` with one `action` at `path` (in place where it can be; the root itself when path is empty)."""
    if action == "replace":
        return _set(data, path, draw(VALUES))
    if action == "delete":
        return _delete(data, path)
    if action == "add":
        target = data
        for part in path:
            target = target[part]
        if isinstance(target, dict):
            target[draw(st.text(min_size=1, max_size=12))] = draw(VALUES)
    elif action == "alias" and isinstance(data, dict):
        shared = draw(st.sampled_from(list(_paths(data))[1:] or [()]))
        if path[: len(shared)] == shared or shared[: len(path)] == path:
            return data  # an alias inside itself would make a cycle, not a stage file
        source = data
        for part in shared:
            source = source[part]
        data = _set(data, path, source)  # the same object twice: YAML writes an anchor and an alias
    return data


@settings(
    max_examples=1800,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(content=mutated_files())
def test_every_mutation_loads_or_fails_with_one_line(content, tmp_path_factory):
    path = Path(tmp_path_factory.mktemp("stage")) / "dev.yaml"
    path.write_bytes(content)
    CASES["ran"] += 1
    try:
        load_stage_file(path)
        CASES["valid"] += 1
        expected = 0
    except ConfigError as exc:  # anything else is a bug and fails the test
        CASES["rejected"] += 1
        line = str(exc)
        assert line.startswith(f"{path}: ") and "\n" not in line and "\r" not in line
        assert len(line) < 2000 + len(str(path))  # never a whole structure or a huge number in a message
        assert not any(secret.strip() in line for secret in SECRETS)  # a secret is named, never shown
        expected = 2
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["validate", str(path)])
    assert code == expected
    if expected:
        assert len(err.getvalue().splitlines()) == 1 and "Traceback" not in err.getvalue()


def test_campaign_ran_its_cases():
    # runs after the campaign in file order; the count is what the closing note reports
    assert CASES["ran"] >= 1800 and CASES["rejected"] > CASES["valid"] > 0, CASES
    print(f"bad-input campaign: {CASES}")
