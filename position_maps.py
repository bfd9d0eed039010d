"""
Position maps: training-free extension at the attention level (ReRoPE, Leaky ReRoPE, Self-Extend), as small pure
functions. A sibling of rope.py on the math floor (torch + math only; it imports nothing above rope.py).

Rope scaling changes the frequencies; a position map changes which relative positions attention sees, so a model
never meets a distance it was not trained on. Query i sees key j at its true distance i - j while i - j < w (near:
q rotated at i, k at j, the ordinary RoPE score). Farther keys are scored with q rotated at pq(i) and k at pk(j)
(far), i.e. q_i.R(pq(i) - pk(j)).k_j; each method below is one choice of (pq, pk). The price: inside L too, every
distance >= w is no longer exact. model.CausalSelfAttention.extended_attention computes both score maps exactly,
merged by the mask i - j < w, in query chunks.

Composition. The frequencies and attention factor come from the model's rope_scaling, so a map works on a plain
model (the zero-shot arms) and on a fine-tuned scaled one (e.g. YaRN fine-tuned at s*L plus ReRoPE with w < s*L, to
go past s*L). It does not make sense over a zero-shot frequency scaling of a model trained at L (the map already keeps
distances inside L; squeezing the frequencies too only moves the model further from training), nor with a dynamic
type (dynamic, dynamic_yarn): their scale follows the forward length, for distances the map no longer produces.

ALiBi (Press et al. 2022), the other attention-level answer, lives here too: a bias -m_h*(i - j) on the scores
instead of any rotation (model.py's pos_emb='alibi').
"""
import math
from typing import NamedTuple

import torch

from rope import spec_settings


def rerope_positions(pos, w):
    """ReRoPE (Su 2023): relative position min(i - j, w). Far: q at w, k at 0, so every far key sits at distance w."""
    return torch.full_like(pos, w), torch.zeros_like(pos)


def leaky_rerope_positions(pos, w, k):
    """Leaky ReRoPE: i - j below w, else w + (i - j - w)/k = (i/k + w(1 - 1/k)) - j/k, so q sits at i/k + w(1 - 1/k)
    and k at j/k (fractional positions; rope.rope_cos_sin takes floats). k = 1 is plain RoPE. T tokens reach
    w + (T - 1 - w)/k, which stays below L for k >= (T - 1 - w)/(L - 1 - w)."""
    return pos / k + w * (1 - 1 / k), pos / k


def self_extend_positions(pos, w, G):
    """Self-Extend (Jin et al. 2024): exact inside the neighbour window w; beyond it floor(i/G) - floor(j/G) + (w -
    floor(w/G)): q at floor(i/G) + w - floor(w/G), k at floor(j/G). Unlike ReRoPE it depends on i and j, not only on
    i - j. G = 1 is plain RoPE. T tokens reach about (T - 1)/G + w - w/G: inside L up to T ~ (L - w)*G + w."""
    g = torch.div(pos, G, rounding_mode='floor')
    return g + (w - w // G), g


# method -> ({key: (type, meaning)}, far(positions, cfg) -> (query positions, key positions)). Every key is required.
POSITION_MAPS = {
    'rerope': ({'window': (int, 'the near window w')}, lambda p, c: rerope_positions(p, c['window'])),
    'leaky_rerope': ({'window': (int, 'the near window w'), 'k': (float, 'the slope divisor beyond w; 1 = plain RoPE')},
                     lambda p, c: leaky_rerope_positions(p, c['window'], c['k'])),
    'self_extend': ({'window': (int, 'the neighbour window w'), 'group': (int, 'the group size G; 1 = plain RoPE')},
                    lambda p, c: self_extend_positions(p, c['window'], c['group'])),
}
SHORT = {'window': 'w', 'group': 'G'}  # in arm names


def check_position_map(pm):
    """Validate a position map: {'method': 'rerope', 'window': 64}, {'method': 'leaky_rerope', 'window': 64, 'k': 16},
    {'method': 'self_extend', 'window': 32, 'group': 4}. Returns a normalized copy (None for None). Every key is
    required and >= 1 (window and group ints, k a number). Raises ValueError naming the field and the fix."""
    if pm is None:
        return None
    method = pm.get('method') if isinstance(pm, dict) else None
    if method not in POSITION_MAPS:
        raise ValueError(f"position_map = {pm!r}: 'method' is missing or unknown; give a dict like "
                         f"{{'method': 'rerope', 'window': 64}} with method one of {', '.join(POSITION_MAPS)}")
    keys = POSITION_MAPS[method][0]
    for k in pm:
        if k != 'method' and k not in keys:
            raise ValueError(f"position_map key {k!r} is not used by method {method!r}; "
                             f"accepted keys: method, {', '.join(keys)}")
    for k, (typ, meaning) in keys.items():
        v = pm.get(k)
        number = not isinstance(v, bool) and isinstance(v, (int, float) if typ is float else int)
        if not number or not 1 <= v < math.inf:
            raise ValueError(f"position_map['{k}'] {'= ' + repr(v) if k in pm else 'is missing'} for method "
                             f"{method!r}: set {'a number' if typ is float else 'an int'} >= 1 ({meaning})")
    return {'method': method, **{k: typ(pm[k]) for k, (typ, _) in keys.items()}}


def position_map_positions(pm, positions):
    """The far map's (query positions, key positions) at the given token positions, float64 (for rope_cos_sin)."""
    return POSITION_MAPS[pm['method']][1](positions.to(torch.float64), pm)


def is_position_map_spec(entry):
    """True when an arm spec names a position map ('rerope:window=64'), not a rope type."""
    return entry.strip().split(':')[0] in POSITION_MAPS


def parse_position_map(entry):
    """Arm spec -> position map: 'rerope:window=64', 'leaky_rerope:window=64:k=16', 'self_extend:window=32:group=4'."""
    method, *pairs = entry.strip().split(':')
    if method not in POSITION_MAPS:
        raise ValueError(f"arm {entry!r}: {method!r} is not a position map; use one of {', '.join(POSITION_MAPS)}")
    return check_position_map({'method': method, **spec_settings(entry, pairs, POSITION_MAPS[method][0])})


def position_map_name(pm):
    """'rerope w=64', 'leaky_rerope w=64 k=16', 'self_extend w=32 G=4'."""
    return pm['method'] + ''.join(f" {SHORT.get(k, k)}={v:g}" for k, v in pm.items() if k != 'method')


# ----------------------------------------------------------------------------- the score maps model.py uses

def alibi_slopes(n_head):
    """ALiBi's head slopes (Press et al. 2022): m_h = 2^(-8h/H) for h = 1..H when H is a power of two. Otherwise,
    with P = 2^floor(log2 H): the P slopes of P heads, then every other slope of 2P heads (h = 1, 3, 5, ...: the ones
    that fall between them) until there are H, in that order, as the paper's code does. H = 6: 1/4, 1/16, 1/64,
    1/256, then 1/2, 1/8."""
    geometric = lambda n: [2.0 ** (-8 * h / n) for h in range(1, n + 1)]
    p = 2 ** int(math.floor(math.log2(n_head)))
    return torch.tensor(geometric(p) + geometric(2 * p)[0::2][:n_head - p])


def alibi_bias(slopes, q_start, q_end, k_len):
    """The float mask of queries q_start..q_end-1 against keys 0..k_len-1: bias[h, i, j] = -m_h·(i - j) for j <= i,
    -inf for j > i (causal). Shape (H, q_end - q_start, k_len), float32; it broadcasts over the batch."""
    i = torch.arange(q_start, q_end, device=slopes.device)[:, None]
    j = torch.arange(k_len, device=slopes.device)[None, :]
    return (-slopes.float()[:, None, None] * (i - j)).masked_fill(j > i, float('-inf'))


# Query chunk of the ALiBi path: a chunk's mask is H·chunk·T floats (T = 4096, H = 4: 16 MiB in float32), and SDPA's
# scores, where it materialises them, B·H·chunk·T. One mask for the whole sequence would be H·T² floats (256 MiB) on
# top of B·H·T² scores. A float mask keeps SDPA off its flash kernel (CPU: the math path; CUDA: memory-efficient);
# smaller chunks also skip more of the masked keys: on CPU, a forward at T = 1024 took 1.27 s with 256, 2.0 s with 512,
# 2.8 s unchunked (0.77 s for rope).
ALIBI_CHUNK = 256


class MappedRope(NamedTuple):
    """RoPE tables under a position map: near = the ordinary (cos, sin); far = (q_cos, q_sin, k_cos, k_sin) at the
    map's query / key positions; pos = the token positions; window = w (near while pos_i - pos_j < w)."""
    near: tuple
    far: tuple
    pos: torch.Tensor
    window: int


def mapped_logits(near, far, pos, window, s, e):
    """Attention logits (float32, before the 1/sqrt(hd) scale) of queries s..e-1 against keys 0..e-1 under a position
    map: q_i.k_j from near = (q, k) rotated at their own positions where pos_i - pos_j < window, else from far = (q, k)
    rotated at the map's positions; -inf where j > i. The near map is computed only on the keys that can be near
    (j > s - window, as positions grow by >= 1 per token), so the cost is one far map plus a band."""
    (q, k), (qf, kf) = near, far
    lo = max(0, s - window + 1)
    att = (qf[..., s:e, :] @ kf[..., :e, :].transpose(-2, -1)).float()
    band = (q[..., s:e, :] @ k[..., lo:e, :].transpose(-2, -1)).float()
    is_near = pos[s:e, None] - pos[None, lo:e] < window
    att[..., lo:] = torch.where(is_near, band, att[..., lo:])  # in place: one T-wide copy less per chunk
    future = torch.arange(e, device=att.device)[None, :] > torch.arange(s, e, device=att.device)[:, None]
    return att.masked_fill_(future, float('-inf'))
