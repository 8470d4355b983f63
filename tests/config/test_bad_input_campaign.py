"""Property-based bad-input campaign: mutate valid stage files (types, missing and extra keys,
out-of-range and huge numbers, wrong AZs, unicode, YAML anchors, non-mapping documents, raw bytes) and
assert that loading either succeeds or fails with the one-line config error and exit code 2, never
another exception. Deterministic (derandomized) so CI runs the same cases every time."""
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

CASES = {"ran": 0, "valid": 0, "rejected": 0}
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(["us-west-2z", "us-east-1a", "g6.xlarge", "p5.48xlarge", "0.0.0.0/0", "1.34", "UCX",
                     "colocated", "ipc_lock", "NewCluster", "-1", "", "\u0000", "é", "🚀", "~", "null"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                      max_leaves=8)


def _paths(data, prefix=()):
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, prefix + (index,))


def _set(data, path, value):
    if not path:
        return value
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data


def _delete(data, path):
    if not path:
        return None
    target = data
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return data


@st.composite
def mutated_files(draw):
    base = {"dev": stage_data("dev"), "prod": stage_data("prod")}[draw(st.sampled_from(["dev", "prod"]))]
    base["stage"] = "dev"  # the file is written as dev.yaml
    kind = draw(st.sampled_from(["replace", "delete", "add", "alias", "wrap", "raw", "several"]))
    if kind == "raw":
        return draw(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
    data = copy.deepcopy(base)
    steps = draw(st.integers(min_value=2, max_value=5)) if kind == "several" else 1
    for _ in range(steps):
        paths = list(_paths(data)) if isinstance(data, (dict, list)) else [()]
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "delete", "add", "alias"])) if kind == "several" else kind
        try:
            if action == "replace":
                data = _set(data, path, draw(VALUES))
            elif action == "delete":
                data = _delete(data, path)
            elif action == "add":
                target = data
                for part in path:
                    target = target[part]
                if isinstance(target, dict):
                    target[draw(st.text(min_size=1, max_size=12))] = draw(VALUES)
            elif action == "alias" and isinstance(data, dict):
                shared = draw(st.sampled_from(list(_paths(data))[1:] or [()]))
                if path[:len(shared)] == shared or shared[:len(path)] == path:
                    continue  # an alias inside itself would make a cycle, not a stage file
                source = data
                for part in shared:
                    source = source[part]
                data = _set(data, path, source)  # the same object twice: YAML writes an anchor and an alias
        except (KeyError, IndexError, TypeError):
            pass
        if not isinstance(data, (dict, list)):
            break
    if kind == "wrap":
        data = draw(st.sampled_from([[data], "text", 42, None]))
    try:
        return yaml.dump(data, Dumper=yaml.SafeDumper, allow_unicode=draw(st.booleans())).encode()
    except (yaml.YAMLError, ValueError, RecursionError):
        return b"stage: [unterminated"


@settings(max_examples=1500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
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
        expected = 2
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["validate", str(path)])
    assert code == expected
    if expected:
        assert len(err.getvalue().splitlines()) == 1 and "Traceback" not in err.getvalue()


def test_campaign_ran_its_cases():
    # runs after the campaign in file order; the count is what the closing note reports
    assert CASES["ran"] >= 1500 and CASES["rejected"] > CASES["valid"] > 0, CASES
    print(f"bad-input campaign: {CASES}")
