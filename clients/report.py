"""A report is a list of checks: name, status, detail and what to do. Rendered as a table or JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Literal

from .text import shown

Status = Literal["pass", "fail", "warn", "skip"]
_MARK = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP"}


@dataclass
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""
    data: dict = field(default_factory=dict)


@dataclass
class Report:
    command: str
    stage: str
    checks: list[Check] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def add(self, name: str, status: Status, detail: str, fix: str = "", **data) -> Check:
        # detail and fix quote what the cluster answered: one line each, through the one sanitizer (clients/text.py)
        check = Check(name, status, shown(" ".join(detail.split())), shown(" ".join(fix.split())), data)
        self.checks.append(check)
        return check

    @property
    def ok(self) -> bool:
        return all(check.status != "fail" for check in self.checks)

    def find(self, name: str) -> Check | None:
        return next((check for check in self.checks if check.name == name), None)

    def table(self) -> str:
        width = max([len(c.name) for c in self.checks] + [5])
        lines = [f"{self.command} --stage {self.stage}", f"{'CHECK':<{width}}  STATUS  DETAIL"]
        for check in self.checks:
            lines.append(f"{check.name:<{width}}  {_MARK[check.status]:<6}  {check.detail}")
            if check.fix and check.status in ("fail", "warn"):
                lines.append(f"{'':<{width}}  {'':<6}  -> {check.fix}")
        counts = {status: sum(c.status == status for c in self.checks) for status in _MARK}
        verdict = "OK" if self.ok else "FAILED"
        lines.append(
            f"{verdict}: {counts['pass']} passed, {counts['fail']} failed, {counts['warn']} warnings, "
            f"{counts['skip']} skipped"
        )
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps(
            {
                "command": self.command,
                "stage": self.stage,
                "ok": self.ok,
                "checks": [asdict(c) for c in self.checks],
                **self.extra,
            },
            indent=2,
        )

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1
