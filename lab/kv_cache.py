"""
The KV cache: decode one token per step instead of running the whole prefix again, exactly.

    cache = KVCache(); logits = cache.forward(model, prompt); logits = cache.forward(model, next_token) ...
    ids = generate(model, prompt, 200, temperature=0.8, top_k=200)

Through the model's seams only: the new tokens run at positions past..l-1 (forward's pos) and every layer's attention
is the cache's (forward's attend): it appends the new keys and values and lets the new queries attend over all of them.
Exact for every rope type and layer pattern (NoPE layers, sliding windows, chunks, per-layer bases and scaling): the
logits equal a full forward of the prefix. A chunked layer's chunks count from the cache's first token, as a forward's
count from its first (Llama 4: from cache position 0).
  * Static types: a token's keys and values never change as the sequence grows, so each is computed once.
    Learned frequencies (model.py's learned_freqs, theta * exp(alpha)) are compared by value at every step: an alpha
    changed between calls (a training step) is a scale that moved, and the prefix is recomputed.
  * Dynamic types (dynamic, dynamic_yarn, longrope) change frequencies and temperature with the current length l.
    Caching keys unrotated and rotating them at use with l's tables (Hugging Face's fix for transformers #25104 /
    #27226) repairs the first layer only: deeper keys and values are functions of hidden states computed at the old
    scale (measured on a 2-layer model: next-token logits off by 1e-2). So when l's frequencies differ from the cached
    ones (or set_rope_scaling was called in between), the whole prefix is recomputed and the cache refilled: as fast
    as any cache while the scale holds still (l <= L for dynamic, l <= factor*L for dynamic_yarn), a full forward per
    step beyond.
  * Attention classes that mix in the previous token's key (smeared keys: `lookback = 1`) get the last cached token
    fed again with the new ones: its queries attend over the cache as before, its recomputed key is dropped (the
    cached one is right) and the new token's key mixes in the right previous key. One extra token per step.
    With grouped-query heads their keys differ per query head (the smear's gate is per query head, applied after
    the repeat: `keys_per_head`), so the cache keeps n_head keys (values stay n_kv_head): one key head per group
    gave logits off by 2.5.
  * Gated attention (lab/gated.py): causal attention, which the cache's reproduces; each fed token's row is gated after.
  * FoPE (lab/fope.py): its per-head tables are absolute (not relative), and qkv turns each fed token's keys by its
    own position's, so the keys cached are right; one table per key/value head, so one key head per group is kept.
  * FIRE (lab/fire.py, cache_at): its bias reads the query's position, so the cache runs the layer's own attend with
    the new queries' positions (at=) over every cached key; the forward gets no position ids (FIRE takes none).
  * CoPE (lab/cope.py, cache_at) alike: every cached key's position counts the gates of the new query, so its attend
    recomputes them from the cached keys at each step.
  * Short convolutions (lab/conv.py, `reach` = k - 1): a conv layer's output at a token reads its layer's inputs
    k - 1 tokens back, which nothing caches (the conv never calls attend), so those tokens are fed again; each conv
    layer widens what a token depends on by its reach, so the tokens fed again are the sum of the reaches (plus
    smeared keys' lookback). Exact; 2 conv layers of k = 3 cost 4 tokens more per step.
ALiBi's bias is not covered: generate() recomputes the prefix for it.
"""
import torch
import torch.nn.functional as F
from tqdm import tqdm

from model import BIASES, CausalSelfAttention, allowed, check_generate, sample_next


def blocker(model):
    """What keeps the cache from being exact for this model (None: nothing): ALiBi's bias, or an attention class
    with its own attend (Scalable-Softmax: lab/temperature.py), which the cache's attention would bypass; a class
    whose attend is causal attention's says so (cache_exact: lab/gated.py, whose gate acts after the seam), and one
    whose attend takes the queries' positions (cache_at: lab/fire.py, lab/cope.py) is run with them."""
    if model.config.pos_emb == 'alibi':
        return 'pos_emb=alibi'
    own = [type(b.attn).__name__ for b in model.transformer.h if isinstance(b.attn, CausalSelfAttention)  # (conv:
           and type(b.attn).attend is not CausalSelfAttention.attend  # no attention, fed again instead: its reach)
           and not getattr(b.attn, 'cache_exact', False)  # (gated attention: causal attention, its gate after)
           and not getattr(b.attn, 'cache_at', False)]  # (FIRE, CoPE: their own attend, told the queries' positions)
    return f"attention={model.config.attention!r}" if own else None


class KVCache:
    """The tokens fed so far, every layer's keys (rotated) and values, and the RoPE frequencies they were computed
    with. One cache per batch of sequences; a new generation starts with a new (or reset) cache."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.ids = None                   # (B, l) every token fed so far
        self.keys, self.values = [], []   # per layer (B, n_kv_head, l, head_dim): grouped heads stored once
                                          # (keys: n_head where they differ per head, keys_per_head)
        self.freqs = None                 # per RoPE group (inv_freq, attention_factor) the states were computed with

    @property
    def length(self):
        """Tokens fed so far (a property, not __len__, so that an empty cache is not falsy)."""
        return 0 if self.ids is None else self.ids.size(1)

    def forward(self, model, idx):
        """Logits (B, T, vocab) of idx's tokens, which follow the cached ones; the cache takes them in only when the
        forward succeeds (an exception leaves it as it was)."""
        if blocker(model):
            raise ValueError(f"the KV cache does not cover {blocker(model)}; run without it")
        B, T = idx.size()
        past = self.length
        if past and self.ids.size(0) != B:
            raise ValueError(f"kv_cache holds {self.ids.size(0)} sequences but idx has {B}; use one cache per batch "
                             f"(or cache.reset())")
        freqs = [model.rope_freqs(past + T, g) for g in range(len(getattr(model, 'rope_groups', ())))]
        empty = [None] * model.config.n_layer  # one entry per layer (a conv layer's stays None: it attends nowhere)
        keys, values = list(self.keys or empty), list(self.values or empty)
        if past and not all(f[1] == c[1] and (f[0] is c[0] or torch.equal(f[0], c[0])) for f, c in
                            zip(freqs, self.freqs)):  # static types: the same buffers (learned: the same values)
            idx, past, keys, values = torch.cat((self.ids, idx), dim=1), 0, list(empty), list(empty)  # scale moved
        back = min(past, max(getattr(b.attn, 'lookback', 0) for b in model.transformer.h)
                   + sum(getattr(b.attn, 'reach', 0) for b in model.transformer.h))  # (conv layers, lab/conv.py)
        feed = torch.cat((self.ids[:, past - back:past], idx), dim=1) if back else idx

        def attend(layer, q, k, v):
            attn = model.transformer.h[layer].attn
            g = model.config.n_head // model.config.n_kv_head  # qkv repeated each key/value head g times: keep one
            gk = 1 if getattr(attn, 'keys_per_head', False) else g  # (smeared keys: a gate per query head, all kept)
            k, v = k[:, ::gk, back:], v[:, ::g, back:]  # the re-fed tokens' keys and values are cached already
            if past:
                k, v = torch.cat((keys[layer], k), dim=2), torch.cat((values[layer], v), dim=2)
            keys[layer:layer + 1], values[layer:layer + 1] = [k], [v]
            if g > 1:  # grouped-query heads: the cache holds n_kv_head of them (1/g of the memory), repeated to use
                k, v = k if gk == 1 else k.repeat_interleave(gk, dim=1), v.repeat_interleave(g, dim=1)
            n, S, local = q.size(2), k.size(2), attn.window or attn.chunk
            if getattr(attn, 'cache_at', False):  # the layer's own attention for queries at S - n .. S - 1
                at = None if n == S else torch.arange(S - n, S, device=q.device).expand(q.size(0), n)
                return attn.attend(q, k, v, at)
            if n == S and not local:  # nothing cached before (a prompt, or a recomputed prefix)
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            # query i (position S - n + i) sees keys 0 .. S - n + i (its last `window` of them in a sliding-window
            # layer, those of its own chunk in a chunked one); SDPA's is_causal would align the mask top-left
            mask = None if n == 1 and not local else allowed(torch.arange(S - n, S, device=q.device), S, attn.window,
                                                             attn.chunk)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        pos = torch.arange(past - back, past + idx.size(1), device=idx.device)
        logits = model(feed, pos=None if model.config.pos_emb in BIASES else pos, attend=attend)[0]  # (FIRE, CoPE: at=)
        self.ids = idx if past == 0 else torch.cat((self.ids, idx), dim=1)
        self.keys, self.values, self.freqs = keys, values, freqs
        return logits[:, -T:]


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None, progress=False):
    """model.generate with a KV cache: the prompt once, then one token per step (exact, see above); for a model the
    cache does not cover, the prefix is recomputed at every step. Call model.eval() first."""
    check_generate(model, idx, max_new_tokens, temperature, top_k)
    cache = None if blocker(model) else KVCache()
    step = idx
    for _ in tqdm(range(max_new_tokens), disable=not progress, unit='tok', desc='generating', leave=False):
        logits = cache.forward(model, step) if cache is not None else model(idx)[0]
        step = sample_next(logits[:, -1], temperature, top_k, generator)
        idx = torch.cat((idx, step), dim=1)
    return idx
