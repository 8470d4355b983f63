"""CloudFormation's resource schemas, as cfn-lint ships them: the `createOnlyProperties` of a resource type
(a change to one of them replaces the resource). cfn-lint comes with the main set-up (requirements.txt); a venv
made before it did says what to run (`needs_cfn_lint`), before minutes of synth."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from .model import DiffError


@functools.cache
def create_only(resource_type: str) -> tuple[str, ...]:
    import cfnlint

    schemas = Path(cfnlint.__file__).parent / "data" / "schemas"
    providers = json.loads((schemas / "providers" / "us-east-1.json").read_text())
    digest = providers.get(resource_type)
    if digest is None:
        return ()
    schema = json.loads((schemas / "resources" / f"{digest}.json").read_text())
    return tuple(p.removeprefix("/properties/") for p in schema.get("createOnlyProperties", []))


def needs_cfn_lint() -> None:
    """The replacement analysis reads CloudFormation's resource schemas from cfn-lint: without it (a venv older
    than the pin), one line that says what to run, before minutes of synth."""
    try:
        import cfnlint  # noqa: F401
    except ImportError:
        raise DiffError(
            "cfn-lint is not installed in this venv (ops diff reads CloudFormation's resource schemas "
            "from it): run scripts/setup.sh, then ops diff again"
        ) from None
