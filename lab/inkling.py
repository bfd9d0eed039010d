"""
Inkling-2's attention (issue 63), attention='inkling': no RoPE at all. Every score gets a relative bias whose shape
over the distance is mixed, per query and head, from a learned bank of bias-versus-distance profiles by weights read
from the query token's hidden state; the bias is zero past a finite reach R. Beside it: a sink logit per query, also
read from the hidden state (an extra softmax column with no value), and short causal depthwise convolutions on the
keys and the values. Source: transformers/models/inkling2/modeling_inkling2.py (line numbers below) and
configuration_inkling2.py (thinkingmachines/Inkling-2-Small-MXFP8).

    python train.py config/train_shakespeare_char_cpu.py --attention=inkling '--layers=3*nope:w=64,nope' \
        --out_dir=out/char-inkling

The formulas, for the layer input X (ln_1(x), the `hidden_states` the shipped attention gets), query i, key j:

  mixing weights   r_i = clip(s * (W_r x_i)),  per head h: (W_r x_i)_h in R^K        RelativePositionBias.linear
                   clip(u) = u * min(1, 8 / (|u|_2 + 1e-6)), s (H, K) learned, 1     L210, L221-222; ScaledL2Clip
                   at init                                                            L148-160 (threshold
                                                                                      rel_l2_clip_threshold = 8.0)
  bias             b_h(i, j) = r_{i,h} . P[:, i - j]  for 0 <= i - j < R, else 0      proj P (K, R): L216; L225-228
                   P: the bank, one profile over the distances 0..R-1 per row         (gather at i - j, masked_fill
                   (K = d_rel = 16 profiles), shared by the heads, N(0, 0.02)         0 outside [0, R)); init L1345
  sink             z_{i,h} = (W_z x_i)_h, no bias                                     sink_proj L616, L666
  scores           a_ij = q_i . k_j / sqrt(d) + b_h(i, j) (+ the mask: causal, and    eager_attention_forward
                   i - j < window in a sliding layer)                                 L574-578
  softmax          p_ij = exp(a_ij) / (sum_{j' <= i} exp(a_ij') + exp(z_i)),           L580-583 (the sink's column
                   y_i = sum_j p_ij v_j (the sink's value is zero)                    dropped after the softmax)
  keys, values     k = (conv(W_k x) + W_k x) / sqrt(KERNEL + 1), v likewise:           ShortConvolution L341-394
                   conv(u)_t = sum_{d=0}^{KERNEL-1} c_d * u_{t-d} per channel           (causal_conv1d_fn L264-283,
                   (u_{<0} = 0), KERNEL = conv_kernel_size = 4, c N(0, 0.02)          scale L393); HF's Conv1d init
  reach            R = the window in a sliding layer (rel_extent =                   L604; configuration L96, L94
                   sliding_window_size), rel_extent in a full one (1024 = the
                   window, as shipped); here REACH = 64 for a full layer (L = 128)
  layers           sliding, with a full layer every sixth ((i + 1) % 6 == 0)          configuration L124-127

On the miniature's 4 layers that pattern is three sliding layers and a full one on top, '3*nope:w=64,nope' (w = R =
64 = L/2: the shipped full layer's reach equals the sliding window). The class takes the pattern's windows as any
class does (model.allowed); the pattern must turn nothing: pos_emb='none' (every layer full) or nope layers only
(pos_emb stays 'rope' in the config, as DroPE's '4*nope': a pattern sets RoPE per layer, GPTConfig). A RoPE layer is
refused: the shipped text model rotates nothing and has no RoPE option (only its vision tower's axial RoPE).

Left out, as the lab's other rooms or not positions: the L2 clips of q and k (QueryProjection L459-476, the key's
L2Clip and the value's unweighted RMSNorm L509-513), the full layers' dynamic convolution taps (a per-token part
projected from x, DynamicShortConvolution L397-456: here every layer has the static taps of the sliding layers),
the full layers' log scaling of queries and mixing weights past 128,000 tokens (LogScale L163-178; the lab's query
temperature arms, lab/temperature.py, are the knob for that), the output gate (GatedOutputProjection L532-545; the
lab's is lab/gated.py), the convolutions after attention and MLP, the block attention residuals and the experts.

Init: as shipped (W_r, W_z N(0, 0.02) as every Linear here, s = 1, P N(0, 0.02), the taps N(0, 0.02)): at init the
bias is ~0 (|r| ~ 0.9, P ~ 0.02), the sink ~0 (like lab/sinks.py's z = 0) and k = (W_k x) / sqrt(5) plus a little of
the previous tokens'. Not the plain model at init: a base trained from scratch. Weight decay (GPT's groups): W_r, W_z,
P and the taps (matrices); s (stored flat, a gain) is not decayed.

Seams. The bias and the sink read each query's hidden state, which the attend seam (q, k, v) does not carry: forward
computes r and z from X and keeps them for the length of the call, so `attend`, `logits` (the layer's scores with the
bias, for the crop and the diagnostics) and `sink` (the per-query sink logits, which lab.attention.chunked_attention
and attention_probs take beside a per-head one) all answer for the forward under way. The KV cache is exact
(lab/kv_cache.py): `lookback` = KERNEL - 1 makes it feed the last 3 cached tokens again (their recomputed keys and
values dropped, the new tokens' convolutions reading the right earlier pre-convolution ones), and `cache_at` runs this
attend with the new queries' positions (the bias reads i - j). The distances are of the token order: position ids
(forward's pos=, PoSE) reaching a windowed layer are refused; a full layer ignores them, as NoPE does.

Cost (sink_attention): a block of queries at a time, one gather builds bias, mask and sink score in one (B, H, Q, T + 1)
tensor (the sink a zero key and value in front), baddbmm adds q k^T / sqrt(d), then softmax and one bmm: explicit
scores, no fused kernel. A training step of the CPU base (L = 128, batch 32, 4 layers) takes ~1.7x plain causal's
(about half of it the scores' softmax and gather, half the two convolutions).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import ATTENTION, CausalSelfAttention, allowed

KERNEL = 4       # the short convolutions' taps (conv_kernel_size)
PROFILES = 16    # K: the bank's profiles, and each head's mixing weights (d_rel)
REACH = 64       # R of a full layer (rel_extent) at L = 128; a sliding layer's R is its window
CLIP = 8.0       # the mixing weights' L2 bound per head (rel_l2_clip_threshold)


def short_conv(u, taps):
    """Inkling-2's short convolution of u (B, T, C) along T, causal and per channel, with its residual:
    (sum_d taps[d] * u_{t-d} + u_t) / sqrt(KERNEL + 1), u_{<0} = 0. taps (KERNEL, C): tap d weighs the token d back
    (a torch Conv1d's weight[c, 0, KERNEL - 1 - d]). The residual and the scale ride on the taps (one pass a tap)."""
    n, T = taps.size(0), u.size(1)
    w = (taps + F.pad(torch.ones_like(taps[:1]), (0, 0, 0, n - 1))).to(u.dtype) / math.sqrt(n + 1)
    padded = F.pad(u, (0, 0, n - 1, 0))
    out = u * w[0]
    for d in range(1, n):
        out = torch.addcmul(out, padded[:, n - 1 - d:n - 1 - d + T], w[d])
    return out


def mixing_weights(x, weight, scale, n_head, clip=CLIP):
    """r = clip(scale * (x W^T)) per head: x (B, T, C), weight (n_head * K, C), scale (n_head * K,) -> float32
    (B, n_head, T, K), each head's vector scaled down to L2 norm `clip` when longer."""
    r = (F.linear(x, weight).float() * scale.float()).view(*x.shape[:2], n_head, -1)
    r = r * (clip / (torch.linalg.vector_norm(r, dim=-1, keepdim=True) + 1e-6)).clamp(max=1.0)
    return r.transpose(1, 2)


def bias_index(i, k_len, reach, window=None, chunk=None):
    """Where each score's bias sits in a query's row [profile at distances 0..R-1, 0, -inf] (R = reach): at i - j
    while i - j < R, at R (a zero bias) past the reach, at R + 1 where the query may not see the key (j > i, or out
    of its window or chunk: model.allowed). i: positions (Q,) or (B, Q) -> int64 (Q, k_len) or (B, 1, Q, k_len)."""
    d = i[..., None] - torch.arange(k_len, device=i.device)
    ok = allowed(i if i.dim() == 1 else i[:, None], k_len, window, chunk)
    d = d if d.dim() == 2 else d[:, None]
    return torch.where(ok, d.clamp(max=reach), reach + 1)


def bias_rows(r, profiles, extra=()):
    """Each query's row [r . P[:, 0], ..., r . P[:, R-1], 0, -inf, *extra]: r (B, H, Q, K) mixing weights, profiles
    P (K, R); extra: further (B, H, Q) columns (the sink). Float32 (B, H, Q, R + 2 + len(extra))."""
    per = r.float() @ profiles.float()
    edge = per.new_tensor([0.0, float('-inf')]).expand(*per.shape[:-1], 2)
    return torch.cat((per, edge, *(x.float()[..., None] for x in extra)), -1)


def profile_bias(r, profiles, i, k_len, window=None, chunk=None):
    """The bias of queries at positions i against keys 0..k_len-1 with the mask in it: r . P[:, i - j] for
    0 <= i - j < R, 0 past the reach, -inf where the query may not see the key (bias_index). r (B, H, Q, K), P (K, R),
    i (Q,) or (B, Q). Float32 (B, H, Q, k_len)."""
    rows, idx = bias_rows(r, profiles), bias_index(i, k_len, profiles.size(1), window, chunk)
    return rows.gather(-1, idx.expand(*rows.shape[:3], k_len))


def sink_softmax(att, z):
    """softmax over [att, z] with z's column dropped: att (..., Q, K) float32 scores, z (..., Q) sink logits."""
    return F.softmax(torch.cat((att, z.float()[..., None]), -1), dim=-1)[..., :-1]


def sink_attention(q, k, v, r, z, profiles, window=None, chunk=None, dropout=0.0, block=256):
    """softmax over [q k^T / sqrt(d) + bias, z] times [v, 0] for queries and keys at positions 0..T-1, a block of
    queries at a time (memory O(block x T)); the sink is a zero key and value in front of the keys, its score z_i put
    in by the bias's gather (one T x T pass builds bias, mask and sink; baddbmm adds the scores to it). r (B, H, T, K)
    and z (B, H, T) the queries' mixing weights and sink logits."""
    B, H, T, hd = q.shape
    R = profiles.size(1)
    k0, v0 = (torch.cat((t.new_zeros(B, H, 1, hd), t), 2) for t in (k, v))  # the sink's key and value in front
    ys = []
    for s in range(0, T, block):
        e = min(s + block, T)
        rows = bias_rows(r[:, :, s:e], profiles, (z[:, :, s:e],))  # sink logit at R + 2
        idx = F.pad(bias_index(torch.arange(s, e, device=q.device), e, R, window, chunk), (1, 0), value=R + 2)
        mask = rows.gather(-1, idx.expand(B, H, e - s, e + 1)).to(q.dtype)
        att = torch.baddbmm(mask.view(B * H, e - s, e + 1), q[:, :, s:e].reshape(B * H, e - s, hd),
                            k0[:, :, :e + 1].reshape(B * H, e + 1, hd).transpose(1, 2), alpha=1 / math.sqrt(hd))
        p = F.dropout(F.softmax(att.float(), dim=-1), dropout, dropout > 0).to(v.dtype)
        ys.append(torch.bmm(p, v0[:, :, :e + 1].reshape(B * H, e + 1, hd)).view(B, H, e - s, hd))
    return torch.cat(ys, 2)


class InklingAttention(CausalSelfAttention):
    lookback = KERNEL - 1  # a key and a value read the 3 tokens before: the KV cache feeds them again
    cache_at = True  # attend(q, k, v, at) is exact for queries at positions `at` over all keys (lab/kv_cache.py)

    def __init__(self, config, spec):
        if spec.rope or config.pos_emb in ('sinusoidal', 'learned'):
            raise ValueError(f"attention='inkling' is Inkling-2's attention without positions (its text layers turn "
                             f"nothing), but pos_emb={config.pos_emb!r}, layers={config.layers!r} gives this layer "
                             f"{'RoPE' if spec.rope else 'an absolute embedding'}; use pos_emb='none' or nope layers "
                             f"only (layers='3*nope:w=64,nope')")
        super().__init__(config, spec)
        H = config.n_head
        self.reach = spec.window or REACH
        self.rel_mix = nn.Linear(config.n_embd, H * PROFILES, bias=False)  # W_r (GPT's init: N(0, 0.02))
        self.rel_scale = nn.Parameter(torch.ones(H * PROFILES))  # s, flat: a gain, not weight-decayed
        self.rel_profiles = nn.Parameter(torch.empty(PROFILES, self.reach).normal_(0.0, 0.02))  # P
        self.sink_proj = nn.Linear(config.n_embd, H, bias=False)  # W_z
        self.k_taps = nn.Parameter(torch.empty(KERNEL, self.kv_dim).normal_(0.0, 0.02))
        self.v_taps = nn.Parameter(torch.empty(KERNEL, self.kv_dim).normal_(0.0, 0.02))
        self._mix = self._sinks = None  # the forward under way's r (B, H, T, K) and z (B, H, T)

    @property
    def sink(self):
        """The per-query sink logits of the forward under way (B, H, T) (lab.attention.sink_of); None outside one."""
        return self._sinks

    def qkv(self, x, rope):
        """(q, k, v) as (B, n_head, T, head_dim): k and v through their short convolutions, nothing rotated."""
        B, T, C = x.size()
        q, kv = self.c_attn(x).split((C, 2 * self.kv_dim), dim=2)
        k, v = short_conv(kv, torch.cat((self.k_taps, self.v_taps), 1)).split(self.kv_dim, dim=2)  # (one pass for both)
        q, k, v = (t.view(B, T, -1, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if self.n_kv_head != self.n_head:
            k, v = (t.repeat_interleave(self.n_head // self.n_kv_head, dim=1) for t in (k, v))
        return q, k, v

    def stash(self, x):
        """r and z of the layer input x, for this forward's attend, logits and sink."""
        self._mix = mixing_weights(x, self.rel_mix.weight, self.rel_scale, self.n_head)
        self._sinks = self.sink_proj(x).float().transpose(1, 2)

    def rows(self, what, k_len, s=None, e=None, at=None):
        """The stashed r or z of queries s..e-1 or at positions `at` (B, K): the stash's rows are the last of k_len
        positions (all of them in a forward, the fed tokens under the KV cache)."""
        if what is None:
            raise ValueError("attention='inkling' reads each query's hidden state: call its attend or logits inside "
                             "the layer's forward (the attend seam), not on q, k, v alone")
        first = k_len - what.size(2)
        if at is None:
            return what[:, :, s - first:e - first]
        idx = (at - first)[:, None, :].expand(what.size(0), what.size(1), -1)
        return what.gather(2, idx if what.dim() == 3 else idx[..., None].expand(-1, -1, -1, what.size(-1)))

    def logits(self, q, k, s, e):
        """The scaled float32 scores of queries s..e-1 against keys 0..e-1 with the bias, -inf outside the mask."""
        i, r = torch.arange(s, e, device=q.device), self.rows(self._mix, k.size(2), s, e)
        att = (q[:, :, s:e] @ k[:, :, :e].transpose(-2, -1)).float() / math.sqrt(q.size(-1))
        return att + profile_bias(r, self.rel_profiles, i, e, self.window, self.chunk)

    def attend(self, q, k, v, at=None, pos=None):
        if pos is not None:  # (model.GPT.forward passes pos only to a windowed or chunked layer)
            raise ValueError("attention='inkling' reads its bias's distances and its windows from the token order; "
                             "run without position ids (PoSE's skipped ids do not apply)")
        S = k.size(2)
        if at is None:
            if q.size(2) != S:
                raise ValueError(f"attention='inkling' got {q.size(2)} queries for {S} keys without their positions; "
                                 f"pass at= (the KV cache does)")
            p = self.dropout if self.training else 0.0
            return sink_attention(q, k, v, self.rows(self._mix, S, 0, S), self.rows(self._sinks, S, 0, S),
                                  self.rel_profiles, self.window, self.chunk, p)
        att = (q @ k.transpose(-2, -1)).float() / math.sqrt(q.size(-1))
        att = att + profile_bias(self.rows(self._mix, S, at=at), self.rel_profiles, at, S, self.window, self.chunk)
        return sink_softmax(att, self.rows(self._sinks, S, at=at)).to(v.dtype) @ v

    def forward(self, x, rope, attend=None):
        B, T, C = x.size()
        q, k, v = self.qkv(x, rope)
        self.stash(x)
        try:
            y = self.attend(q, k, v) if attend is None else attend(q, k, v)
        finally:
            self._mix = self._sinks = None
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, -1, C)))


ATTENTION['inkling'] = InklingAttention
