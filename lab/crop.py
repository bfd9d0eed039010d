"""
The crop control (issue #20): the base model held to the last w tokens (w = L by default), the same weights, no
scaling. Does a context-extension method USE tokens more than L back, or does it merely stop breaking past L? The
crop is the model that cannot use them: an arm that beats it past L reads the far context; one that only matches
it has learned to ignore that context gracefully.

Two forms, as eval.py arms 'crop w=128 (sliding)' and 'crop w=128 (truncated)':

  sliding    `window_attention(model, w)`: every layer's query i sees only keys j with i - w < j <= i (its own score
             function, masked; one forward of T tokens through the model's `attend` seam). Each layer sees at most w
             keys, but the layers stack: layer 1 at j already summarizes tokens back to j - w + 1, so the final
             output at i can depend on tokens back to i - n_layer x (w - 1) (the receptive field). A sliding window
             is a weak crop: information from beyond w still flows up through the layers.
  truncated  `truncated_scores(model, rows, positions, w, ...)`: the prediction at p comes from a fresh forward over
             ONLY rows[max(0, p - w + 1) : p + 1], at position ids 0..n-1. Nothing before p - w + 1 exists for it,
             at any layer: the strict crop, and the honest "cannot use tokens more than w back" baseline.

The sink-kept crop (crop:form=sliding:sink=4): the sliding form in which every query also sees the first k tokens
of its input (StreamingLLM's attention sink + window, Xiao et al. 2023). A real LLM puts much of many heads'
attention on its first token; masking it from position w on breaks the model there (SmolLM2-135M: +0.475 nats at
8,192-8,319), so a crop without it measures its own breaking, not a model that cannot use far context. By default
(at=true) the kept tokens sit at their true distance, past L for a query beyond the window: distances RoPE never
saw, which cost the miniature (no sink head) +0.139 nats against the plain crop at 1.5 x L. With at=cache they sit
at StreamingLLM's cache positions, just before the window (distance w + k - 1 - j for kept token j, cache_scores),
and the miniature's sink-kept crop equals its plain one. The truncated form needs no such knob: its first token is a
sink by construction.

Both agree with the base at p < w (the whole prefix fits) and differ past w for a model of more than one layer. RoPE
(and ALiBi) are relative, so inside the window both see the true distances i - j < w, exactly what the model was
trained on; only the absolute position ids differ (the truncated crop restarts at 0), which relative encodings do not
see (learned / sinusoidal absolute encodings would: there the truncated crop is the model as trained, the sliding
one runs positions it never saw). A model with one layer gives the same numbers in both forms (up to rounding):
causal, sinks, ALiBi, NoPE, and SSMax, whose ln n counts only the keys the crop leaves (min(p + 1, w) in both forms);
not FIRE (lab/fire.py): its bias divides by ψ(max(L_thr, i)) at the query's own position, so past w the sliding crop
scores the window's distances with the full model's normaliser ψ(max(L_thr, p)) and the truncated one with
ψ(max(L_thr, w - 1)) (at w = L: as trained): the two agree at p < w and where p <= L_thr, and differ past both;
CoPE (lab/cope.py) does: key j's position counts the gates of keys j..i only, all in the window when j is;
an arm's query temperature (lab/temperature.py) runs in both, at the query's true position p with n = the keys it
sees. Not smeared keys (lab/smeared_keys.py): their first key in the sliding window mixes in the token before it.
A chunked layer (layers='rope:c=C', Llama 4) keeps its chunks in the sliding form (counted from the input's first
token, the window masking within them) and counts them from the cut in the truncated form: the model on a text that
begins there, as it was trained (tests/test_chunked.py builds both by hand).

An arm's own crop (--self_crop, self_crop_arms) is the arm with a crop: its weights, RoPE, attention class and query
temperature, built by the same code (lab.measure.forms.arm_form), so inside the window it is the arm itself.

Cost: sliding = one forward of T (chunked attention, memory O(chunk x T)); truncated = one forward of w tokens per
scored position (T x w tokens per row instead of T), batched by crop length into forwards of about batch_size x T
tokens (the budget of one eval forward of batch_size rows). Both are exact for every scored position.
"""
from contextlib import nullcontext

import numpy as np
import torch
import torch.nn.functional as F

import math

from lab.attention import attention_lse, banded_attention, chunked_attention, merge_lse, sink_of
from lab.spec import spec_settings
from rope_config import is_dynamic
from model import CausalSelfAttention

FORMS = ('sliding', 'truncated')
CROP_KEYS = {'window': (int, 'the window w: each prediction sees its last w tokens (default L)'),
             'form': (str, f"{' | '.join(FORMS)} | both (default both: two arms)"),
             'sink': (int, 'the sliding form also sees the first k tokens of its input (StreamingLLM; default 0)'),
             'at': (str, "where the kept tokens sit: 'true' (their own distance) or 'cache' (StreamingLLM's cache "
                         "positions, just before the window; default true)")}
SINK_AT = ('true', 'cache')


def check_window(window):
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"crop window={window!r} must be an int >= 1 (the number of tokens each prediction sees, "
                         f"itself included; L for the crop control)")
    return int(window)


# ----------------------------------------------------------------------------- sliding window


def window_logits(model, window, sink=0, at='true'):
    """fn(layer, q, k, s, e) -> the layer's own scaled float32 scores of queries s..e-1 against keys 0..e-1 (causal,
    ALiBi's bias, ...), -inf also where j <= i - window: query i sees keys i - window < j <= i, and the first `sink`
    keys beside them (the sink-kept crop; at='cache': each kept key scored at its cache distance, cache_scores). The
    score function of window_attention; also what lab.measure.diagnostics.attention_entropy / eval's entropy_at take
    as `logits`."""
    window, sink = check_window(window), check_sink(sink)

    def logits(layer, q, k, s, e):
        attn = model.transformer.h[layer].attn
        seen = getattr(attn, 'windowed_logits', None)  # scores that count the keys a query sees (SSMax's ln n)
        att = attn.logits(q, k, s, e) if seen is None else seen(q, k, s, e, window)
        if e <= window:  # every key j < e is within reach of every query s..e-1
            return att
        i = torch.arange(s, e, device=att.device)[:, None]
        j = torch.arange(e, device=att.device)[None, :]
        att = att.masked_fill((j <= i - window) & (j >= sink), float('-inf'))
        if at == 'cache' and sink:
            group = cache_group(model, layer)
            out = (j < sink) & (j <= i - window)  # the kept keys the band no longer holds
            far = cache_scores(q[:, :, s:e], k, window, sink, model.rope_freqs(q.size(2), group)[0], s)
            att[..., :far.size(-1)] = torch.where(out[:, :far.size(-1)], far, att[..., :far.size(-1)])
        return att
    return logits


def cache_group(model, layer):
    """The layer's RoPE group, for the cache positions of the sink-kept crop; ValueError where they do not apply."""
    attn, group = model.transformer.h[layer].attn, model.rope_index[layer]
    if group is None or type(attn).logits is not CausalSelfAttention.logits or attn.window or attn.chunk \
            or sink_of(model, layer) is not None or not getattr(attn, 'rope_relative', True):  # (FoPE: lab/fope.py)
        raise ValueError("crop at=cache re-rotates the kept keys of RoPE layers with plain scores and no window or "
                         "chunk of their own; this model has another layer: use at=true")
    return group


def sink_turned(q, k, window, sink, inv_freq, s=0):
    """StreamingLLM's cache positions for the kept keys: queries s.. turned back to position 0, kept key j turned to
    position -(window + sink - 1 - j), so their score is that of distance window + sink - 1 - j (the kept tokens
    just before a window of `window` tokens ending at the query), whatever the query's position."""
    from lab.position_maps import turn
    pos = torch.arange(s, s + q.size(2), device=q.device).double()
    j = torch.arange(sink, device=q.device).double()
    return turn(q, inv_freq, -pos), turn(k[:, :, :sink], inv_freq, -(window + sink - 1 - j) - j)


def cache_scores(q, k, window, sink, inv_freq, s=0):
    """Scaled float32 scores (..., Q, sink) of queries s.. against the kept keys at their cache distances."""
    q0, ks = sink_turned(q, k, window, sink, inv_freq, s)
    return (q0 @ ks.transpose(-2, -1)).float() / math.sqrt(q.size(-1))


def cache_sink_attention(q, k, v, window, sink, inv_freq):
    """The sink-kept crop with StreamingLLM's cache positions, fused: the band (banded_attention) merged by its
    log-sum-exp with the kept keys a query's band no longer holds, scored at their cache distances (sink_turned)."""
    T = q.size(2)
    y, lse = banded_attention(q, k, v, window, lse=True)
    if T <= window:
        return y
    q0, ks = sink_turned(q[:, :, window:], k, window, min(sink, T), inv_freq, window)
    i, j = torch.arange(window, T, device=q.device), torch.arange(min(sink, T), device=q.device)
    part = attention_lse(q0, ks, v[:, :, :min(sink, T)], j[None, :] <= i[:, None] - window)
    y = y.clone()
    y[:, :, window:] = merge_lse([(y[:, :, window:], lse[..., window:]), part])[0]
    return y


def window_attention(model, window, chunk=256, sink=0, at='true'):
    """The model's `attend` with a sliding window: fn(layer, q, k, v) -> y, exact: softmax over the layer's own scores
    restricted to the last `window` keys (and the first `sink` keys of the input: the sink-kept crop). Plain scores
    run fused (lab.attention.banded_attention: blocks of queries over the keys they see, about the causal forward's
    cost, no T x T tensor); scores of their own (ALiBi, SSMax, learned sinks, ...) one chunk of queries at a time,
    memory O(chunk x T). window >= T is the ordinary causal forward; window = 1 (no sink) returns v. No attention
    dropout (an eval path). Use: logits = model(x, attend=window_attention(model, L, sink=4))[0]."""
    logits = window_logits(model, window, sink, at)

    def attend(layer, q, k, v):
        attn = model.transformer.h[layer].attn
        fused = not (torch.is_grad_enabled() and q.requires_grad)  # (the fused merge's log-sum-exp has no gradient)
        if at == 'cache' and sink and fused:
            return cache_sink_attention(q, k, v, window, sink, model.rope_freqs(q.size(2), cache_group(model, layer))[0])
        own = attn.window if attn.window and attn.window < window else None  # the layer's own window, if tighter
        if fused and type(attn).logits is CausalSelfAttention.logits and sink_of(model, layer) is None and \
                not (sink and attn.window and not own):  # (a kept sink inside a layer's own wider window: chunks)
            return banded_attention(q, k, v, own or window, 0 if own else sink, attn.chunk)
        return chunked_attention(q, k, v, lambda s, e: logits(layer, q, k, s, e), chunk, sink=sink_of(model, layer))
    return attend


def check_sink(sink):
    if isinstance(sink, bool) or not isinstance(sink, (int, np.integer)) or sink < 0:
        raise ValueError(f"crop sink={sink!r} must be an int >= 0 (the first tokens every query also sees; "
                         f"StreamingLLM keeps 4)")
    return int(sink)


# ----------------------------------------------------------------------------- truncated input


def crop_batches(rows, items, window, batch_size, extra):
    """Group (key, r, p) items by crop length n = min(p + 1, window) and yield (items, x) batches, x[b] =
    rows[r, p - n + 1 : p + 1 + extra] (extra = 1 adds the target), about batch_size x (rows.size(1) - 1) tokens per
    batch (the budget of one eval forward of batch_size full rows)."""
    groups = {}
    for it in items:
        groups.setdefault(min(it[2] + 1, window), []).append(it)
    budget = batch_size * max(1, rows.size(1) - 1)
    for n, group in sorted(groups.items()):
        per = max(1, budget // n)
        for i in range(0, len(group), per):
            part = group[i:i + per]
            r = torch.tensor([it[1] for it in part], device=rows.device)
            p = torch.tensor([it[2] for it in part], device=rows.device)
            yield part, rows[r[:, None], (p - n + 1)[:, None] + torch.arange(n + extra, device=rows.device)]


def check_positions(positions, n_rows, limit, what):
    if len(positions) != n_rows:
        raise ValueError(f"positions has {len(positions)} lists for {n_rows} rows; give one list per row")
    for r, ps in enumerate(positions):
        bad = [p for p in ps if not 0 <= p < limit]
        if bad:
            raise ValueError(f"row {r}: position {bad[0]} is outside 0..{limit - 1} ({what})")


@torch.no_grad()
def truncated_scores(model, rows, positions, window, ctx=None, batch_size=8, preds=False, attend=None):
    """The truncated crop in lab.measure.scoring.score's format: for every p in positions[r], the NLL of rows[r, p + 1] (and whether
    the argmax is that target) from a forward over ONLY rows[r, max(0, p - window + 1) : p + 1], a fresh input at
    position ids 0..n-1 (n = min(p + 1, window)). Crops of one length share a forward (all of length `window` in
    big batches, see crop_batches); p < window is the model's ordinary forward over the whole prefix.
    attend: None (the model's own attention), or fn(start) -> the attend seam for a batch of crops whose first tokens
    sit at positions start (B,) of their rows (an arm's query temperature, lab.temperature.tempered(start=)).
    rows: LongTensor [R, n_tokens]; positions: R int lists, each p <= n_tokens - 2. Returns (loss, hit): R float /
    bool numpy arrays, in the order of positions[r] (and with preds=True the argmax tokens, as lab.measure.scoring.score)."""
    window = check_window(window)
    ctx = nullcontext() if ctx is None else ctx
    check_positions(positions, rows.size(0), rows.size(1) - 1, "each p needs its target p + 1 in the row")
    device = next(iter(model.parameters()), rows).device
    loss = [np.full(len(ps), np.nan) for ps in positions]
    hit = [np.zeros(len(ps), dtype=bool) for ps in positions]
    pred = [np.zeros(len(ps), dtype=np.int64) for ps in positions]
    items = [(j, r, int(p)) for r, ps in enumerate(positions) for j, p in enumerate(ps)]
    for part, x in crop_batches(rows, items, window, batch_size, extra=1):
        x = x.to(device)
        with ctx:  # only the last position's prediction is wanted: at= runs the last layer for it alone
            if attend is None:
                logits = model(x[:, :-1], at=torch.full((x.size(0), 1), x.size(1) - 2, device=device))[0][:, 0]
            else:  # (at= picks causal attention's queries: a seam runs the whole crop)
                start = torch.tensor([p for _, _, p in part], device=device) - (x.size(1) - 2)
                logits = model(x[:, :-1], attend=attend(start))[0][:, -1]
        target = x[:, -1]
        got_l = F.cross_entropy(logits.float(), target, reduction='none').cpu().numpy()
        got_p = logits.argmax(-1)
        got_h = (got_p == target).cpu().numpy()
        for (j, r, _), gl, gh, gp in zip(part, got_l, got_h, got_p.cpu().numpy()):
            loss[r][j], hit[r][j], pred[r][j] = gl, gh, gp
    return (loss, hit, pred) if preds else (loss, hit)


# ----------------------------------------------------------------------------- arms


def is_crop_spec(entry):
    """True when a --rope_types entry names the crop control ('crop', 'crop:window=64', 'crop:form=sliding')."""
    return entry.strip().split(':')[0] == 'crop'


def parse_crop(entry, L):
    """--rope_types entry -> crop dicts, one per form: 'crop' -> [{'window': L, 'form': 'sliding'}, {..., 'form':
    'truncated'}]; 'crop:window=64', 'crop:form=truncated', 'crop:window=64:form=sliding'."""
    name, *pairs = entry.strip().split(':')
    if name != 'crop':
        raise ValueError(f"arm {entry!r} is not a crop spec; write crop[:window=W][:form={'|'.join(FORMS)}|both]")
    try:
        given = spec_settings(entry, pairs, CROP_KEYS)
    except ValueError as e:
        raise ValueError(str(e) if entry in str(e) else f"arm {entry!r}: {e}") from None
    got = {'window': L, 'form': 'both', 'sink': 0, 'at': 'true', **given}
    if got['form'] not in FORMS + ('both',):
        raise ValueError(f"arm {entry!r}: form={got['form']!r} must be one of {', '.join(FORMS)}, both")
    try:
        window, sink = check_window(got['window']), check_sink(got['sink'])
    except ValueError as e:
        raise ValueError(f"arm {entry!r}: {e}") from None
    if got['at'] not in SINK_AT or got['at'] == 'cache' and not sink:
        raise ValueError(f"arm {entry!r}: at={got['at']!r} must be one of {', '.join(SINK_AT)}, and 'cache' needs "
                         f"sink >= 1 (write crop:form=sliding:sink=4:at=cache)")
    if sink and got['form'] != 'sliding':
        raise ValueError(f"arm {entry!r}: sink={sink} is the sliding form's (the truncated crop's first token is a "
                         f"sink by construction); write crop:form=sliding:sink={sink}")
    return [dict(window=window, form=f, **({'sink': sink} if sink else {}), **({'at': 'cache'} if got['at'] == 'cache' else {}))
            for f in (FORMS if got['form'] == 'both' else (got['form'],))]


def crop_name(crop):
    """'crop w=128 (sliding)', 'crop w=128 (truncated)', 'crop w=8192 sink=4 (sliding)' (the sink-kept crop)."""
    sink = f" sink={crop['sink']}" + (' cache' if crop.get('at') == 'cache' else '') if crop.get('sink') else ''
    return f"crop w={crop['window']}{sink} ({crop['form']})"


def self_crop_arms(cfg, arms):
    """--self_crop=sliding|truncated|both: every arm once more with its own weights and RoPE held to its own window:
    the zero-shot scalings to L, a fine-tune to the length it was fine-tuned at and to L (issue 31:
    "uses the context past its window" is an arm against its own crop, settings.vs_self; "better than the base's
    crop" is another statement). Left out: the base (its own crop is the crop control, --rope_types=crop), position
    maps (a map already replaces the attention a crop masks) and dynamic scalings (their scale follows the length of
    the input, which a crop changes)."""
    spec = cfg.get('self_crop') or ''
    if not spec:
        return
    forms = FORMS if spec == 'both' else (spec,)
    if spec != 'both' and spec not in FORMS:
        from configurator import ConfigError
        raise ConfigError(f"self_crop={spec!r} must be one of {', '.join(FORMS)}, both (or '' for none)")
    for a in [a for a in arms if not (a.get('crop') or a.get('position_map') or a['kind'] == 'base'
                                      or is_dynamic(a.get('scaling')))]:
        for w in sorted({a['L']} | ({a['seq_len']} if a['kind'] == 'fine-tuned' else set())):
            arms += [dict(a, name=f"{a['name']} held to {w} ({f})", crop={'window': w, 'form': f},
                          self_crop_of=a['name']) for f in forms]
