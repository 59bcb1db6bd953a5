"""A compact, batched, paged DFlash speculative-decoding runner (Qwen3 target + DFlash/DFlash2 draft).

It knows nothing of mutations or of the verify tool.
"""

from runner.engine import Engine, EngineConfig, GenerationOutput
from runner.errors import (
    CacheCapacityError,
    CheckpointError,
    ConfigMismatchError,
    InvalidRequestError,
    PositionInvariantError,
    RunnerError,
    UnsupportedConfigError,
)
from runner.sampling import SamplingParams

__all__ = [
    "CacheCapacityError",
    "CheckpointError",
    "ConfigMismatchError",
    "Engine",
    "EngineConfig",
    "GenerationOutput",
    "InvalidRequestError",
    "PositionInvariantError",
    "RunnerError",
    "SamplingParams",
    "UnsupportedConfigError",
]
