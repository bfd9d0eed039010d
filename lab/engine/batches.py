"""
Training batches beyond nanoGPT's random windows, for train.py's one batch hook (train.batch_function): PoSE windows
(lab/pose.py), synthetic copies written into the windows (lab/copy_mix.py), alone or together, and LongRoPE2's mixed
windows (a share of the steps at L, or short windows beside the long ones in every step). train.py calls `for_run`
when one is on; every other run trains on plain random windows.

Every process draws the whole optimizer step from the one seeded generator and keeps its own micro-batches, so DDP sees
the single-process data, and a resumed run continues the same stream (the generator's state is in the checkpoint).
"""
import numpy as np
import torch

from configurator import ConfigError
from lab.engine.device import ddp_ranks
from data.common import to_device
from lab import copy_mix
from lab.pose import pose_draw, pose_offsets, pose_positions, random_positions

DEFAULTS = dict(  # train.py's settings for these batches
    pose=False, pose_len=0, pose_chunks=2,  # PoSE: windows of pose_len (0: L) in 2 chunks, ids skip across block_size
    pose_ids='chunks',            # PoSE's two chunks, or 'random': contiguous text, a sorted random sample of ids
    copy_share=0.0,               # synthetic retrieval: share of windows where a random string is written twice
    copy_span_lo=8, copy_span_hi=32,  # its length range (tokens); the distance is uniform, both copies in the window
    copy_fixed_iters=0,           # warm-up: the first steps' windows are one random string written twice (offset ~T/2)
    copy_max_distance=0,          # cap on the distance between the two copies (0: anywhere in the window)
    copy_words=0.0,               # share of the copy windows written as word-needle records instead (lab/copy_mix.py)
    mixed_short=0.0,              # LongRoPE2's mixed-window fine-tune: this share of the steps trains windows of L
                                  # tokens (longrope: its short factors, the original RoPE), evenly spread
    mixed_in_step=False,          # ... or every step: its long windows as ever plus short ones beside them, this share
)                                 # of its sequences (LongRoPE2's batches: the long tokens a plain fine-tune's)


class Batches:
    """Random training windows (x, y, PoSE ids or None) of W tokens from the torch.Generator gen: PoSE windows when
    pose=(target length T, the training documents) (T = W: the ordinary windows, ids 0..W-1), synthetic copies written
    in when copy = lab.copy_mix.settings(...)."""

    def __init__(self, data, W, batch_size, gen, device, pose=None, copy=None, short=None, random_ids=False):
        self.data, self.W, self.B, self.gen, self.device = data, W, batch_size, gen, device
        self.pose, self.copy, self.short = pose, copy, short  # short: (L, share, in_step) or None
        self.random_ids = random_ids  # PoSE's ids as a sorted random sample of 0..T-1 (lab.pose.random_positions)
        self.drawn = None  # PoSE: (raw span starts, PoseDraw) of the last step, each [n_micro, B]
        if pose is not None and pose[0] > W:  # PoSE reads spans of target + 1 tokens inside one document
            span = pose[0] + 1
            docs = [(start, end - start - span + 1) for _, start, end in pose[1] if end - start >= span]
            if not docs:
                raise ConfigError(f"PoSE reads {span} tokens (the target length + 1) inside one training document, "
                                  f"but the longest has {max(e - s for _, s, e in pose[1])}; lower the target length")
            start, n = torch.tensor(docs).T  # n: the spans that fit in each document
            self.doc_end = n.cumsum(0)  # span k (of all n.sum()) lies in the first document with k < doc_end,
            self.doc_offset = start - (self.doc_end - n)  # and starts at doc_offset + k

    def step(self, n_micro, rank=0, world=1, it=0):
        """This process's micro-batches of one optimizer step: n_micro drawn, rank, rank + world, ... kept.
        PoSE: a raw span of T + 1 tokens uniform over the spans inside the documents, two chunks of it (the text between
        them skipped) with their position ids skipped by an independent draw (lab/pose.py)."""
        shape, W = (n_micro, self.B), self.W
        if self.short and self.short[2]:  # LongRoPE2 in one step: the long micro-batches, then as many short ones
            L, share, _ = self.short
            short = Batches(self.data, L, round(self.B * share / (1 - share)), self.gen, self.device)
            return Batches(self.data, W, self.B, self.gen, self.device).step(n_micro, rank, world) + \
                short.step(n_micro, rank, world)
        if self.short and int((it + 1) * self.short[1]) > int(it * self.short[1]):  # LongRoPE2: a short step
            W = self.short[0]
        if self.pose is not None and self.pose[0] > W and self.random_ids:  # contiguous text, randomized ids
            starts = torch.randint(len(self.data) - W - 1, shape, generator=self.gen)
            offsets, pos = starts.unsqueeze(-1) + torch.arange(W + 1), random_positions(self.gen, shape, W,
                                                                                         self.pose[0])
        elif self.pose is not None and self.pose[0] > W:
            k = torch.randint(int(self.doc_end[-1]), shape, generator=self.gen)
            starts = self.doc_offset[torch.searchsorted(self.doc_end, k, right=True)] + k
            draw = pose_draw(self.gen, shape, W, self.pose[0])
            self.drawn = (starts, draw)
            offsets, pos = starts.unsqueeze(-1) + pose_offsets(draw, W), pose_positions(draw, W)
        else:  # ordinary windows of W + 1 tokens (PoSE without room to skip: the ordinary ids)
            starts = torch.randint(len(self.data) - W - 1, shape, generator=self.gen)
            offsets = starts.unsqueeze(-1) + torch.arange(W + 1)
            pos = None if self.pose is None else torch.arange(W).expand(*shape, W)
        w = torch.from_numpy(self.data[offsets.numpy()].astype(np.int64))
        if self.copy is not None:
            w = copy_mix.mix(w.view(-1, W + 1), self.gen, self.copy, it).view(*shape, W + 1)
        return [(*to_device(w[m, :, :-1], w[m, :, 1:], self.device), None if pos is None else pos[m].to(self.device))
                for m in range(rank, n_micro, world)]


def check(cfg, meta, L):
    """(the window length trained, the copy mix or None) of a run's settings, L its base's training length: PoSE
    trains windows of pose_len (0: L) and sees the ids of block_size. ConfigError or ValueError naming a setting out of
    range."""
    T = cfg['block_size']
    W = (cfg['pose_len'] or L) if cfg['pose'] else T
    if cfg['pose_ids'] not in ('chunks', 'random') or cfg['pose_ids'] == 'random' and not cfg['pose']:
        raise ConfigError(f"pose_ids={cfg['pose_ids']!r}: 'chunks' (PoSE's two) or 'random' (randomized positions), "
                          f"and 'random' needs pose=True")
    if cfg['pose'] and 'logpos' in (cfg.get('attention') or ''):
        raise ConfigError(f"pose=True with attention={cfg['attention']!r}: its query scale reads each token's index, "
                          f"which PoSE's skipped position ids would contradict; fine-tune it without PoSE")
    if cfg['pose'] and not (cfg['pose_chunks'] == 2 and 1 <= W <= T):
        raise ConfigError(f"pose_len={cfg['pose_len']}, pose_chunks={cfg['pose_chunks']} are out of range; PoSE needs "
                          f"1 <= pose_len <= block_size={T} (pose_len=0 means L) and pose_chunks=2 "
                          f"(the two chunks of the reference code, lab/pose.py)")
    if cfg['mixed_short'] and (cfg['pose'] or cfg['copy_share'] or cfg['copy_fixed_iters'] or
                               not 0 < cfg['mixed_short'] < 1 or not L < T):
        raise ConfigError(f"mixed_short={cfg['mixed_short']} (LongRoPE2's mixed windows) needs 0 < mixed_short < 1, "
                          f"block_size={T} > L={L} and no PoSE or synthetic copies; set it to 0 otherwise")
    if cfg['mixed_in_step'] and not cfg['mixed_short']:
        raise ConfigError("mixed_in_step=True mixes short windows into every step: give their share, e.g. "
                          "--mixed_short=0.5, or drop mixed_in_step")
    return W, copy_mix.settings(cfg, meta, W)  # the copy spans must fit the window trained


def add_records(mix, meta, text, T):
    """A mix with copy_words: the records' tokens from the training text's ids (lab.measure.ruler's word-needle format:
    its lower-case words of 5 letters as ' word', 5 digits after ' is '), so that its keys are training words and
    the eval's keys the held-out play's. ValueError when they do not fit windows of T tokens or the vocabulary.
    (The room is imported here, on the one path that writes its records: a run without copy_words never loads it.)"""
    from lab.measure.ruler import WORD, digit_tokens, encode, play_words
    records = dict(words=torch.from_numpy(play_words(text, meta, WORD['key_len'])),  # (the room's own record shape)
                   digits=torch.tensor(digit_tokens(meta)), mid=encode(meta, ' is '), value_len=WORD['value_len'])
    copy_mix.check_records(T + 1, **records)
    return dict(mix, records=records)


def for_run(cfg, meta, data, L, gen, device):
    """train.batch_function's answer for a run with PoSE or copies: (get_batch(it), the window length, a note)."""
    W, mix = check(cfg, meta, L)
    if mix and mix.get('words'):  # the records' keys: the training text's words
        mix = add_records(mix, meta, data, W)
    b = Batches(data, W, cfg['batch_size'], gen, device, (cfg['block_size'], meta['docs']['train']) if cfg['pose']
                else None, mix, (L, cfg['mixed_short'], cfg['mixed_in_step']) if cfg['mixed_short'] else None,
                cfg['pose_ids'] == 'random')
    (rank, world, _), n_micro = ddp_ranks(), cfg['gradient_accumulation_steps']
    note = '; '.join([f"{'randomized-position' if cfg['pose_ids'] == 'random' else 'PoSE'} windows of {W} tokens"]
                     * cfg['pose'] + ([copy_mix.describe(mix, W)] if mix else []) +
                     [f"mixed windows: {cfg['mixed_short']:.0%} of the "
                      f"{'sequences of every step' if cfg['mixed_in_step'] else 'steps'} at L = {L}"] *
                     bool(cfg['mixed_short']))
    return (lambda it: b.step(n_micro, rank, world, it)), W, note
