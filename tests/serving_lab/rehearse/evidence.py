"""Reading a committed GPU evidence folder (evidence/DATE-HOST/): its README's numbered sections and tables,
the cells a benchmark level gives, and the goodput `ops bench --goodput` counts from the runs as they came back
(serving_lab/scripts/rehearsal_device_run.sh: NAME.tgz holds aiperf's summaries, NAME-records.tgz its per-request records)."""

from __future__ import annotations

import tarfile
from pathlib import Path

from serving_lab.bench import goodput, results
from serving_lab.bench.cli import goodput_markdown


def section(readme: Path, number: int) -> str:
    text = readme.read_text()
    start = text.index(f"## {number}. ")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def table_rows(text: str, width: int) -> list[list[str]]:
    """The body rows of the tables in `text` with `width` cells (header and rule rows left out)."""
    rows = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if (
            line.startswith("|")
            and len(cells) == width
            and not set(cells[0]) <= {"-"}
            and cells[0] not in ("arm", "profile")
        ):
            rows.append(cells)
    return rows


def strip(cell: str) -> str:
    return cell.replace("*", "").strip()


def level_cells(level) -> list[str]:
    """A benchmark level as the READMEs print it: TTFT and ITL p50 / p99, E2E p50, tok/s, requests, goodput."""
    g = level.goodput
    return [
        f"{level.ttft_ms.p50:.0f} / {level.ttft_ms.p99:.0f}",
        f"{level.itl_ms.p50:.2f} / {level.itl_ms.p99:.2f}",
        f"{level.e2e_ms.p50 / 1000:.2f}",
        f"{level.output_tokens_per_s:.0f}",
        str(level.requests),
        f"{g.per_s:.2f} ({g.good} of {g.requests} good)",
    ]


def goodput_per_s(run: results.Run, profile: str, streams: int) -> float:
    level = next(lv for p in run.profiles if p.name == profile for lv in p.levels if lv.concurrency == streams)
    assert level.goodput is not None, f"{profile} at {streams} streams: no goodput recorded"
    return level.goodput.per_s


def recounted_goodput(evidence: Path, runs: dict[str, tuple[Path, str]], tmp_path: Path) -> str:
    """goodput.md as `ops bench --goodput` writes it from each run's archives: `runs` maps a committed run file in
    `evidence` to (its archives' stem, the run's name inside them); each unpacked run must be the committed one."""
    objectives = goodput.Objectives.of_seconds(2.0, 0.1)
    recounted = []
    for name, (results_stem, stem) in runs.items():
        for archive_path in (Path(f"{results_stem}.tgz"), Path(f"{results_stem}-records.tgz")):
            with tarfile.open(archive_path) as archive:
                archive.extractall(tmp_path / name, filter="data")
        path = tmp_path / name / "dev" / "runs" / "dev" / f"{stem}.json"
        assert results.load(path).model_dump() == results.load(evidence / name).model_dump()
        run, missing = goodput.recount(results.load(path), path, objectives)
        assert missing == []
        recounted.append(run)
    return goodput_markdown(recounted, objectives)


def assert_pd_on_one_shared_h200(run: results.Run) -> None:
    """A run of dev's PD on one H200 that both engines shared, with dummy weights and UCX, and no failed request."""
    assert (run.stage, run.mode, run.hardware.gpu) == ("dev", "pd", "NVIDIA H200")
    assert "dummy weights" in run.note and "not EFA" in run.note and "shared by 2 engines" in run.note
    assert all(level.errors == 0 for p in run.profiles for level in p.levels)
