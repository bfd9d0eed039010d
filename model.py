"""
nanoGPT's GPT (pre-LayerNorm blocks, SDPA attention, GELU MLP, tied embeddings) with a switchable position encoding:
rope (default), sinusoidal, learned, alibi, fire, cope or none. RoPE comes from rope.py; its scaling (PI, NTK, YaRN,
...) is part of the config, and `set_rope_scaling` switches it on a trained model without touching a weight. As in
2025-26 models, each layer may differ (`layers`): RoPE or NoPE, a window or chunk, its own base, scaled or not
(rope_scaling['layers']), or a short convolution in place of attention (LFM2 / LFM3: lab/conv.py). The Llama family
is the same GPT with options: RMSNorm, SwiGLU, grouped-query heads (n_kv_head), q/k/v biases, an untied head; lab/hf
loads GGUF files and Hugging Face folders into it.

Seams for lab/ (imported by none of this file): `forward(pos=ids)` runs tokens at given positions (PoSE, KV cache),
which a windowed or chunked layer's mask counts too; `forward(rope=[(cos, sin) per RoPE group])` takes ready-made
tables; `forward(attend=fn)`: fn(layer, q, k, v) -> y (q, k rotated) in every layer instead of causal attention (cache,
position maps, crop); `ATTENTION` holds attention classes.
"""

import importlib
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

from rope import apply_rope, longrope_start_tokens, rope_cos_sin
from rope_config import check_scaling, is_dynamic, parse_layers, rope_inv_freq, scaled_layers

POS_EMBS = ('rope', 'sinusoidal', 'learned', 'alibi', 'fire', 'cope', 'none')
BIASES = {'alibi': 'ALiBi', 'fire': 'FIRE', 'cope': 'CoPE'}  # the pos_embs in their attention class (a room), by name
NORMS = ('layernorm', 'rmsnorm')
MLPS = ('gelu', 'swiglu')

@dataclass
class GPTConfig:
    block_size: int = 128       # sequence length trained at; also the table size of a `learned` embedding
    vocab_size: int = 65
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = False
    pos_emb: str = 'rope'       # rope | sinusoidal | learned | alibi | fire | cope | none
    rope_base: float = 10000.0
    rope_scaling: dict = None   # Hugging Face style rope_scaling dict, None = plain RoPE
    attention: str = 'causal'   # a class of ATTENTION: 'causal' here; rooms add more (ATTENTION_ROOMS: 'smear_keys', ...)
    layers: str = None          # per layer: RoPE or NoPE, window, chunk, base, or conv ('3*conv,rope'); None = RoPE all
    norm: str = 'layernorm'     # layernorm | rmsnorm (Llama)
    norm_eps: float = 1e-5
    mlp: str = 'gelu'           # gelu | swiglu (Llama: down(silu(gate(x)) * up(x)))
    n_ffn: int = None           # the MLP's hidden width; None = 4 * n_embd
    n_kv_head: int = None       # key/value heads (grouped-query attention); None = n_head
    qkv_bias: bool = False      # biases on q, k, v only (Qwen2); `bias` puts them everywhere
    tie_embeddings: bool = True # the head shares the token embedding's weights
    partial_rotary_factor: float = 1.0  # GPT-NeoX's rotary_pct: the first p * head_dim dims turn (base over them)
    learned_freqs: bool = False # LeRoPE (Mistral Large 4): pair i turns at theta_i * exp(alpha_i), alpha learned

    @property
    def attention_class(self):
        return self.pos_emb if self.pos_emb in BIASES else self.attention  # ALiBi, FIRE: lab/alibi.py, lab/fire.py

    def __post_init__(self):
        self.n_kv_head = self.n_head if self.n_kv_head is None else self.n_kv_head  # the defaults: nanoGPT's
        self.n_ffn = 4 * self.n_embd if self.n_ffn is None else self.n_ffn
        check_config(self)  # every field in range, or one line naming the one that is not
        self.rope_scaling = check_scaling(self.rope_scaling, self.rope_base)  # HF forms too (lab/hf/config.py)
        layer_specs(self)  # the pattern, and the layers the scaling aims at (rope_scaling['layers']), checked

    @property
    def rotary_dim(self):  # the dims that turn (HF: int(head_dim * partial_rotary_factor), rounded down to a pair)
        return int(self.n_embd // self.n_head * self.partial_rotary_factor) // 2 * 2

def layer_specs(config):
    """Each layer's LayerSpec (rope_config.parse_layers; RoPE only with pos_emb='rope') and whether it is scaled."""
    specs = [s._replace(rope=s.rope and config.pos_emb == 'rope') for s in
             parse_layers(config.layers, config.n_layer, config.rope_base, config.block_size)]
    return specs, scaled_layers(specs, config.rope_scaling)

def rope_groups(config):
    """The RoPE tables a model needs, [(base, rope_scaling or None)], and each layer's index into them (None: NoPE).
    The default model has one, (rope_base, rope_scaling); Gemma 3's local and global layers two."""
    groups, index = [], []
    for spec, scaled in zip(*layer_specs(config)):
        key = (spec.base, config.rope_scaling if scaled else None)
        if spec.rope and key not in groups:
            groups.append(key)
        index.append(groups.index(key) if spec.rope else None)
    return groups, index


# Unscaled (rms 1/sqrt(2)) the table drowns the tokens (std 0.02): our CPU model stalled at val loss 2.4, not 1.55
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

def allowed(i, n_keys, window=None, chunk=None, first=0, pos=None):
    """Which keys first..n_keys-1 the queries at positions i (a tensor) may see: j <= i, and i - j < window if set, and
    i // chunk == j // chunk if set (chunked local attention: the keys start again at every chunk edge). pos: the
    tokens' position ids (T,) or (B, T) when they skip (PoSE): the window and chunks are then of those positions, the
    distances RoPE was given, while j <= i stays the token order; the mask is (B, 1, queries, keys) with (B, T)."""
    j, pi, pj = torch.arange(first, n_keys, device=i.device), i, None
    if pos is not None:
        pi = pos[:, None].gather(2, i.expand(len(pos), 1, -1)) if pos.dim() == 2 else pos[i]
        pj = pos[:, None, None, first:n_keys] if pos.dim() == 2 else pos[first:n_keys]
    i, pi, pj = i[..., None], pi[..., None], j if pj is None else pj
    ok = (j <= i) & ((pj > pi - window) if window else True)
    return ok & (pj // chunk == pi // chunk) if chunk else ok

def local_attention(q, k, v, window, chunk, dropout_p=0.0, block=512, pos=None):
    """Causal SDPA in a window or chunk with no T x T mask: each block of queries s..e-1 against only the keys
    lo..e-1 its first query can reach (a later query reaches no further back), masked inside that slice. Exact (the
    keys outside the slice are masked for the whole block), differentiable, about T x (block + window) scores.
    pos: position ids (T,) or (B, T), increasing (PoSE's): the window and chunk are of positions, so a key within
    reach is fewer than window (or chunk) tokens back."""
    ys = []
    for s in range(0, q.size(2), block):
        e = min(s + block, q.size(2))
        if pos is None:
            lo = max(s - window + 1 if window else 0, s // chunk * chunk if chunk else 0)
            mask = allowed(torch.arange(s, e, device=q.device), e, window, chunk, first=lo)
        else:
            lo = max(s - min(w for w in (window, chunk) if w) + 1, 0)
            mask = allowed(torch.arange(s, e, device=q.device), e, window, chunk, lo, pos)
        ys.append(F.scaled_dot_product_attention(q[:, :, s:e], k[:, :, lo:e], v[:, :, lo:e], attn_mask=mask,
                                                 dropout_p=dropout_p))
    return torch.cat(ys, 2)

def rotate(q, k, rope):
    """q and k rotated by rope = (cos, sin) float32 tables; unchanged when rope is None (no RoPE)."""
    return (q, k) if rope is None else tuple(apply_rope(x, *(t.to(x.dtype) for t in rope)) for x in (q, k))

class CausalSelfAttention(nn.Module):

    def __init__(self, config, spec):  # spec: this layer's LayerSpec (layer_specs); a subclass takes and passes both
        super().__init__()
        self.window, self.chunk = spec.window, spec.chunk  # its sliding window of keys or its chunk (None: all keys)
        self.n_head, self.n_kv_head, self.n_embd = config.n_head, config.n_kv_head, config.n_embd
        self.dropout = config.dropout
        self.kv_dim = config.n_kv_head * (config.n_embd // config.n_head)  # rows of k (and of v) in c_attn: q, k, v
        self.c_attn = nn.Linear(config.n_embd, config.n_embd + 2 * self.kv_dim, bias=config.bias or config.qkv_bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def qkv(self, x, rope):
        """(q, k, v), each (B, n_head, T, head_dim), q and k rotated at their positions; with grouped-query heads
        each key/value head is repeated for its n_head // n_kv_head query heads, so every room sees n_head heads."""
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split((C, self.kv_dim, self.kv_dim), dim=2)
        q, k, v = (t.view(B, T, -1, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        q, k = rotate(q, k, rope)  # (before repeating: fewer keys to turn)
        if self.n_kv_head != self.n_head:
            k, v = (t.repeat_interleave(self.n_head // self.n_kv_head, dim=1) for t in (k, v))
        return q, k, v

    def logits(self, q, k, s, e):
        """Scaled float32 scores of queries s..e-1 against keys 0..e-1, -inf where j > i (for rooms that need them)."""
        att = (q[:, :, s:e] @ k[:, :, :e].transpose(-2, -1)).float() / math.sqrt(q.size(-1))
        ok = allowed(torch.arange(s, e, device=q.device), e, self.window, self.chunk)
        return att.masked_fill(~ok, float('-inf'))

    def attend(self, q, k, v, at=None, pos=None):
        """Causal attention (SDPA) in the layer's window or chunk; with at (B, K), q holds only the queries at `at`.
        pos: the tokens' position ids (T,) or (B, T) where they skip (PoSE): a window or chunk of positions."""
        p = self.dropout if self.training else 0.0
        if at is None and self.window is None and self.chunk is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
        if at is not None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed(at[:, None, :], k.size(2), self.window,
                                                                             self.chunk, pos=pos), dropout_p=p)
        return local_attention(q, k, v, self.window, self.chunk, p, pos=pos)

    def forward(self, x, rope, attend=None):
        B, T, C = x.size()
        q, k, v = self.qkv(x, rope)
        y = self.attend(q, k, v) if attend is None else attend(q, k, v)  # attend may return fewer queries (at=)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, -1, C)))

ATTENTION = {'causal': CausalSelfAttention}  # config.attention -> class; the rooms add theirs, on first use:
ATTENTION_ROOMS = {'smear_keys': 'lab.smeared_keys', 'ssmax': 'lab.temperature', 'smear_keys_ssmax': 'lab.temperature',
                   'logpos': 'lab.temperature', 'smear_keys_logpos': 'lab.temperature',
                   'sinks': 'lab.sinks', 'smear_keys_sinks': 'lab.sinks', 'gated': 'lab.gated',
                   'smear_keys_gated': 'lab.gated', 'alibi': 'lab.alibi', 'fire': 'lab.fire', 'cope': 'lab.cope',
                   'inkling': 'lab.inkling',
                   'fope': 'lab.fope', 'fope_learned': 'lab.fope', 'smear_keys_fope': 'lab.fope',
                   'smear_keys_fope_learned': 'lab.fope',
                   'conv': 'lab.conv'}  # (not an attention: a conv layer's token mixer, layers='conv,...')

def attention_class(name):
    """The class of config.attention_class: model.py's own, or the one its room (ATTENTION_ROOMS) adds to ATTENTION
    when it is first imported, which a model of that class does here."""
    if name not in ATTENTION and name in ATTENTION_ROOMS:
        importlib.import_module(ATTENTION_ROOMS[name])
    return ATTENTION[name]

class MLP(nn.Module):
    width = 1  # c_fc's outputs per hidden unit

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, self.width * config.n_ffn, bias=config.bias)
        self.c_proj = nn.Linear(config.n_ffn, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))

class SwiGLU(MLP):
    """Llama's MLP, down(silu(gate(x)) * up(x)): c_fc holds gate's rows, then up's (one matmul for both)."""
    width = 2

    def forward(self, x):
        gate, up = self.c_fc(x).chunk(2, dim=-1)
        return self.dropout(self.c_proj(F.silu(gate) * up))

class RMSNorm(nn.Module):
    """Llama's RMSNorm, weight * x / rms(x), computed in float32 as Llama does; no bias."""

    def __init__(self, n, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

    def forward(self, x):
        return self.weight * F.rms_norm(x.float(), (x.size(-1),), eps=self.eps).to(x.dtype)

def norm(config):
    """A new normalisation layer of the config's kind: nanoGPT's LayerNorm (bias as config.bias) or RMSNorm."""
    if config.norm == 'rmsnorm':
        return RMSNorm(config.n_embd, config.norm_eps)
    return nn.LayerNorm(config.n_embd, eps=config.norm_eps, bias=config.bias)

class Block(nn.Module):

    def __init__(self, config, spec):
        super().__init__()
        self.ln_1 = norm(config)
        self.attn = attention_class('conv' if spec.conv else config.attention_class)(config, spec)
        self.ln_2 = norm(config)
        self.mlp = SwiGLU(config) if config.mlp == 'swiglu' else MLP(config)

    def forward(self, x, rope, attend=None):  # rope: this layer's (cos, sin), None in a NoPE layer
        x = x + self.attn(self.ln_1(x), rope, attend)
        return x + self.mlp(self.ln_2(x))

class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config, spec) for spec in layer_specs(config)[0]]),
            ln_f=norm(config),
        ))
        if config.pos_emb == 'learned':
            self.transformer['wpe'] = nn.Embedding(config.block_size, config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.transformer.wte.weight = self.lm_head.weight  # weight tying
        # LeRoPE's alpha: one per turning pair, for the whole model (every layer and RoPE group), float32, 0 at init
        self.rope_alpha = nn.Parameter(torch.zeros(config.rotary_dim // 2)) if config.learned_freqs else None
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

    @property
    def rotary_dim(self):
        return self.config.rotary_dim

    def set_rope_scaling(self, scaling):
        """Switch the RoPE scaling (None = plain RoPE), checked; no weight changes: inv_freq and the factor are rebuilt."""
        if self.config.pos_emb != 'rope':
            raise ValueError(f"this model uses pos_emb={self.config.pos_emb!r}; RoPE scaling needs pos_emb='rope'")
        scaling = check_scaling(scaling, self.config.rope_base)
        rope_inv_freq(self.head_dim, self.config.rope_base, scaling, None, self.rotary_dim)  # e.g. a per-pair list
        scaled_layers(layer_specs(self.config)[0], scaling)  # refused if it scales no RoPE layer
        self.config.rope_scaling = scaling
        self._build_rope()

    def _build_rope(self, device=None):
        """Per RoPE group (rope_groups), inv_freq (float32, non-persistent buffers: rope_inv_freq is group 0's) and
        the attention factor, computed once, not at every forward (a dynamic type: at l = L; rope_freqs recomputes);
        rope_index[layer]: the layer's group (None: NoPE), which a scaling aimed at some layers only moves."""
        self.rope_groups, self.rope_index = rope_groups(self.config)
        self.rope_dynamic = is_dynamic(self.config.rope_scaling)
        device = self.lm_head.weight.device if device is None else device
        self.register_buffer('rope_inv_freq', None, persistent=False)  # (stays None without a RoPE layer)
        self.rope_attention_factors = []
        for g, (base, scaling) in enumerate(self.rope_groups):
            inv_freq, attention_factor = rope_inv_freq(self.head_dim, base, scaling, None, self.rotary_dim)
            self.register_buffer('rope_inv_freq' + (f'_{g}' if g else ''), inv_freq.to(device), persistent=False)
            self.rope_attention_factors.append(attention_factor)

    def _apply(self, fn, *args, **kwargs):
        # a cast such as model.bfloat16() would round theta (256 and 257 are one bf16 number): rebuilt in float32
        super()._apply(fn, *args, **kwargs)
        if self.rope_inv_freq is not None and self.rope_inv_freq.dtype != torch.float32:
            self._build_rope(self.rope_inv_freq.device)
        return self

    def rope_freqs(self, seq_len, group=0):
        """(inv_freq float32 on the model's device, attention factor) of a RoPE group for a forward of length
        seq_len: the stored pair for a static type; a dynamic type recomputes it for seq_len (host math, one copy)."""
        stored = getattr(self, 'rope_inv_freq' + (f'_{group}' if group else ''))
        if not self.rope_dynamic or seq_len is None:
            return self.with_alpha(stored), self.rope_attention_factors[group]
        inv_freq, attention_factor = rope_inv_freq(self.head_dim, *self.rope_groups[group], seq_len=seq_len,
                                                   rotary_dim=self.rotary_dim)
        return self.with_alpha(inv_freq.to(stored.device)), attention_factor

    def with_alpha(self, inv_freq):
        """Learned frequencies (Mistral Large 4's LeRoPE, transformers' MistralLarge4TextRotaryEmbedding): the angle
        of pair i at position m is m * theta_i * exp(alpha_i), theta the static (scaled, or a dynamic type's
        recomputed) frequencies kept in their buffers, alpha learned; the attention factor is untouched. Pass-through
        pairs of a partial rotation stay at theta = 0. Without learned_freqs (alpha None), inv_freq itself."""
        if self.rope_alpha is None:
            return inv_freq
        scale = self.rope_alpha.float().exp()  # exp(0) = 1 exactly: the static model, bit for bit, at init
        return inv_freq * F.pad(scale, (0, inv_freq.numel() - scale.numel()), value=1.0)

    def rope_tables(self, positions, group=0):
        """(cos, sin) in float32 of a RoPE group (rope_groups) for position ids: an int T (0..T-1) or a tensor (T,) or
        (B, T); shape (T, head_dim), or (B, 1, T, head_dim) to broadcast over the heads. A dynamic type scales for max
        position + 1 tokens."""
        span = positions if isinstance(positions, int) else int(positions.max()) + 1 if self.rope_dynamic else None
        if isinstance(positions, int):
            positions = torch.arange(positions, device=self.lm_head.weight.device)
        base, scaling = self.rope_groups[group]
        inv_freq, attention_factor = self.rope_freqs(span, group)
        on = (scaling or {}).get('attention_factor_on', 'all')  # the temperature on every dim, or the turning pairs'
        cos, sin = rope_cos_sin(inv_freq, positions, attention_factor, rotary_only=on == 'rotary')
        n_hat = (scaling or {}).get('start_token_idx', 0)  # longrope: positions < n_hat stay plain
        if n_hat:
            plain = rope_inv_freq(self.head_dim, base, None, None, self.rotary_dim)[0]  # (pass-through pairs stay)
            plain = self.with_alpha(plain.to(inv_freq.device))  # (learned frequencies: these times exp(alpha) too)
            cos, sin = longrope_start_tokens(cos, sin, positions, plain, n_hat)
        return (cos, sin) if cos.dim() == 2 else (cos[:, None], sin[:, None])

    def forward(self, idx, targets=None, reduction='mean', pos=None, attend=None, rope=None, at=None):
        """idx (B, T) token ids -> (logits (B, T, vocab), loss): a scalar (reduction='mean') or per-token NLL in nats
        (reduction='none', (B, T)), None without targets. pos: position ids (T,) or (B, T), default 0..T-1 (dynamic
        types scale for max(pos) + 1). attend: fn(layer, q, k, v) -> y instead of causal attention. rope: ready tables,
        a list of one (cos, sin) per RoPE group, as [rope_tables(pos, g) for g in range(len(rope_groups))] gives them
        (lab/measure/scoring.py's row_tables). at: (B, K) positions, the only outputs wanted (logits and loss (B, K)):
        the last layer runs just their queries (_last_layer_at); not with attend."""
        check_forward(self, idx, pos, attend, at)
        T, given = idx.size(1), pos is not None
        pos = torch.arange(T, device=idx.device) if pos is None else pos.to(idx.device)
        x = self.transformer.drop(self.embed(idx, pos, given))
        if rope is None:  # one (cos, sin) per RoPE group (none without RoPE), computed once for all its layers
            rope = [self.rope_tables(pos if given else T, g) for g in range(len(self.rope_groups))]
        tables = [None if g is None else rope[g] for g in self.rope_index]  # each layer's own (None: NoPE)
        for i, (block, table) in enumerate(zip(self.transformer.h, tables)):
            ids = pos if given and attend is None and (block.attn.window or block.attn.chunk) else None
            if at is not None and i == self.config.n_layer - 1:  # (only the queries at `at`)
                x = self._last_layer_at(block, x, table, at, ids)
            else:
                x = block(x, table, layer_seam(block, i, attend, ids))
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits, None
        targets = targets if at is None else targets.gather(1, at)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1),
                               ignore_index=-1, reduction=reduction)
        return logits, loss.view(targets.shape) if reduction == 'none' else loss

    def embed(self, idx, pos, given):
        """The token embedding plus an absolute position's (learned or sinusoidal; RoPE and the biases add none)."""
        c, x = self.config, self.transformer.wte(idx)
        if c.pos_emb == 'learned':
            out = [p for p in ((int(pos.min()), int(pos.max())) if given else (pos.numel() - 1,))
                   if not 0 <= p < c.block_size]
            if out:  # (no device sync for the usual 0..T-1)
                raise ValueError(f"positions reach {out[0]}, outside the learned position table (0..{c.block_size - 1}); "
                                 f"learned positions cannot run past block_size={c.block_size}")
            x = x + self.transformer.wpe(pos)
        elif c.pos_emb == 'sinusoidal':
            x = x + SINUSOIDAL_SCALE * sinusoidal_table(pos, c.n_embd).to(x.dtype)
        return x

    def _last_layer_at(self, block, x, rope, at, pos=None):
        """The last block, only for the outputs at positions at (B, K) -> (B, K, C): every key, just their queries and
        residuals (nanoGPT's last-position lm_head, one layer deeper), through the attend seam (pos: forward's)."""
        def attend(q, k, v):  # the attention masks the gathered queries by their positions `at`
            q = q.gather(2, at[:, None, :, None].expand(-1, q.size(1), -1, q.size(-1)))
            return block.attn.attend(q, k, v, at) if pos is None else block.attn.attend(q, k, v, at, pos=pos)
        pick = lambda t: t.gather(1, at[..., None].expand(-1, -1, t.size(-1)))  # noqa: E731  (the rows at `at`)
        y = block.attn(block.ln_1(x), rope, attend)  # a conv layer attends nowhere: it returns every row, then picked
        x = pick(x) + (y if isinstance(block.attn, CausalSelfAttention) else pick(y))
        return x + block.mlp(block.ln_2(x))

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type, pos_lr_scale=1.0):
        """AdamW; weight decay on matrices only (not on biases, LayerNorm gains). pos_lr_scale: the learned position
        parts (learned frequencies' alpha, and what a room lists in its position_params: the log-position query scale)
        in a group of their own at that multiple of the learning rate (lr_scale; train.py's schedule keeps it)."""
        own = list(self.position_parts().values())
        if pos_lr_scale != 1 and not own:
            raise ValueError(f"pos_lr_scale={pos_lr_scale:g} scales the learning rate of learned position parts, and "
                             f"this model has none (learned_freqs=False, no logpos attention); drop it or add one")
        own = own if pos_lr_scale != 1 else []
        params = [p for p in self.parameters() if p.requires_grad and not any(p is q for q in own)]
        groups = [{'params': [p for p in params if p.dim() >= 2], 'weight_decay': weight_decay},
                  {'params': [p for p in params if p.dim() < 2], 'weight_decay': 0.0}]
        groups += [{'params': own, 'weight_decay': 0.0, 'lr_scale': pos_lr_scale}] if own else []
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=device_type == 'cuda')

    def position_parts(self):
        """The learned position parts, {state_dict name: parameter}: learned frequencies' alpha and what an attention
        room lists in its position_params (the log-position scale and bias)."""
        own = {'rope_alpha': self.rope_alpha} if self.rope_alpha is not None else {}
        return own | {f"{path}.{n}": getattr(m, n) for path, m in self.named_modules()
                      for n in getattr(m, 'position_params', ())}

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None, attend=None):
        """Sample max_new_tokens tokens after the prompts idx (B, T) -> (B, T + max_new_tokens), running the whole
        prefix at every step (lab/kv_cache.py decodes one token per step, exactly). Call model.eval() first."""
        check_generate(self, idx, max_new_tokens, temperature, top_k)
        for _ in range(max_new_tokens):
            logits = self(idx, attend=attend)[0][:, -1, :]
            idx = torch.cat((idx, sample_next(logits, temperature, top_k, generator)), dim=1)
        return idx

def check_config(c):
    """GPTConfig's fields checked together: ValueError naming the first one out of range and what it may be."""
    for key in ('block_size', 'vocab_size', 'n_layer', 'n_head', 'n_embd', 'n_kv_head', 'n_ffn'):
        if getattr(c, key) < 1:
            raise ValueError(f"{key}={getattr(c, key)!r} is out of range; it must be a positive integer")
    for bad, why in (
            (not 0 <= c.dropout < 1, f"dropout={c.dropout} is out of range; it must be in [0, 1)"),
            (c.pos_emb not in POS_EMBS, f"pos_emb={c.pos_emb!r} is unknown; use one of {', '.join(POS_EMBS)}"),
            (c.n_embd % c.n_head, f"n_embd={c.n_embd} is not divisible by n_head={c.n_head}"),
            (c.n_head % c.n_kv_head, f"n_head={c.n_head} is not divisible by n_kv_head={c.n_kv_head}"),
            (c.norm not in NORMS or c.mlp not in MLPS or not c.norm_eps > 0,
             f"norm={c.norm!r}, mlp={c.mlp!r}, norm_eps={c.norm_eps}: norm is one of {NORMS}, mlp one of {MLPS}, "
             f"norm_eps > 0"),
            (c.pos_emb == 'rope' and (c.n_embd // c.n_head) % 2,
             f"head_dim={c.n_embd // c.n_head} must be even for rope; change n_embd or n_head"),
            (not 0 < c.partial_rotary_factor <= 1 or int(c.n_embd // c.n_head * c.partial_rotary_factor) < 2,
             f"partial_rotary_factor={c.partial_rotary_factor} must be in (0, 1] and leave a pair to turn"),
            (c.rope_scaling is not None and c.pos_emb != 'rope',
             f"rope_scaling is set but pos_emb={c.pos_emb!r}; scaling only applies to pos_emb='rope'"),
            (c.learned_freqs and c.pos_emb != 'rope',
             f"learned_freqs=True learns RoPE's frequencies, but pos_emb={c.pos_emb!r}; use pos_emb='rope'"),
            (c.layers is not None and c.pos_emb != 'rope',
             f"layers={c.layers!r} sets RoPE per layer, which needs pos_emb='rope' (NoPE: pos_emb='none')"),
            (c.pos_emb in BIASES and c.attention != 'causal',  # one class per layer: the bias's would win
             f"pos_emb={c.pos_emb!r} brings its own attention class, so attention={c.attention!r} would be "
             f"dropped; use attention='causal' with {BIASES.get(c.pos_emb)}, or another pos_emb"),
            (c.attention_class not in ATTENTION and c.attention_class not in ATTENTION_ROOMS,
             f"attention={c.attention_class!r} is unknown; use one of "
             f"{', '.join(sorted({*ATTENTION, *ATTENTION_ROOMS} - set(BIASES) - {'conv'}))}"),
            (c.attention == 'conv' or c.attention != 'causal' and 'conv' in str(c.layers),  # (lab/conv.py)
             f"attention={c.attention!r} with layers={c.layers!r}: a short convolution is a layer kind "
             f"(layers='3*conv,rope'), beside attention='causal' only")):
        if bad:
            raise ValueError(why)

def layer_seam(block, i, attend, ids):
    """What layer i attends with: its own attention (None), forward's attend told the layer, or (a windowed or
    chunked layer given position ids: PoSE's skip) its mask drawn from the positions RoPE sees."""
    if ids is not None:
        return lambda q, k, v: block.attn.attend(q, k, v, pos=ids)
    return None if attend is None else (lambda q, k, v: attend(i, q, k, v))

def check_forward(model, idx, pos, attend, at):
    """Refuse position ids or output picks forward cannot honour, in one line."""
    (B, T), c = idx.size(), model.config
    if pos is not None and (not isinstance(pos, torch.Tensor) or pos.is_floating_point() or c.pos_emb in BIASES
                            or tuple(pos.shape) not in ((T,), (B, T))):
        raise ValueError(f"pos must be an integer tensor of shape ({T},) or ({B}, {T}), one position per token"
                         + (f" ({BIASES[c.pos_emb]} reads distances from the token order: pass none)"
                            if c.pos_emb in BIASES else ''))
    if at is not None and attend is not None:
        raise ValueError("at= picks the queries of causal attention; it cannot be combined with attend=")

def check_generate(model, idx, max_new_tokens, temperature, top_k):
    """Refuse a generation that cannot run, before anything runs."""
    T, n = idx.size(1), max_new_tokens
    for bad, why in ((not temperature > 0, f"temperature={temperature} must be > 0 (top_k=1 is greedy)"),
                     (top_k is not None and top_k < 1, f"top_k={top_k} must be >= 1 (or None: no filtering)"),
                     (T < 1 or n < 0, f"need a prompt of >= 1 token and max_new_tokens >= 0 (got {T}, {n})"),
                     (model.config.pos_emb == 'learned' and T + n > model.config.block_size,
                      f"prompt ({T}) + max_new_tokens ({n}) run past the learned position table (block_size="
                      f"{model.config.block_size}); ask for at most {max(model.config.block_size - T, 0)} new tokens")):
        if bad:
            raise ValueError(why)

def sample_next(logits, temperature=1.0, top_k=None, generator=None):
    """One token per row (B, 1) from the last logits (B, vocab): divided by temperature, top_k filtered."""
    logits = logits.float() / temperature
    if top_k is not None:  # every logit below the k-th largest
        logits[logits < torch.topk(logits, min(top_k, logits.size(-1)))[0][:, [-1]]] = -float('Inf')
    return torch.multinomial(F.softmax(logits, dim=-1), num_samples=1, generator=generator)
