"""`pd-inference COMMAND` (the console script scripts/setup.sh installs) or `python -m ops COMMAND`.

  preflight --stage NAME [--suggest]  read-only AWS checks before `cdk deploy`
  verify --stage NAME [--wait SECONDS]
                          checks of the running stage after `cdk deploy`
  verify-remote --stage NAME
                          the same, run inside the stage's VPC on its verify runner (CodeBuild)
  diff --base REF         offline infrastructure diff of the working tree against REF (no AWS access; ops/diff/)
  bench --stage NAME      benchmark the stage's OpenAI endpoint; --compare A B writes a report (serving_lab/bench/)
  rehearse --stage NAME   the stage's serve config on this host's GPUs, checked and benchmarked (serving_lab/rehearse/)
  rehearse-cluster --stage NAME
                          the stage's Kubernetes objects on a local kube-apiserver built from source (localcluster/)
  validate [PATH ...]     the stage files' checks that synth runs, without CDK (also `python -m config validate`)

Every command takes --config-dir DIR (the folder of stage files) and --json (its result as JSON on stdout),
or says in its --help why it does not; and --debug (a traceback on internal errors).

Exit codes (every command):
  0      every hard check passed (diff, bench, validate: done)
  1      a check failed, the cluster cannot be reached, or (diff --fail-on-danger) a destructive change
         or a part of the change trusted code could not judge
  2      bad arguments, stage file or local set-up (an AWS profile that does not exist, an AWS config file
         that does not parse, an AWS endpoint URL that is not a URL, a credential_process that fails or does
         not answer within a minute, an AWS endpoint that does not answer as AWS, git missing; diff: the base
         or a synth failed, an unwritable --markdown file)
  3      an internal error (a bug: please report it, with --debug output)
  128+N  stopped by signal N: 130 Ctrl-C, 143 SIGTERM
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
import textwrap
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from config import CONFIG_DIR, ConfigError, load_stages
from config import __main__ as validate_cli

from . import diff, rehearse_cluster

# Every command has one protocol: `add_parser(sub)` registers its subcommand, `run(args) -> int` runs it
# and returns the exit code, handling the failures it expects (one line each); main() wraps every run in
# the one handler for the rest (a bug: exit 3). bench, rehearse, rehearse-cluster, diff and validate
# (config/__main__.py) are modules; preflight, verify and verify-remote share StageCommand below, because
# their modules import the AWS SDK, which `rehearse` (GPU hosts) must never load: boto3 is imported when
# one of them runs, not when the parser is built. bench and rehearse (serving_lab/) are LazyCommands: their
# modules are imported only when the parser lists every command (--help, an unknown command) or they run,
# so `python -m ops verify` runs from the verify runner's upload (ops/remote.py RUNNER_PATHS: config, ops,
# charts), which holds no serving_lab/.


@dataclass(frozen=True)
class StageCommand:
    """A read-only AWS check of one stage that prints a Report: load the stage file (exit 2 when
    invalid), make the AWS session (exit 2 for a broken local set-up), run, print the table or JSON."""

    name: str
    text: str
    check: Callable  # (cfg, args, session, clients) -> (Report, suggestion or None)
    arguments: Callable[[argparse.ArgumentParser], None] = lambda parser: None

    def add_parser(self, sub) -> None:
        cmd = sub.add_parser(self.name, help=self.text, description=self.text)
        cmd.add_argument("--stage", required=True, help="stage name (config/<stage>.yaml)")
        cmd.add_argument("--config-dir", default=str(CONFIG_DIR), help="folder of stage files")
        cmd.add_argument("--json", action="store_true", help="print the report as JSON (for pipelines)")
        self.arguments(cmd)

    def run(self, args) -> int:
        try:
            (cfg,) = load_stages(args.config_dir, only=args.stage)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
        import boto3

        from . import errors, remote, verify
        from .aws_clients import guard_answers, resolve_credentials

        label = f"{self.name} --stage {cfg.stage}"
        session, clients = args.aws
        try:
            # The local AWS set-up first: a missing profile or an unparsable config file fails when the
            # session is made, an AWS_ENDPOINT_URL that is not a URL when a client is made; none of it
            # calls AWS. The credentials are resolved here, once, within a deadline (a credential_process
            # that never answers would hang the command: botocore waits for it forever); every client
            # of the session refuses an answer that is not AWS's (an HTML page, a proxy's) with one line.
            session = session or boto3.session.Session(region_name=cfg.region)
            guard_answers(session)
            resolve_credentials(session)
            if not (clients or {}).get("sts"):
                session.client("sts", region_name=cfg.region)
            report, snippet = self.check(cfg, args, session, clients)
        except verify.AccessError as exc:
            print(f"{label}: {exc}", file=sys.stderr)
            return 1
        except remote.SourceError as exc:
            print(f"{label}: {exc}", file=sys.stderr)
            return 2
        except Exception as exc:
            problem = errors.setup_problem(exc)
            if not problem:
                raise
            print(f"{label}: {problem}", file=sys.stderr)
            return 2
        if args.json:
            print(report.to_json())
        else:
            print(report.table())
            if snippet:
                print(f"\nSuggested change to {args.config_dir}/{cfg.stage}.yaml:\n{snippet}", end="")
        return report.exit_code


def _preflight(cfg, args, session, clients):
    from . import preflight
    from .aws_clients import Clients

    report, facts = preflight.run(cfg, Clients(session, cfg.region, overrides=clients or {}))
    snippet = preflight.suggestion(cfg, facts) if args.suggest else None
    if snippet:
        report.extra["suggestion"] = snippet
    return report, snippet


def _preflight_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--suggest", action="store_true", help="print a corrected stage snippet when possible")


def _verify(cfg, args, session, clients):
    from . import verify
    from .aws_clients import Clients

    access = verify.cluster_access(cfg, session)
    api = verify.connect(cfg, session, access)
    cloudwatch = Clients(session, cfg.region, overrides=clients or {})
    return verify.run(cfg, api, wait=args.wait, poll=args.poll, cloudwatch=cloudwatch), None


def _verify_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--wait",
        type=number(float, 0, 86400, "seconds"),
        default=0,
        metavar="SECONDS",
        help="wait up to this long for nodes, operator and RayService (tutorial: 900-1800)",
    )
    cmd.add_argument(
        "--poll", type=number(float, 0.1, 3600, "seconds"), default=10, metavar="SECONDS", help=argparse.SUPPRESS
    )


def number(kind: type, low: float, high: float, unit: str = "") -> Callable[[str], float]:
    """An argparse type: a finite `kind` (int or float) from `low` to `high`. Anything else (inf, nan, -1,
    1e400, "ten", a 5000-digit integer) is argparse's one-line error and exit 2: a timeout of inf or nan
    would otherwise reach time.sleep or a deadline as a crash or a wait that never ends."""
    what = "an integer" if kind is int else "a number"
    allowed = f"allowed: {what} from {low:g} to {high:g}" + (f" {unit}" if unit else "")

    def parse(text: str):
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not {what} ({allowed})") from None
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(f"{_shown(text)} ({allowed})")
        return value

    parse.__name__ = kind.__name__
    return parse


def _shown(text: str) -> str:
    text = text if len(text) <= 40 else text[:40] + "..."
    return text if text.isprintable() and text.strip() == text and text else repr(text)


# Every number option of every command (`type=float` or `type=int`, e.g. rehearse's --deploy-timeout)
# that does not bring its own range gets this one in _parser(): seconds and counts are finite, never
# negative, and far below 1e9 s (thread timeouts overflow past threading.TIMEOUT_MAX, about 9.2e9 s).
OPTION_NUMBER_MAX = 1e9


class Unavailable(Exception):
    """A LazyCommand's package is not in this copy of the project (the verify runner's upload has no
    serving_lab/): the one line main() prints, exit 2."""


@dataclass(frozen=True)
class LazyCommand:
    """A command whose module (`bench`, `rehearse`: serving_lab/) is imported only when its parser is built in
    full or it runs. _parser() builds it in full unless the command line names another command: then a bare
    placeholder parser of the same name stands in, which argparse never shows (only the chosen command's help
    and errors are printed, and the top-level usage lists the names alone)."""

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


def _verify_remote(cfg, args, session, clients):
    from . import remote

    return remote.run(cfg, session, remote.PROJECT_ROOT, clients=clients), None


class Command(Protocol):
    """The command protocol: a StageCommand, or a module with these two functions."""

    def add_parser(self, sub) -> object: ...

    def run(self, args) -> int: ...


# In the order `python -m ops --help` lists them.
COMMANDS: dict[str, Command] = {
    "preflight": StageCommand("preflight", "read-only AWS checks before cdk deploy", _preflight, _preflight_arguments),
    "verify": StageCommand("verify", "end-to-end checks of a deployed stage", _verify, _verify_arguments),
    "verify-remote": StageCommand(
        "verify-remote", "run verify inside the stage's VPC, on its CodeBuild verify runner", _verify_remote
    ),
    "bench": LazyCommand("bench", "serving_lab.bench.cli"),
    "rehearse": LazyCommand("rehearse", "serving_lab.rehearse.cli"),
    "rehearse-cluster": rehearse_cluster,
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
EXIT_CODES = __doc__[__doc__.index("Exit codes (every command):") :].rstrip()


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
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Operations checks for a stage, and the project's other commands.",
        epilog=EXIT_CODES,
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
            if action.type in (float, int):
                action.type = number(action.type, 0, OPTION_NUMBER_MAX)
        subparser.epilog = _epilog(name, subparser)
        subparser.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def _epilog(name: str, subparser: argparse.ArgumentParser) -> str:
    """The end of every command's --help: the shared options it does not take (and why), the exit codes."""
    lines = []
    for option in SHARED_OPTIONS:
        if option not in subparser._option_string_actions:  # argparse has no public lookup of an option
            why = NOT_TAKEN.get((name, option), "")
            text = f"{option}: not taken" + (f": {why}" if why else "")
            lines += textwrap.wrap(text, width=110, subsequent_indent="  ")
    return "\n".join([*lines, *([""] if lines else []), EXIT_CODES])


def _internal(command: str, exc: BaseException, debug: bool) -> int:
    """A real bug: one line (and the traceback with --debug), exit 3."""
    if debug:
        traceback.print_exc()
    print(
        f"{command}: internal error: {type(exc).__name__}: {exc} (a bug: rerun with --debug and report it)",
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
