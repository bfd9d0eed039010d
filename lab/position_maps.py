"""
Position maps: training-free extension at the attention level (ReRoPE, Leaky ReRoPE, Self-Extend), one room.

Rope scaling changes the frequencies; a position map changes which relative positions attention sees, so a model
never meets a distance it was not trained on. Query i sees key j at its true distance i - j while i - j < w (near:
q rotated at i, k at j, the ordinary RoPE score). Farther keys are scored with q rotated at pq(i) and k at pk(j)
(far), i.e. q_i.R(pq(i) - pk(j)).k_j; each method below is one choice of (pq, pk). The price: inside L too, every
distance >= w is no longer exact. `mapped_attention(model, pm)` is the exact attention under a map, for the model's
`attend` seam: both score maps, merged by the mask i - j < w, one chunk of queries at a time (memory O(chunk x T)).

Composition. The frequencies and attention factor come from the model's rope_scaling, so a map works on a plain
model (the zero-shot arms) and on a fine-tuned scaled one (e.g. YaRN fine-tuned at s*L plus ReRoPE with w < s*L, to
go past s*L). It does not make sense over a zero-shot frequency scaling of a model trained at L (the map already keeps
distances inside L), nor with a dynamic type: their scale follows the forward length, for distances the map no longer
produces.
"""
import math

import torch

from model import chunked_attention
from rope import apply_rope, rope_cos_sin
from rope_config import spec_settings

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



def far_logits(q, k, pm, inv_freq, s, e):
    """Scaled float32 scores of queries s..e-1 against keys 0..e-1 under the map pm: q.k as given (q, k rotated at their
    own positions i, j, the near map) where i - j < window, else q turned on to pq(i) and k to pk(j) (the far map);
    -inf where j > i. RoPE rotations add up, so the far q is the near q turned by pq(i) - i more (unit factor: the
    attention factor already sits in q and k). The near scores are computed only on the band of keys that can be near."""
    w = pm['window']
    pos = torch.arange(e, device=q.device)
    q_pos, k_pos = position_map_positions(pm, pos)
    turn = lambda x, by: apply_rope(x, *(t.to(x.dtype) for t in rope_cos_sin(inv_freq, by.to(x.device))))
    qf, kf = turn(q[:, :, s:e], q_pos[s:] - pos[s:].double()), turn(k[:, :, :e], k_pos - pos.double())
    lo = max(0, s - w + 1)
    att = (qf @ kf.transpose(-2, -1)).float()
    band = (q[:, :, s:e] @ k[:, :, lo:e].transpose(-2, -1)).float()
    att[..., lo:] = torch.where(pos[s:e, None] - pos[None, lo:e] < w, band, att[..., lo:])
    future = pos[None, :] > pos[s:e, None]
    return att.div_(math.sqrt(q.size(-1))).masked_fill_(future, float('-inf'))


def mapped_logits(model, pm):
    """fn(layer, q, k, s, e) -> far_logits under pm with the model's frequencies for the forward's length (a dynamic
    type at length T): the score function that mapped_attention and the attention diagnostics use."""
    pm = check_position_map(pm)
    if model.config.pos_emb != 'rope':
        raise ValueError(f"a position map re-rotates RoPE's queries and keys; this model has pos_emb="
                         f"{model.config.pos_emb!r}")
    return lambda layer, q, k, s, e: far_logits(q, k, pm, model.rope_freqs(q.size(2))[0], s, e)


def mapped_attention(model, pm, chunk=128):
    """The model's `attend` under position map pm: fn(layer, q, k, v) -> y, exact, in query chunks.
    Use: logits = model(x, attend=mapped_attention(model, pm))[0]."""
    logits = mapped_logits(model, pm)
    return lambda layer, q, k, v: chunked_attention(q, k, v, lambda s, e: logits(layer, q, k, s, e), chunk)
