#!/usr/bin/env python3
"""The Python payload of the serving image, measured from PyPI: the wheels pip resolves for the image's vLLM, Ray
and torch on CPython 3.13 x86_64, their compressed size and their unpacked size (read from each wheel's zip
directory by HTTP range requests, nothing downloaded whole). config/versions.py DLC_IMAGE_COMPRESSED_GIB rests on it.
    .venv/bin/python scripts/image_payload.py
Needs pypi.org and files.pythonhosted.org; a minute or two."""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path

# The image's packages (aws/deep-learning-containers docs/ray-llm/changelog/index.md, "Ray LLM v1.0").
REQUIREMENTS = ("vllm==0.26.0", "ray[llm]==2.58.0", "torch==2.11.0")
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(39, 4, -1)] + ["manylinux2014_x86_64", "linux_x86_64"]


class RangeFile:
    """A seekable view of a URL, read by HTTP range requests (zipfile needs only the end and the directory)."""

    def __init__(self, url: str) -> None:
        self.url, self.pos = url, 0
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as answer:
            self.size = int(answer.headers["Content-Length"])

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = (0, self.pos, self.size)[whence] + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end - 1}"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            data = answer.read()
        self.pos += len(data)
        return data


def resolved_wheels() -> list[str]:
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed"]
        command += ["--report", str(report), "--only-binary", ":all:", "--python-version", "3.13"]
        command += ["--implementation", "cp", "--target", str(Path(scratch) / "t")]
        command += [arg for platform in PLATFORMS for arg in ("--platform", platform)]
        subprocess.run(command + list(REQUIREMENTS), check=True)
        return [item["download_info"]["url"] for item in json.loads(report.read_text())["install"]]


def sizes(url: str) -> tuple[int, int]:
    wheel = RangeFile(url)
    return wheel.size, sum(entry.file_size for entry in zipfile.ZipFile(wheel).infolist())  # type: ignore[arg-type]


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    urls = resolved_wheels()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        measured = list(pool.map(sizes, urls))
    compressed, unpacked = (sum(column) / 2**30 for column in zip(*measured, strict=True))
    print(
        f"{len(urls)} wheels for {', '.join(REQUIREMENTS)}: {compressed:.2f} GiB compressed, "
        f"{unpacked:.2f} GiB unpacked (ratio {unpacked / compressed:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
