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

from configurator import ConfigError, autocast_context, cli, get_config, pick_device
from data.common import (atomic_torch_save, atomic_write_text, data_dir_of, doc_windows, fetch_windows, insert_repeats,
                         load_meta, load_split, pose_positions, to_device)
from model import GPT, GPTConfig, load_checkpoint, model_from_checkpoint, model_args

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
    pose=False, pose_len=0, pose_chunks=2,  # PoSE: windows of pose_len (0: L), ids skip across block_size in chunks
    copy_share=0.0,               # synthetic retrieval: share of windows where a random string is written twice
    copy_span_lo=8, copy_span_hi=32,  # its length range (tokens); the distance is uniform, both copies in the window
    copy_fixed_iters=0,           # warm-up: the first steps' windows are one random string written twice (offset ~T/2)
    # model
    n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False,
    pos_emb='rope',               # rope | sinusoidal | learned | alibi | none
    rope_base=10000.0,
    smear_keys=False,             # each head's key mixes in the previous token's key (learned gate per head)
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

# Peak dense bf16 FLOP/s used for MFU; unknown devices report "n/a" rather than a guess.
PEAK_FLOPS = {'H100': 989e12, 'H200': 989e12, 'A100': 312e12, 'L4': 121e12, 'A10': 125e12, '4090': 165e12, '3090': 71e12}


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
    if os.path.exists(cfg['out_dir']) and not os.path.isdir(cfg['out_dir']):
        raise ConfigError(f"out_dir={cfg['out_dir']} is a file; pass a folder for the run")
    if cfg['pose'] and not 1 <= cfg['pose_chunks'] <= (cfg['pose_len'] or cfg['block_size']) <= cfg['block_size']:
        raise ConfigError(f"pose_len={cfg['pose_len']}, pose_chunks={cfg['pose_chunks']} are out of range; PoSE needs "
                          f"1 <= pose_chunks <= pose_len <= block_size={cfg['block_size']} (pose_len=0 means L)")


def check_vocab(stored, meta, data_dir, source):
    """The model's vocabulary (a checkpoint's 'dataset' entry) must be the data's: same tokenizer, size and,
    for characters, the same characters in the same order; otherwise the token ids mean different things."""
    for key in ('tokenizer', 'vocab_size', 'itos'):
        if stored.get(key) is not None and stored[key] != meta.get(key):
            raise ConfigError(f"{source} was trained on a {stored.get('tokenizer')} vocabulary of {stored.get('vocab_size')} "
                              f"tokens but {data_dir} has a {meta['tokenizer']} vocabulary of {meta['vocab_size']}"
                              f"{' (different characters)' if key == 'itos' else ''}; "
                              f"pass --dataset=<the data the model was trained on>")


def mfu(model, T, tokens_per_s, device):
    """Model FLOPs utilisation against the device's peak, or None when the peak is unknown (e.g. CPU)."""
    if not str(device).startswith('cuda'):
        return None
    name = torch.cuda.get_device_name(device)
    peak = next((v for k, v in PEAK_FLOPS.items() if k in name), None)
    return None if peak is None else model.flops_per_token(T) * tokens_per_s / peak


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
    """Random training windows (x, y, PoSE ids or None) from one seeded generator; ids when pose=(target len, chunks).
    Every process draws the whole optimizer step and keeps its own micro-batches: DDP sees the single-process data."""

    def __init__(self, data, T, batch_size, seed, device, pose=None, copy=None):
        self.data, self.T, self.B, self.device, self.pose = data, T, batch_size, device, pose
        self.gen = torch.Generator().manual_seed(seed)
        self.copy = copy  # insert_repeats' settings (share, span_lo, span_hi, vocab_size, exclude), or None

    def step(self, n_micro, rank=0, world=1, it=0):
        ix = torch.randint(len(self.data) - self.T - 1, (n_micro, self.B), generator=self.gen)
        pos = None if self.pose is None else \
            pose_positions(self.gen, (n_micro, self.B), self.T, *self.pose).to(self.device)
        mix = self.copy and dict(self.copy)
        if mix and it < mix.pop('fixed_iters'):  # a copy at a fixed offset: learned fast, as a positional copy
            mix.update(share=1.0, span_lo=(self.T + 1) // 2, span_hi=(self.T + 1) // 2)
        if not (mix and mix['share'] > 0):
            xy = [fetch_windows(self.data, ix[m].tolist(), self.T, self.device) for m in range(rank, n_micro, world)]
        else:
            w = torch.from_numpy(np.stack([self.data[s:s + self.T + 1] for s in ix.flatten().tolist()]).astype(np.int64))
            w = insert_repeats(w, self.gen, **mix).view(n_micro, self.B, self.T + 1)
            xy = [to_device(w[m, :, :-1], w[m, :, 1:], self.device) for m in range(rank, n_micro, world)]
        return [(x, y, None if pos is None else pos[m]) for m, (x, y) in zip(range(rank, n_micro, world), xy)]


def copy_mix(cfg, meta, verbose=False):
    """insert_repeats' settings (+ fixed_iters) for Batches from cfg, None when there is no mix; printed when verbose."""
    if not (cfg['copy_share'] > 0 or cfg['copy_fixed_iters'] > 0):
        return None
    mix = dict(share=cfg['copy_share'], span_lo=cfg['copy_span_lo'], span_hi=cfg['copy_span_hi'],
               vocab_size=meta['vocab_size'], exclude=meta['eot_token'], fixed_iters=cfg['copy_fixed_iters'])
    if mix['fixed_iters'] < 0 or not (mix['share'] <= 1 and 1 <= mix['span_lo'] <= mix['span_hi']
                                      and 2 * mix['span_hi'] <= cfg['block_size'] + 1):
        raise ConfigError(f"copy_share={mix['share']} must be in [0, 1], copy_fixed_iters >= 0 and 1 <= copy_span_lo="
                          f"{mix['span_lo']} <= copy_span_hi={mix['span_hi']} <= (block_size+1)/2 = {(cfg['block_size'] + 1) // 2}")
    if verbose:
        half = (cfg['block_size'] + 1) // 2
        tqdm.write(f"synthetic copies: steps < {mix['fixed_iters']}: every window is a random string of {half} tokens "
                   f"written twice (fixed offset); then " * (mix['fixed_iters'] > 0) +
                   f"{100 * mix['share']:g}% of windows carry a random string of {mix['span_lo']}-{mix['span_hi']} "
                   f"tokens written twice, at a uniform distance inside the window")
    return mix


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

def ddp_ranks():
    """(rank, world_size, local_rank) from torchrun's environment; (0, 1, 0) for a plain `python` run."""
    if 'RANK' not in os.environ:
        return 0, 1, 0
    return int(os.environ['RANK']), int(os.environ['WORLD_SIZE']), int(os.environ['LOCAL_RANK'])


def setup_device(cfg, training=True):
    """(device, device_type, dtype actually run, autocast context); joins torchrun's process group if any."""
    rank, world, local_rank = ddp_ranks()
    device = pick_device(cfg['device'])
    if world > 1:
        from torch.distributed import init_process_group, is_initialized
        if not is_initialized():
            init_process_group(backend='nccl' if device.startswith('cuda') else 'gloo')
        if device.startswith('cuda'):
            device = f'cuda:{local_rank}'
            torch.cuda.set_device(local_rank)
    device_type = device.split(':')[0]
    return (device, device_type) + autocast_context(device_type, cfg['dtype'], training=training)


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
                              smear_keys=cfg['smear_keys']))
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


class StopOnSignal:
    """Ctrl-C (SIGINT) and SIGTERM set a flag instead of killing the run: the loop finishes its step, saves once
    and stops. Under torchrun every rank catches them, and the ranks agree (an all-reduce of the flags every
    `every` steps), so all stop after the same step even when only one of them got the signal."""

    def __init__(self, world, device, every):
        self.sig, self.world, self.device, self.every = 0, world, device, every

    def __enter__(self):
        self.old = {s: signal.signal(s, self.catch) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def catch(self, signum, frame):
        self.sig = signum

    def __exit__(self, *exc):
        for s, h in self.old.items():
            signal.signal(s, h)

    def agreed(self, iter_num):
        """The signal to stop on (0: go on), the same on every rank."""
        if self.world == 1:
            return self.sig
        if iter_num % self.every:
            return 0
        import torch.distributed as dist
        flag = torch.tensor([self.sig], device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item())


# ----------------------------------------------------------------------------- the engine

def train(cfg, model=None, lineage=None, ckpt=None):
    """Train `model` (or a new GPT from cfg, or the run in out_dir when init_from='resume') for
    cfg['max_iters'] optimizer steps at length cfg['block_size']. Evaluates every eval_interval steps on
    fixed held-out windows, logs to out_dir/log.jsonl and writes out_dir/ckpt.pt atomically.
    Returns the last evaluation row (dict)."""
    rank, world, _ = ddp_ranks()
    check_settings(cfg, world)
    master, resume, out_dir = rank == 0, cfg['init_from'] == 'resume', cfg['out_dir']
    T, B, accum = cfg['block_size'], cfg['batch_size'], cfg['gradient_accumulation_steps']
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
    val_starts = doc_windows(meta['docs']['val'], T + 1, cfg['eval_iters'] * B, seed=cfg['seed'])
    L = lineage['train_len']
    W = (cfg['pose_len'] or L) if cfg['pose'] else T  # the length run; evaluation stays at T with ordinary ids
    lineage['pose'] = dict(len=W, chunks=cfg['pose_chunks']) if cfg['pose'] else None
    model.to(device)
    optimizer = model.configure_optimizers(cfg['weight_decay'], cfg['learning_rate'],
                                           (cfg['beta1'], cfg['beta2']), device_type)
    batches = Batches(train_data, W, B, cfg['seed'], device, (T, cfg['pose_chunks']) if cfg['pose'] else None,
                      copy_mix(cfg, meta, master))
    state = restore_state(ckpt, optimizer, batches, master, device) if resume else \
        dict(iter_num=0, best_val=float('inf'), rows=[])
    net = wrap_model(model, cfg, device_type)
    save = lambda: save_checkpoint(ckpt_path, model, optimizer, batches, state, cfg, lineage, data_dir, meta, device)
    if master:
        os.makedirs(out_dir, exist_ok=True)

    start_iter, t_start = state['iter_num'], time.time()
    clock = dict(t=t_start, iter=start_iter, tok_s=0.0, loss=None)  # the rate since the last log line
    last_row = state['rows'][-1] if state['rows'] else None  # a finished run that is resumed returns its last eval
    lr, stop_sig = get_lr(state['iter_num'], cfg), 0
    bar = tqdm(total=cfg['max_iters'], initial=start_iter, disable=not (master and cfg['progress']), unit='it',
               dynamic_ncols=True, desc=os.path.basename(out_dir.rstrip('/')))
    try:
        with StopOnSignal(world, device, cfg['log_interval']) as stop:
            while True:
                it = state['iter_num']
                if master and (it % cfg['eval_interval'] == 0 or it == cfg['max_iters']) and \
                        not (resume and it == start_iter and last_row and last_row['iter'] == it):
                    val, beyond = estimate_loss(model, val_data, val_starts, T, L, B, device, ctx)
                    if not math.isfinite(val):
                        raise FloatingPointError(f"validation loss is {val} at iter {it}")
                    last_row = dict(iter=it, train_loss=clock['loss'], val_loss=round(val, 5),
                                    val_loss_beyond_L=None if beyond is None else round(beyond, 5), lr=lr,
                                    tokens_per_s=round(clock['tok_s'], 1), elapsed_s=round(time.time() - t_start, 2))
                    log_eval(out_dir, state, last_row, L)
                    if val < state['best_val'] or cfg['always_save_checkpoint']:
                        state['best_val'] = min(state['best_val'], val)
                        save()
                stop_sig = stop.agreed(it)
                if it >= cfg['max_iters'] or stop_sig:
                    break
                lr = get_lr(it, cfg)
                for group in optimizer.param_groups:
                    group['lr'] = lr
                loss = train_step(net, optimizer, batches.step(accum, rank, world, it), ctx, cfg['grad_clip'], world > 1)
                state['iter_num'] = it = it + 1
                if it % cfg['log_interval'] == 0 or it == cfg['max_iters']:
                    log_step(clock, it, loss, B * W * accum, bar, lr)
            if stop_sig and master:
                save()
                tqdm.write(f"saved {ckpt_path} at iter {state['iter_num']} (stopped by "
                           f"{signal.Signals(stop_sig).name}; continue with --init_from=resume)")
    except FloatingPointError as e:
        kept = f"the last good checkpoint {ckpt_path} is kept" if os.path.exists(ckpt_path) else "no checkpoint was written"
        raise ConfigError(f"{e}; training stopped ({kept}); lower learning_rate or check the data") from None
    finally:
        bar.close()
        if world > 1:  # drop the DDP wrapper (its reducer talks to the group) before the group goes
            import torch.distributed as dist
            net = None  # noqa: F841
            gc.collect()  # DDP holds reference cycles: free its reducer now, not after the group is gone
            dist.destroy_process_group()
    if stop_sig:
        raise KeyboardInterrupt
    return last_row


def log_eval(out_dir, state, row, L):
    """Append an evaluation row to the run's log (log.jsonl, rewritten atomically) and print it."""
    state['rows'].append(row)
    atomic_write_text(os.path.join(out_dir, 'log.jsonl'), ''.join(json.dumps(r) + '\n' for r in state['rows']))
    tqdm.write(f"iter {row['iter']}: train {row['train_loss'] if row['train_loss'] is None else round(row['train_loss'], 4)}, "
               f"val {row['val_loss']:.4f}" + ('' if row['val_loss_beyond_L'] is None else
                                             f", val beyond L={L}: {row['val_loss_beyond_L']:.4f}"))


def log_step(clock, it, loss, tokens_per_iter, bar, lr):
    """The training loss and the throughput since the previous log line, on the bar and in `clock`."""
    if not math.isfinite(loss):
        raise FloatingPointError(f"training loss is {loss} at iter {it}")
    now = time.time()
    clock.update(tok_s=tokens_per_iter * (it - clock['iter']) / max(now - clock['t'], 1e-9), t=now, iter=it, loss=loss)
    bar.set_postfix(loss=f'{loss:.4f}', tok_s=f"{clock['tok_s']:,.0f}", lr=f'{lr:.2e}')
    bar.update(it - bar.n)


def bench(cfg, warmup=3):
    """Time cfg['max_iters'] training steps of a new model (no evaluation, no checkpoint) after `warmup` steps
    (which include compilation); print tokens/s and MFU. nanoGPT's bench.py, as a mode of the same engine."""
    rank, world, _ = ddp_ranks()
    check_settings(cfg, world)
    if cfg['max_iters'] <= warmup:
        raise ConfigError(f"bench needs more than {warmup} steps; pass --max_iters=20 or more")
    T, B, accum = cfg['block_size'], cfg['batch_size'], cfg['gradient_accumulation_steps']
    device, device_type, dtype, ctx = setup_device(cfg)
    data_dir, meta, train_data, _ = load_data(cfg, T)
    torch.manual_seed(cfg['seed'] + rank)
    model, _ = build_model(cfg, meta, data_dir)
    model.to(device)
    optimizer = model.configure_optimizers(cfg['weight_decay'], cfg['learning_rate'], (cfg['beta1'], cfg['beta2']),
                                           device_type)
    net, batches = wrap_model(model, cfg, device_type), Batches(train_data, T, B, cfg['seed'], device, copy=copy_mix(cfg, meta))
    for i in tqdm(range(cfg['max_iters']), desc='bench', disable=not (rank == 0 and cfg['progress'])):
        if i == warmup:
            if device_type == 'cuda':
                torch.cuda.synchronize()
            t0 = time.time()
        train_step(net, optimizer, batches.step(accum, rank, world, i), ctx, cfg['grad_clip'], world > 1)
    if device_type == 'cuda':
        torch.cuda.synchronize()
    tok_s = B * T * accum * (cfg['max_iters'] - warmup) / (time.time() - t0)
    frac = mfu(model, T, tok_s, device)
    if rank == 0:
        print(f"bench: {model.get_num_params() / 1e6:.2f}M params, pos_emb={model.config.pos_emb}, T={T}, "
              f"batch={B}x{accum}, device={device}, dtype={dtype}, compile={cfg['compile']}: "
              f"{tok_s:,.0f} tokens/s, MFU {'n/a' if frac is None else f'{100 * frac:.1f}%'}")
    return {'tokens_per_s': tok_s, 'mfu': frac}


def main(argv):
    cfg, ckpt = run_config(argv)
    if cfg['bench']:
        bench(cfg)
    else:
        train(cfg, ckpt=ckpt)


if __name__ == '__main__':
    cli(main)
