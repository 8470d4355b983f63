"""The CDK app: one cdk.Stage per stage file in config/ (or only `-c stage=NAME`).

Context: `stage` (one stage), `config_dir` (another folder of stage files), `nag` (run cdk-nag; cdk.json
turns it on for every `cdk` command, so synth, diff and deploy all gate on it). The delivery pipeline is
built when `config/_pipeline.yaml` exists and no single stage is asked for.

The only place that reads CDK context. A bad stage file stops here with one line and exit code 2,
before any construct exists, so no half-written cloud assembly is left behind.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

# jsii's Node.js runtime, which the CDK imports below start, inherits this environment. Its end-of-life and
# deprecation banners (a dozen lines on stderr, Node 20 here) are silenced as scripts/env.sh does, so that a
# bad stage file is one line also under `python app.py` and `cdk synth` (cdk.json runs app.py without
# env.sh). A value the caller set is kept.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

# A signal (Ctrl-C, SIGTERM, SIGHUP) at any moment of a run ends it with one line and 128+N, and an interrupted
# synth leaves its output folder empty rather than half-written.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
INTERRUPTED: list[int] = []
ENDED: list[int] = []  # main's exit code, once it has one


def _stop(signum: int, frame: Any) -> None:
    for number in STOP_SIGNALS:  # a second Ctrl-C cannot cut the clean-up short
        signal.signal(number, signal.SIG_IGN)
    INTERRUPTED.append(signum)
    if ENDED:  # Python's exit (jsii's atexit hook) would swallow the KeyboardInterrupt, print it, and exit 0
        print(f"app.py: stopped by signal {signum} as it exited", file=sys.stderr, flush=True)
        os._exit(128 + signum)
    raise KeyboardInterrupt


def _stopped(output: str | None) -> NoReturn:
    """Empty `output` (the cloud assembly folder, which the CDK CLI made), say so, and exit without jsii's exit
    hooks: its Node process took the signal too, and its hooks would fail on the closed pipe."""
    folder = Path(output) if output else None
    for path in folder.iterdir() if folder and folder.is_dir() else ():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    emptied = f": {output} emptied, no half-written synth left" if output else ", before the synth"
    print(f"app.py: stopped by signal {INTERRUPTED[0]}{emptied}", file=sys.stderr, flush=True)
    os._exit(128 + INTERRUPTED[0])


# The project's own packages: a module of theirs missing is a bug to show whole, not a venv to set up again.
PROJECT_PACKAGES = frozenset({"charts", "clients", "config", "localcluster", "ops", "serving_lab", "stacks"})


def _lacks(missing: ModuleNotFoundError) -> NoReturn:
    """A venv older than the requirement files, where or whenever the import: one line, exit 2."""
    if (missing.name or "").split(".")[0] in PROJECT_PACKAGES:
        raise missing
    print(f"app.py: this venv lacks the module {missing.name!r}: run scripts/setup.sh, then again", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    for number in STOP_SIGNALS:
        signal.signal(number, _stop)

try:
    from charts import render
    from config import CONFIG_DIR, ConfigError, load_stages, secret_scan
    from config.errors import short
    from config.pipeline import load_pipeline
    from config.schema import is_valid_name
    from stacks import assembly
except KeyboardInterrupt:
    _stopped(None)
except ModuleNotFoundError as missing:
    _lacks(missing)

# The CDK modules just loaded are hundreds of thousands of long-lived objects, none of them garbage: frozen,
# Python's cycle collector skips them in every later collection and at exit (0.24 s of a 2.0 s synth;
# docs/DECISIONS.md, "Synth process tuning, measured").
gc.freeze()


def main(context: dict | None = None, outdir: str | None = None) -> int:
    """`context`/`outdir` are for in-process callers (tests); the CDK CLI passes both in the
    environment (CDK_CONTEXT_JSON, CDK_OUTDIR), which cdk.App reads itself."""
    app = assembly.new_app(context, outdir)
    try:
        only, config_dir, nag = _context(app.node.try_get_context)
    except ContextError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        # Their warnings become the stages' CDK annotations (stacks/stage.py), which `cdk synth` prints.
        stages = load_stages(config_dir, only=only, warn=lambda line: None)
        pipeline = None if only else load_pipeline(config_dir, [cfg.stage for cfg in stages])
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    output = str(app.outdir)  # read while jsii's Node process is alive: a signal ends it too
    try:
        code = _synth(app, stages, nag, pipeline)
        ENDED.append(code)  # a signal from here on leaves the output whole
        return code
    except ModuleNotFoundError as missing:  # one imported only when used (cdk_nag, CDK Pipelines)
        _lacks(missing)
    except BaseException:
        if not INTERRUPTED:
            raise
        _stopped(output)


def _synth(app: Any, stages: list, nag: bool, pipeline: Any) -> int:
    built = assembly.build(app, stages, nag=nag, pipeline=pipeline)
    try:
        app.synth()
    except RuntimeError as exc:  # a validation plugin (cdk-nag) failed; its report is printed above
        if "ValidationFailed" not in str(exc):
            raise
        print(f"synth: {exc}", file=sys.stderr)
        return 1
    render.write(app.outdir, [stage.rendering() for stage in built])
    # Nothing secret-shaped may leave a synth (templates, manifests, rendered YAML): a finding fails it,
    # naming the file, line and kind, never the value. The stage files are checked before (config/rules/).
    findings = secret_scan.scan(Path(app.outdir))
    if findings:
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        print(
            f"synth: {Path(app.outdir) / findings[0].path}:{findings[0].line}: {findings[0].kind} in the "
            f"output{more}: remove it from the stage file or the code that put it there (value not shown)",
            file=sys.stderr,
        )
        return 1
    return 0


class ContextError(Exception):
    """A CDK context value of the wrong type or form: one line naming the key, exit 2."""


# `-c nag=false` arrives as a string, cdk.json's `"nag": true` as JSON.
_NAG = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _context(get: Any) -> tuple[str | None, Any, bool]:
    """(stage or None, config folder, nag) from the context, each checked for what it must be: JSON
    (CDK_CONTEXT_JSON, cdk.json) can hold a number, a list or an object where a name belongs. null or a
    missing key is the default."""
    stage, config_dir, nag = get("stage"), get("config_dir"), get("nag")
    if stage is not None and not is_valid_name(stage):  # the stage file name's own rule (config/schema.py)
        raise ContextError(
            f"cdk context stage: {short(stage)} is not a stage name (allowed: a <stage>.yaml's "
            f"name: lowercase letters, digits and '-', e.g. -c stage=dev)"
        )
    if config_dir is not None and not (isinstance(config_dir, str) and config_dir.strip() and config_dir.isprintable()):
        raise ContextError(
            f"cdk context config_dir: {short(config_dir)} is not a folder path (allowed: the path "
            f"of a folder of stage files, e.g. -c config_dir=config)"
        )
    if nag is None:
        flag = False
    elif isinstance(nag, bool):
        flag = nag
    elif isinstance(nag, (str, int)) and str(nag).lower() in _NAG:
        flag = _NAG[str(nag).lower()]
    else:
        raise ContextError(
            f"cdk context nag: {short(nag)} is not true or false (allowed: true, false, 1, 0, yes, "
            f"no, e.g. -c nag=false)"
        )
    return stage, config_dir or CONFIG_DIR, flag


if __name__ == "__main__":
    try:
        ENDED.append(main())
    except KeyboardInterrupt:
        _stopped(None)  # before the synth wrote anything
    sys.exit(ENDED[-1])
