"""
Position maps: training-free extension at the attention level (ReRoPE, Leaky ReRoPE, Self-Extend, Dual Chunk
Attention), one room.

Rope scaling changes the frequencies; a position map changes which relative positions attention sees, so a model
never meets a distance it was not trained on. Query i sees key j at its true distance i - j while i - j < w (near:
q rotated at i, k at j, the ordinary RoPE score). Farther keys are scored with q rotated at pq(i) and k at pk(j)
(far), i.e. q_i.R(pq(i) - pk(j)).k_j; each method below is one choice of (pq, pk). DCA has three maps instead of
two (same chunk, previous chunk, older chunks: dca_positions). The price: inside L too, every
distance >= w is no longer exact. `mapped_attention(model, pm)` is the exact attention under a map, for the model's
`attend` seam: fused where the layer allows (near keys banded, far keys one shifted causal call, DCA's three tables,
merged by their log-sum-exp: no T x T tensor, about a causal forward's cost), else both score maps merged by the mask
i - j < w, one chunk of queries at a time (memory O(chunk x T); mapped_logits, which the diagnostics use too).

Log scale (key log_scale). bojone/rerope's patches multiply every query, before both the near and the far product,
by max(1, log(p + 1)/log L) at its absolute position p (L: the training length; x10/7 = 1.4286 at p = 1023 with
L = 128), to keep attention as sharp as the sequence grows: on by default for ReRoPE and Leaky ReRoPE
('rerope:window=64:log_scale=0' turns it off, arm 'rerope w=64 no-log'). LongLM ships the same scale for Self-Extend
as an option off by default (scale_base=-1; 'self_extend:window=32:group=4:log_scale=1', arm '... log'). Queries at
p < L are unchanged; past L the scale changes scores inside the window too.

Composition. The frequencies and attention factor come from the model's rope_scaling, so a map works on a plain
model (the zero-shot arms) and on a fine-tuned scaled one (e.g. YaRN fine-tuned at s*L plus ReRoPE with w < s*L, to
go past s*L). It does not make sense over a zero-shot frequency scaling of a model trained at L (the map already keeps
distances inside L), nor with a dynamic type: their scale follows the forward length, for distances the map no longer
produces.
"""
import math

import torch

from lab.attention import attention_lse, banded_attention, causal_lse, chunked_attention, merge_lse, sink_of
from model import CausalSelfAttention, allowed
from rope import apply_rope, rope_cos_sin
from lab.spec import spec_settings


def rerope_positions(pos, w):
    """ReRoPE (Su 2023): relative position min(i - j, w). Far: q at w, k at 0, so every far key sits at distance w."""
    return torch.full_like(pos, w), torch.zeros_like(pos)


def leaky_rerope_positions(pos, w, k):
    """Leaky ReRoPE: i - j below w, else w + (i - j - w)/k = (i/k + w(1 - 1/k)) - j/k, so q sits at i/k + w(1 - 1/k)
    and k at j/k (fractional positions; rope.rope_cos_sin takes floats). k = 1 is plain RoPE. T tokens reach
    w + (T - 1 - w)/k, which stays below L for k >= (T - 1 - w)/(L - 1 - w). This is bojone/rerope's
    leaky_rerope_patch.py: its second rotary table is PI-scaled by k, with q at position i + w(k - 1)."""
    return pos / k + w * (1 - 1 / k), pos / k


def self_extend_positions(pos, w, G):
    """Self-Extend (Jin et al. 2024): exact inside the neighbour window w; beyond it floor(i/G) - floor(j/G) + w - w/G:
    q at floor(i/G) + w - w/G, k at floor(j/G). w - w/G is the shift of datamllab/LongLM's prefill
    (self_extend_patch/Llama.py, self_extend_forward: `_re_group_size_2 - _re_group_size_2 / group_size_1`; Gemma.py
    and the flash prefills alike); its decode paths, the legacy patches and its last commit (715c1e3, which calls `/`
    a mistake and changes Llama_4_40.py's prefill) use w - floor(w/G). check_position_map requires G | w, where all of
    them agree. Unlike ReRoPE it depends on i and j, not only on i - j. G = 1 is plain RoPE. T tokens reach
    (T - 1)//G + w - w/G: inside L up to T ~ (L - w)*G + w."""
    g = torch.div(pos, G, rounding_mode='floor')
    return g + (w - w / G), g


def dca_positions(i, j, S, w):
    """Dual Chunk Attention (An et al. 2024, ChunkLlama; what Qwen2.5-1M ships): chunk size S < L, local window w < S,
    chunks of c = S - w tokens; every key sits at its in-chunk index j mod c. Query i (chunk i // c, index i' = i mod c):
      same chunk      at i'                  -> distance i - j, exact
      previous chunk  at min(i' + c, S)      -> exact for i' <= w (the successive chunk's local window), then S - j'
      older chunks    at min(2c - 1, S)      -> the reference's inter-chunk query (index c - 1 of the successive table)
    so no distance exceeds S, at any length: the reach is unlimited. Returns the (query, key) positions of every
    (i, j) pair, float64 [Q, K] (i, j: position tensors); datamllab/ChunkLlama's chunkllama_attn_replace.py defaults
    S = 3L/4, w = L/16 (96 and 8 for L = 128)."""
    c = S - w
    ci, cj = (i // c)[:, None], (j // c)[None, :]
    intra, successive, inter = (p[:, None] for p in dca_query_positions(i, S, w))
    q = torch.where(ci == cj, intra, torch.where(ci == cj + 1, successive, inter))
    return q, (j % c).double()[None, :].expand_as(q)


def dca_query_positions(i, S, w):
    """DCA's three positions for queries i (float64 each): in-chunk i', successive min(i' + c, S), inter
    min(2c - 1, S), c = S - w (dca_positions says which one each key sees)."""
    c = S - w
    i_in = (i % c).double()
    return i_in, (i_in + c).clamp(max=S), torch.full_like(i_in, float(min(2 * c - 1, S)))


def dca_scores(q, k, pm, inv_freq, s, e):
    """Unscaled float32 scores of queries s..e-1 against keys 0..e-1 under DCA: three query rotations (intra,
    successive, inter) against keys turned to their in-chunk index, merged per pair by the chunk relation (one
    softmax over all of them, as the reference merges its three flash-attention parts by their normalisers)."""
    S, w = pm['chunk'], pm['window']
    pos = torch.arange(e, device=q.device)
    qp, kp = dca_positions(pos[s:e], pos, S, w)  # [Q, K]; per row the query takes one of three positions
    turn = lambda x, by: apply_rope(x, *(t.to(x.dtype) for t in rope_cos_sin(inv_freq, by.to(x.device))))
    kf = turn(k[:, :, :e], kp[0] - pos.double())
    att = None
    for at in dca_query_positions(pos[s:e], S, w):
        part = (turn(q[:, :, s:e], at - pos[s:e].double()) @ kf.transpose(-2, -1)).float()
        att = part if att is None else torch.where(qp == at[:, None], part, att)
    return att


def log_scales(pos, L):
    """The query scale of the reference patches: max(1, log(p + 1)/log L) at absolute position p, for a model trained
    at L. 1 up to p = L - 1; log(1024)/log(128) = 10/7 at p = 1023 with L = 128."""
    return (torch.log1p(pos.double()) / math.log(L)).clamp(min=1.0)


LOG_SCALE = {'log_scale': (int, 'scale each query by max(1, log(p + 1)/log L) (1 = on, 0 = off)')}

# method -> ({key: (type, meaning)}, far(positions, cfg) -> (query positions, key positions), {key: default}). A key
# without a default is required.
POSITION_MAPS = {
    'rerope': ({'window': (int, 'the near window w'), **LOG_SCALE}, lambda p, c: rerope_positions(p, c['window']),
               {'log_scale': 1}),
    'leaky_rerope': ({'window': (int, 'the near window w'), 'k': (float, 'the slope divisor beyond w; 1 = plain RoPE'),
                      **LOG_SCALE}, lambda p, c: leaky_rerope_positions(p, c['window'], c['k']), {'log_scale': 1}),
    'self_extend': ({'window': (int, 'the neighbour window w'), 'group': (int, 'the group size G, a divisor of w; '
                     '1 = plain RoPE'), **LOG_SCALE},
                    lambda p, c: self_extend_positions(p, c['window'], c['group']), {'log_scale': 0}),
    'dca': ({'chunk': (int, 'the chunk size S (< L)'), 'window': (int, 'the local window w (< S)'), **LOG_SCALE},
            lambda p, c: (dca_query_positions(p, c['chunk'], c['window'])[2], p % (c['chunk'] - c['window'])),
            {'log_scale': 0}),  # (its far map, for the reach: the older chunks')
}
FLAGS = {'log_scale'}  # 0 or 1; every other key is a number >= 1
SHORT = {'window': 'w', 'group': 'G', 'chunk': 'S'}  # in arm names


def check_position_map(pm):
    """Validate a position map: {'method': 'rerope', 'window': 64}, {'method': 'leaky_rerope', 'window': 64, 'k': 16},
    {'method': 'self_extend', 'window': 32, 'group': 4}, each with an optional 'log_scale' (0 or 1; on by default for
    ReRoPE and Leaky ReRoPE as in bojone/rerope, off for Self-Extend as in LongLM's scale_base=-1). Returns a
    normalized copy with every key set (None for None). window, group and k are >= 1 (window and group ints, k a
    number), and group divides window. Raises ValueError naming the field and the fix."""
    if pm is None:
        return None
    method = pm.get('method') if isinstance(pm, dict) else None
    if method not in POSITION_MAPS:
        raise ValueError(f"position_map = {pm!r}: 'method' is missing or unknown; give a dict like "
                         f"{{'method': 'rerope', 'window': 64}} with method one of {', '.join(POSITION_MAPS)}")
    keys, _, defaults = POSITION_MAPS[method]
    for k in pm:
        if k != 'method' and k not in keys:
            raise ValueError(f"position_map key {k!r} is not used by method {method!r}; "
                             f"accepted keys: method, {', '.join(keys)}")
    pm = {**defaults, **pm}
    for k, (typ, meaning) in keys.items():
        v = pm.get(k)
        if k in FLAGS:
            if v not in (0, 1):  # True and False too
                raise ValueError(f"position_map['{k}'] = {v!r} for method {method!r}: set 0 or 1 ({meaning})")
            continue
        number = not isinstance(v, bool) and isinstance(v, (int, float) if typ is float else int)
        if not number or not 1 <= v < math.inf:
            raise ValueError(f"position_map['{k}'] {'= ' + repr(v) if k in pm else 'is missing'} for method "
                             f"{method!r}: set {'a number' if typ is float else 'an int'} >= 1 ({meaning})")
    if method == 'self_extend' and pm['window'] % pm['group']:
        w, G = pm['window'], pm['group']
        raise ValueError(f"position_map['group'] = {G} for method 'self_extend' does not divide window = {w}: set a group "
                         f"among {divisors(w)} (LongLM's prefill shifts far keys by w - w/G and its decode by "
                         f"w - floor(w/G), equal only when G divides w)")
    if method == 'dca' and not pm['window'] < pm['chunk']:
        raise ValueError(f"position_map['window'] = {pm['window']} for method 'dca' must be below chunk = {pm['chunk']} "
                         f"(chunks of chunk - window tokens; ChunkLlama: chunk = 3L/4, window = L/16)")
    return {'method': method, **{k: typ(pm[k]) for k, (typ, _) in keys.items()}}


def divisors(n):
    return ', '.join(str(d) for d in range(1, n + 1) if n % d == 0)


def position_map_positions(pm, positions):
    """The far map's (query positions, key positions) at the given token positions, float64 (for rope_cos_sin)."""
    return POSITION_MAPS[pm['method']][1](positions.to(torch.float64), pm)


def is_position_map_spec(entry):
    """True when an arm spec names a position map ('rerope:window=64'), not a rope type."""
    return entry.strip().split(':')[0] in POSITION_MAPS


def parse_position_map(entry):
    """Arm spec -> position map: 'rerope:window=64', 'leaky_rerope:window=64:k=16', 'self_extend:window=32:group=4',
    'rerope:window=64:log_scale=0' (ReRoPE without the query's log scale)."""
    method, *pairs = entry.strip().split(':')
    if method not in POSITION_MAPS:
        raise ValueError(f"arm {entry!r}: {method!r} is not a position map; use one of {', '.join(POSITION_MAPS)}")
    return check_position_map({'method': method, **spec_settings(entry, pairs, POSITION_MAPS[method][0])})


def position_map_name(pm):
    """'rerope w=64', 'leaky_rerope w=64 k=16', 'self_extend w=32 G=4'; the log scale only where it differs from the
    method's default: 'rerope w=64 no-log', 'self_extend w=32 G=4 log'."""
    defaults = POSITION_MAPS[pm['method']][2]
    return pm['method'] + ''.join(f" {SHORT.get(k, k)}={v:g}" for k, v in pm.items() if k not in ('method', *FLAGS)) \
        + ''.join(f" {'log' if pm[k] else 'no-log'}" for k in FLAGS if k in pm and pm[k] != defaults.get(k))


def far_logits(q, k, pm, inv_freq, s, e, L=None):
    """Scaled float32 scores of queries s..e-1 against keys 0..e-1 under the map pm: q.k as given (q, k rotated at their
    own positions i, j, the near map) where i - j < window, else q turned on to pq(i) and k to pk(j) (the far map);
    -inf where j > i. RoPE rotations add up, so the far q is the near q turned by pq(i) - i more (unit factor: the
    attention factor already sits in q and k). The near scores are computed only on the band of keys that can be near.
    With pm['log_scale'] on, every score of query i, near and far, is multiplied by log_scales(i, L) (the reference
    multiplies q before both products; here the float32 scores, the same up to rounding): L, the length the model was
    trained at, is then required. pm is normalized first (a key left out takes the method's default)."""
    pm = check_position_map(pm)
    w = pm['window']
    pos = torch.arange(e, device=q.device)
    if pm['method'] == 'dca':  # three maps, not near and far
        att = dca_scores(q, k, pm, inv_freq, s, e)
    else:
        q_pos, k_pos = position_map_positions(pm, pos)
        turn = lambda x, by: apply_rope(x, *(t.to(x.dtype) for t in rope_cos_sin(inv_freq, by.to(x.device))))
        qf, kf = turn(q[:, :, s:e], q_pos[s:] - pos[s:].double()), turn(k[:, :, :e], k_pos - pos.double())
        lo = max(0, s - w + 1)
        att = (qf @ kf.transpose(-2, -1)).float()
        band = (q[:, :, s:e] @ k[:, :, lo:e].transpose(-2, -1)).float()
        att[..., lo:] = torch.where(pos[s:e, None] - pos[None, lo:e] < w, band, att[..., lo:])
    if pm['log_scale']:
        if L is None:
            raise ValueError("far_logits: position map with log_scale=1 needs L, the length the model was trained at")
        att.mul_(log_scales(pos[s:e], L).float()[:, None])
    future = pos[None, :] > pos[s:e, None]
    return att.div_(math.sqrt(q.size(-1))).masked_fill_(future, float('-inf'))


def mapped_logits(model, pm, L=None):
    """fn(layer, q, k, s, e) -> far_logits under pm with the model's frequencies for the forward's length (a dynamic
    type at length T): the score function that mapped_attention and the attention diagnostics use. Per layer: its
    own RoPE group's frequencies, its window or chunk mask; a NoPE layer keeps its own scores (log scale included).
    L (for the log scale): the length the model was trained at, by default model.config.block_size (a base: its L; a
    fine-tune: the length it was fine-tuned at)."""
    pm = check_position_map(pm)
    if model.config.pos_emb != 'rope':
        raise ValueError(f"a position map re-rotates RoPE's queries and keys; this model has pos_emb="
                         f"{model.config.pos_emb!r}: evaluate it without a map")
    if (model.config.rope_scaling or {}).get('start_token_idx'):
        raise ValueError("a position map re-rotates with one frequency table for every position; LongRoPE's "
                         "start_token_idx (n-hat) keeps the first positions on another: set it to 0 to combine them")
    if any(type(b.attn).logits is not CausalSelfAttention.logits for b in model.transformer.h
           if isinstance(b.attn, CausalSelfAttention)):  # (a conv layer, lab/conv.py, attends nowhere: no map)
        raise ValueError(f"a position map scores with plain RoPE dot products; attention={model.config.attention!r} "
                         f"has scores of its own (Scalable-Softmax?), which the map would drop")
    if not all(getattr(b.attn, 'rope_relative', True) for b in model.transformer.h):  # (FoPE: lab/fope.py)
        raise ValueError(f"a position map re-rotates queries and keys by plain RoPE (R(a)R(b) = R(a + b)); "
                         f"attention={model.config.attention!r} turns them by tables of its own, whose scores are not "
                         f"a function of i - j: evaluate it without a map")
    L = L or model.config.block_size
    if pm['method'] == 'dca' and pm['chunk'] >= L:
        raise ValueError(f"position_map chunk = {pm['chunk']} for method 'dca' reaches the model's length {L}: no "
                         f"distance it produces may exceed what training saw; set chunk < {L} (ChunkLlama: 3L/4)")

    def logits(layer, q, k, s, e):  # per layer: a NoPE layer has no rotation to map (its own scores, the log scale)
        attn, group = model.transformer.h[layer].attn, model.rope_index[layer]
        if group is None:
            att = attn.logits(q, k, s, e)
            return att.mul_(log_scales(torch.arange(s, e, device=q.device), L).float()[:, None]) if pm['log_scale'] \
                else att
        att = far_logits(q, k, pm, model.rope_freqs(q.size(2), group)[0], s, e, L)
        if attn.window is None and attn.chunk is None:
            return att
        ok = allowed(torch.arange(s, e, device=q.device), e, attn.window, attn.chunk)
        return att.masked_fill_(~ok, float('-inf'))
    return logits


def turn(x, inv_freq, by):
    """x (..., T, d) turned on by `by` (T,) more positions (float64, fractional allowed), unit factor: RoPE's rotations
    add up, so q or k rotated at i and turned by p - i is rotated at p (the attention factor already sits in x)."""
    return apply_rope(x, *(t.to(x.dtype) for t in rope_cos_sin(inv_freq, by.to(x.device))))


def fused_far(q, k, v, pm, inv_freq, block=512):
    """ReRoPE, Leaky ReRoPE, Self-Extend attention fused, exact: the near keys i - j < w with q, k as given
    (banded_attention, blocks of `block` queries), the far keys j <= i - w with q turned to pq(i) and k to pk(j) (once
    for all T), merged by their log-sum-exp. The far part is causal attention of queries w..T-1 over keys 0..T-1-w
    (query i's far keys are j <= i - w: the diagonal shifted by w), one fused causal call; queries i < w have none.
    No T x T tensor, no key a query cannot see. q's rows carry any query scale (the log scale) already."""
    T, w = q.size(2), pm['window']
    y, lse = banded_attention(q, k, v, window=w, block=block, lse=True)
    if T <= w:
        return y
    pos = torch.arange(T, device=q.device)
    q_pos, k_pos = position_map_positions(pm, pos)
    qf = turn(q[:, :, w:], inv_freq, q_pos[w:] - pos[w:].double())
    kf = turn(k[:, :, :T - w], inv_freq, k_pos[:T - w] - pos[:T - w].double())
    y[:, :, w:] = merge_lse([(y[:, :, w:], lse[..., w:]), causal_lse(qf, kf, v[:, :, :T - w])])[0]
    return y


def fused_dca(q, k, v, pm, inv_freq, block=512):
    """Dual Chunk Attention fused, exact: keys turned to their in-chunk index j mod c (c = S - w) once; per DCA chunk
    of queries, intra = its own chunk's keys, causal (one causal call), then per block of queries successive = the
    previous chunk's keys and inter = all older chunks' keys, each unmasked with q turned to dca_query_positions'
    position; the three softmaxes merge by their log-sum-exp (as the reference merges its flash-attention parts).
    q's rows carry any query scale already."""
    T, c = q.size(2), pm['chunk'] - pm['window']
    pos = torch.arange(T, device=q.device)
    kf = turn(k, inv_freq, (pos % c).double() - pos.double())
    intra, successive, inter = (turn(q, inv_freq, at - pos.double())
                                for at in dca_query_positions(pos, pm['chunk'], pm['window']))
    ys = []
    for c0 in range(0, T, c):
        c1 = min(c0 + c, T)
        own = causal_lse(intra[:, :, c0:c1], kf[:, :, c0:c1], v[:, :, c0:c1])
        if not c0:
            ys.append(own[0])
            continue
        for s in range(c0, c1, block):
            e = min(s + block, c1)
            parts = [(own[0][:, :, s - c0:e - c0], own[1][..., s - c0:e - c0]),
                     attention_lse(successive[:, :, s:e], kf[:, :, c0 - c:c0], v[:, :, c0 - c:c0])]
            if c0 > c:
                parts.append(attention_lse(inter[:, :, s:e], kf[:, :, :c0 - c], v[:, :, :c0 - c]))
            ys.append(merge_lse(parts)[0])
    return torch.cat(ys, 2)


def fused_mapped(q, k, v, pm, inv_freq, L=None, block=512):
    """Attention under the (normalized) position map pm, fused (fused_far, fused_dca): q's rows times log_scales(i, L)
    first when pm['log_scale'] is on (the reference scales q before every product; the chunked path its scores, the
    same up to rounding). q, k rotated at their own positions, as the attend seam gets them. For forwards without
    gradients: the CPU kernel's log-sum-exp carries none, so the merges would not differentiate."""
    if pm['log_scale']:
        q = q * log_scales(torch.arange(q.size(2), device=q.device), L).to(q.dtype)[:, None]
    return (fused_dca if pm['method'] == 'dca' else fused_far)(q, k, v, pm, inv_freq, block)


def mapped_attention(model, pm, chunk=128, L=None, fused=True, block=512):
    """The model's `attend` under position map pm: fn(layer, q, k, v) -> y, exact (L: as in mapped_logits). A RoPE layer
    with plain scores, no window, chunk or learned sink of its own runs fused (fused_mapped, blocks of `block`
    queries: no T x T tensor, about a causal forward's cost); any other layer, a forward that needs gradients (the
    CPU kernel's log-sum-exp has none, so the merge would not differentiate) and fused=False take the chunked scores
    of mapped_logits, `chunk` queries at a time (memory O(chunk x T)).
    Use: logits = model(x, attend=mapped_attention(model, pm))[0]."""
    logits = mapped_logits(model, pm, L)
    pm, L = check_position_map(pm), L or model.config.block_size

    def attend(layer, q, k, v):
        attn, group = model.transformer.h[layer].attn, model.rope_index[layer]
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
        if fused and not grad and group is not None and attn.window is None and attn.chunk is None \
                and sink_of(model, layer) is None:  # (plain scores: mapped_logits checked every layer's)
            return fused_mapped(q, k, v, pm, model.rope_freqs(q.size(2), group)[0], L, block)
        return chunked_attention(q, k, v, lambda s, e: logits(layer, q, k, s, e), chunk, sink=sink_of(model, layer))
    return attend
