"""
PoSE (Zhu et al. 2023): train at a short length W and still see the position ids of a long one T. Each training window
is two chunks of text whose position ids skip forward, so relative distances up to T - 1 appear while every training
sequence stays W tokens long. This follows the authors' training code (github.com/dwzhu-pku/PoSE, src/train_pose.py,
train_preprocess_function_pose), which builds two chunks:

- the first chunk's length l is uniform in {1, ..., (W+1)//2} (random.randint(1, (len_chunk+1)//2));
- its text is the first l tokens of the raw span, its ids 0..l-1 (the id bias of chunk 1 is 0);
- the second chunk's text is the W - l tokens that end at a random point of the raw span (random.randint(W, L_x)), so
  the text between the chunks, v tokens with v uniform in {0, ..., L_x - W}, is skipped;
- its ids skip by u, uniform in {0, ..., T - W}, drawn independently of v (the paper's Table 4: v = u, v = 0 or v
  independent make little difference; the code draws them independently);
- labels = input_ids, shifted inside the model: each token's target is the next token of the assembled sequence, so
  chunk 1's last token is trained to predict chunk 2's first one (across the skipped text).

Here the raw span is L_x = T tokens read from inside one training document (lab.engine.batches.Batches), plus one token for the
last target: the reference reads up to 5 W tokens from the start of each document (tokenizer truncation at
model_max_position_embeddings * 5), this lab reads T from a random place in a document. `pose_draw` draws (l, v, u)
from a torch.Generator; `pose_offsets` and `pose_positions` turn them into where the W + 1 tokens sit in the raw span
and the W position ids the model takes through its `pos` seam. A windowed or chunked layer masks by those ids
(model.allowed): a query sees the keys whose position is within its window, the distances it sees at inference.

Randomized positions (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length Generalization of
Transformers"; the id sampling of 2026's Randomized YaRN): the window's text stays contiguous and its W position ids
are a sorted sample of W distinct ids from 0..T-1 (`random_positions`), so every distance up to T - 1 can appear and
the ids stay in order; `--pose_ids=random` with `--pose=True`. Randomized YaRN's length curriculum is not here.
"""
from typing import NamedTuple

import torch


class PoseDraw(NamedTuple):
    """One PoSE draw per window, LongTensors of the same shape: the first chunk's length l, the text skipped between
    the chunks v, and the skip u of the second chunk's position ids."""
    first: torch.Tensor
    text_skip: torch.Tensor
    id_skip: torch.Tensor


def pose_draw(gen, shape, W, T, span=None):
    """PoseDraw for windows of W tokens that should see the positions of a length T >= W, their text taken from a raw
    span of `span` >= W tokens (None: T) plus one for the last target, from the torch.Generator gen in this order:
    l ~ U{1, ..., (W+1)//2}, v ~ U{0, ..., span - W}, u ~ U{0, ..., T - W} (each of shape `shape`)."""
    span = T if span is None else span
    if not 1 <= W <= min(T, span):
        raise ValueError(f"PoSE needs 1 <= window length <= target length and raw span; got window {W}, target {T}, "
                         f"span {span}")
    uniform = lambda lo, hi: torch.randint(lo, hi + 1, tuple(shape), generator=gen)
    return PoseDraw(uniform(1, (W + 1) // 2), uniform(0, span - W), uniform(0, T - W))


def pose_offsets(d, W):
    """Where the W + 1 tokens of each window sit in its raw span, LongTensor [*shape, W + 1]: j for j < l (chunk 1),
    j + v for j >= l (chunk 2). Inputs are the first W of them, targets the last W: the target of position j is the
    token at offset j + 1 of the assembled sequence, so chunk 1's last token (j = l - 1) predicts chunk 2's first,
    raw[l + v], and chunk 2's last (j = W - 1) the raw token after it, raw[W + v] (at most raw[span])."""
    j = torch.arange(W + 1)
    return j + d.text_skip.unsqueeze(-1) * (j >= d.first.unsqueeze(-1))


def pose_positions(d, W):
    """PoSE position ids, LongTensor [*shape, W]: 0, ..., l - 1 for chunk 1 and l + u, ..., W - 1 + u for chunk 2, so
    ids increase strictly, are contiguous inside a chunk, and the last is W - 1 + u <= T - 1. With T = W (u = 0) they
    are the ordinary 0..W-1."""
    j = torch.arange(W)
    return j + d.id_skip.unsqueeze(-1) * (j >= d.first.unsqueeze(-1))


def random_positions(gen, shape, W, T):
    """Randomized position ids, LongTensor [*shape, W]: for each window a sample of W distinct ids from 0..T-1 in
    increasing order (Ruoss et al. 2023: the order kept, the gaps random), drawn from the torch.Generator gen."""
    if not 1 <= W <= T:
        raise ValueError(f"randomized positions need 1 <= window length <= target length; got {W} and {T}")
    keys = torch.rand(*shape, T, generator=gen)
    return keys.argsort(dim=-1)[..., :W].sort(dim=-1).values
