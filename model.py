"""
A small GPT whose position encoding can be switched: rope (default), sinusoidal, learned or none.

nanoGPT-shaped: pre-LayerNorm blocks, causal attention through F.scaled_dot_product_attention, GELU MLP,
tied input/output embeddings. What is particular to this project:
  * RoPE comes from rope.py and is rebuilt for the length actually run (no table, no cap), in float32;
  * the RoPE scaling (PI, NTK, YaRN, ...) is part of the config and can be switched on a trained model
    with `set_rope_scaling`, which touches no weight;
  * `forward(..., reduction='none')` returns the loss of every token, which is what eval.py plots;
  * `attention_entropy` is a slower, chunked manual attention path used only for diagnostics.
"""

import math
import os
from dataclasses import dataclass, asdict, fields

import torch
import torch.nn as nn
from torch.nn import functional as F

from rope import rope_inv_freq, rope_cos_sin, apply_rope, check_scaling, is_dynamic

POS_EMBS = ('rope', 'sinusoidal', 'learned', 'none')


@dataclass
class GPTConfig:
    block_size: int = 128       # sequence length trained at; also the table size of a `learned` embedding
    vocab_size: int = 65
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = False
    pos_emb: str = 'rope'       # rope | sinusoidal | learned | none
    rope_base: float = 10000.0
    rope_scaling: dict = None   # Hugging Face style rope_scaling dict, None = plain RoPE
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


# The table's entries have rms 1/sqrt(2); the token embeddings start at std 0.02 (GPT-2 init). Unscaled, position
# drowns the tokens (the original Transformer scaled its embeddings up by sqrt(d_model) instead): our 0.8M CPU model
# then stalled at val loss 2.4 instead of 1.55. Scaled to rms 0.02, the table starts like a learned one.
SINUSOIDAL_SCALE = 0.02 * math.sqrt(2)


def sinusoidal_table(T, n_embd, device=None):
    """The original Transformer's absolute encoding: PE[m, 2i] = sin(m / 10000^(2i/n)), PE[m, 2i+1] = cos(...)."""
    pos = torch.arange(T, device=device, dtype=torch.float32)[:, None]
    inv = torch.exp(torch.arange(0, n_embd, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / n_embd))
    pe = torch.zeros(T, n_embd, device=device)
    pe[:, 0::2] = torch.sin(pos * inv)
    pe[:, 1::2] = torch.cos(pos * inv)
    return pe


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout
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

    def forward(self, x, rope):
        B, T, C = x.size()
        q, k, v = self.qkv(x, rope)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))

    def attention_probs(self, x, rope, chunk_size=256):
        """Manual attention, yielding (query_start, probs[B, nh, chunk, T]) one chunk of queries at a time.
        Same math as SDPA (softmax(q·k/√hd) under a causal mask); memory O(chunk·T) instead of O(T²)."""
        q, k, _ = self.qkv(x, rope)
        T = q.size(2)
        scale = 1.0 / math.sqrt(q.size(-1))
        for s in range(0, T, chunk_size):
            att = (q[:, :, s:s + chunk_size] @ k.transpose(-2, -1)).float() * scale
            qpos = torch.arange(s, min(s + chunk_size, T), device=x.device)[:, None]
            att = att.masked_fill(torch.arange(T, device=x.device)[None, :] > qpos, float('-inf'))
            yield s, F.softmax(att, dim=-1)


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

    def forward(self, x, rope):
        x = x + self.attn(self.ln_1(x), rope)
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
        """Switch the RoPE scaling (None = plain RoPE). Validated by rope.check_scaling; no weight changes,
        because cos/sin are rebuilt from the config at every forward."""
        if self.config.pos_emb != 'rope':
            raise ValueError(f"this model uses pos_emb={self.config.pos_emb!r}; RoPE scaling needs pos_emb='rope'")
        self.config.rope_scaling = check_scaling(scaling)

    def rope_tables(self, T, device):
        """cos/sin of shape (T, head_dim) for a forward of length T, in float32. Dynamic types see seq_len=T."""
        c = self.config
        inv_freq, attn_factor = rope_inv_freq(self.head_dim, c.rope_base, c.rope_scaling,
                                              seq_len=T if is_dynamic(c.rope_scaling) else None)
        return rope_cos_sin(inv_freq.to(device), torch.arange(T, device=device), attn_factor)

    def _embed(self, idx):
        B, T = idx.size()
        c = self.config
        x = self.transformer.wte(idx)
        if c.pos_emb == 'learned':
            if T > c.block_size:
                raise ValueError(f"sequence of length {T} is longer than the learned position table "
                                 f"(block_size={c.block_size}); learned positions cannot run past it")
            x = x + self.transformer.wpe(torch.arange(T, device=idx.device))
        elif c.pos_emb == 'sinusoidal':
            x = x + SINUSOIDAL_SCALE * sinusoidal_table(T, c.n_embd, idx.device).to(x.dtype)
        rope = self.rope_tables(T, idx.device) if c.pos_emb == 'rope' else None
        return self.transformer.drop(x), rope

    def forward(self, idx, targets=None, reduction='mean'):
        """idx (B, T) token ids -> logits (B, T, vocab). With targets: loss, a scalar (reduction='mean')
        or the per-token negative log-likelihood in nats (reduction='none', shape (B, T))."""
        x, rope = self._embed(idx)
        for block in self.transformer.h:
            x = block(x, rope)
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

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            cond = idx if self.config.pos_emb != 'learned' else idx[:, -self.config.block_size:]
            logits = self(cond)[0][:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('Inf')
            idx = torch.cat((idx, torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)), dim=1)
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
