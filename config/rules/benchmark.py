"""Rules of the `benchmark` section (docs/STAGE_FILE.md): every profile fits the served context."""

from __future__ import annotations

from ..errors import ConfigError
from ..schema import StageConfig


def context_fits(cfg: StageConfig, path: str) -> None:
    """Prompt and answer of every profile fit the served context: the smallest max_model_len of the engines the
    mode runs (a PD request is prefilled by one engine and decoded by the other: both hold all of it)."""
    serving = cfg.serving
    lengths = [(serving.engine_for(role).max_model_len, role) for role in serving.engine_roles()]
    context = min(length for length, _ in lengths)
    role = next(role for length, role in lengths if length == context)  # prefill on a tie
    field = serving.engine_field(role, "max_model_len")
    for index, profile in enumerate(cfg.benchmark.profiles):
        needed = profile.input_tokens + profile.output_tokens
        if needed > context:
            raise ConfigError(
                path,
                f"benchmark.profiles[{index}].input_tokens",
                f"{profile.input_tokens} in + {profile.output_tokens} out = {needed} tokens, more than "
                f"the served context {field} {context} (the server would "
                f"reject every request; allowed: at most {context} together)",
            )
