"""The oracle inside `ops rehearse`: each mode's answers on a real-format checkpoint, PD's bytes accounted, and the
verdict once both modes have answered (serving_lab/rehearse/oracle.py, kv_accounting.py).

Per mode, OUT/oracle-answers-<mode>.json: every level's answers (oracle.CONCURRENCY) and the checkpoint they came
from; in PD also OUT/oracle-accounting-pd.json. Once PD and colocated answers exist (one command with --mode both,
or --oracle-against FILE naming the other mode's answers from an earlier command on the same checkpoint), the check
"PD answers = colocated" and OUT/oracle-<stage>.json: prompts, identical, divergences (prompt, position, margin).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from clients import kube, nixl_rate
from clients.cli_options import OneLineParser, file_label, output_file, output_folder, regular_file
from clients.files import FileRefused, read_regular
from clients.report import Report
from clients.text import shown

from . import checkpoint, kv_accounting, oracle

# Ray's core workers export their metrics every metrics_report_interval_ms (10 s by default,
# src/ray/common/ray_config_def.h): a scrape of the head waits one interval and a margin.
EXPORT_WAIT_S = 12.0


class ScrapeError(Exception):
    """The head's metrics endpoint did not answer with its text; one line."""


class OracleError(Exception):
    """One line: the answers cannot be compared (another checkpoint, a file that is not the oracle's)."""


@dataclass(frozen=True)
class OracleInputs:
    base: str  # the Serve endpoint
    model_id: str
    mode: str
    model_dir: Path  # the checkpoint
    out: Path
    scrape_head: Callable[[], str]  # Ray's metrics on the head (vLLM's series among them); ScrapeError
    scrape_exporter: Callable[[], str]  # NIXL's exporter on the decode worker; "" where it does not answer
    worker_logs: Callable[[], dict[str, str]]
    say: Callable[[str], None]
    wait: Callable[[float], None] = time.sleep


def fingerprint(model_dir: Path) -> dict[str, Any]:
    """What identifies a checkpoint: checkpoint.json's seed, tensors and bytes (an OracleError where that file is no
    such record)."""
    record = model_dir / checkpoint.RECORD
    found = _validated(CheckpointRecord, record, "a checkpoint record") if record.is_file() else CheckpointRecord()
    return found.model_dump() | {"folder": str(model_dir)}


def _ask_measured(inputs: OracleInputs, transfers: list[kv_accounting.Transfer]):
    """One request at a time with NIXL's exporter scraped around it: that request's own transfer (bytes, seconds)."""

    def ask(prompt: dict[str, Any]) -> oracle.Answer:
        before = nixl_rate.settled(inputs.scrape_exporter)
        answer = oracle.ask(inputs.base, inputs.model_id, prompt)
        after = nixl_rate.settled(inputs.scrape_exporter)
        found = kv_accounting.transfer(prompt["name"], answer.prompt_tokens or 0, before, after)
        if found is not None and not answer.error:
            transfers.append(found)
        return answer

    return ask


def _pd_round(inputs: OracleInputs, concurrency: int, prompts: list[dict]) -> tuple[list[oracle.Answer], Any]:
    """One PD level with the scrapes around it: Ray exports every 10 s, so each scrape waits for the export."""
    transfers: list[kv_accounting.Transfer] = []
    if concurrency == 1:
        ask = _ask_measured(inputs, transfers)
    else:
        ask = lambda p: oracle.ask(inputs.base, inputs.model_id, p)
    inputs.wait(EXPORT_WAIT_S)
    before, exporter_before = inputs.scrape_head(), inputs.scrape_exporter()
    answers = oracle.run_round(ask, prompts, concurrency)
    inputs.wait(EXPORT_WAIT_S)
    after, exporter_after = inputs.scrape_head(), inputs.scrape_exporter()
    round_ = kv_accounting.Round(
        concurrency=concurrency,
        prompt_tokens=[a.prompt_tokens or 0 for a in answers],
        cached_tokens=[a.cached_tokens for a in answers],
        metrics_before=before,
        metrics_after=after,
        exporter_before=exporter_before,
        exporter_after=exporter_after,
        transfers=transfers,
    )
    return answers, round_


def answer_levels(inputs: OracleInputs, report: Report) -> oracle.Levels:
    """Every level's answers for this mode; in PD each level's bytes accounted too (a check per level)."""
    prompts = oracle.prompt_set()
    levels: oracle.Levels = {}
    accounts = []
    layout = kv_accounting.Layout.from_config(json.loads((inputs.model_dir / "config.json").read_text()))
    for concurrency in oracle.CONCURRENCY:
        if inputs.mode != "pd":
            levels[concurrency] = oracle.run_round(
                lambda p: oracle.ask(inputs.base, inputs.model_id, p), prompts, concurrency
            )
            continue
        try:
            levels[concurrency], round_ = _pd_round(inputs, concurrency, prompts)
        except ScrapeError as exc:
            report.add(f"KV bytes accounted ({concurrency} at a time)", "fail", str(exc))
            continue
        found = kv_accounting.account(round_, layout, kv_accounting.block_size(inputs.worker_logs()))
        accounts.append(found.to_json())
        _report_accounting(report, found)
    _write(inputs.out / f"oracle-answers-{inputs.mode}.json", _answers_file(inputs, levels))
    if accounts:
        _write(inputs.out / f"oracle-accounting-{inputs.mode}.json", {"layout": layout.__dict__, "levels": accounts})
    errors = sum(1 for level in levels.values() for a in level if a.error)
    count = sum(len(level) for level in levels.values())
    report.add(
        f"oracle answers ({inputs.mode})",
        "fail" if errors or not count else "pass",
        f"{count - errors} of {count} requests answered at {', '.join(map(str, levels))} at a time",
        informative=oracle.informative(levels.get(1, []), layout_vocab(inputs.model_dir)),
    )
    return levels


def layout_vocab(model_dir: Path) -> int:
    config = json.loads((model_dir / "config.json").read_text())
    return int(config.get("text_config", config)["vocab_size"])


def _report_accounting(report: Report, found: kv_accounting.Accounting) -> None:
    moved = "no bytes measured" if found.moved is None else f"{found.moved} bytes moved"
    rate = (
        f"; per transfer {found.rate_gbps['median']} Gbps median, {found.rate_gbps['worst']} worst"
        if found.rate_gbps
        else ""
    )
    detail = (
        f"{found.requests} requests, {found.prompt_tokens} prompt tokens; decode {found.decode or 'not found'}; "
        f"{found.transfers} transfers; {moved} ({found.moved_source}); the layout predicts {found.predicted}{rate}"
    )
    if found.problems:
        detail += "; " + "; ".join(found.problems)
    report.add(f"KV bytes accounted ({found.concurrency} at a time)", "pass" if found.ok else "fail", detail)


def _answers_file(inputs: OracleInputs, levels: oracle.Levels) -> dict[str, Any]:
    return {
        "mode": inputs.mode,
        "checkpoint": fingerprint(inputs.model_dir),
        "levels": {str(c): [a.to_json() for a in answers] for c, answers in levels.items()},
    }


def _write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n")


# An answers file holds 2 x 16 answers of at most a few hundred tokens and their top logprobs: a few MB.
ANSWERS_MAX_BYTES = 64 * 2**20


class CheckpointRecord(BaseModel):
    seed: int | None = None
    tensors: int | None = None
    bytes: int | None = None


class AnswersFile(BaseModel):
    """An oracle-answers file as _answers_file writes it; a field of another type or shape is refused."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["pd", "colocated"]
    checkpoint: CheckpointRecord
    levels: dict[int, list[oracle.Answer]]


def read_answers(path: Path) -> tuple[str, oracle.Levels, dict[str, Any]]:
    """(mode, levels, checkpoint) of an oracle-answers file, or an OracleError naming the file and what is wrong."""
    return _fields(_validated(AnswersFile, path, "an oracle-answers file"))


def parse_answers(data: object) -> tuple[str, oracle.Levels, dict[str, Any]]:
    """(mode, levels, checkpoint) of an answers file's JSON; a pydantic ValidationError where it is not one."""
    return _fields(AnswersFile.model_validate(data))


def _fields(found: AnswersFile) -> tuple[str, oracle.Levels, dict[str, Any]]:
    return found.mode, found.levels, found.checkpoint.model_dump()


Record = TypeVar("Record", bound=BaseModel)


def _validated(model: type[Record], path: Path, what: str) -> Record:
    """The JSON file `path` (at most ANSWERS_MAX_BYTES) as `model`, or an OracleError saying why it is not `what`."""
    try:
        return model.model_validate(kube.parse_json(read_regular(path, ANSWERS_MAX_BYTES)))
    except FileRefused as exc:
        raise OracleError(f"{path}: {exc}: not {what}") from None
    except kube.TooDeep:  # clients/kube.py bounds nesting, and refuses NaN and 1e400 too
        raise OracleError(f"{path}: not {what} (JSON nested too deeply)") from None
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise OracleError(f"{path}: not {what} ({_first_problem(exc)})") from None


def _first_problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the whole file"
        return shown(f"{where}: {error['msg']}", 200)
    return shown(f"{type(exc).__name__}: {exc}", 200)


def load_answers(path: Path, model_dir: Path) -> tuple[str, oracle.Levels]:
    """(mode, levels) of an earlier command's oracle-answers file, refused unless it came from this checkpoint."""
    try:
        mode, levels, theirs = read_answers(path)
    except OracleError as exc:
        raise OracleError(f"--oracle-against: {exc}") from None
    ours = fingerprint(model_dir)
    if any(theirs[k] != ours[k] for k in ("seed", "tensors", "bytes")):
        raise OracleError(f"--oracle-against: {path} answered another checkpoint ({theirs}) than {model_dir} ({ours})")
    return mode, levels


def noise_floor(colocated: oracle.Levels) -> dict[str, Any]:
    """The colocated engine against itself, one request in flight against the first of sixteen: rounding alone."""
    one, many = colocated.get(1, []), colocated.get(oracle.CONCURRENCY[-1], [])
    found = oracle.compare({1: one}, {1: many[: len(one)]})
    return {
        "requests": found.requests,
        "identical": found.identical,
        "max_logprob_delta": max((d.max_logprob_delta for d in found.divergences), default=0.0),
        "max_regret": max((d.regret for d in found.divergences if d.regret is not None), default=0.0),
    }


def verdict(levels_by_mode: dict[str, oracle.Levels], out: Path, stage: str, report: Report) -> oracle.Verdict:
    """PD against colocated: the check, and OUT/oracle-<stage>.json with the colocated engine's own noise beside it."""
    found = oracle.compare(levels_by_mode["pd"], levels_by_mode["colocated"])
    floor = noise_floor(levels_by_mode["colocated"])
    _write(out / f"oracle-{stage}.json", found.to_json() | {"noise_floor": floor})
    report.add(
        "PD answers = colocated",
        "pass" if found.ok else "fail",
        "; ".join(found.lines()) + f"; the colocated engine against itself (1 vs 16 in flight): largest logprob gap "
        f"{floor['max_logprob_delta']:.4f}, regret {floor['max_regret']:.4f}",
        fix=""
        if found.ok
        else "see oracle-<stage>.json: a divergence beyond the noise bound means the KV the decode "
        "engine received is not the KV its prompt has",
        identical=found.identical,
        requests=found.requests,
    )
    return found


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python3 -m serving_lab.rehearse.oracle_run", description=main.__doc__)
    parser.add_argument("answers", nargs=2, type=regular_file, metavar="ANSWERS", help="PD's and colocated's")
    parser.add_argument("out", type=output_folder, metavar="OUT", help="the folder for oracle-<STAGE>.json")
    parser.add_argument("stage", type=file_label, metavar="STAGE", help="the stage's name (names the file)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """python3 -m serving_lab.rehearse.oracle_run PD_ANSWERS COLOCATED_ANSWERS OUT STAGE: the verdict again, offline,
    from two oracle-answers files (each mode's, as a rehearsal wrote them)."""
    args = _parser().parse_args(argv)
    try:
        output_file(str(Path(args.out) / f"oracle-{args.stage}.json"))  # never a FIFO in OUT (its writer blocks)
    except argparse.ArgumentTypeError as exc:
        _parser().error(f"OUT: {exc}")
    levels: dict[str, oracle.Levels] = {}
    try:
        for path in args.answers:
            mode, answers, _ = read_answers(Path(path))
            levels[mode] = answers
    except OracleError as exc:
        print(f"oracle_run: {exc}", file=sys.stderr)
        return 2
    if set(levels) != {"pd", "colocated"}:
        print(f"oracle_run: the files hold {sorted(levels)} answers; one pd and one colocated", file=sys.stderr)
        return 2
    report = Report("oracle", args.stage)
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        verdict(levels, Path(args.out), args.stage, report)
    except OSError as exc:
        print(f"oracle_run: OUT {shown(args.out, 80)}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(report.table())
    return report.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
