"""python -m ops {preflight,verify} --stage NAME [--json] ... | python -m ops diff --base REF

  preflight [--suggest]   read-only AWS checks before `cdk deploy`
  verify [--wait SECONDS] checks of the running stage after `cdk deploy`
  verify-remote           the same, run inside the stage's VPC on its verify runner (CodeBuild)
  diff --base REF         offline infrastructure diff of the working tree against REF (no AWS access)
  bench --stage NAME      benchmark the stage's OpenAI endpoint; --compare A B writes a report (ops/bench/)
  rehearse --stage NAME   run the stage's serve config on this host's GPUs, check and benchmark it (ops/rehearse/)

Exit codes: 0 every hard check passed (diff: done); 1 a check failed, the cluster cannot be reached,
or (diff --fail-on-danger) a destructive change; 2 bad arguments or stage file (diff: the base or a
synth failed); 3 an internal error (a bug: please report it, with --debug output).
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
        result = diff.compute(args.base, stage=args.stage)
    except diff.DiffError as exc:
        print(f"diff: {exc}", file=sys.stderr)
        return 2
    print(diff.text(result), end="")
    if args.markdown:
        Path(args.markdown).write_text(diff.markdown(result))
    return 1 if args.fail_on_danger and result.dangers else 0


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
            if args.debug:
                traceback.print_exc()
            print(f"diff: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 3
    try:
        (cfg,) = load_stages(args.config_dir, only=args.stage)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    import boto3

    from . import preflight, remote, verify

    session = session or boto3.session.Session(region_name=cfg.region)
    try:
        if args.command == "preflight":
            report, facts = preflight.run(cfg, preflight.Clients(session, cfg.region, overrides=clients or {}))
            snippet = preflight.suggestion(cfg, facts) if args.suggest else None
            if snippet:
                report.extra["suggestion"] = snippet
        elif args.command == "verify-remote":
            report = remote.run(cfg, session, Path.cwd(), clients=clients)
            snippet = None
        else:
            try:
                access = verify.cluster_access(cfg, session)
                api = verify.connect(cfg, session, access)
            except verify.AccessError as exc:
                print(f"verify --stage {cfg.stage}: {exc}", file=sys.stderr)
                return 1
            report = verify.run(cfg, api, wait=args.wait, poll=args.poll)
            snippet = None
    except Exception as exc:  # noqa: BLE001 - the promise is one line, never a traceback
        if args.debug:
            traceback.print_exc()
        print(f"{args.command}: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    if args.json:
        print(report.to_json())
    else:
        print(report.table())
        if snippet:
            print(f"\nSuggested change to {args.config_dir}/{cfg.stage}.yaml:\n{snippet}", end="")
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
