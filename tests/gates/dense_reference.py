"""An independent dense implementation of the target and the DFlash draft, straight from the HF folders.

It imports nothing from `runner`: plain torch over the safetensors state dicts, whole sequences, no cache, no
paging, no batching. Gates compare the production paged path against it op by op, so a wrong mask, a skipped
K/V write or a dropped block row shows up in the logits even when no drafted token changes.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch.nn import functional as F


class Checkpoint:
    def __init__(self, folder: Path) -> None:
        self.cfg = json.loads((folder / "config.json").read_text())
        self.w = {k: v.float() for k, v in load_file(str(folder / "model.safetensors")).items()}
        self.heads = self.cfg["num_attention_heads"]
        self.kv_heads = self.cfg["num_key_value_heads"]
        self.head_dim = self.cfg.get("head_dim") or self.cfg["hidden_size"] // self.heads
        self.eps = self.cfg.get("rms_norm_eps", 1e-6)
        params = self.cfg.get("rope_parameters") or {}
        self.theta = params.get("rope_theta", self.cfg.get("rope_theta", 10000.0))


def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """x: [T, heads, d] rotated by its absolute positions [T] (half-split convention)."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2).float() / d)
    angles = positions.float()[:, None] * inv[None]
    cos, sin = torch.cat([angles.cos()] * 2, -1)[:, None], torch.cat([angles.sin()] * 2, -1)[:, None]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """q: [T, H, d]; k, v: [S, KVH, d]; visible: [T, S] -> [T, H * d], written out without SDPA."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    scores = torch.einsum("thd,shd->hts", q, k) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~visible[None], float("-inf"))
    return torch.einsum("hts,shd->thd", scores.softmax(-1), v).reshape(q.shape[0], -1)


def _proj(ck: Checkpoint, prefix: str, x: torch.Tensor, heads: int, norm: str | None) -> torch.Tensor:
    out = (x @ ck.w[f"{prefix}.weight"].T).view(x.shape[0], heads, ck.head_dim)
    return rms(out, ck.w[norm], ck.eps) if norm else out


def _mlp(ck: Checkpoint, p: str, x: torch.Tensor) -> torch.Tensor:
    gate, up = x @ ck.w[f"{p}.mlp.gate_proj.weight"].T, x @ ck.w[f"{p}.mlp.up_proj.weight"].T
    return (F.silu(gate) * up) @ ck.w[f"{p}.mlp.down_proj.weight"].T


def causal_conv(d: Checkpoint, prefix: str, h: torch.Tensor, dynamic: torch.Tensor, which: int) -> torch.Tensor:
    """DFlash2's grouped dynamic causal conv over the block, written per channel: h [T, H], dynamic [T, K, G]."""
    base = d.w[f"{prefix}.base_kernel"][which]  # [K, H]
    group = h.shape[1] // dynamic.shape[2]
    out = torch.zeros_like(h)
    for offset in range(base.shape[0]):
        earlier = torch.zeros_like(h)
        earlier[offset:] = h[: h.shape[0] - offset]  # position t reads t - offset, zero before the block
        out = out + (base[offset] + dynamic[:, offset].repeat_interleave(group, dim=-1)) * earlier
    return out


def conv_prepare(d: Checkpoint, prefix: str, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    kernel, groups = d.cfg["dflash_config"]["conv_kernel_size"], h.shape[1] // d.cfg["dflash_config"]["conv_group_size"]
    dynamic = (h @ d.w[f"{prefix}.kernel_projection.weight"].T).view(h.shape[0], 2, kernel, groups)
    return causal_conv(d, prefix, h, dynamic[:, 0], 0), dynamic[:, 1]


def walk(d: Checkpoint, hidden: torch.Tensor, logits: torch.Tensor, anchor: int) -> list[int]:
    """The candidate selector's greedy walk from the anchor: hidden [N, H] (normed), logits [N, V]."""
    k = d.cfg["dflash_config"]["selector_top_k"]
    pred, succ = d.w["candidate_selector.predecessor_codebook"], d.w["candidate_selector.successor_codebook"]
    projected = hidden @ d.w["candidate_selector.hidden_projection.weight"].T
    previous, path = anchor, []
    for t in range(hidden.shape[0]):
        unary, candidates = logits[t].topk(k)
        scores = unary + (succ[candidates] * (pred[previous] * projected[t])).sum(-1)
        previous = int(candidates[scores.argmax()])
        path.append(previous)
    return path


def walk_distributions(
    d: Checkpoint, hidden: torch.Tensor, logits: torch.Tensor, anchor: int, path: list[int], temperature: float
) -> list[dict[int, float]]:
    """A sampled walk's per-step distribution over its candidates, {candidate id: probability}, along the path it
    took: at step t the predecessor is path[t - 1] (the anchor at t = 0) and q_t = softmax(scores_t / T)."""
    k = d.cfg["dflash_config"]["selector_top_k"]
    pred, succ = d.w["candidate_selector.predecessor_codebook"], d.w["candidate_selector.successor_codebook"]
    projected = hidden @ d.w["candidate_selector.hidden_projection.weight"].T
    previous, out = anchor, []
    for t in range(len(path)):
        unary, candidates = logits[t].topk(k)
        scores = unary + (succ[candidates] * (pred[previous] * projected[t])).sum(-1)
        probs = torch.softmax(scores.double() / temperature, -1)
        out.append({int(c): float(q) for c, q in zip(candidates, probs, strict=True)})
        previous = path[t]
    return out


def target_forward(t: Checkpoint, ids: list[int]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Logits [T, V] and every layer's output as HF's hidden_states[1:] gives it (the last one after the final
    norm) for one causal sequence."""
    pos = torch.arange(len(ids))
    h = t.w["model.embed_tokens.weight"][torch.tensor(ids)]
    causal = pos[None, :] <= pos[:, None]
    outs = []
    for i in range(t.cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        x = rms(h, t.w[f"{p}.input_layernorm.weight"], t.eps)
        q = rope(_proj(t, f"{p}.self_attn.q_proj", x, t.heads, f"{p}.self_attn.q_norm.weight"), pos, t.theta)
        k = rope(_proj(t, f"{p}.self_attn.k_proj", x, t.kv_heads, f"{p}.self_attn.k_norm.weight"), pos, t.theta)
        v = _proj(t, f"{p}.self_attn.v_proj", x, t.kv_heads, None)
        h = h + attention(q, k, v, causal) @ t.w[f"{p}.self_attn.o_proj.weight"].T
        h = h + _mlp(t, p, rms(h, t.w[f"{p}.post_attention_layernorm.weight"], t.eps))
        outs.append(h)
    head = t.w.get("lm_head.weight", t.w["model.embed_tokens.weight"])
    outs[-1] = rms(h, t.w["model.norm.weight"], t.eps)  # HF's hidden_states[L] is taken after the final norm
    return outs[-1] @ head.T, outs


def draft_block(
    d: Checkpoint, t: Checkpoint, context_ids: list[int], anchor: int, size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The draft's block hidden states [size - 1, H] (after the final norm) and logits [size - 1, V] for the
    block [anchor, MASK...] after `context_ids` (length L)."""
    dcfg = d.cfg["dflash_config"]
    _, layer_outs = target_forward(t, context_ids)
    feats = torch.cat([layer_outs[i] for i in dcfg["target_layer_ids"]], -1)
    ctx = rms(feats @ d.w["fc.weight"].T, d.w["hidden_norm.weight"], d.eps)
    L = len(context_ids)
    ctx_pos, blk_pos = torch.arange(L), torch.arange(L, L + size)
    ids = torch.tensor([anchor] + [dcfg["mask_token_id"]] * (size - 1))
    h = t.w["model.embed_tokens.weight"][ids] * dcfg.get("input_embedding_scale", 1.0)
    layer_types = d.cfg.get("layer_types") or ["full_attention"] * d.cfg["num_hidden_layers"]
    for i in range(d.cfg["num_hidden_layers"]):
        p = f"layers.{i}"
        causal = d.cfg.get("is_causal")
        causal = layer_types[i] == "sliding_attention" if causal is None else causal
        key_pos = torch.cat([ctx_pos, blk_pos])
        visible = key_pos[None, :] <= blk_pos[:, None] if causal else torch.ones(size, L + size, dtype=torch.bool)
        x = rms(h, d.w[f"{p}.input_layernorm.weight"], d.eps)
        dflash2 = f"{p}.attention_conv.base_kernel" in d.w
        if dflash2:
            x, after = conv_prepare(d, f"{p}.attention_conv", x)
        q = rope(_proj(d, f"{p}.self_attn.q_proj", x, d.heads, f"{p}.self_attn.q_norm.weight"), blk_pos, d.theta)
        both = torch.cat([ctx, x])
        k = rope(_proj(d, f"{p}.self_attn.k_proj", both, d.kv_heads, f"{p}.self_attn.k_norm.weight"), key_pos, d.theta)
        v = _proj(d, f"{p}.self_attn.v_proj", both, d.kv_heads, None)
        out = attention(q, k, v, visible) @ d.w[f"{p}.self_attn.o_proj.weight"].T
        h = h + (causal_conv(d, f"{p}.attention_conv", out, after, 1) if dflash2 else out)
        x = rms(h, d.w[f"{p}.post_attention_layernorm.weight"], d.eps)
        if dflash2:
            x, after = conv_prepare(d, f"{p}.mlp_conv", x)
            h = h + causal_conv(d, f"{p}.mlp_conv", _mlp(d, p, x), after, 1)
        else:
            h = h + _mlp(d, p, x)
    head = t.w.get("lm_head.weight", t.w["model.embed_tokens.weight"])
    hidden = rms(h, d.w["norm.weight"], d.eps)[1:]
    logits = hidden @ head.T * dcfg.get("output_multiplier", 1.0)
    cap = dcfg.get("final_logit_softcapping")
    return hidden, torch.tanh(logits / cap) * cap if cap else logits


def draft_block_logits(d: Checkpoint, t: Checkpoint, context_ids: list[int], anchor: int, size: int) -> torch.Tensor:
    return draft_block(d, t, context_ids, anchor, size)[1]


def filtered_probs(logits: torch.Tensor, temperature: float, top_p: float = 1.0, top_k: int = 0) -> torch.Tensor:
    """The distribution a request with (temperature, top_p, top_k) samples from, written out per row in float64:
    softmax(logits / T) restricted to the top-k tokens, then to the smallest prefix (by probability) whose mass
    reaches top_p (the token that crosses it included), renormalised. logits: [..., V] -> float32 [..., V]."""
    flat = logits.detach().double().reshape(-1, logits.shape[-1])
    out = torch.zeros_like(flat)
    for row, scores in enumerate(flat):
        probs = torch.softmax(scores / temperature, -1)
        order = probs.argsort(descending=True)
        limit = top_k if top_k > 0 else probs.numel()
        restricted = probs[order[:limit]] / probs[order[:limit]].sum()
        # The walk over the ranks in plain Python numbers (the same float64 values, read once).
        kept, mass = [], 0.0
        for index, share in zip(order[:limit].tolist(), restricted.tolist(), strict=True):
            if mass >= top_p:
                break
            kept.append(index)
            mass += share
        out[row, kept] = probs[kept]
        out[row] /= out[row].sum()
    return out.reshape(logits.shape).float()
