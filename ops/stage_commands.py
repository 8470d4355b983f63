"""The operator's stage commands, `preflight`, `addon-check`, `verify`, `verify-remote` and `leftovers`: read-only
AWS checks of one stage that print a Report. Their modules import the AWS SDK, which `rehearse` (GPU hosts) must
never load: boto3 is imported when one of them runs, not when the parser is built (ops/__main__.py collects them)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

from clients.cli_options import number
from clients.text import shown
from config.stage_options import add_stage_options, load_stage


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
        add_stage_options(cmd)
        cmd.add_argument("--json", action="store_true", help="print the report as JSON (for pipelines)")
        self.arguments(cmd)

    def run(self, args) -> int:
        cfg = load_stage(args)
        if cfg is None:
            return 2
        import boto3

        from . import errors, remote, verify
        from .aws_clients import guard_answers, resolve_credentials

        label = f"{self.name} --stage {cfg.stage}"
        session, clients = args.aws
        try:
            # The local AWS set-up first, none of it calling AWS; the credentials are resolved here, once,
            # within a deadline (botocore would wait for a credential_process forever).
            # Why: docs/DECISIONS.md, "Operations".
            session = session or boto3.session.Session(region_name=cfg.region)
            guard_answers(session)
            resolve_credentials(session)
            if not (clients or {}).get("sts"):
                session.client("sts", region_name=cfg.region)
            report, snippet = self.check(cfg, args, session, clients)
        except verify.AccessError as exc:  # it may quote the cluster's answer: through the one sanitizer
            print(f"{label}: {shown(exc)}", file=sys.stderr)
            if args.json:  # a pipeline reads the failing check on stdout, as preflight's without credentials
                print(verify.unreachable(cfg, exc).to_json())
            return 1
        except remote.SourceError as exc:
            print(f"{label}: {shown(exc)}", file=sys.stderr)
            return 2
        except Exception as exc:
            problem = errors.setup_problem(exc)
            if not problem:
                raise
            print(f"{label}: {shown(problem)}", file=sys.stderr)
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


def _addon_check(cfg, args, session, clients):
    from clients.report import Report

    from . import preflight
    from .aws_clients import Clients

    report = Report("addon-check", cfg.stage)
    preflight.addon_configuration_check(
        cfg, Clients(session, cfg.region, overrides=clients or {}), report, preflight.Facts()
    )
    return report, None


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


def _verify_remote(cfg, args, session, clients):
    from . import remote

    return remote.run(cfg, session, remote.PROJECT_ROOT, clients=clients), None


def _leftovers(cfg, args, session, clients):
    from . import leftovers
    from .aws_clients import Clients

    return leftovers.run(cfg, Clients(session, cfg.region, overrides=clients or {})), None


PREFLIGHT = StageCommand("preflight", "read-only AWS checks before cdk deploy", _preflight, _preflight_arguments)
ADDON_CHECK = StageCommand(
    "addon-check",
    "preflight's CloudWatch add-on check alone (the pipeline runs it before any stage deploys)",
    _addon_check,
)
VERIFY = StageCommand("verify", "end-to-end checks of a deployed stage", _verify, _verify_arguments)
VERIFY_REMOTE = StageCommand(
    "verify-remote", "run verify inside the stage's VPC, on its CodeBuild verify runner", _verify_remote
)
LEFTOVERS = StageCommand(
    "leftovers", "what a destroyed stage left (KMS keys, log groups), with the aws commands that remove it", _leftovers
)
