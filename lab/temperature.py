"""
The attention temperature as its own knob (issue 32): the shapes the field ships, each a factor on the queries at
absolute position p (so every score of that query is multiplied by it, the softmax sharpened past L), and
Scalable-Softmax trained into a model. L is the length the model was trained at.

  llama4     1 + beta * log1p(floor((p + 1) / F))      Llama 4, on its NoPE layers (attn_scale beta 0.1, floor_scale F;
                                                        8192 there, L here): 1 inside F, a step up every F tokens
  ministral  1 + beta * ln(1 + floor(p / L))            Ministral 3 (llama_4_scaling_beta 0.1), every layer, over YaRN
                                                        with its attention factor set to 1 ('yarn:attention_factor=1')
  logn       max(1, ln(p + 1) / ln L)                   ReRoPE's log-n scale (bojone/rerope), alone
  drope      1 + c * ln(max(1, (p + 1) / L))            DroPE's inference temperature 1 + c ln s at s = (p + 1)/L;
                                                        c chosen on dev windows (logn is c = 1/ln L)
  ssmax      s * ln(n),  n = the keys query p sees      Scalable-Softmax swapped in after training, one s for every
                                                        head (calibrated on dev windows); n = p + 1, or the window
                                                        (the layer's, or a crop's: only the keys it leaves), or
                                                        p mod c + 1 in a layer chunked by c (keys_seen)

As arms: `qtemp:shape=llama4:beta=0.1:layers=nope` alone (on the base's own RoPE) or after a rope spec,
`yarn:beta_fast=8:attention_factor=1+qtemp:shape=ministral`; `layers` = all | rope | nope picks the layers it scales,
`on` = all | rotary the dims: every dim of q (the whole logit, a softmax scale), or only the dims whose pairs turn (the
placement Hugging Face's cos/sin give YaRN's factor under a partial rotation; rope.rope_cos_sin).
They run through the model's attend seam (queries scaled, then the layer's own attention, window included), so they
cost no training and apply to any trained model.

Trained in: attention='ssmax' (or 'smear_keys_ssmax', the demo's recipe with smeared keys) multiplies each head's
queries by s_h * ln(n) with s_h learned, initialized at 1/ln L (the factor is 1 at n = L, below it shorter).
attention='logpos' (or 'smear_keys_logpos'): a learned per-head log-position query scale, queries at position p times
a_h * ln(p + 1) + b_h with a_h = 0 and b_h = 1 at init (the plain model), Mistral Large 4's query scale (issue 63; its
learned frequencies inv_freq * exp(alpha) are not here). p is the token's index, so PoSE's skipped ids are refused.
"""
import math

import torch

from configurator import ConfigError
from lab.smeared_keys import SmearedKeyAttention
from lab.spec import parse_value
from model import ATTENTION, CausalSelfAttention
from rope_config import PLACEMENTS  # every dim of q, or only the dims whose pairs turn

SHAPES = {  # shape -> ({key: (type, default or None = from L, meaning)}, factor(p, n, L, cfg) for positions p)
    'llama4': ({'beta': (float, 0.1, 'attn_scale'), 'floor': (int, None, 'floor_scale F (default L)')},
               lambda p, n, L, c: 1 + c['beta'] * torch.log1p(torch.floor((p + 1) / (c['floor'] or L)))),
    'ministral': ({'beta': (float, 0.1, 'llama_4_scaling_beta')},
                  lambda p, n, L, c: 1 + c['beta'] * torch.log1p(torch.floor(p / L))),
    'logn': ({}, lambda p, n, L, c: (torch.log1p(p) / math.log(L)).clamp(min=1.0)),
    'drope': ({'c': (float, None, 'the slope of 1 + c ln s (default 1/ln L)')},
              lambda p, n, L, c: 1 + (c['c'] if c['c'] is not None else 1 / math.log(L)) *
              torch.log(((p + 1) / L).clamp(min=1.0))),
    'ssmax': ({'s': (float, None, 's of s ln n (default 1/ln L)')},
              lambda p, n, L, c: (c['s'] if c['s'] is not None else 1 / math.log(L)) * torch.log(n)),
}
LAYERS = ('all', 'rope', 'nope')


def parse_temperature(entry):
    """'qtemp:shape=llama4:beta=0.1:layers=nope' -> {'shape': 'llama4', 'beta': 0.1, 'floor': None, 'layers':
    'nope'}, every key of the shape filled (None: from L). One-line errors naming the fix."""
    head, *pairs = entry.strip().split(':')
    got = dict(p.partition('=')[::2] for p in pairs)
    twice = next((k for k in got if [p.partition('=')[0] for p in pairs].count(k) > 1), None)
    if twice or '' in got.values():
        raise ValueError(f"temperature {entry!r}: {f'{twice} is given twice' if twice else 'a key has no value'}; "
                         f"give each key=value once")
    shape = got.pop('shape', None)
    if head != 'qtemp' or shape not in SHAPES:
        raise ValueError(f"temperature {entry!r}: write qtemp:shape=S[:key=value...] with S one of {', '.join(SHAPES)}")
    keys = SHAPES[shape][0]
    cfg = {'shape': shape, 'layers': got.pop('layers', 'all'), **{k: d for k, (_, d, _) in keys.items()}}
    if cfg['layers'] not in LAYERS:
        raise ValueError(f"temperature {entry!r}: layers={cfg['layers']!r}; use one of {', '.join(LAYERS)}")
    if 'on' in got:  # (kept only when given: 'all' is every temperature's placement before the key existed)
        cfg['on'] = got.pop('on')
    if cfg.get('on', 'all') not in PLACEMENTS:
        raise ValueError(f"temperature {entry!r}: on={cfg['on']!r}; use all (the whole logit) or rotary (the "
                         f"dims whose pairs turn, as HF's cos/sin carry YaRN's factor under a partial rotation)")
    for k, v in got.items():
        if k not in keys:
            raise ValueError(f"temperature {entry!r}: {k!r} is not a key of shape {shape!r} "
                             f"({', '.join(keys) or 'it takes none'}; and layers, on)")
        cfg[k] = parse_value(k, v, keys[k][0])
        if not 0 < cfg[k] < math.inf:  # (an infinite constant's NaNs would surface later, naming neither)
            raise ValueError(f"temperature {entry!r}: {k}={v} must be a finite number > 0")
    return cfg


def temperature_name(t):
    """'qtemp llama4 β=0.1 on nope': the shape, the keys that differ from its defaults, the layers when not all."""
    keys = SHAPES[t['shape']][0]
    extras = ''.join(f" {'β' if k == 'beta' else k}={t[k]:g}" for k in keys if t[k] is not None and t[k] != keys[k][1])
    return f"qtemp {t['shape']}{extras}" + ('' if t['layers'] == 'all' else f" on {t['layers']}") + \
        (' rotary-only' if t.get('on', 'all') == 'rotary' else '')


def query_factors(t, positions, L, window=None, keys=None):
    """The factor of each query position (a float32 tensor like positions) under temperature t; keys: the number of
    keys each query sees (default p + 1, at most window)."""
    p = positions.to(torch.float64)
    n = (p + 1 if window is None else (p + 1).clamp(max=window)) if keys is None else keys.to(torch.float64)
    return torch.broadcast_to(SHAPES[t['shape']][1](p, n, L, t), p.shape).to(torch.float32)


def keys_seen(i, attn, window=None):
    """How many keys the queries at positions i (a tensor) see in layer attn: i + 1, in a layer chunked by c
    i mod c + 1 (its keys start again at every chunk edge), at most the layer's window and a crop's `window`."""
    n = i % attn.chunk + 1 if attn.chunk else i + 1
    seen = [w for w in (attn.window, window) if w]
    return n.clamp(max=min(seen)) if seen else n


def scales_layer(t, model, layer):
    return t['layers'] == 'all' or (t['layers'] == 'nope') == (model.rope_index[layer] is None)


def scaled_queries(t, model, layer, q, L, window=None, start=None):
    """q (B, H, T, d) of a full forward, each query times its factor where t scales the layer. Query i sits at
    position i, or start[b] + i (start (B,): where each row's input begins, the truncated crop's cut); it sees
    keys_seen(i) keys: i + 1 (i mod c + 1 in a chunked layer), at most the layer's window and the crop's `window`
    (a crop hides the rest: SSMax's n counts what is seen)."""
    if not scales_layer(t, model, layer):
        return q
    i = torch.arange(q.size(2), device=q.device)
    keys = keys_seen(i, model.transformer.h[layer].attn, window)
    f = query_factors(t, i if start is None else start.to(i.device)[:, None] + i, L, keys=keys).to(q.dtype)
    f = f[:, None] if start is None else f[:, None, :, None]
    if t.get('on', 'all') == 'rotary':  # only the dims whose pairs turn: a NoPE layer's, or p-RoPE's stopped, stay
        g = model.rope_index[layer]
        turn = q.new_zeros(q.size(-1), dtype=torch.bool) if g is None else (model.rope_freqs(None, g)[0] != 0).repeat(2)
        f = torch.where(turn.to(q.device), f, torch.ones_like(f))
    return q * f


def tempered(model, t, attend=None, L=None, window=None, start=None):
    """The model's attend seam with temperature t: fn(layer, q, k, v) -> y, the queries of each layer it scales
    multiplied by their factor, then `attend` (a crop or position map's) or the layer's own attention. For full
    forwards (eval's scoring), where query i sits at position i (start: at start[b] + i, a truncated crop's rows);
    window: a sliding crop's, which bounds the keys each query sees (scaled_queries)."""
    L = L or model.config.block_size

    def run(layer, q, k, v):
        attn = model.transformer.h[layer].attn
        if q.size(2) != k.size(2):
            raise ValueError("a query temperature scores full forwards from position 0; run without a KV cache")
        q = scaled_queries(t, model, layer, q, L, window, start)
        return attn.attend(q, k, v) if attend is None else attend(layer, q, k, v)
    return run


def tempered_logits(model, t, logits=None, L=None, window=None, start=None):
    """The score function beside tempered (for the attention entropy): fn(layer, q, k, s, e)."""
    L = L or model.config.block_size

    def run(layer, q, k, s, e):
        attn = model.transformer.h[layer].attn
        q = scaled_queries(t, model, layer, q, L, window, start)
        return attn.logits(q, k, s, e) if logits is None else logits(layer, q, k, s, e)
    return run


# ----------------------------------------------------------------------------- Scalable-Softmax, trained in

def ssmax_class(base):
    """base attention with SSMax: queries at position i times s_h ln(n_i), n_i the keys i sees, s_h learned."""

    class SSMax(base):
        def __init__(self, config, spec):
            super().__init__(config, spec)
            self.ssmax = torch.nn.Parameter(torch.full((config.n_head, 1), 1 / math.log(max(config.block_size, 2))))

        def factors(self, i, window=None):  # i: query positions (T,) or (B, 1, K) -> (H, T, 1) or (B, H, K, 1), as q;
            n = keys_seen(i, self, window).to(torch.float32)  # n: the keys i sees (chunk, layer's or crop's window)
            return (self.ssmax * torch.log(n)).unsqueeze(-1)

        def attend(self, q, k, v, at=None, pos=None):
            if pos is not None:  # (model.GPT.forward passes pos only to a windowed or chunked layer)
                raise ValueError("SSMax counts the keys a windowed or chunked layer sees by token index, which PoSE's "
                                 "skipped position ids would contradict; PoSE-train SSMax on a pattern without windows "
                                 "or chunks, or without PoSE")
            i = torch.arange(k.size(2) - q.size(2), k.size(2), device=q.device) if at is None else at[:, None, :]
            return super().attend(q * self.factors(i).to(q.dtype), k, v, at)

        def logits(self, q, k, s, e):
            return self.windowed_logits(q, k, s, e, None)

        def windowed_logits(self, q, k, s, e, window):
            """The scores with every key before i - window + 1 hidden (lab/crop.py's sliding crop): ln n counts only
            the keys left, as in a forward over the last `window` tokens (the truncated crop)."""
            f = self.factors(torch.arange(s, e, device=q.device), window).to(q.dtype)
            return super().logits(torch.cat((q[:, :, :s], q[:, :, s:e] * f), 2), k, s, e)
    return SSMax


ATTENTION['ssmax'] = ssmax_class(CausalSelfAttention)
ATTENTION['smear_keys_ssmax'] = ssmax_class(SmearedKeyAttention)


# ----------------------------------------------------------------------------- a learned log-position query scale

def logpos_class(base):
    """base attention with a learned log-position query scale: queries at position i times a_h ln(i + 1) + b_h, a_h
    and b_h learned per head (0 and 1 at init: the base model exactly). Exact under the KV cache (cache_at: the
    factor of a query reads its own position only)."""

    class LogPosScale(base):
        cache_at = True  # attend(q, k, v, at) is exact for queries at positions `at` over all keys (lab/kv_cache.py)
        position_params = ('logpos_scale', 'logpos_bias')  # learned position parts (train.py's pos_lr_scale)

        def __init__(self, config, spec):
            super().__init__(config, spec)
            self.logpos_scale = torch.nn.Parameter(torch.zeros(config.n_head, 1))
            self.logpos_bias = torch.nn.Parameter(torch.ones(config.n_head, 1))

        def factors(self, i):  # i: query positions (T,) or (B, 1, K) -> (H, T, 1) or (B, H, K, 1), as q
            return (self.logpos_scale * torch.log1p(i.to(torch.float32)) + self.logpos_bias).unsqueeze(-1)

        def attend(self, q, k, v, at=None, pos=None):
            if pos is not None:  # (model.GPT.forward passes pos only to a windowed or chunked layer)
                raise ValueError("attention='logpos' scales a query by its token index; PoSE's skipped position ids "
                                 "would contradict it: train it without PoSE")
            i = torch.arange(k.size(2) - q.size(2), k.size(2), device=q.device) if at is None else at[:, None, :]
            return super().attend(q * self.factors(i).to(q.dtype), k, v, at)

        def logits(self, q, k, s, e):
            f = self.factors(torch.arange(s, e, device=q.device)).to(q.dtype)
            return super().logits(torch.cat((q[:, :, :s], q[:, :, s:e] * f), 2), k, s, e)
    return LogPosScale


ATTENTION['logpos'] = logpos_class(CausalSelfAttention)
ATTENTION['smear_keys_logpos'] = logpos_class(SmearedKeyAttention)


def split_temperature(entry):
    """An arm spec with a temperature after '+' -> (the rest, the temperature or None): 'yarn:beta_fast=8+qtemp:
    shape=logn' -> ('yarn:beta_fast=8', {...}); a bare 'qtemp:...' -> ('default', {...})."""
    rest, plus, temp = entry.rpartition('+')
    if not plus:
        return ('default', parse_temperature(entry)) if entry.strip().startswith('qtemp') else (entry, None)
    return rest.strip() or 'default', parse_temperature(temp)


def aimed_layers(temp, model_args):
    """The layers (indices) of a model of `model_args` (a checkpoint's) that temperature temp scales; ConfigError when
    none, as a rope scaling aimed at no layer is refused (rope_config.scaled_layers)."""
    from rope_config import parse_layers
    a = model_args
    specs = parse_layers(a.get('layers'), a['n_layer'], a['rope_base'], a['block_size'])
    rope = [s.rope and a['pos_emb'] == 'rope' for s in specs]
    hit = [i for i, r in enumerate(rope) if not specs[i].conv  # (a conv layer has no queries: lab/conv.py)
           and (temp['layers'] == 'all' or (temp['layers'] == 'nope') == (not r))]
    if not hit:
        raise ConfigError(f"temperature {temperature_name(temp)!r} is aimed at layers={temp['layers']!r}, but no layer "
                          f"of this model is {'NoPE' if temp['layers'] == 'nope' else 'RoPE'} (it would change "
                          f"nothing); aim it at {' or '.join(repr(k) for k in LAYERS if k != temp['layers'])}")
    if temp.get('on', 'all') == 'rotary' and not any(rope[i] for i in hit):
        raise ConfigError(f"temperature {temperature_name(temp)!r}: on='rotary' scales only the dims that turn, and "
                          f"no layer it is aimed at (layers={temp['layers']!r}) turns any (it would change nothing); "
                          f"use on=all")
    return hit


def with_temperature(arm, temp):
    """The arm once more with a query temperature, named '<arm> + qtemp <shape> ...'; refused when it scales no layer
    of the arm's model. Any form takes it: causal, a position map, either crop (lab.measure.forms.arm_form)."""
    if arm.get('ckpt'):
        aimed_layers(temp, arm['ckpt']['model_args'])
    head = arm['name'].removesuffix(' zero-shot')  # '' for the base itself: 'qtemp logn zero-shot'
    return dict(arm, name=(f"{head} + " if head else '') + temperature_name(temp) +
                (' zero-shot' if arm['kind'] == 'zero-shot' else ''), temperature=temp)
