"""The saved run: a round trip keeps every field, percentiles are numpy's, and a bad file is one line
naming the file and the problem."""

from __future__ import annotations

import json

import numpy
import pytest

from serving_lab.bench import results

from .runs import make_run


def test_save_and_load_round_trip(tmp_path):
    run = make_run("pd", {"chat": {1: (100, 20, 900), 8: (150, 22, 1000)}})
    path = run.save(tmp_path / "runs" / "a.json")
    assert results.load(path) == run
    assert json.loads(path.read_text())["schema"] == results.SCHEMA
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("values", [[5.0], [3.0, 1.0], list(map(float, range(1, 102))), [0.5, 9.0, 2.25, 7.0, 7.0]])
def test_percentiles_match_numpy(values):
    stats = results.Stats.of(values)
    for q, got in ((50, stats.p50), (90, stats.p90), (99, stats.p99)):
        assert got == pytest.approx(float(numpy.percentile(values, q)))
    assert (stats.min, stats.max) == (min(values), max(values))


def _write(tmp_path, content) -> str:
    path = tmp_path / "run.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_missing_file(tmp_path):
    with pytest.raises(results.ResultsError, match=r"^.*/nope\.json: no such file: not a results file$"):
        results.load(tmp_path / "nope.json")


def test_not_json(tmp_path):
    path = _write(tmp_path, "{not json")
    with pytest.raises(results.ResultsError, match=rf"^{path}: not a results JSON file"):
        results.load(path)


def test_other_schema(tmp_path):
    path = _write(tmp_path, {"schema": "aiperf"})
    with pytest.raises(results.ResultsError) as info:
        results.load(path)
    assert str(info.value) == f"{path}: schema: 'aiperf' is not a benchmark run (allowed: '{results.SCHEMA}')"


def test_missing_field_names_the_field(tmp_path):
    data = make_run("pd", {"chat": {1: (100, 20, 900)}}).model_dump(by_alias=True)
    del data["profiles"][0]["levels"][0]["ttft_ms"]
    path = _write(tmp_path, data)
    with pytest.raises(results.ResultsError) as info:
        results.load(path)
    assert str(info.value) == f"{path}: profiles.0.levels.0.ttft_ms: Field required"
