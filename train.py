"""
The one training engine: train a small RoPE GPT at a short context (and, through finetune_long.py,
fine-tune it at a longer one).

    python train.py config/train_shakespeare_char_cpu.py          # CPU, ~10 minutes
    python train.py config/train_shakespeare_char_cpu.py --max_iters=100 --out_dir=out-try
    python train.py config/train_shakespeare_char_cpu.py --init_from=resume     # continue a run
    python train.py config/train_shakespeare_char_cpu.py --bench=True           # tokens/s and MFU
    torchrun --standalone --nproc_per_node=4 train.py config/train_shakespeare_gpu.py

Settings: the defaults below, then config files (python files that assign some of these names),
then --key=value overrides, in the order given.
"""

import gc
import json
import math
import os
import signal
import time

import numpy as np
import torch
from tqdm import tqdm

from configurator import ConfigError, StopOnSignal, check_out_dir, cli, ddp_ranks, get_config, setup_device
from data.common import (atomic_torch_save, atomic_write_text, check_vocab, data_dir_of, doc_windows, fetch_windows,
                         load_meta, load_split, to_device)
from lab import bench, copy_mix
from lab.pose import pose_draw, pose_offsets, pose_positions
from model import GPT, GPTConfig, load_checkpoint, model_args, model_from_checkpoint

DEFAULTS = dict(
    # I/O
    out_dir='out-shakespeare-char',
    init_from='scratch',          # 'scratch' or 'resume' (continue the run in out_dir)
    overwrite=False,              # allow starting from scratch over an existing run in out_dir
    eval_interval=250,
    eval_iters=20,                # validation batches per evaluation (the same windows every time)
    log_interval=10,
    always_save_checkpoint=True,  # False: write ckpt.pt only when the validation loss improves
    # data
    dataset='shakespeare_char',   # a folder under data/ made by its prepare.py
    batch_size=32,                # sequences per micro-batch per process
    block_size=128,               # training length L
    gradient_accumulation_steps=1,  # micro-batches per optimizer step, summed over all processes
    pose=False, pose_len=0, pose_chunks=2,  # PoSE: windows of pose_len (0: L) in 2 chunks, ids skip across block_size
    copy_share=0.0,               # synthetic retrieval: share of windows where a random string is written twice
    copy_span_lo=8, copy_span_hi=32,  # its length range (tokens); the distance is uniform, both copies in the window
    copy_fixed_iters=0,           # warm-up: the first steps' windows are one random string written twice (offset ~T/2)
    copy_max_distance=0,          # cap on the distance between the two copies (0: anywhere in the window)
    # model
    n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False,
    pos_emb='rope',               # rope | sinusoidal | learned | alibi | none
    rope_base=10000.0,
    attention='causal',           # causal | smear_keys (each head's key mixes in the previous token's: lab/copy_mix.py)
    # AdamW and the learning-rate schedule (linear warm-up, then cosine decay to min_lr)
    learning_rate=1e-3, max_iters=2000, weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0,
    decay_lr=True, warmup_iters=100, lr_decay_iters=2000, min_lr=1e-4,
    # system
    device='auto',                # auto | cpu | cuda | cuda:N | mps
    dtype='auto',                 # auto (bfloat16 on CUDA when supported, else float32) | float32 | bfloat16 | float16
    compile=False,                # torch.compile the model
    seed=1337,
    bench=False,                  # time max_iters steps (no eval, no checkpoint), print tokens/s and MFU
    progress=True,                # tqdm bar
)

# ----------------------------------------------------------------------------- configuration

def run_config(argv, defaults=DEFAULTS):
    """get_config, except that --init_from=resume starts from the settings stored in the run's checkpoint
    (then config files and --key=value on top), so a resumed run keeps its schedule, batch and data.
    Returns (cfg, the loaded checkpoint or None): the checkpoint is read once and handed to train()."""
    cfg = get_config(argv, defaults)
    if cfg['init_from'] != 'resume':
        return cfg, None
    ckpt = load_checkpoint(cfg['out_dir'])
    stored = ckpt['config']
    return get_config(argv, defaults, start={k: stored.get(k, v) for k, v in defaults.items()}), ckpt


def check_settings(cfg, world):
    """Range checks that need no data, run before anything starts (world = number of DDP processes)."""
    for key in ('block_size', 'batch_size', 'gradient_accumulation_steps', 'eval_interval', 'eval_iters', 'log_interval'):
        if cfg[key] < 1:
            raise ConfigError(f"{key}={cfg[key]} is out of range; it must be a positive integer")
    for key in ('max_iters', 'warmup_iters', 'lr_decay_iters', 'learning_rate', 'min_lr', 'weight_decay', 'grad_clip'):
        if not cfg[key] >= 0:
            raise ConfigError(f"{key}={cfg[key]} is out of range; it must be >= 0")
    for key in ('beta1', 'beta2'):
        if not 0 <= cfg[key] < 1:
            raise ConfigError(f"{key}={cfg[key]} is out of range; it must be in [0, 1), like 0.9 or 0.99")
    accum = cfg['gradient_accumulation_steps']
    if accum % world:
        raise ConfigError(f"gradient_accumulation_steps={accum} is not divisible by the {world} processes; "
                          f"make it a multiple of {world}")
    if not 0 <= cfg['dropout'] < 1:
        raise ConfigError(f"dropout={cfg['dropout']} is out of range; it must be in [0, 1), like 0.0 or 0.1")
    check_out_dir(cfg['out_dir'])
    W = cfg['pose_len'] or cfg['block_size']
    if cfg['pose'] and not (cfg['pose_chunks'] == 2 and 1 <= W <= cfg['block_size']):
        raise ConfigError(f"pose_len={cfg['pose_len']}, pose_chunks={cfg['pose_chunks']} are out of range; PoSE needs "
                          f"1 <= pose_len <= block_size={cfg['block_size']} (pose_len=0 means L) and pose_chunks=2 "
                          f"(the two chunks of the reference code, lab/pose.py)")


def get_lr(it, cfg):
    if it < cfg['warmup_iters']:
        return cfg['learning_rate'] * (it + 1) / (cfg['warmup_iters'] + 1)
    if not cfg['decay_lr']:
        return cfg['learning_rate']
    if it > cfg['lr_decay_iters']:
        return cfg['min_lr']
    ratio = (it - cfg['warmup_iters']) / max(1, cfg['lr_decay_iters'] - cfg['warmup_iters'])
    return cfg['min_lr'] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (cfg['learning_rate'] - cfg['min_lr'])


# ----------------------------------------------------------------------------- data

class Batches:
    """Random training windows (x, y, PoSE ids or None) from one seeded generator: PoSE windows when pose=(target len,
    the training documents) (lab/pose.py), synthetic copies written in when copy = lab.copy_mix.settings(...). Every
    process draws the whole optimizer step and keeps its own micro-batches: DDP sees the single-process data."""

    def __init__(self, data, T, batch_size, seed, device, pose=None, copy=None):
        self.data, self.T, self.B, self.device, self.pose, self.copy = data, T, batch_size, device, pose, copy
        self.gen = torch.Generator().manual_seed(seed)
        self.drawn = None  # PoSE: (raw span starts, PoseDraw) of the last step, each [n_micro, B]
        if pose is not None and pose[0] > T:  # PoSE reads spans of target + 1 tokens inside one document
            span = pose[0] + 1
            docs = [(start, end - start - span + 1) for _, start, end in pose[1] if end - start >= span]
            if not docs:
                raise ConfigError(f"PoSE reads {span} tokens (the target length + 1) inside one training document, "
                                  f"but the longest has {max(e - s for _, s, e in pose[1])}; lower the target length")
            start, n = torch.tensor(docs).T  # n: the spans that fit in each document
            self.doc_end = n.cumsum(0)  # span k (of all n.sum()) lies in the first document with k < doc_end,
            self.doc_offset = start - (self.doc_end - n)  # and starts at doc_offset + k

    def step(self, n_micro, rank=0, world=1, it=0):
        if self.pose is not None and self.pose[0] > self.T:
            return self.pose_step(n_micro, rank, world, it)
        ix = torch.randint(len(self.data) - self.T - 1, (n_micro, self.B), generator=self.gen)
        pos = None if self.pose is None else torch.arange(self.T).expand(self.B, self.T).to(self.device)  # no skips
        if self.copy is None:
            xy = [fetch_windows(self.data, ix[m].tolist(), self.T, self.device) for m in range(rank, n_micro, world)]
        else:
            w = torch.from_numpy(np.stack([self.data[s:s + self.T + 1] for s in ix.flatten().tolist()]).astype(np.int64))
            w = copy_mix.mix(w, self.gen, self.copy, it).view(n_micro, self.B, self.T + 1)
            xy = [to_device(w[m, :, :-1], w[m, :, 1:], self.device) for m in range(rank, n_micro, world)]
        return [(x, y, pos) for x, y in xy]

    def pose_step(self, n_micro, rank, world, it):
        """PoSE windows (lab/pose.py): a raw span of target + 1 tokens uniform over the spans inside the documents,
        two chunks of it (the text between them skipped) with their position ids skipped by an independent draw."""
        W, shape = self.T, (n_micro, self.B)
        k = torch.randint(int(self.doc_end[-1]), shape, generator=self.gen)
        starts = self.doc_offset[torch.searchsorted(self.doc_end, k, right=True)] + k
        draw = pose_draw(self.gen, shape, W, self.pose[0])
        self.drawn = (starts, draw)
        w = torch.from_numpy(self.data[(starts.unsqueeze(-1) + pose_offsets(draw, W)).numpy()].astype(np.int64))
        if self.copy is not None:
            w = copy_mix.mix(w.view(-1, W + 1), self.gen, self.copy, it).view(n_micro, self.B, W + 1)
        pos = pose_positions(draw, W)
        return [(*to_device(w[m, :, :-1], w[m, :, 1:], self.device), pos[m].to(self.device))
                for m in range(rank, n_micro, world)]


@torch.no_grad()
def estimate_loss(model, val, starts, T, L, batch_size, device, ctx):
    """Mean validation loss over fixed windows, and over the positions >= L alone (None when T <= L)."""
    model.eval()
    losses = []
    for i in range(0, len(starts), batch_size):
        x, y = fetch_windows(val, starts[i:i + batch_size], T, device)
        with ctx:
            losses.append(model(x, y, reduction='none')[1].float().cpu())
    model.train()
    loss = torch.cat(losses)
    return loss.mean().item(), (loss[:, L:].mean().item() if T > L else None)


# ----------------------------------------------------------------------------- setting up a run

def load_data(cfg, T):
    """(data dir, meta, train tokens, val tokens), with the window length checked against the data."""
    data_dir = os.path.abspath(data_dir_of(cfg['dataset']))
    meta = load_meta(data_dir)
    train_data, val_data = load_split(data_dir, 'train'), load_split(data_dir, 'val')
    if T + 1 >= len(train_data):
        raise ConfigError(f"block_size={T} does not fit in the {len(train_data)} training tokens of {data_dir}")
    return data_dir, meta, train_data, val_data


def new_lineage(T):
    """Where a model came from; finetune_long.py fills in the base checkpoint, method and factor."""
    return dict(train_len=T, seq_len=T, base_checkpoint=None, rope_type=None, factor=None, finetune_steps=0)


def extended_model(base, base_path, scaling, L, T):
    """(model, lineage) of a base checkpoint switched to `scaling` (None: unscaled) for training or scoring at T:
    what finetune_long.py fine-tunes and search_longrope.py writes. The base path is stored absolute."""
    model = model_from_checkpoint(base)
    model.set_rope_scaling(scaling)
    model.config.block_size = T
    return model, dict(train_len=L, seq_len=T, base_checkpoint=os.path.abspath(base_path),
                       rope_type=scaling['rope_type'] if scaling else 'default',
                       factor=scaling['factor'] if scaling else None, finetune_steps=0)


def build_model(cfg, meta, data_dir, model=None, lineage=None, ckpt=None):
    """The model to train and its lineage: the resumed run's, the one handed in, or a new GPT from cfg."""
    T = cfg['block_size']
    if ckpt is not None:
        check_vocab(ckpt['dataset'], meta, data_dir, os.path.join(cfg['out_dir'], 'ckpt.pt'))
        model, lineage = model_from_checkpoint(ckpt), ckpt['lineage']
    elif model is None:
        model = GPT(GPTConfig(block_size=T, vocab_size=meta['vocab_size'], n_layer=cfg['n_layer'],
                              n_head=cfg['n_head'], n_embd=cfg['n_embd'], dropout=cfg['dropout'],
                              bias=cfg['bias'], pos_emb=cfg['pos_emb'], rope_base=cfg['rope_base'],
                              attention=cfg['attention']))
    if model.config.vocab_size != meta['vocab_size']:
        raise ConfigError(f"the model has a vocabulary of {model.config.vocab_size} but {data_dir} has "
                          f"{meta['vocab_size']}; use the dataset the model was trained on")
    if model.config.pos_emb == 'learned' and T > model.config.block_size:
        raise ConfigError(f"block_size={T} is longer than the model's learned position table "
                          f"({model.config.block_size})")
    return model, dict(lineage or new_lineage(T), seq_len=T)


def wrap_model(model, cfg, device_type):
    """torch.compile and/or DistributedDataParallel around the raw model, as the settings ask."""
    if cfg['compile']:
        model = torch.compile(model)
    rank, world, local_rank = ddp_ranks()
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[local_rank] if device_type == 'cuda' else None)
    return model


def train_step(model, optimizer, micro, ctx, grad_clip, ddp):
    """One optimizer step over the micro-batches (gradients synchronised on the last one); returns its loss."""
    for m, (x, y, pos) in enumerate(micro):
        if ddp:
            model.require_backward_grad_sync = m == len(micro) - 1
        with ctx:
            loss = model(x, y, pos=pos)[1] / len(micro)
        loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item() * len(micro)


def save_checkpoint(path, model, optimizer, batches, state, cfg, lineage, data_dir, meta, device):
    """Write the run atomically: weights, optimizer, RNG states, settings, lineage, vocabulary and log.
    Refuses non-finite weights, so a diverged run never replaces a good file."""
    if not torch.stack([torch.isfinite(p).all() for p in model.parameters()]).all():
        raise FloatingPointError(f"the weights are not finite at iter {state['iter_num']}")
    lineage['finetune_steps'] = state['iter_num'] if lineage['base_checkpoint'] else 0
    atomic_torch_save({
        'model': model.state_dict(), 'model_args': model_args(model), 'optimizer': optimizer.state_dict(),
        'iter_num': state['iter_num'], 'best_val_loss': state['best_val'], 'config': dict(cfg),
        'lineage': dict(lineage),
        'rng': {'batches': batches.gen.get_state(), 'torch': torch.get_rng_state(),
                'cuda': torch.cuda.get_rng_state(device) if str(device).startswith('cuda') else None},
        'dataset': {'data_dir': data_dir, 'dataset': cfg['dataset'], 'vocab_size': meta['vocab_size'],
                    'tokenizer': meta.get('tokenizer'), 'itos': meta.get('itos')},
        'log': state['rows']}, path)


def restore_state(ckpt, optimizer, batches, master, device):
    """A resumed run's optimizer, data-order generator and RNGs; returns its iter/best/log state."""
    optimizer.load_state_dict(ckpt['optimizer'])
    batches.gen.set_state(ckpt['rng']['batches'])
    if master:
        torch.set_rng_state(ckpt['rng']['torch'])
        if str(device).startswith('cuda') and ckpt['rng'].get('cuda') is not None:
            torch.cuda.set_rng_state(ckpt['rng']['cuda'], device)
    return dict(iter_num=ckpt['iter_num'], best_val=ckpt['best_val_loss'], rows=list(ckpt.get('log', [])))


# ----------------------------------------------------------------------------- the engine

def setup_run(cfg, model=None, lineage=None, ckpt=None):
    """Everything a run needs, validated before anything is written: device, data, model, optimizer, batches and the
    state to continue from. Returns a dict (its keys are the names used by train())."""
    rank, world, _ = ddp_ranks()
    check_settings(cfg, world)
    resume, out_dir, T = cfg['init_from'] == 'resume', cfg['out_dir'], cfg['block_size']
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    if cfg['init_from'] not in ('scratch', 'resume'):
        raise ConfigError(f"init_from={cfg['init_from']!r} is unknown; use scratch or resume "
                          f"(finetune_long.py takes a run folder)")
    if not resume and os.path.exists(ckpt_path) and not cfg['overwrite']:
        raise ConfigError(f"{out_dir} already holds a run (ckpt.pt); pass --init_from=resume to continue it, "
                          f"--overwrite=True to replace it, or another --out_dir")
    device, device_type, dtype, ctx = setup_device(cfg)
    data_dir, meta, train_data, val_data = load_data(cfg, T)
    if resume and ckpt is None:
        ckpt = load_checkpoint(ckpt_path)
    torch.manual_seed(cfg['seed'] + rank)
    model, lineage = build_model(cfg, meta, data_dir, model, lineage, ckpt if resume else None)
    L = lineage['train_len']
    W = (cfg['pose_len'] or L) if cfg['pose'] else T  # the length run; evaluation stays at T with ordinary ids
    lineage['pose'] = dict(len=W, chunks=cfg['pose_chunks']) if cfg['pose'] else None
    mix = copy_mix.settings(cfg, meta, W)
    model.to(device)
    optimizer = model.configure_optimizers(cfg['weight_decay'], cfg['learning_rate'],
                                           (cfg['beta1'], cfg['beta2']), device_type)
    batches = Batches(train_data, W, cfg['batch_size'], cfg['seed'], device,
                      (T, meta['docs']['train']) if cfg['pose'] else None, mix)
    state = restore_state(ckpt, optimizer, batches, rank == 0, device) if resume else \
        dict(iter_num=0, best_val=float('inf'), rows=[])
    if rank == 0:
        tqdm.write(f"{out_dir}: {model.get_num_params() / 1e6:.2f}M params, T={T}" + (f" (PoSE windows of {W})" if
                   cfg['pose'] else '') + f", device={device}, dtype={dtype}, compile={cfg['compile']}" +
                   (f"; {copy_mix.describe(mix, W)}" if mix else ''))
    return dict(rank=rank, world=world, model=model, lineage=lineage, optimizer=optimizer, batches=batches,
                state=state, ctx=ctx, device=device, net=wrap_model(model, cfg, device_type), L=L, W=W,
                val_data=val_data, val_starts=doc_windows(meta['docs']['val'], T + 1, cfg['eval_iters'] *
                                                          cfg['batch_size'], seed=cfg['seed']),
                save=lambda: save_checkpoint(ckpt_path, model, optimizer, batches, state, cfg, lineage, data_dir, meta,
                                             device))


def train(cfg, model=None, lineage=None, ckpt=None):
    """Train `model` (or a new GPT from cfg, or the run in out_dir when init_from='resume') for
    cfg['max_iters'] optimizer steps at length cfg['block_size']. Evaluates every eval_interval steps on
    fixed held-out windows, logs to out_dir/log.jsonl and writes out_dir/ckpt.pt atomically.
    Returns the last evaluation row (dict)."""
    r = setup_run(cfg, model, lineage, ckpt)
    state, master, world, out_dir = r['state'], r['rank'] == 0, r['world'], cfg['out_dir']
    if master:
        os.makedirs(out_dir, exist_ok=True)
    start_iter, t_start = state['iter_num'], time.time()
    clock = dict(t=t_start, iter=start_iter, tok_s=0.0, loss=None)  # the rate since the last log line
    last_row = state['rows'][-1] if state['rows'] else None  # a finished run that is resumed returns its last eval
    lr, stop_sig = get_lr(state['iter_num'], cfg), 0
    bar = tqdm(total=cfg['max_iters'], initial=start_iter, disable=not (master and cfg['progress']), unit='it',
               dynamic_ncols=True, desc=os.path.basename(os.path.normpath(out_dir)))
    try:
        with StopOnSignal(world, r['device'], cfg['log_interval']) as stop:
            while True:
                it = state['iter_num']
                if master and (it % cfg['eval_interval'] == 0 or it == cfg['max_iters']) and \
                        not (it == start_iter and last_row and last_row['iter'] == it):
                    last_row = evaluate(cfg, r, clock, lr, time.time() - t_start)
                stop_sig = stop.agreed(it)
                if it >= cfg['max_iters'] or stop_sig:
                    break
                lr = get_lr(it, cfg)
                for group in r['optimizer'].param_groups:
                    group['lr'] = lr
                loss = train_step(r['net'], r['optimizer'], r['batches'].step(cfg['gradient_accumulation_steps'],
                                  r['rank'], world, it), r['ctx'], cfg['grad_clip'], world > 1)
                state['iter_num'] = it = it + 1
                if it % cfg['log_interval'] == 0 or it == cfg['max_iters']:
                    log_step(clock, it, loss, cfg['batch_size'] * r['W'] * cfg['gradient_accumulation_steps'], bar, lr)
            if stop_sig and master:
                r['save']()
                tqdm.write(f"saved {os.path.join(out_dir, 'ckpt.pt')} at iter {state['iter_num']} (stopped by "
                           f"{signal.Signals(stop_sig).name}; continue with --init_from=resume)")
    except FloatingPointError as e:
        path = os.path.join(out_dir, 'ckpt.pt')
        kept = f"the last good checkpoint {path} is kept" if os.path.exists(path) else "no checkpoint was written"
        raise ConfigError(f"{e}; training stopped ({kept}); lower learning_rate or check the data") from None
    finally:
        bar.close()
        if world > 1:  # drop the DDP wrapper (its reducer talks to the group) before the group goes
            import torch.distributed as dist
            r['net'] = None
            gc.collect()  # DDP holds reference cycles: free its reducer now, not after the group is gone
            dist.destroy_process_group()
    if stop_sig:
        raise KeyboardInterrupt
    return last_row


def evaluate(cfg, r, clock, lr, elapsed):
    """One evaluation row: validation loss (and beyond L) on the fixed windows; the checkpoint is saved first (when it
    improved, or always), then the row is added to log.jsonl, so the log never names a step whose save failed."""
    state, it = r['state'], r['state']['iter_num']
    val, beyond = estimate_loss(r['model'], r['val_data'], r['val_starts'], cfg['block_size'], r['L'],
                                cfg['batch_size'], r['device'], r['ctx'])
    if not math.isfinite(val):
        raise FloatingPointError(f"validation loss is {val} at iter {it}")
    row = dict(iter=it, train_loss=clock['loss'], val_loss=round(val, 5),
               val_loss_beyond_L=None if beyond is None else round(beyond, 5), lr=lr,
               tokens_per_s=round(clock['tok_s'], 1), elapsed_s=round(elapsed, 2))
    state['rows'].append(row)
    if val < state['best_val'] or cfg['always_save_checkpoint']:
        state['best_val'] = min(state['best_val'], val)
        try:
            r['save']()
        except BaseException:
            state['rows'].pop()
            raise
    atomic_write_text(os.path.join(cfg['out_dir'], 'log.jsonl'), ''.join(json.dumps(x) + '\n' for x in state['rows']))
    tqdm.write(f"iter {it}: " + ('' if row['train_loss'] is None else f"train {row['train_loss']:.4f}, ") +
               f"val {val:.4f}" + ('' if beyond is None else f", val beyond L={r['L']}: {beyond:.4f}"))
    return row


def log_step(clock, it, loss, tokens_per_iter, bar, lr):
    """The training loss and the throughput since the previous log line, on the bar and in `clock`."""
    if not math.isfinite(loss):
        raise FloatingPointError(f"training loss is {loss} at iter {it}")
    now = time.time()
    clock.update(tok_s=tokens_per_iter * (it - clock['iter']) / max(now - clock['t'], 1e-9), t=now, iter=it, loss=loss)
    bar.set_postfix(loss=f'{loss:.4f}', tok_s=f"{clock['tok_s']:,.0f}", lr=f'{lr:.2e}')
    bar.update(it - bar.n)


def main(argv):
    cfg, ckpt = run_config(argv)
    if cfg['bench']:
        bench.run(cfg, setup_run, train_step)
    else:
        train(cfg, ckpt=ckpt)


if __name__ == '__main__':
    cli(main)
