"""Every command's exit codes, declared once: the table that ends each command's --help (and the top-level
one) is made from them. tests/ops/test_exit_codes.py reads each command's return sites and fails when a
code it returns is not here, or one here is never returned."""

from __future__ import annotations

import textwrap

SIGNALLED = "128+N"
Codes = dict[int | str, str]  # what each exit code means: 0, 1, 2, 3 or SIGNALLED
# main() (ops/__main__.py) returns these for every command: argparse's usage error (2), a bug (3), Ctrl-C (130);
# other signals end the process by their default action (a shell sees 128+N).
SHARED: Codes = {
    2: "bad arguments (each command's --help names its other causes)",
    3: "an internal error (a bug: please report it, with --debug output)",
    SIGNALLED: "stopped by signal N: 130 Ctrl-C, 143 SIGTERM",
}
_AWS_SET_UP = (
    "bad arguments, stage file or local AWS set-up (an AWS profile that does not exist, an AWS config file that "
    "does not parse, an AWS endpoint URL that is not a URL, a credential_process that fails or does not answer "
    "within a minute, an AWS endpoint that does not answer as AWS)"
)
_PREFLIGHT: Codes = {0: "every hard check passed", 1: "a check failed", 2: _AWS_SET_UP}

EXIT_CODES: dict[str, Codes] = {
    "preflight": _PREFLIGHT,
    "addon-check": _PREFLIGHT,
    "verify": {**_PREFLIGHT, 1: "a check failed, or the cluster cannot be reached"},
    "verify-remote": {
        0: "every verify check passed on the stage's verify runner",
        1: "a check failed there, or the runner's build could not be started or followed",
        2: f"{_AWS_SET_UP}, or git missing or failing (it uploads the git-tracked runner files)",
    },
    "leftovers": {
        0: "listed: nothing left, or what is left with the command that removes each",
        1: "the stage is still deployed, or a read failed",
        2: _AWS_SET_UP,
    },
    "diff": {
        0: "done (with --fail-on-danger: nothing destructive)",
        1: "with --fail-on-danger: a destructive change, or a part of the change trusted code could not judge",
        2: "bad arguments, git missing, not a checkout, a stage in neither tree, the base or a synth failed, an "
        "unwritable --markdown file",
        SIGNALLED: "stopped by signal N: 129 SIGHUP, 130 Ctrl-C, 131 SIGQUIT, 143 SIGTERM (its temporary folder "
        "removed)",
    },
    "bench": {
        0: "done",
        1: "the benchmark failed (endpoint unreachable or not serving the model, tokenizer that cannot be loaded, "
        "aiperf error, no request succeeded)",
        2: "bad arguments, stage file or results file, or a package of the benchmark's set-up missing",
    },
    "rehearse": {
        0: 'every check passed (a "not EFA" verdict on a host without EFA is a warning)',
        1: "a check failed, the stack did not come up, or the host cannot run it (no nvidia-smi or GPU answer)",
        2: "bad arguments or stage file, a stage this host cannot rehearse (the plan), or --oracle-against "
        "answers that cannot be compared",
        SIGNALLED: "stopped by signal N: 130 Ctrl-C, SIGTERM or SIGHUP (Ray stopped, the finished checks printed "
        "and written)",
    },
    "local-cluster": {
        0: "every check passed",
        1: "a check failed or the cluster did not start",
        2: "bad arguments or stage file, the pinned tools do not fit the stage, or the set-up is missing",
        SIGNALLED: "stopped by signal N: 129 SIGHUP, 130 Ctrl-C, 131 SIGQUIT, 143 SIGTERM (every process it "
        "started is ended and its folder, keys and tokens included, removed; a second signal meanwhile does not "
        "cut that short)",
    },
    "validate": {0: "every file is valid", 2: "bad arguments, or the first problem: one `PATH: field: problem` line"},
}


def codes(command: str) -> Codes:
    """What each code `command` exits with means: its own, then the shared ones it does not redefine."""
    merged = {**SHARED, **EXIT_CODES[command]}
    return dict(sorted(merged.items(), key=lambda item: 128 if item[0] == SIGNALLED else int(item[0])))


def table(rows: Codes, title: str = "Exit codes:") -> str:
    lines = [title]
    for code, meaning in rows.items():
        lines += textwrap.wrap(meaning, width=110, initial_indent=f"  {code!s:<7}", subsequent_indent=" " * 9)
    return "\n".join(lines)


OVERVIEW = table(SHARED, "Exit codes of every command (each command's --help lists all of its own):")
