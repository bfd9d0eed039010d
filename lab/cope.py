"""
CoPE, contextual position encoding (Golovneva, Wang, Weston, Sukhbaatar, "Contextual Position Encoding: Learning to
Count What's Important", 2024, arXiv 2405.18719): a key's position is not how many tokens lie between it and the
query but how many of them the query's gates open on, so a head can count lines, words or sentences. No rotation;
in every layer and head, for the query at i and the keys j <= i (d the head dim):

    a_ij     = q_i·k_j / √d                  the attention logit
    g_ij     = σ(a_ij)                       does query i count token j? (0 for j > i: future keys are masked)
    p_ij     = min(Σ_{t=j..i} g_it, P)       key j's position: the open gates from j up to the query; P = npos_max - 1
    z_i[n]   = q_i·e[n],  n = 0..P           the logit of every integer position (e: d x npos_max, learned)
    logit_ij = a_ij + (1 - w)·z_i[⌊p_ij⌋] + w·z_i[⌈p_ij⌉],   w = p_ij - ⌊p_ij⌋

Positions are fractional, so the embedding is interpolated between its integer neighbours; computing z for the P + 1
integers first and interpolating the logits (not the embeddings: q·e is linear) is the paper's efficient form, a
matrix product of Q x d x (P + 1) instead of one of Q x K x d. With every gate open p_ij = i - j + 1 (token counts);
a head that opens only on newlines gives p = the newlines among j..i: 0 for the keys of the query's own line, 1 for
the line before it (its newline included), and so on.

    python train.py config/train_shakespeare_char_cpu.py --pos_emb=cope --out_dir=out/char-cope
    python -m lab.cope --ckpt=out/char-cope           # what it counts: each head's mean gate per kind of token

The form, checked against the paper's code listing and the authors' code (facebookresearch/RAM,
projects/cope/src/cope/context_position.py and src/models/transformer.py):
  * the gate reads the scaled logit, σ(q·k/√d) (the paper's equations leave the scale out: g_ij = σ(q_i·k_j),
    softmax(q_i·(k_j + e[p_ij])); its listing takes the sigmoid of the logits already divided by √d, RAM's code
    divides before the sigmoid), with the attention's own key (RAM's --cope-sep-key and --cope-val-gates, off by
    default, use another key or the values);
  * √d divides q·k only; z is added unscaled (the listing: attn_logits / √d, then += cope(query, attn_logits); RAM's
    --cope-nodiv). RAM's default divides the sum (q·k + z)/√d: the same family up to e's scale, which is learned;
  * p is clamped to P = npos_max - 1 (both); npos_max = block_size + 1 (RAM's default when --cope-npos is unset:
    positions 0..L, so nothing is clamped inside L, where p_ij <= i - j + 1 <= L); NPOS_MAX below sets another (the
    paper's small p_max), and a checkpoint keeps the one it trained with (its e's shape wins on load);
  * e is one (d, npos_max) parameter per layer, shared by its heads (both fold the heads into the batch), initialised
    to zeros, so a new CoPE model starts as NoPE and learns its positions (RAM's --cope-shared, off by default, would
    share it across the layers too);
  * ⌊p⌋ and ⌈p⌉ carry no gradient; w does, so the gates learn through the interpolation (both).
Everything is computed in float32 with autocast off: p sums up to thousands of gates, which bfloat16's 8 bits would
round to a multiple of 2 past 256, 4 past 512.

Registered as the attention of pos_emb='cope' models (model.BIASES, like ALiBi's and FIRE's): no RoPE to scale, map or
pattern, one attention class per layer, no position ids (forward's pos=). `logits` and `attend(at=)` build the same
scores; the KV cache (lab/kv_cache.py) runs `attend` with the new queries' positions (cache_at): every old key's
position changes with each new query, which attend recomputes from the cached keys, exact. CoPE reads no absolute
position, and p_ij only the keys j..i, so a sliding crop (lab/crop.py: the keys before i - w + 1 masked after) gives
every key it leaves the position a forward over the window alone gives it: on one layer the two crop forms agree
(unlike FIRE's). A query temperature (lab/temperature.py) scales q before the layer, so it sharpens the gates too and
moves the positions. Past L, a head whose gates open on every token runs its positions off the trained range (held at
P); one that counts lines or words stays inside it: `python -m lab.cope` shows which heads do which.
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from configurator import ConfigError, get_config
from data.common import atomic_write_text, check_vocab, data_dir_of, doc_windows, load_meta, load_split
from data.checkpoints import load_checkpoint, model_from_checkpoint, train_len
from data.sources import get_tokenizer
from lab.attention import chunked_attention
from lab.engine.checks import check_ranges
from lab.engine.cli import cli
from lab.engine.device import pick_device
from model import ATTENTION, CausalSelfAttention, allowed

NPOS_MAX = None  # positions 0..npos_max-1 of a new model: None = block_size + 1 (RAM's default), or a count >= 2


def cope_gates(q, k, visible):
    """(a, g): the scaled logits a_ij = q_i·k_j/√d and the gates g_ij = σ(a_ij), 0 where `visible` (a bool mask
    broadcasting to (..., Q, K), True where query i sees key j) is False. q (..., Q, d), k (..., K, d); float32."""
    with torch.autocast(q.device.type, enabled=False):
        a = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.size(-1))
        return a, torch.sigmoid(a).masked_fill(~visible, 0.0)


def cope_positions(gates, npos_max):
    """p_ij = min(Σ_{t=j..i} g_it, npos_max - 1) of gates (..., Q, K) (0 where a query sees no key): the cumulative
    sum over the keys from the query's end back, one row per query. Float32."""
    return gates.float().flip(-1).cumsum(-1).flip(-1).clamp(max=npos_max - 1)


def cope_interpolate(z, p):
    """(1 - w)·z[⌊p⌋] + w·z[⌈p⌉], w = p - ⌊p⌋: the logits z (..., Q, npos) of the integer positions read at the
    fractional positions p (..., Q, K) -> (..., Q, K). p in [0, npos - 1]."""
    lo = p.floor()
    w = p - lo  # (the gradient reaches the gates through w; floor and ceil are integers)
    return torch.gather(z, -1, lo.long()) * (1 - w) + torch.gather(z, -1, p.ceil().long()) * w


def cope_logits(q, k, e, visible):
    """CoPE's float32 scores of queries q (..., Q, d) against keys k (..., K, d) with the position embeddings e
    (d, npos_max): a_ij + the interpolated z_i at p_ij (the module docstring), -inf where `visible` is False."""
    a, g = cope_gates(q, k, visible)
    with torch.autocast(q.device.type, enabled=False):
        z = q.float() @ e.float()  # (..., Q, npos_max): q_i·e[n] for every integer position n
        return (a + cope_interpolate(z, cope_positions(g, e.size(-1)))).masked_fill(~visible, float('-inf'))


class CoPEAttention(CausalSelfAttention):
    cache_at = True  # attend(q, k, v, at) is exact for queries at any positions `at` over all keys (lab/kv_cache.py)

    def __init__(self, config, spec):
        super().__init__(config, spec)
        npos = NPOS_MAX or config.block_size + 1
        if npos < 2:
            raise ValueError(f"lab.cope.NPOS_MAX={npos} must be >= 2 (positions 0 and 1 at least), or None for "
                             f"block_size + 1")
        self.cope_e = nn.Parameter(torch.zeros(config.n_embd // config.n_head, npos))  # e[n] = cope_e[:, n]

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        e = state_dict.get(prefix + 'cope_e')  # a checkpoint keeps the npos_max it trained with (NPOS_MAX or L + 1)
        if e is not None and e.dim() == 2 and e.size(0) == self.cope_e.size(0) and e.shape != self.cope_e.shape:
            self.cope_e = nn.Parameter(self.cope_e.new_zeros(e.shape))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def scores(self, q, k, i):
        """cope_logits of queries q at positions i ((Q,), or (B, 1, Q) for at=) against keys 0..K-1."""
        return cope_logits(q, k, self.cope_e, allowed(i, k.size(2), self.window, self.chunk))

    def logits(self, q, k, s, e):
        return self.scores(q[:, :, s:e], k[:, :, :e], torch.arange(s, e, device=q.device))

    def attend(self, q, k, v, at=None):
        if at is not None:  # q holds only the queries at positions at (B, K) (model.forward's at=, the KV cache)
            return torch.softmax(self.scores(q, k, at[:, None, :]), dim=-1).to(v.dtype) @ v
        p = self.dropout if self.training else 0.0
        return chunked_attention(q, k, v, lambda s, e: self.logits(q, k, s, e), dropout=p)


ATTENTION['cope'] = CoPEAttention


# ----------------------------------------------------------------------------- what it counts

CLASSES = ('newline', 'space', 'punctuation', 'letters', 'other')


def token_class(piece):
    """The kind of a token's text (a character of the char vocabulary, or a decoded BPE piece): 'newline' when it
    holds a line break, 'space' when it is only white space, 'letters' when it holds a letter, 'punctuation' when it is
    printable with no letter or digit, else 'other' (digits, the end-of-document character '\\x00')."""
    s = piece.strip()
    if '\n' in piece:
        return 'newline'
    if piece and not s:
        return 'space'
    if any(c.isalpha() for c in s):
        return 'letters'
    return 'punctuation' if s and s.isprintable() and not any(c.isalnum() for c in s) else 'other'


def gate_sums(gates, classes, n_classes=len(CLASSES)):
    """(sums (H, C), pairs (C,)) of one layer's gates (B, H, T, T), 0 above the diagonal, for the keys' class ids
    classes (B, T): sums[h, c] = Σ g_ij over every window and query i of head h and every key j <= i of class c,
    pairs[c] the number of those (i, j) (T - j queries see key j). Their ratio is the mean gate per class; windows
    add up."""
    onehot = F.one_hot(classes, n_classes).float()  # (B, T, C)
    seen = torch.arange(gates.size(-1), 0, -1, device=gates.device, dtype=torch.float32)  # T - j
    return torch.einsum('bhj,bjc->hc', gates.float().sum(-2), onehot), torch.einsum('j,bjc->c', seen, onehot)


@torch.no_grad()
def what_it_counts(model, x, vocab_classes, batch_size=4):
    """Which tokens each CoPE head's gates open on, over the windows x (N, T) of token ids: {'classes': CLASSES,
    'share': {class: its share of the keys}, 'heads': [{'layer', 'head', 'gate': {class: mean g_ij over the pairs
    (i, j <= i) whose key is of that class, None where none is}, 'opens_most_on': the class of the largest mean}]}.
    vocab_classes: one class name (CLASSES) per token id. The gates are read through the forward's attend seam (the
    layer's q and k), then the layer's own attention runs on."""
    if any(type(b.attn) is not CoPEAttention for b in model.transformer.h):
        raise ValueError(f"pos_emb={model.config.pos_emb!r}: only a CoPE model (pos_emb='cope') has gates to read")
    ids = torch.tensor([CLASSES.index(c) for c in vocab_classes], device=x.device)
    H, n_layer = model.config.n_head, model.config.n_layer
    sums, pairs = torch.zeros(n_layer, H, len(CLASSES)), torch.zeros(len(CLASSES))
    for b in range(0, x.size(0), batch_size):
        rows = x[b:b + batch_size]
        classes = ids[rows]

        def seam(layer, q, k, v):
            attn = model.transformer.h[layer].attn
            seen = allowed(torch.arange(q.size(2), device=q.device), k.size(2), attn.window, attn.chunk)
            s, n = gate_sums(cope_gates(q, k, seen)[1], classes)
            sums[layer] += s.cpu()
            if layer == 0:  # (the pairs are the same in every layer)
                pairs.add_(n.cpu())
            return attn.attend(q, k, v)
        model(rows, attend=seam)
    keys = torch.bincount(ids[x].flatten(), minlength=len(CLASSES)).float()
    heads = []
    for layer in range(n_layer):
        for h in range(H):
            gate = {c: (sums[layer, h, i] / pairs[i]).item() if pairs[i] else None
                    for i, c in enumerate(CLASSES)}
            heads.append(dict(layer=layer, head=h, gate=gate,
                              opens_most_on=max((c for c in CLASSES if gate[c] is not None), key=gate.get)))
    return dict(classes=list(CLASSES), share={c: (keys[i] / keys.sum()).item() for i, c in enumerate(CLASSES)},
                heads=heads)


def counts_table(result):
    """what_it_counts' result as the text table `python -m lab.cope` prints: one row per layer and head."""
    cols = result['classes']
    lines = ['keys: ' + ', '.join(f"{c} {100 * result['share'][c]:.1f}%" for c in cols),
             f"{'layer':>5} {'head':>4}  " + ' '.join(f"{c:>11}" for c in cols) + '  opens most on']
    for r in result['heads']:
        cells = ' '.join(f"{'-' if r['gate'][c] is None else format(r['gate'][c], '.3f'):>11}" for c in cols)
        lines.append(f"{r['layer']:>5} {r['head']:>4}  {cells}  {r['opens_most_on']}")
    return '\n'.join(lines)


DEFAULTS = dict(
    ckpt='',            # a run folder of a CoPE model (train.py --pos_emb=cope)
    text='',            # a text file to read (in the run's vocabulary); '' = held-out windows of the run's data
    eval_len=0,         # tokens per window; 0 = L, the length it trained at
    num_windows=8,      # windows (of the text, in order; of the data, drawn as eval.py draws them)
    seed=1337,          # picks the held-out windows
    batch_size=4,       # windows per forward
    device='cpu',
    out='',             # also write the result as JSON to this file ('' = print only)
)


def windows(cfg, meta, data_dir, T):
    """(N, T') token ids: the text's first num_windows runs of T tokens (T' = the text's length when shorter), or
    num_windows held-out windows of the run's val split."""
    if not cfg['text']:
        docs = meta['docs']['val']
        starts = doc_windows(docs, T + 1, cfg['num_windows'], cfg['seed'])  # (eval.py's picker and windows)
        data = load_split(data_dir, 'val', meta)
        return torch.from_numpy(np.stack([np.asarray(data[s:s + T], dtype=np.int64) for s in starts]))
    with open(cfg['text'], encoding='utf-8') as f:
        ids = get_tokenizer(meta)[0](f.read())
    if len(ids) < 2:
        raise ConfigError(f"text={cfg['text']} holds {len(ids)} token(s); the gates need at least 2")
    T = min(T, len(ids))
    n = max(1, min(cfg['num_windows'], len(ids) // T))
    return torch.tensor(ids[:n * T]).view(n, T)


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    check_ranges(cfg, positive=('num_windows', 'batch_size'), nonneg=('eval_len',))
    if not cfg['ckpt']:
        raise ConfigError("pass --ckpt=<run folder of a CoPE model> (train.py --pos_emb=cope)")
    ckpt = load_checkpoint(cfg['ckpt'])
    if ckpt['model_args'].get('pos_emb') != 'cope':
        raise ConfigError(f"ckpt={cfg['ckpt']} uses pos_emb={ckpt['model_args'].get('pos_emb')!r}: no CoPE gates to "
                          f"read; pass a run trained with --pos_emb=cope")
    if cfg['text'] and not os.path.isfile(cfg['text']):
        raise ConfigError(f"text={cfg['text']} is not a file; pass a text file, or '' for the run's held-out text")
    data_dir = data_dir_of((ckpt.get('dataset') or {}).get('dataset', ''))
    meta = load_meta(data_dir)
    check_vocab(ckpt.get('dataset') or {}, meta, data_dir, cfg['ckpt'])
    T = cfg['eval_len'] or train_len(ckpt)
    x = windows(cfg, meta, data_dir, T)
    decode = get_tokenizer(meta)[1]
    model = model_from_checkpoint(ckpt).to(pick_device(cfg['device'])).eval()
    result = what_it_counts(model, x.to(next(model.parameters()).device),
                            [token_class(decode([i])) for i in range(meta['vocab_size'])], cfg['batch_size'])
    print(f"what CoPE's gates open on: {cfg['ckpt']}, {x.size(0)} windows x {x.size(1)} tokens of "
          f"{cfg['text'] or 'its held-out text'}; each cell the mean gate g_ij over the (query, key) pairs whose key "
          f"is of that kind")
    print(counts_table(result))
    if cfg['out']:
        atomic_write_text(cfg['out'], json.dumps(dict(result, ckpt=cfg['ckpt'], windows=x.size(0), tokens=x.size(1),
                                                      text=cfg['text'] or None), indent=1) + '\n')
        print(f"wrote {cfg['out']}")
    return 0


if __name__ == '__main__':
    cli(main)
