"""The benchmark tests run the real aiperf (from .venv-bench, installed by the test command) against
the local fake OpenAI server; nothing is downloaded: the tokenizer is built in the test and every
Hugging Face hub address points at a closed local port."""
from __future__ import annotations

from pathlib import Path

import pytest

from ops.bench import aiperf, offline_tokenizer

from ...helpers import ROOT


@pytest.fixture(scope="session")
def aiperf_bin() -> str:
    path = ROOT / ".venv-bench" / "bin" / "aiperf"
    if not path.is_file():
        pytest.fail(f"{path} is missing: the test command (scripts/test.sh) installs it with scripts/setup.sh --dev")
    return aiperf.find_executable(str(path))


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
