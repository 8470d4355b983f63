"""Record vLLM's own engine arguments (names and types) as config/vllm_engine_args.json.

vLLM cannot be installed on the CPU machines that validate stage files (a multi-GB CUDA wheel), so the
stage schema checks its engine settings against this record instead, the way the Ray fields are read
from Ray's source. The record is made from the `EngineArgs` dataclass in vllm/engine/arg_utils.py of
the pinned wheel, read with `ast` (nothing is imported); `ops rehearse` compares it with the real
`EngineArgs` on the GPU host.

    python scripts/record_vllm_engine_args.py [--wheel PATH]   # default: pip download vllm==<pin>
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from clients.cli_options import regular_file
from config.versions import VLLM_VERSION

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "config" / "vllm_engine_args.json"
SOURCE = "vllm/engine/arg_utils.py"


def literal_aliases(sources: dict[str, str]) -> dict[str, str]:
    """Module-level `Name = Literal[...]` aliases (e.g. CacheDType), so the record shows the choices."""
    aliases = {}
    for source in sources.values():
        for node in ast.parse(source).body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if isinstance(value, ast.Subscript) and ast.unparse(value.value) == "Literal":
                for target in targets:
                    if isinstance(target, ast.Name):
                        aliases[target.id] = ast.unparse(value)
    return aliases


def resolve(annotation: str, aliases: dict[str, str]) -> str:
    parts = [part.strip() for part in annotation.split(" | ")]
    return " | ".join(aliases.get(part, part) for part in parts)


def engine_args(source: str) -> dict[str, str]:
    """{field: annotation as written} of the EngineArgs dataclass."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "EngineArgs":
            return {
                item.target.id: ast.unparse(item.annotation)
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
    raise LookupError(f"no EngineArgs class in {SOURCE}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", type=regular_file, help=f"a downloaded vllm=={VLLM_VERSION} wheel")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        wheel = args.wheel
        if not wheel:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--platform",
                    "manylinux_2_28_x86_64",
                    "--python-version",
                    "3.12",
                    "-d",
                    work,
                    f"vllm=={VLLM_VERSION}",
                ],
                check=True,
            )
            (wheel,) = Path(work).glob("vllm-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            fields = engine_args(archive.read(SOURCE).decode())
            config_sources = {
                name: archive.read(name).decode()
                for name in archive.namelist()
                if name.startswith("vllm/config/") and name.endswith(".py")
            }
        aliases = literal_aliases({SOURCE: "", **config_sources})
        fields = {name: resolve(annotation, aliases) for name, annotation in fields.items()}
    OUT.write_text(
        json.dumps(
            {"vllm": VLLM_VERSION, "source": SOURCE, "class": "EngineArgs", "fields": dict(sorted(fields.items()))},
            indent=1,
        )
        + "\n"
    )
    print(f"{OUT.relative_to(ROOT)}: {len(fields)} EngineArgs fields of vllm {VLLM_VERSION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
