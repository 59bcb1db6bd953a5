"""Model configs: the Qwen3 target and the DFlash/DFlash2 draft, read from and written to HF `config.json` dicts.

A leaf module: frozen records validated on construction. It knows nothing of tensors or weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.config_read import ConfigReader
from runner.errors import CheckpointError, UnsupportedConfigError

DRAFT_KINDS = ("dflash", "dflash2")
LAYER_TYPES = ("full_attention", "sliding_attention")


def _rope_theta(read: ConfigReader) -> float:
    # transformers 5 nests rope settings in `rope_parameters`; older files keep `rope_theta` at top level and a
    # scaling in `rope_scaling`. Both sections are checked: a file whose `rope_parameters` says "default" but
    # whose legacy `rope_scaling` says "yarn" is ambiguous, and running it unscaled would be silently wrong.
    sections = [read.nested(key) for key in ("rope_parameters", "rope_scaling")]
    for params in sections:
        rope_type = params.get("rope_type", params.get("type", "default"))
        if rope_type not in ("default", None):
            raise UnsupportedConfigError(f"{read.where}: rope_type {rope_type!r} is not supported (only 'default')")
    for params in sections:
        if "rope_theta" in params.raw:
            return params.number("rope_theta", positive=True)
    return read.number("rope_theta", 10000.0, positive=True)


@dataclass(frozen=True, slots=True)
class TargetConfig:
    """A Qwen3 dense decoder."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    eos_token_ids: tuple[int, ...] = ()  # generation ends at any of them unless a request opts out

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "max_position_embeddings",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise CheckpointError(f"config field {name} must be a positive integer, got {value!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise CheckpointError(
                f"num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if not self.rms_norm_eps > 0 or not self.rope_theta > 0:
            raise CheckpointError("config fields rms_norm_eps and rope_theta must be positive")
        bad = [t for t in self.eos_token_ids if not 0 <= t < self.vocab_size]
        if bad:
            raise CheckpointError(f"eos_token_id {bad} outside the vocab ({self.vocab_size})")

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str = "target") -> TargetConfig:
        read = ConfigReader(raw, where)
        if read.flag("use_sliding_window", False, or_none=True):
            raise UnsupportedConfigError(f"{where}: sliding-window targets are not supported")
        act = read.string("hidden_act", "silu")
        if act != "silu":
            raise UnsupportedConfigError(f"{where}: hidden_act {act!r} is not supported (only 'silu')")
        heads = read.integer("num_attention_heads")
        hidden = read.integer("hidden_size")
        # HF writes null for "same as the attention heads" / "hidden_size // heads".
        kv_heads = read.integer("num_key_value_heads", None, or_none=True)
        head_dim = read.integer("head_dim", None, or_none=True)
        eos = read.get("eos_token_id", None)
        return cls(
            vocab_size=read.integer("vocab_size"),
            hidden_size=hidden,
            intermediate_size=read.integer("intermediate_size"),
            num_hidden_layers=read.integer("num_hidden_layers"),
            num_attention_heads=heads,
            num_key_value_heads=kv_heads or heads,
            head_dim=head_dim or hidden // heads,
            rms_norm_eps=read.number("rms_norm_eps", 1e-6, positive=True),
            rope_theta=_rope_theta(read),
            max_position_embeddings=read.integer("max_position_embeddings", 4096),
            tie_word_embeddings=read.flag("tie_word_embeddings", False),
            attention_bias=read.flag("attention_bias", False),
            eos_token_ids=() if eos is None else read.integers("eos_token_id"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The HF `config.json` of a Qwen3ForCausalLM with these settings."""
        return {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_parameters": {"rope_theta": self.rope_theta, "rope_type": "default"},
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "attention_bias": self.attention_bias,
            "attention_dropout": 0.0,
            "use_sliding_window": False,
            "eos_token_id": _eos_json(self.eos_token_ids),
            "torch_dtype": "float32",
        }


@dataclass(frozen=True, slots=True)
class DraftConfig:
    """A DFlash (or DFlash2) block drafter: Qwen3-style layers fed by tapped target hidden states."""

    target: TargetConfig  # the draft's own layer shapes (hidden, heads, mlp) in Qwen3 form
    num_target_layers: int
    block_size: int
    mask_token_id: int
    target_layer_ids: tuple[int, ...]
    layer_types: tuple[str, ...]
    is_causal: bool | None = None
    sliding_window: int | None = None
    input_embedding_scale: float = 1.0
    output_multiplier: float = 1.0
    final_logit_softcapping: float | None = None
    kind: str = "dflash"
    # DFlash2 only.
    conv_kernel_size: int = 0
    conv_group_size: int = 0
    selector_rank: int = 0
    selector_top_k: int = 0
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise CheckpointError(f"draft block_size must be >= 1, got {self.block_size}")
        if not self.target_layer_ids:
            raise CheckpointError("draft target_layer_ids is empty")
        if len(self.layer_types) != self.target.num_hidden_layers:
            raise CheckpointError(
                f"draft layer_types has {len(self.layer_types)} entries for {self.target.num_hidden_layers} layers"
            )
        bad = [t for t in self.layer_types if t not in LAYER_TYPES]
        if bad:
            raise UnsupportedConfigError(f"draft layer type(s) {bad} not supported")
        if self.kind not in DRAFT_KINDS:
            raise UnsupportedConfigError(f"draft kind {self.kind!r} not in {DRAFT_KINDS}")
        if not 0 <= self.mask_token_id < self.target.vocab_size:
            raise CheckpointError(f"mask_token_id {self.mask_token_id} is outside the vocab")
        if self.kind == "dflash2":
            for name in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"):
                if getattr(self, name) <= 0:
                    raise CheckpointError(f"a DFlash2 draft needs a positive {name}")
            if self.selector_top_k > self.target.vocab_size:
                raise CheckpointError(
                    f"selector_top_k {self.selector_top_k} exceeds the vocab ({self.target.vocab_size})"
                )
            if self.target.hidden_size % self.conv_group_size:
                raise CheckpointError("conv_group_size must divide hidden_size")

    def layer_is_causal(self, layer_idx: int) -> bool:
        """The reference's rule: an explicit `is_causal` wins; else sliding layers are causal, full ones not."""
        if self.is_causal is not None:
            return self.is_causal
        return self.layer_types[layer_idx] == "sliding_attention"

    def layer_window(self, layer_idx: int) -> int | None:
        return self.sliding_window if self.layer_types[layer_idx] == "sliding_attention" else None

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str = "draft") -> DraftConfig:
        shapes = TargetConfig.from_dict({**raw, "use_sliding_window": False}, where)
        read = ConfigReader(raw, where)
        dflash = read.nested("dflash_config")

        def source(name: str) -> ConfigReader:
            # Same lookup order as the reference: dflash_config first, then the top level.
            return dflash if name in dflash.raw else read

        if raw.get("num_target_layers") is None:
            raise CheckpointError(f"{where}: lacks 'num_target_layers' (not a DFlash draft?)")
        num_target_layers = read.integer("num_target_layers")
        if source("mask_token_id").get("mask_token_id", None) is None:
            raise CheckpointError(f"{where}: dflash_config lacks 'mask_token_id'")
        mask_token_id = source("mask_token_id").integer("mask_token_id", minimum=0)
        # Negative layer ids are read here and refused by the fit check, which knows the target.
        layer_ids = source("target_layer_ids").integers("target_layer_ids", None, minimum=None)
        if layer_ids is None:
            layer_ids = default_target_layer_ids(num_target_layers, shapes.num_hidden_layers)
        layer_types = read.strings("layer_types") if raw.get("layer_types") else ()
        if not layer_types:
            sliding = read.flag("use_sliding_window", False, or_none=True)
            max_window = read.integer("max_window_layers", shapes.num_hidden_layers, minimum=0, or_none=True)
            layer_types = tuple(
                "sliding_attention" if sliding and i >= max_window else "full_attention"
                for i in range(shapes.num_hidden_layers)
            )
        kernel_size = source("conv_kernel_size").get("conv_kernel_size", None)
        is_dflash2 = kernel_size is not None or "DFlash2" in str(raw.get("architectures"))

        def dflash2_size(name: str) -> int:
            return source(name).integer(name, 0, minimum=0, or_none=True) or 0

        return cls(
            target=shapes,
            num_target_layers=num_target_layers,
            block_size=source("block_size").integer("block_size", 16),
            mask_token_id=mask_token_id,
            target_layer_ids=tuple(layer_ids),
            layer_types=layer_types,
            is_causal=read.flag("is_causal", None, or_none=True),
            sliding_window=read.integer("sliding_window", None, or_none=True),
            input_embedding_scale=source("input_embedding_scale").number("input_embedding_scale", 1.0),
            output_multiplier=source("output_multiplier").number("output_multiplier", 1.0),
            final_logit_softcapping=source("final_logit_softcapping").number(
                "final_logit_softcapping", None, or_none=True
            ),
            kind="dflash2" if is_dflash2 else "dflash",
            conv_kernel_size=dflash2_size("conv_kernel_size"),
            conv_group_size=dflash2_size("conv_group_size"),
            selector_rank=dflash2_size("selector_rank"),
            selector_top_k=dflash2_size("selector_top_k"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The upstream DFlash `config.json`: Qwen3 fields plus `num_target_layers` and `dflash_config`."""
        out = self.target.to_dict()
        arch = "DFlash2DraftModel" if self.kind == "dflash2" else "DFlashDraftModel"
        dflash: dict[str, Any] = {
            "block_size": self.block_size,
            "mask_token_id": self.mask_token_id,
            "target_layer_ids": list(self.target_layer_ids),
        }
        for name in ("input_embedding_scale", "output_multiplier"):
            if getattr(self, name) != 1.0:
                dflash[name] = getattr(self, name)
        if self.final_logit_softcapping is not None:
            dflash["final_logit_softcapping"] = self.final_logit_softcapping
        if self.kind == "dflash2":
            for name in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"):
                dflash[name] = getattr(self, name)
        out.update(
            architectures=[arch],
            num_target_layers=self.num_target_layers,
            dflash_config=dflash,
            layer_types=list(self.layer_types),
        )
        if self.is_causal is not None:
            out["is_causal"] = self.is_causal
        if self.sliding_window is not None:
            out["sliding_window"] = self.sliding_window
        out.pop("eos_token_id", None)
        return out


def _eos_json(ids: tuple[int, ...]) -> int | list[int] | None:
    """HF's spellings: null, one id, or a list."""
    return None if not ids else ids[0] if len(ids) == 1 else list(ids)


def default_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> tuple[int, ...]:
    """Evenly spaced taps between layer 1 and layer L-3 (the reference's default when none is given)."""
    if num_draft_layers == 1:
        return (num_target_layers // 2,)
    start, end = 1, num_target_layers - 3
    span = end - start
    return tuple(round(start + i * span / (num_draft_layers - 1)) for i in range(num_draft_layers))
