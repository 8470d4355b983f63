"""The GPU evidence of evidence/2026-12-02-h200-ttft-phases-16/: the README's phase table is the committed
run's console, line by line."""

from __future__ import annotations

import re

import pytest

from ...helpers import ROOT

EVIDENCE = ROOT / "evidence" / "2026-12-02-h200-ttft-phases-16"
README = (EVIDENCE / "README.md").read_text()
CONSOLE = (EVIDENCE / "runs" / "phases16.log").read_text()
ROUNDS = {"1 at a time": 1, "12 at once": 16}


def _phase(streams: int, pattern: str) -> list[str]:
    lines = [line for line in CONSOLE.splitlines() if line.startswith(f"  TTFT phases ({streams} at a time): ")]
    found = re.search(pattern, "\n".join(lines))
    assert found is not None, pattern
    return list(found.groups())


def _row(label: str) -> list[str]:
    (line,) = [line for line in README.splitlines() if line.startswith(f"| {label} ")]
    return [cell.strip() for cell in line.strip("|").split("|")][1:3]


@pytest.mark.parametrize(
    ("label", "pattern", "cell"),
    [
        ("client TTFT median", r"client TTFT median ([\d.]+) ms", "{} ms"),
        ("prefill engine: TTFT / e2e", r"prefill engine .*?ttft ([\d.]+) ms.*?e2e ([\d.]+) ms", "{} / {} ms"),
        ("decode engine TTFT", r"decode engine .*?ttft ([\d.]+) ms", "{} ms"),
        ("outside the engines", r"outside the engines [^:]*: ([\d.]+) ms", "{} ms"),
    ],
)
def test_each_phase_row_is_the_consoles(label, pattern, cell):
    assert _row(label) == [cell.format(*_phase(streams, pattern)) for streams in ROUNDS.values()]


def test_the_nixl_row_is_the_consoles_transfer_time():
    cells = _row("of it the NIXL transfer")
    for cell, streams in zip(cells, ROUNDS.values(), strict=True):
        (ms,) = _phase(streams, r"nixl_xfer ([\d.]+) ms")
        assert cell.startswith(f"{ms} ms (")


def test_the_serve_handler_row_is_the_consoles():
    cells = _row("Serve handlers, mean: Prefill / Decode / OpenAiIngress")
    for cell, streams in zip(cells, ROUNDS.values(), strict=True):
        means = [
            _phase(streams, rf"Serve deployment {name}: handler ([\d.]+) ms")[0]
            for name in ("Prefill:qwen3_5-9b", "Decode:qwen3_5-9b", "OpenAiIngress")
        ]
        assert cell == " / ".join(means) + " ms"


def test_running_and_the_checks_are_the_consoles():
    found = re.search(r"application RUNNING\s+PASS\s+(\d+) s from ray start", CONSOLE)
    assert found is not None and f"RUNNING {found[1]} s from ray start" in README
    assert "OK: 11 passed, 0 failed, 1 warnings, 0 skipped" in CONSOLE and "11 checks passed" in README
