"""The benchmark tests run the real aiperf (from .venv-bench, installed by the test command) against
the local fake OpenAI server; nothing is downloaded: the tokenizer is built in the test and every
Hugging Face hub address points at a closed local port."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from serving_lab.bench import aiperf, offline_tokenizer

from ...helpers import ROOT
from . import measured


@pytest.fixture(scope="session")
def aiperf_bin() -> str:
    path = ROOT / ".venv-bench" / "bin" / "aiperf"
    if not path.is_file():
        pytest.fail(f"{path} is missing: the test command (scripts/test.sh) installs it with scripts/setup.sh --dev")
    return aiperf.find_executable(str(path))


@pytest.fixture(scope="package", autouse=True)
def aiperf_temp(tmp_path_factory):
    """aiperf's temporary files in one folder, removed after this package's tests (passed or failed).

    Each aiperf run leaves in the system temp folder an `aiperf_mmap_<id>/` (it deletes its dataset's
    memory-mapped files, not their folder: aiperf/dataset/memory_map_utils.py) and a `tmpXXXXXXXX/aiperf/`
    of ZMQ ipc sockets (aiperf/config/comm/ipc.py, tempfile.mkdtemp). Both follow tempfile.gettempdir(),
    so TMPDIR (and aiperf's own AIPERF_DATASET_MMAP_BASE_PATH) for the aiperf processes puts them here.
    The folder is short on purpose: a unix socket path has at most 107 bytes. Package scope: the rest
    of the suite (CDK synth, node) keeps the usual TMPDIR."""
    tmp_path_factory.getbasetemp()  # pytest's folders are placed before TMPDIR changes ...
    tempfile.gettempdir()  # ... and this process keeps its temp folder (cached); only children move
    folder = Path(tempfile.mkdtemp(prefix="pytest-aiperf-"))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TMPDIR", str(folder))
            patch.setenv("AIPERF_DATASET_MMAP_BASE_PATH", str(folder))
            yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def offline_hub(tmp_path_factory):
    """HF_HOME in a temporary folder and the hub at a closed port, for every aiperf run of the session."""
    home = tmp_path_factory.mktemp("hf-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HOME", str(home))
        patch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
        patch.delenv("HF_HUB_OFFLINE", raising=False)
        yield home


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory) -> Path:
    return offline_tokenizer.build(tmp_path_factory.mktemp("tokenizer"))


def pytest_terminal_summary(terminalreporter):
    """The accuracy figures the tests measured but do not gate on (see measured.py)."""
    if measured.LINES:
        terminalreporter.section("benchmark accuracy (measured on this machine, not gated: depends on load)")
        for line in measured.LINES:
            terminalreporter.write_line(line)
