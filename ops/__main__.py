"""python -m ops {preflight,verify} --stage NAME [--json] ... | python -m ops diff --base REF

  preflight [--suggest]   read-only AWS checks before `cdk deploy`
  verify [--wait SECONDS] checks of the running stage after `cdk deploy`
  verify-remote           the same, run inside the stage's VPC on its verify runner (CodeBuild)
  diff --base REF         offline infrastructure diff of the working tree against REF (no AWS access)
  bench --stage NAME      benchmark the stage's OpenAI endpoint; --compare A B writes a report (ops/bench/)
  rehearse --stage NAME   run the stage's serve config on this host's GPUs, check and benchmark it (ops/rehearse/)

Exit codes: 0 every hard check passed (diff: done); 1 a check failed, the cluster cannot be reached,
or (diff --fail-on-danger) a destructive change; 2 bad arguments, stage file or local set-up (an AWS
profile that does not exist, an AWS config file that does not parse, an AWS endpoint URL that is not a
URL, git missing; diff: the base or a synth failed, an unwritable --markdown file); 3 an internal error
(a bug: please report it, with --debug output).
"""
from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import Optional

from config import CONFIG_DIR, ConfigError, load_stages

from .bench import cli as bench_cli
from .rehearse import cli as rehearse_cli


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ops", description="Operations checks for a stage.")
    parser.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("preflight", "read-only AWS checks before cdk deploy"),
                       ("verify", "end-to-end checks of a deployed stage"),
                       ("verify-remote", "run verify inside the stage's VPC, on its CodeBuild verify runner")):
        cmd = sub.add_parser(name, help=text, description=text)
        cmd.add_argument("--stage", required=True, help="stage name (config/<stage>.yaml)")
        cmd.add_argument("--config-dir", default=str(CONFIG_DIR), help="folder of stage files")
        cmd.add_argument("--json", action="store_true", help="print the report as JSON (for pipelines)")
        if name == "preflight":
            cmd.add_argument("--suggest", action="store_true", help="print a corrected stage snippet when possible")
        elif name == "verify":
            cmd.add_argument("--wait", type=float, default=0, metavar="SECONDS",
                             help="wait up to this long for nodes, operator and RayService (tutorial: 900-1800)")
            cmd.add_argument("--poll", type=float, default=10, metavar="SECONDS", help=argparse.SUPPRESS)
    bench_cli.add_parser(sub)
    rehearse_cli.add_parser(sub)
    diff = sub.add_parser("diff", help="offline diff against a git revision (no AWS access)",
                          description="Synthesize REF and the working tree without credentials and compare them.")
    diff.add_argument("--base", required=True, metavar="REF", help="git revision to compare with (e.g. origin/main)")
    diff.add_argument("--stage", help="only this stage (default: every stage)")
    diff.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown (for a PR comment)")
    diff.add_argument("--fail-on-danger", action="store_true",
                      help="exit 1 when the cluster, a nodegroup, the VPC or the KMS key would be replaced or deleted")
    return parser


def _diff(args) -> int:
    from . import diff

    try:
        if args.markdown:
            diff.check_writable(Path(args.markdown))  # before minutes of synth, not after
        result = diff.compute(args.base, stage=args.stage)
        print(diff.text(result), end="")
        if args.markdown:
            diff.write_markdown(Path(args.markdown), result)
    except diff.DiffError as exc:
        print(f"diff: {exc}", file=sys.stderr)
        return 2
    return 1 if args.fail_on_danger and result.dangers else 0


def _internal(command: str, exc: BaseException, debug: bool) -> int:
    """A real bug: one line (and the traceback with --debug), exit 3."""
    if debug:
        traceback.print_exc()
    print(f"{command}: internal error: {type(exc).__name__}: {exc} (a bug: rerun with --debug and report it)",
          file=sys.stderr)
    return 3


def main(argv: Optional[list[str]] = None, session=None, clients: Optional[dict] = None) -> int:
    """`session` (a boto3 Session) and `clients` (boto3 clients by service name) let tests pass moto and
    Stubber clients. boto3 is imported only by the commands that talk to AWS: `rehearse` runs on GPU
    hosts that have no AWS SDK."""
    args = _parser().parse_args(argv)
    for name, command in (("bench", bench_cli.run), ("rehearse", rehearse_cli.run)):
        if args.command != name:
            continue
        try:
            return command(args)
        except Exception as exc:  # noqa: BLE001
            if args.debug:
                traceback.print_exc()
            print(f"{name}: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 3
    if args.command == "diff":
        try:
            return _diff(args)
        except Exception as exc:  # noqa: BLE001
            return _internal("diff", exc, args.debug)
    try:
        (cfg,) = load_stages(args.config_dir, only=args.stage)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    import boto3

    from . import errors, preflight, remote, verify

    label = f"{args.command} --stage {cfg.stage}"
    try:
        # The local AWS set-up first: a missing profile or an unparsable config file fails when the session
        # is made, an AWS_ENDPOINT_URL that is not a URL when a client is made; none of it calls AWS.
        session = session or boto3.session.Session(region_name=cfg.region)
        if not (clients or {}).get("sts"):
            session.client("sts", region_name=cfg.region)
        if args.command == "preflight":
            report, facts = preflight.run(cfg, preflight.Clients(session, cfg.region, overrides=clients or {}))
            snippet = preflight.suggestion(cfg, facts) if args.suggest else None
            if snippet:
                report.extra["suggestion"] = snippet
        elif args.command == "verify-remote":
            report = remote.run(cfg, session, remote.PROJECT_ROOT, clients=clients)
            snippet = None
        else:
            access = verify.cluster_access(cfg, session)
            api = verify.connect(cfg, session, access)
            report = verify.run(cfg, api, wait=args.wait, poll=args.poll)
            snippet = None
    except verify.AccessError as exc:
        print(f"{label}: {exc}", file=sys.stderr)
        return 1
    except remote.SourceError as exc:
        print(f"{label}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the promise is one line, never a traceback
        problem = errors.setup_problem(exc)
        if problem:
            print(f"{label}: {problem}", file=sys.stderr)
            return 2
        return _internal(args.command, exc, args.debug)
    if args.json:
        print(report.to_json())
    else:
        print(report.table())
        if snippet:
            print(f"\nSuggested change to {args.config_dir}/{cfg.stage}.yaml:\n{snippet}", end="")
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
