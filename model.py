"""
A small GPT whose position encoding can be switched: rope (default), sinusoidal, learned, alibi or none.

nanoGPT-shaped: pre-LayerNorm blocks, causal attention through F.scaled_dot_product_attention, GELU MLP,
tied input/output embeddings. What is particular to this project:
  * RoPE comes from rope.py. inv_freq and the attention factor of a static type are computed once (a
    non-persistent float32 buffer: it follows .to(device) and stays out of the checkpoint); cos/sin are built
    for the length actually run (no table, no cap); only the dynamic types recompute inv_freq per length;
  * the RoPE scaling (PI, NTK, YaRN, ...) is part of the config and can be switched on a trained model
    with `set_rope_scaling`, which touches no weight;
  * `forward(..., reduction='none')` returns the loss of every token, which is what eval.py plots;
  * `forward(..., pos=...)` takes explicit position ids (PoSE), for every position encoding;
  * ALiBi (Press et al. 2022) adds -m_h·(i - j) to the scores of head h, as a float mask built per query chunk;
  * `forward(..., kv_cache=KVCache())` decodes incrementally and `generate` samples with it; the cache is exact
    (logits equal a full forward of the prefix) under every position encoding and rope type, see KVCache;
  * `attention_entropy` is a slower, chunked manual attention path used only for diagnostics;
  * a position map (ReRoPE, Leaky ReRoPE, Self-Extend: config.position_map, position_maps.py, switchable with
    `set_position_map`) runs attention through `CausalSelfAttention.extended_attention`, an exact chunked path;
    every other model keeps the SDPA path.
"""

import math
import os
from dataclasses import dataclass, asdict, fields

import torch
import torch.nn as nn
from torch.nn import functional as F
from tqdm import tqdm

from rope import rope_inv_freq, rope_cos_sin, apply_rope, check_scaling, is_dynamic
from position_maps import (ALIBI_CHUNK, MappedRope, alibi_bias, alibi_slopes, check_position_map, mapped_logits,
                           position_map_positions)

POS_EMBS = ('rope', 'sinusoidal', 'learned', 'alibi', 'none')


@dataclass
class GPTConfig:
    block_size: int = 128       # sequence length trained at; also the table size of a `learned` embedding
    vocab_size: int = 65
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = False
    pos_emb: str = 'rope'       # rope | sinusoidal | learned | alibi | none
    rope_base: float = 10000.0
    rope_scaling: dict = None   # Hugging Face style rope_scaling dict, None = plain RoPE
    position_map: dict = None   # ReRoPE / Self-Extend, e.g. {'method': 'rerope', 'window': 64} (position_maps.py)
    smear_keys: bool = False    # per-head learned mix of the previous position's key into each key (Olsson et al.)

    def __post_init__(self):
        for key in ('block_size', 'vocab_size', 'n_layer', 'n_head', 'n_embd'):
            if getattr(self, key) < 1:
                raise ValueError(f"{key}={getattr(self, key)!r} is out of range; it must be a positive integer")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout={self.dropout} is out of range; it must be in [0, 1)")
        if self.pos_emb not in POS_EMBS:
            raise ValueError(f"pos_emb={self.pos_emb!r} is unknown; use one of {', '.join(POS_EMBS)}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if self.pos_emb == 'rope' and (self.n_embd // self.n_head) % 2:
            raise ValueError(f"head_dim={self.n_embd // self.n_head} must be even for rope; change n_embd or n_head")
        if self.rope_scaling is not None and self.pos_emb != 'rope':
            raise ValueError(f"rope_scaling is set but pos_emb={self.pos_emb!r}; scaling only applies to pos_emb='rope'")
        self.rope_scaling = check_scaling(self.rope_scaling)
        if self.position_map is not None and self.pos_emb != 'rope':
            raise ValueError(f"position_map is set but pos_emb={self.pos_emb!r}; a position map re-rotates RoPE's "
                             f"queries and keys, so it needs pos_emb='rope'")
        self.position_map = check_position_map(self.position_map)


# The table's entries have rms 1/sqrt(2); the token embeddings start at std 0.02 (GPT-2 init). Unscaled, position
# drowns the tokens (the original Transformer scaled its embeddings up by sqrt(d_model) instead): our 0.8M CPU model
# then stalled at val loss 2.4 instead of 1.55. Scaled to rms 0.02, the table starts like a learned one.
SINUSOIDAL_SCALE = 0.02 * math.sqrt(2)


def sinusoidal_table(positions, n_embd, device=None):
    """The original Transformer's absolute encoding: PE[m, 2i] = sin(m / 10000^(2i/n)), PE[m, 2i+1] = cos(...).
    positions: an int T (positions 0..T-1) or a tensor of position ids of any shape -> [*positions.shape, n_embd]."""
    if isinstance(positions, int):
        positions = torch.arange(positions, device=device)
    pos = positions.to(torch.float32)[..., None]
    inv = torch.exp(torch.arange(0, n_embd, 2, device=pos.device, dtype=torch.float32) * (-math.log(10000.0) / n_embd))
    pe = torch.zeros(*positions.shape, n_embd, device=pos.device)
    pe[..., 0::2] = torch.sin(pos * inv)
    pe[..., 1::2] = torch.cos(pos * inv)
    return pe


class KVCache:
    """What GPT.forward(idx, kv_cache=cache) keeps between calls to decode incrementally: the tokens fed so far, every
    layer's keys (rotated) and values, and the RoPE frequencies they were computed with. One cache per batch of
    sequences; a new generation starts with a new (or reset) cache.

    Exact for every position encoding and rope type: the logits equal a full forward over the same prefix.
    Static types: a token's keys and values never change as the sequence grows, so each is computed once.
    Dynamic types (dynamic, dynamic_yarn) change frequencies and temperature with the current length l. Caching keys
    unrotated and rotating them at use with l's tables (Hugging Face's fix for transformers #25104 / #27226) repairs
    the first layer only: deeper keys and values are functions of hidden states that were computed at the old scale
    (measured on a 2-layer model: next-token logits off by 1e-2). So when l's frequencies differ from the cached ones
    (or set_rope_scaling was called in between), the forward recomputes the whole prefix and refills the cache: as
    fast as any cache while the scale holds still (l <= L for dynamic, l <= factor*L for dynamic_yarn), a full
    forward per step beyond."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.ids = None                   # (B, l) every token fed so far
        self.keys, self.values = [], []   # per layer (B, n_head, l, head_dim)
        self.freqs = None                 # (inv_freq, attention_factor) the cached states were computed with

    @property
    def length(self):
        """Tokens fed so far (a property, not __len__, so that an empty cache is not falsy)."""
        return 0 if self.ids is None else self.ids.size(1)

    def attend(self, layer, q, k, v):
        """Append the new tokens' k, v to `layer`; causal attention of the new queries over all of its keys."""
        if layer == len(self.keys):
            self.keys.append(k)
            self.values.append(v)
        else:
            self.keys[layer] = k = torch.cat((self.keys[layer], k), dim=2)
            self.values[layer] = v = torch.cat((self.values[layer], v), dim=2)
        T, S = q.size(2), k.size(2)
        if T == S:  # nothing cached before (a prompt, or a recomputed prefix)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        # query i (position S - T + i) sees keys 0 .. S - T + i; SDPA's is_causal would align the mask top-left
        mask = None if T == 1 else torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout
        self.register_buffer('alibi_slopes', alibi_slopes(config.n_head) if config.pos_emb == 'alibi' else None,
                             persistent=False)
        if config.smear_keys:  # gate sigmoid(smear) per head, 0.5 at init
            self.smear = nn.Parameter(torch.zeros(config.n_head, 1, 1))

    def qkv(self, x, rope):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hd)
        if hasattr(self, 'smear'):  # k_t += g_h (k_{t-1} - k_t), on the content, before RoPE puts it at position t
            k = k + torch.sigmoid(self.smear).to(k.dtype) * (F.pad(k, (0, 0, 1, -1)) - k)
        if rope is not None:
            cos, sin = rope
            q, k = apply_rope(q, cos.to(q.dtype), sin.to(q.dtype)), apply_rope(k, cos.to(k.dtype), sin.to(k.dtype))
        return q, k, v

    def forward(self, x, rope, kv_cache=None, layer=0):
        if isinstance(rope, MappedRope):  # a position map (ReRoPE, Self-Extend): the exact chunked path
            return self.resid_dropout(self.c_proj(self.extended_attention(x, rope)))
        B, T, C = x.size()
        q, k, v = self.qkv(x, rope)
        if kv_cache is not None:
            y = kv_cache.attend(layer, q, k, v)
        elif self.alibi_slopes is not None:
            y = self.alibi_attention(q, k, v)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))

    def alibi_attention(self, q, k, v):
        """softmax(q·k/√hd + alibi_bias)·v, one chunk of queries at a time, each reading only the keys up to its
        last query. The queries are the last q.size(2) of the k.size(2) positions (all of them in a plain forward)."""
        first, ys = k.size(2) - q.size(2), []
        for a in range(first, k.size(2), ALIBI_CHUNK):
            b = min(a + ALIBI_CHUNK, k.size(2))
            ys.append(F.scaled_dot_product_attention(q[:, :, a - first:b - first], k[:, :, :b], v[:, :, :b],
                                                     attn_mask=alibi_bias(self.alibi_slopes, a, b, b).to(q.dtype),
                                                     dropout_p=self.dropout if self.training else 0.0))
        return torch.cat(ys, dim=2)

    def attention_probs(self, x, rope, chunk_size=256):
        """Manual attention, yielding (query_start, probs[B, nh, chunk, T]) one chunk of queries at a time.
        Same math as SDPA (softmax(q·k/√hd) under a causal mask); memory O(chunk·T) instead of O(T²).
        Under a position map, the probabilities of extended_attention (zero beyond each chunk's last key)."""
        if isinstance(rope, MappedRope):
            for s, p, _ in self.mapped_probs(x, rope, chunk_size):
                yield s, F.pad(p, (0, x.size(1) - p.size(-1)))
            return
        q, k, _ = self.qkv(x, rope)
        T = q.size(2)
        scale = 1.0 / math.sqrt(q.size(-1))
        for s in range(0, T, chunk_size):
            att = (q[:, :, s:s + chunk_size] @ k.transpose(-2, -1)).float() * scale
            if self.alibi_slopes is not None:
                att = att + alibi_bias(self.alibi_slopes, s, min(s + chunk_size, T), T)
            qpos = torch.arange(s, min(s + chunk_size, T), device=x.device)[:, None]
            att = att.masked_fill(torch.arange(T, device=x.device)[None, :] > qpos, float('-inf'))
            yield s, F.softmax(att, dim=-1)

    def mapped_qkv(self, x, rope):
        """Under a position map (a MappedRope): near = (q, k) rotated at their own positions, far = (q, k) rotated at
        the map's query / key positions, and v."""
        q, k, v = self.qkv(x, None)  # not rotated yet: each map rotates them at its own positions
        rot = lambda t, cos, sin: apply_rope(t, cos.to(t.dtype), sin.to(t.dtype))
        (cos, sin), (q_cos, q_sin, k_cos, k_sin) = rope.near, rope.far
        return (rot(q, cos, sin), rot(k, cos, sin)), (rot(q, q_cos, q_sin), rot(k, k_cos, k_sin)), v

    def mapped_probs(self, x, rope, chunk_size):
        """Under a position map, one chunk of queries s..e-1 at a time: yields (s, probs[B, nh, e-s, e], v[:, :, :e]),
        probs = softmax(mapped_logits / sqrt(hd)) over keys 0..e-1. Memory O(chunk·T)."""
        near, far, v = self.mapped_qkv(x, rope)
        T, scale = v.size(2), 1.0 / math.sqrt(v.size(-1))
        for s in range(0, T, chunk_size):
            e = min(s + chunk_size, T)
            yield s, F.softmax(mapped_logits(near, far, rope.pos, rope.window, s, e).mul_(scale), dim=-1), v[:, :, :e]

    def extended_attention(self, x, rope, chunk_size=128):
        """Causal attention under a position map (ReRoPE, Leaky ReRoPE, Self-Extend; position_maps.py), computed
        exactly from two score maps merged by the distance mask (mapped_logits), in query chunks: memory
        O(chunk·T), so T = 4096 fits on a CPU. x (B, T, C) -> (B, T, C), before c_proj. forward() takes this path
        only when the model has a position map; every other model uses SDPA."""
        B, T, C = x.size()
        ys = [F.dropout(p, self.dropout, self.training).to(v.dtype) @ v
              for _, p, v in self.mapped_probs(x, rope, chunk_size)]
        return torch.cat(ys, dim=2).transpose(1, 2).reshape(B, T, C)


class MLP(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x, rope, kv_cache=None, layer=0):
        x = x + self.attn(self.ln_1(x), rope, kv_cache, layer)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        if config.pos_emb == 'learned':
            self.transformer['wpe'] = nn.Embedding(config.block_size, config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self._build_rope()
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def get_num_params(self):
        """Parameters, counting the tied embedding once (position tables included when learned)."""
        return sum(p.numel() for p in self.parameters())

    @property
    def head_dim(self):
        return self.config.n_embd // self.config.n_head

    def set_rope_scaling(self, scaling):
        """Switch the RoPE scaling (None = plain RoPE). Validated by rope.check_scaling; no weight changes:
        only the non-persistent inv_freq buffer and the attention factor are rebuilt."""
        if self.config.pos_emb != 'rope':
            raise ValueError(f"this model uses pos_emb={self.config.pos_emb!r}; RoPE scaling needs pos_emb='rope'")
        scaling = check_scaling(scaling)
        rope_inv_freq(self.head_dim, self.config.rope_base, scaling)  # e.g. a per-pair list must match head_dim
        self.config.rope_scaling = scaling
        self._build_rope()

    def set_position_map(self, position_map):
        """Switch a position map on a trained model (None = off), e.g. {'method': 'rerope', 'window': 64}. Validated by
        position_maps.check_position_map; no weight changes. It composes with the model's rope_scaling."""
        if self.config.pos_emb != 'rope':
            raise ValueError(f"this model uses pos_emb={self.config.pos_emb!r}; a position map needs pos_emb='rope'")
        self.config.position_map = check_position_map(position_map)

    def _build_rope(self, device=None):
        """inv_freq (float32, a non-persistent buffer) and the attention factor, validated and computed once here
        instead of at every forward. For a dynamic type they are its values at l = L; rope_freqs recomputes them."""
        c = self.config
        self.rope_dynamic = is_dynamic(c.rope_scaling)
        if c.pos_emb != 'rope':
            self.register_buffer('rope_inv_freq', None, persistent=False)
            return
        inv_freq, self.rope_attention_factor = rope_inv_freq(self.head_dim, c.rope_base, c.rope_scaling)
        device = self.lm_head.weight.device if device is None else device
        self.register_buffer('rope_inv_freq', inv_freq.to(device), persistent=False)

    def _apply(self, fn, *args, **kwargs):
        # .to(device) moves the buffer like any other; a cast such as model.bfloat16() would round theta (positions
        # 256 and 257 are one bf16 number), so the buffer is rebuilt in float32 on its new device instead.
        super()._apply(fn, *args, **kwargs)
        if self.rope_inv_freq is not None and self.rope_inv_freq.dtype != torch.float32:
            self._build_rope(self.rope_inv_freq.device)
        return self

    def rope_freqs(self, seq_len):
        """(inv_freq float32 on the model's device, attention factor) for a forward of length seq_len: the stored
        pair for a static type; a dynamic type recomputes it for seq_len (host math, one small copy)."""
        if not self.rope_dynamic:
            return self.rope_inv_freq, self.rope_attention_factor
        c = self.config
        inv_freq, attention_factor = rope_inv_freq(self.head_dim, c.rope_base, c.rope_scaling, seq_len=seq_len)
        return inv_freq.to(self.rope_inv_freq.device), attention_factor

    def rope_tables(self, positions, span=None, freqs=None):
        """cos/sin in float32 for position ids: an int T (0..T-1) or a tensor (T,) or (B, T); shape (T, head_dim), or
        (B, 1, T, head_dim) to broadcast over the heads. span is the length a dynamic type scales for: the forward's
        length, max position + 1 (read from the positions when not given). freqs: rope_freqs(span) if known."""
        if isinstance(positions, int):
            positions, span = torch.arange(positions, device=self.rope_inv_freq.device), positions
        if freqs is None and span is None and self.rope_dynamic:
            span = int(positions.max()) + 1
        inv_freq, attention_factor = freqs or self.rope_freqs(span)
        cos, sin = rope_cos_sin(inv_freq, positions, attention_factor)
        return (cos, sin) if cos.dim() == 2 else (cos[:, None], sin[:, None])

    def mapped_rope(self, rope, T):
        """The ordinary tables plus the position map's far tables (same frequencies and attention factor, a dynamic
        type at length T) for positions 0..T-1: a MappedRope, which sends attention down extended_attention."""
        inv_freq, attention_factor = self.rope_freqs(T)
        pos = torch.arange(T)  # the far positions in float64 on the host (MPS has no float64); rope_cos_sin moves them
        q_pos, k_pos = position_map_positions(self.config.position_map, pos)
        far = rope_cos_sin(inv_freq, q_pos, attention_factor) + rope_cos_sin(inv_freq, k_pos, attention_factor)
        return MappedRope(rope, far, pos.to(inv_freq.device), self.config.position_map['window'])

    def _embed(self, idx, pos=None, span=None, freqs=None):
        """Token embeddings (+ the absolute position embedding at pos) and the RoPE tables for pos (default 0..T-1).
        span: positions are known to lie in [0, span) (see rope_tables); when None they are read back from pos, a
        device sync, only where needed (learned, dynamic rope)."""
        B, T = idx.size()
        c = self.config
        if pos is None:
            pos, span = torch.arange(T, device=idx.device), T
        elif c.pos_emb == 'alibi':
            raise ValueError("pos_emb='alibi' reads its distances from the token order; call the model with pos=None")
        elif not (isinstance(pos, torch.Tensor) and pos.dtype in (torch.int32, torch.int64)
                  and tuple(pos.shape) in ((T,), (B, T))):
            got = f"{pos.dtype} tensor of shape {tuple(pos.shape)}" if isinstance(pos, torch.Tensor) else type(pos).__name__
            raise ValueError(f"pos must be an integer tensor of shape ({T},) or ({B}, {T}), the position id of every "
                             f"token of idx; got a {got}")
        else:
            pos = pos.to(idx.device)
        x = self.transformer.wte(idx)
        if c.pos_emb == 'learned':
            lo, hi = (0, span - 1) if span is not None else (int(pos.min()), int(pos.max()))
            if lo < 0 or hi >= c.block_size:
                raise ValueError(f"position {hi if lo >= 0 else lo} is outside the learned position table (positions 0.."
                                 f"{c.block_size - 1}, block_size={c.block_size}); learned positions cannot run past it")
            x = x + self.transformer.wpe(pos)
        elif c.pos_emb == 'sinusoidal':
            x = x + SINUSOIDAL_SCALE * sinusoidal_table(pos, c.n_embd).to(x.dtype)
        rope = self.rope_tables(pos, span, freqs) if c.pos_emb == 'rope' else None
        if c.position_map is not None:  # ReRoPE / Self-Extend: the far tables travel with the ordinary ones
            if span != T:
                raise ValueError("a position map (ReRoPE, Self-Extend) runs on positions 0..T-1; call it with pos=None")
            rope = self.mapped_rope(rope, T)
        return self.transformer.drop(x), rope

    def _embed_cached(self, idx, cache):
        """_embed for the tokens that follow the cache's: positions past .. l-1, l = past + T. When the rope frequencies
        for l differ from the cached ones (a dynamic type's scale moved), the cache is dropped and the whole prefix
        recomputed (see KVCache); the returned x then covers all l tokens."""
        B, T = idx.size()
        past = cache.length
        if past and cache.ids.size(0) != B:
            raise ValueError(f"kv_cache holds {cache.ids.size(0)} sequences but idx has {B}; use one cache per batch "
                             f"(or cache.reset())")
        freqs = self.rope_freqs(past + T) if self.config.pos_emb == 'rope' else None
        if past and freqs is not None and not (freqs[1] == cache.freqs[1] and (
                freqs[0] is cache.freqs[0] or torch.equal(freqs[0], cache.freqs[0]))):  # static types: the same buffer
            idx, past = torch.cat((cache.ids, idx), dim=1), 0
            cache.reset()
        x, rope = self._embed(idx, torch.arange(past, past + idx.size(1), device=idx.device), past + idx.size(1), freqs)
        cache.ids = idx if past == 0 else torch.cat((cache.ids, idx), dim=1)
        cache.freqs = freqs
        return x, rope

    def forward(self, idx, targets=None, reduction='mean', pos=None, kv_cache=None):
        """idx (B, T) token ids -> logits (B, T, vocab). With targets: loss, a scalar (reduction='mean')
        or the per-token negative log-likelihood in nats (reduction='none', shape (B, T)).
        pos: optional position ids, a LongTensor (T,) or (B, T) (default 0..T-1), e.g. PoSE's skipped positions.
        RoPE is built at those positions (a dynamic type scales for max(pos) + 1 tokens); sinusoidal and learned
        tables are read at them (learned ones only inside their table).
        kv_cache: a KVCache; idx then holds the tokens that follow those already in the cache (their positions go on
        from there, so pos cannot be given), and the cache takes them in. Exact for every position encoding."""
        if kv_cache is None:
            x, rope = self._embed(idx, pos)
        elif self.cache_blocker():
            raise ValueError(f"the KV cache does not cover {self.cache_blocker()}; run without it (kv_cache=None)")
        elif pos is not None:
            raise ValueError("pos and kv_cache cannot be combined: the cache numbers positions itself (0, 1, ... over "
                             "every token fed); drop pos")
        else:
            x, rope = self._embed_cached(idx, kv_cache)
        for i, block in enumerate(self.transformer.h):
            x = block(x, rope, kv_cache, i)
        if kv_cache is not None:
            x = x[:, -idx.size(1):]  # a recomputed prefix (dynamic types) yields logits for idx's tokens only
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1),
                               ignore_index=-1, reduction=reduction)
        return logits, loss.view(targets.shape) if reduction == 'none' else loss

    @torch.no_grad()
    def attention_entropy(self, idx, chunk_size=256):
        """Entropy (nats) of every query's attention distribution: tensor (n_layer, B, n_head, T).
        Runs the manual attention path in query chunks, so T=4096 fits in a few GB on a CPU."""
        x, rope = self._embed(idx)
        out = []
        for block in self.transformer.h:
            h = block.ln_1(x)
            ent = torch.empty(idx.size(0), self.config.n_head, idx.size(1), device=idx.device)
            for s, p in block.attn.attention_probs(h, rope, chunk_size):
                ent[:, :, s:s + p.size(2)] = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
            out.append(ent)
            x = block(x, rope)
        return torch.stack(out)

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        """AdamW; weight decay on matrices only (not on biases, LayerNorm gains)."""
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [{'params': [p for p in params if p.dim() >= 2], 'weight_decay': weight_decay},
                  {'params': [p for p in params if p.dim() < 2], 'weight_decay': 0.0}]
        fused = device_type == 'cuda'
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=fused)

    def flops_per_token(self, T):
        """Approximate training FLOPs per token (PaLM appendix B): 6N + 12·L·C·T."""
        c = self.config
        return 6 * self.get_num_params() + 12 * c.n_layer * c.n_embd * T

    def cache_blocker(self):
        """What keeps the KV cache from being exact for this model (None: nothing): ALiBi's bias, smeared keys and
        position maps are applied on the uncached paths only, so generate() recomputes the prefix for them."""
        c = self.config
        return ('pos_emb=alibi' if c.pos_emb == 'alibi' else 'smear_keys' if c.smear_keys else
                'a position map (ReRoPE, Self-Extend)' if c.position_map else None)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, kv_cache=True, generator=None, progress=False):
        """Sample max_new_tokens tokens after the prompts idx (B, T) -> (B, T + max_new_tokens). Call model.eval() first.
        temperature > 0 divides the logits; top_k keeps the k likeliest tokens (top_k=1 is greedy); generator (a
        torch.Generator on the model's device) makes the draw reproducible. kv_cache=True prefills the prompt once,
        then feeds one token per step (exact, see KVCache); False runs the whole prefix at every step.
        Learned positions cannot run past block_size: that is refused before anything runs."""
        T, c = idx.size(1), self.config
        if not temperature > 0:
            raise ValueError(f"temperature={temperature} must be > 0 (1 samples the model as it is; top_k=1 is greedy)")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k={top_k} must be >= 1 (or None for no top-k filtering)")
        if T < 1 or max_new_tokens < 0:
            raise ValueError(f"need a prompt of at least one token and max_new_tokens >= 0 (got {T}, {max_new_tokens})")
        if c.pos_emb == 'learned' and T + max_new_tokens > c.block_size:
            raise ValueError(f"prompt ({T}) + max_new_tokens ({max_new_tokens}) = {T + max_new_tokens} tokens run past the "
                             f"learned position table (block_size={c.block_size}); ask for at most "
                             f"{max(c.block_size - T, 0)} new tokens")
        cache = KVCache() if kv_cache and not self.cache_blocker() else None
        step = idx
        for _ in tqdm(range(max_new_tokens), disable=not progress, unit='tok', desc='generating', leave=False):
            logits = (self(step, kv_cache=cache) if cache is not None else self(idx))[0][:, -1, :].float() / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('Inf')
            step = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1, generator=generator)
            idx = torch.cat((idx, step), dim=1)
        return idx


# ----------------------------------------------------------------------------- checkpoints

CKPT_KEYS = ('model', 'model_args')


def load_checkpoint(path, map_location='cpu'):
    """Load one of our checkpoints (a run folder or its ckpt.pt) with weights_only=True: no code in the
    file can run. Raises ValueError naming the file when it is missing, truncated, unsafe or not ours."""
    if os.path.isdir(path):
        path = os.path.join(path, 'ckpt.pt')
    if not os.path.isfile(path):
        raise ValueError(f"checkpoint {path} does not exist; pass a run folder written by train.py or finetune_long.py")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # truncated zip, pickle with globals, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"checkpoint {path} could not be loaded safely ({first[:160]}); "
                         f"it is truncated or not a checkpoint of this project") from None
    if not isinstance(ckpt, dict) or any(not isinstance(ckpt.get(k), dict) for k in CKPT_KEYS):
        raise ValueError(f"checkpoint {path} is not a checkpoint of this project (no 'model'/'model_args')")
    return ckpt


def model_from_checkpoint(ckpt):
    """Rebuild the exact GPT stored in a checkpoint dict (config incl. rope scaling, then weights)."""
    known = {f.name for f in fields(GPTConfig)}
    model = GPT(GPTConfig(**{k: v for k, v in ckpt['model_args'].items() if k in known}))
    state = {k.removeprefix('_orig_mod.').removeprefix('module.'): v for k, v in ckpt['model'].items()}
    model.load_state_dict(state)
    return model


def model_args(model):
    """The model's config as a plain dict (what a checkpoint stores)."""
    return asdict(model.config)
