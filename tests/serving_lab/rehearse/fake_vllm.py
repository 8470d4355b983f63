"""A stand-in `vllm` package on a subprocess's path: `LLM` runs the given body and answers `generate` with each
prompt's first tokens, and the OpenAI frontend's FrontendArgs names the field the plan sets for a real checkpoint
(vllm/entrypoints/openai/cli_args.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

GENERATE = """import json
from types import SimpleNamespace
class SamplingParams:
    def __init__(self, **kwargs):
        self.max_tokens, self.logprobs = kwargs["max_tokens"], kwargs.get("logprobs")
def _top(ids):  # the first token's logprobs: the prompt's first two ids
    return [{ids[0]: SimpleNamespace(logprob=-0.5), ids[1]: SimpleNamespace(logprob=-1.5)}]
def _generate(self, prompts, params, use_tqdm=True):
    return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids[: params.max_tokens],
            logprobs=_top(ids) if params.logprobs else None)]) for ids in prompts]
"""


def install(site: Path, llm_init: str) -> Path:
    """The package under `site` (returned, for PYTHONPATH); `llm_init` is LLM.__init__(self, **kwargs)'s body."""
    package = site / "vllm"
    (package / "entrypoints" / "openai").mkdir(parents=True)
    (package / "__init__.py").write_text(GENERATE + "class LLM:\n    def __init__(self, **kwargs):\n"
                                         + textwrap.indent(llm_init, " " * 8) + "    generate = _generate\n")  # fmt: skip
    (package / "inputs.py").write_text("def TokensPrompt(prompt_token_ids):\n    return prompt_token_ids\n")
    (package / "entrypoints" / "__init__.py").write_text("")
    (package / "entrypoints" / "openai" / "__init__.py").write_text("")
    (package / "entrypoints" / "openai" / "cli_args.py").write_text(
        "from dataclasses import dataclass\n"
        "@dataclass\nclass BaseFrontendArgs:\n    enable_prompt_tokens_details: bool = False\n"
        "@dataclass\nclass FrontendArgs(BaseFrontendArgs):\n    port: int = 8000\n"
    )
    return site
