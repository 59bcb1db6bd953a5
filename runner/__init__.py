"""A compact, batched, paged DFlash speculative-decoding runner (Qwen3 target + DFlash/DFlash2 draft).

It knows nothing of mutations or of the verify tool.

The map: `engine` (wires the rest into `generate`) with `engine_config` (its settings and per-request result);
`scheduler` (who runs next), `request` (one request's state), `batch` (the running rows), `block_manager` (free
and used pages) and `kv_cache` (paged K/V storage); the models: `target` (the Qwen3 target), `draft` (the DFlash
block drafter), `dflash2` (DFlash2's additions), `layers` (their shared maths), `proposer` (drafting one block
per row); `sampling` (sampling and the acceptance rule); loading: `config` and `config_read` (model configs and
typed reads of them), `checkpoint` (HF folders), `loader` (modules built and checked to fit); `trace` (the
per-step trace), `errors` (the named errors), `compat` (the Python 3.10 shim). `fixtures/` holds the shipped
fixture pairs (package data, no code).
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
