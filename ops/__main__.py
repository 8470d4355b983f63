"""`pd-inference COMMAND` (the console script scripts/setup.sh installs) or `python -m ops COMMAND`.

  preflight --stage NAME [--suggest]  read-only AWS checks before `cdk deploy`
  addon-check --stage NAME
                          preflight's CloudWatch add-on check alone (the pipeline runs it before any stage)
  verify --stage NAME [--wait SECONDS]
                          checks of the running stage after `cdk deploy`
  verify-remote --stage NAME
                          the same, run inside the stage's VPC on its verify runner (CodeBuild)
  leftovers --stage NAME  what a destroyed stage left (KMS keys, log groups), with the aws commands that remove it
  diff --base REF         offline infrastructure diff of the working tree against REF (no AWS access; ops/diff/)
  bench --stage NAME      benchmark the stage's OpenAI endpoint; --compare A B writes a report (serving_lab/bench/)
  rehearse --stage NAME   the stage's serve config on this host's GPUs, checked and benchmarked (serving_lab/rehearse/)
  local-cluster --stage NAME
                          the stage's Kubernetes objects on a local kube-apiserver built from source (localcluster/)
  validate [PATH ...]     the stage files' checks that synth runs, without CDK (also `python -m config validate`)

Every command takes --config-dir DIR (the folder of stage files) and --json (its result as JSON on stdout),
or says in its --help why it does not; and --debug (a traceback on internal errors). Each command's --help
ends with its exit codes (ops/exit_codes.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
import traceback
from dataclasses import dataclass
from typing import Protocol

from clients.cli_options import NUMBER_MAX, OneLineParser, number, text
from clients.text import shown
from config import __main__ as validate_cli

from . import diff, exit_codes, stage_commands

# Every command has one protocol: `add_parser(sub)` registers it, `run(args) -> int` runs it; main() wraps
# every run in the one handler for bugs (exit 3). The lab commands are LazyCommands, imported only when
# needed, so `python -m ops verify` runs from the verify runner's upload, which holds no lab package.
# Why: docs/DECISIONS.md, "One home for shared names; one command protocol".


class Unavailable(Exception):
    """A LazyCommand's package is not in this copy of the project (the verify runner's upload has no
    serving_lab/): the one line main() prints, exit 2."""


@dataclass(frozen=True)
class LazyCommand:
    """A command whose module (`bench`, `rehearse`: serving_lab/; `local-cluster`: localcluster/) is imported
    only when its parser is built in full or it runs. _parser() builds it in full unless the command line
    names another command: then a bare placeholder parser of the same name stands in, which argparse never
    shows (only the chosen command's help and errors are printed, and the top-level usage lists the names
    alone)."""

    name: str
    module: str

    def _load(self):
        try:
            return importlib.import_module(self.module)
        except ModuleNotFoundError as exc:
            # Only the module or a package above it missing means "not in this copy"; a package the module
            # imports that is missing is a real error, raised as it is.
            parts = self.module.split(".")
            if exc.name not in {".".join(parts[: i + 1]) for i in range(len(parts))}:
                raise
            raise Unavailable(f"{self.name}: not in this copy of the project (no module {exc.name})") from None

    def add_parser(self, sub) -> None:
        self._load().add_parser(sub)

    def placeholder(self, sub, text: str | None = None) -> None:
        sub.add_parser(self.name, **({"help": text} if text else {}))

    def run(self, args) -> int:
        return self._load().run(args)


class Command(Protocol):
    """The command protocol: a StageCommand, or a module with these two functions."""

    def add_parser(self, sub) -> object: ...

    def run(self, args) -> int: ...


# In the order `python -m ops --help` lists them.
COMMANDS: dict[str, Command] = {
    "preflight": stage_commands.PREFLIGHT,
    "addon-check": stage_commands.ADDON_CHECK,
    "verify": stage_commands.VERIFY,
    "verify-remote": stage_commands.VERIFY_REMOTE,
    "leftovers": stage_commands.LEFTOVERS,
    "bench": LazyCommand("bench", "serving_lab.bench.cli"),
    "rehearse": LazyCommand("rehearse", "serving_lab.rehearse.cli"),
    "local-cluster": LazyCommand("local-cluster", "localcluster.cli"),
    "diff": diff,
    "validate": validate_cli,
}

# The options every command shares: a command that does not take one says why in its --help.
SHARED_OPTIONS = ("--config-dir", "--json")
NOT_TAKEN = {
    ("diff", "--config-dir"): "each side is synthesized from the stage files of its own checkout (config/ of REF "
    "and of the working tree): they are part of what is compared",
    ("bench", "--json"): "every run is saved as JSON (<out>/<stage>/<time>-<label>.json; --merge writes one to "
    "--out), --compare writes report.md; stdout is the progress",
    ("rehearse", "--json"): "each mode's report is saved as JSON (<out>/<stage>/report-<mode>.json, beside "
    "plan-<mode>.json); stdout is the progress",
}


def _chosen(argv: list[str] | None) -> str | None:
    """The command a command line names, when it is plain to see: its first argument after any `--debug`.
    None (every command's parser built in full) for anything else: no arguments, -h, an unknown command,
    an abbreviated option. argparse reads the line itself, with the same result either way."""
    rest = list(argv or [])
    while rest and rest[0] == "--debug":
        rest.pop(0)
    return rest[0] if rest and rest[0] in COMMANDS else None


def _parser(prog: str = "python -m ops", argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Every command's parser; with `argv`, the LazyCommands that it does not name get a placeholder."""
    chosen = _chosen(argv)
    parser = OneLineParser(
        prog=prog,
        description="Operations checks for a stage, and the project's other commands.",
        epilog=exit_codes.OVERVIEW,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        if isinstance(command, LazyCommand) and chosen not in (None, name):
            command.placeholder(sub)
            continue
        try:
            command.add_parser(sub)
        except Unavailable as exc:
            if chosen == name or not isinstance(command, LazyCommand):
                raise
            command.placeholder(sub, str(exc))  # the full listing (--help) names it, with why it cannot run
    # --debug also after the subcommand (`python -m ops verify --stage dev --debug`); SUPPRESS keeps a
    # subcommand that was not given it from resetting the top-level one.
    for name, subparser in sub.choices.items():
        subparser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show a traceback on internal errors"
        )
        for action in subparser._actions:  # argparse has no public list of a parser's options
            _give_type(action)
        subparser.epilog = _epilog(name, subparser)
        subparser.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def _give_type(action: argparse.Action) -> None:
    """The allowlist of an option that brings none (clients/cli_options.py): a plain number gets its finite range
    (NUMBER_MAX), a plain string printable, non-empty text; a flag (nargs 0) takes no value."""
    if action.type in (float, int):
        action.type = number(action.type, 0, NUMBER_MAX)
    elif action.type is None and action.nargs != 0 and not isinstance(action, argparse._SubParsersAction):
        action.type = text


def _epilog(name: str, subparser: argparse.ArgumentParser) -> str:
    """The end of every command's --help: the shared options it does not take (and why), the exit codes."""
    lines = []
    for option in SHARED_OPTIONS:
        if option not in subparser._option_string_actions:  # argparse has no public lookup of an option
            why = NOT_TAKEN.get((name, option), "")
            text = f"{option}: not taken" + (f": {why}" if why else "")
            lines += textwrap.wrap(text, width=110, subsequent_indent="  ")
    return "\n".join([*lines, *([""] if lines else []), exit_codes.table(exit_codes.codes(name))])


def _internal(command: str, exc: BaseException, debug: bool) -> int:
    """A real bug: one line (and the traceback with --debug), exit 3."""
    if debug:
        traceback.print_exc()
    print(
        f"{command}: internal error: {type(exc).__name__}: {shown(exc)} (a bug: rerun with --debug and report it)",
        file=sys.stderr,
    )
    return 3


def main(argv: list[str] | None = None, session=None, clients: dict | None = None, prog: str = "python -m ops") -> int:
    """`session` (a boto3 Session) and `clients` (boto3 clients by service name) let tests pass moto and
    Stubber clients to the AWS commands. boto3 is imported only by the commands that talk to AWS:
    `rehearse` runs on GPU hosts that have no AWS SDK."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = _parser(prog, argv)
    except Unavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    args.aws = (session, clients)
    try:
        return COMMANDS[args.command].run(args)
    except KeyboardInterrupt:
        print(f"{args.command}: stopped by Ctrl-C", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the promise is one line, never a traceback
        return _internal(args.command, exc, args.debug)


def console() -> int:
    """The `pd-inference` console script ([project.scripts] in pyproject.toml)."""
    return main(prog="pd-inference")


if __name__ == "__main__":
    sys.exit(main())
