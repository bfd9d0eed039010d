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
from dataclasses import dataclass
from typing import Callable

import torch
from tqdm import tqdm

from configurator import ConfigError, get_config
from lab.engine.cli import cli
from data.common import (atomic_torch_save, atomic_write_text, check_vocab, data_dir_of, doc_windows, fetch_windows,
                         load_meta, load_split)
from data.checkpoints import load_checkpoint, model_args, model_from_checkpoint
from lab.engine import batches, bench  # batches: PoSE windows and synthetic copies
from lab.engine.ddp import StopOnSignal, from_rank0, in_group, rng_states  # several processes, Ctrl-C
from lab.engine.device import ddp_ranks, setup_device  # cpu / cuda / mps, autocast, torchrun's ranks
from lab.engine.checks import MODEL_KEYS, check_model, check_resume, check_settings, check_start  # refused first
from model import GPT, GPTConfig

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
    **batches.DEFAULTS,           # PoSE (pose, pose_len, pose_chunks) and synthetic copies (copy_*): lab/engine/batches.py
    # model
    n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False, layers=None,  # layers: per-layer positions (model.py)
    n_kv_head=None,               # key/value heads (grouped-query attention; n_head a multiple of it); None = n_head
    pos_emb='rope',               # rope | sinusoidal | learned | alibi | fire (lab/fire.py) | cope (lab/cope.py) | none
    rope_base=10000.0, partial_rotary_factor=1.0,  # p < 1: GPT-NeoX's partial rotation (the first p * head_dim dims)
    learned_freqs=False,          # Mistral Large 4's LeRoPE: RoPE's frequencies times exp(alpha), alpha learned (model.py)
    pos_lr_scale=1.0,             # learned position parts' (alpha, logpos) learning rate over learning_rate (model.py)
    rope_scaling=None,            # a rope type trained in, e.g. {'rope_type': 'proportional', 'partial_rotary_factor': 0.25}
    attention='causal',           # causal | smear_keys (lab/smeared_keys.py) | ssmax, logpos (lab/temperature.py) | sinks
                                  # (lab/sinks.py) | gated (lab/gated.py) | fope, fope_learned (lab/fope.py, on rope_type
                                  # 'clip'); smear_keys_ssmax / _logpos / _sinks / _gated / _fope
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
    start = {k: ckpt['config'].get(k, v) for k, v in defaults.items()}
    cfg = get_config(argv, defaults, start=start)
    check_resume(cfg, ckpt, start)  # the checkpoint says one model, and the command line does not change it
    return cfg, ckpt


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

VAL_SEED = 1337  # the validation windows' seed: every training seed of an arm is scored on the same text


def load_data(cfg, T):
    """(data dir, meta, train tokens, val tokens), with the window length checked against the data."""
    data_dir = os.path.abspath(data_dir_of(cfg['dataset']))
    meta = load_meta(data_dir)
    train_data, val_data = load_split(data_dir, 'train'), load_split(data_dir, 'val')
    if T + 1 >= len(train_data):
        raise ConfigError(f"block_size={T} does not fit in the {len(train_data)} training tokens of {data_dir}")
    return data_dir, meta, train_data, val_data


def batch_function(cfg, meta, data, L, gen, device):
    """The run's batches, through one hook: (get_batch(it) -> this process's micro-batches [(x, y, position ids or
    None)] of optimizer step it, the window length trained, a note for the start line). nanoGPT's random windows of
    block_size tokens, or lab/engine/batches.py's when PoSE or synthetic copies are on. Every process draws the whole step
    from gen and keeps its own micro-batches (rank, rank + world, ...): DDP sees the single-process data."""
    if cfg['pose'] or cfg['pose_ids'] != 'chunks' or cfg['copy_share'] or cfg['copy_fixed_iters'] or \
            cfg['mixed_short'] or cfg['mixed_in_step']:  # (batches.check refuses what does not combine)
        return batches.for_run(cfg, meta, data, L, gen, device)
    T, B, n_micro, (rank, world, _) = cfg['block_size'], cfg['batch_size'], cfg['gradient_accumulation_steps'], \
        ddp_ranks()

    def get_batch(it):
        ix = torch.randint(len(data) - T - 1, (n_micro, B), generator=gen)
        return [(*fetch_windows(data, ix[m].tolist(), T, device), None) for m in range(rank, n_micro, world)]
    return get_batch, T, ''


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

def new_lineage(T):
    """Where a model came from; finetune_long.py fills in the base checkpoint, method and factor."""
    return dict(train_len=T, seq_len=T, base_checkpoint=None, rope_type=None, factor=None, finetune_steps=0)


def build_model(cfg, meta, data_dir, model=None, lineage=None, ckpt=None):
    """The model to train and its lineage: the resumed run's, the one handed in, or a new GPT from cfg."""
    T = cfg['block_size']
    if ckpt is not None:
        check_vocab(ckpt['dataset'], meta, data_dir, os.path.join(cfg['out_dir'], 'ckpt.pt'))
        model, lineage = model_from_checkpoint(ckpt), ckpt['lineage']
    elif model is None:
        model = GPT(GPTConfig(block_size=T, vocab_size=meta['vocab_size'], **{k: cfg[k] for k in MODEL_KEYS}))
    check_model(model, meta, data_dir, T)
    return model, dict(lineage or new_lineage(T), seq_len=T)


@dataclass
class Run:
    """What the loop needs, built and checked by setup_run before anything is written."""
    rank: int
    world: int
    device: str
    ctx: object                 # the autocast context (a null one in float32)
    model: GPT                  # the model itself: evaluated and saved
    net: torch.nn.Module        # what trains: the model, compiled and/or wrapped in DistributedDataParallel
    optimizer: torch.optim.Optimizer
    lineage: dict
    gen: torch.Generator        # the data order, the same stream on every process
    get_batch: Callable         # get_batch(it): this process's micro-batches of step it (batch_function)
    W: int                      # the window length trained (PoSE: shorter than block_size)
    val_data: object
    val_starts: list            # the fixed validation windows
    data_dir: str
    meta: dict
    state: dict                 # iter_num, best_val and the log rows, to continue from


def setup_run(cfg, model=None, lineage=None, ckpt=None):
    """Everything a run needs (a Run), validated before anything is written: device, data, model, optimizer, batches
    and the state to continue from."""
    rank, world, local_rank = ddp_ranks()
    check_settings(cfg, world)  # ranges, and the out_dir writable (lab/engine/checks.py)
    check_start(cfg)  # init_from is scratch or resume; no run in out_dir is replaced unasked
    resume, out_dir, T = cfg['init_from'] == 'resume', cfg['out_dir'], cfg['block_size']
    device, device_type, dtype, ctx = setup_device(cfg)
    data_dir, meta, train_data, val_data = load_data(cfg, T)
    if resume and ckpt is None:
        ckpt = load_checkpoint(out_dir)
    torch.manual_seed(cfg['seed'] + rank)
    model, lineage = build_model(cfg, meta, data_dir, model, lineage, ckpt if resume else None)
    gen = torch.Generator().manual_seed(cfg['seed'])
    get_batch, W, note = batch_function(cfg, meta, train_data, lineage['train_len'], gen, device)
    lineage['pose'] = dict(len=W, chunks=cfg['pose_chunks'], **({'ids': 'random'} if cfg['pose_ids'] == 'random'
                                                                else {})) if cfg['pose'] else None
    model.to(device)
    optimizer = model.configure_optimizers(cfg['weight_decay'], cfg['learning_rate'],
                                           (cfg['beta1'], cfg['beta2']), device_type, cfg['pos_lr_scale'])
    net = torch.compile(model) if cfg['compile'] else model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(net, device_ids=[local_rank] if device_type == 'cuda' else None)
    state = restore_state(ckpt, optimizer, gen, rank, device) if resume else \
        dict(iter_num=0, best_val=math.inf, rows=[])
    if rank == 0:
        tqdm.write(f"{out_dir}: {model.get_num_params() / 1e6:.2f}M params, T={T}, device={device}, dtype={dtype}, "
                   f"compile={cfg['compile']}" + (f"; {note}" if note else ''))
    val_starts = doc_windows(meta['docs']['val'], T + 1, cfg['eval_iters'] * cfg['batch_size'], seed=VAL_SEED)
    return Run(rank, world, device, ctx, model, net, optimizer, lineage, gen, get_batch, W, val_data, val_starts,
               data_dir, meta, state)


# ----------------------------------------------------------------------------- checkpoints

def save_checkpoint(cfg, run, rngs):
    """Write the run atomically: weights, optimizer, every rank's RNG states, settings, lineage, vocabulary and log.
    Refuses non-finite weights, so a diverged run never replaces a good file."""
    model, state, lineage = run.model, run.state, run.lineage
    if not torch.stack([torch.isfinite(p).all() for p in model.parameters()]).all():
        raise FloatingPointError(f"the weights are not finite at iter {state['iter_num']}")
    lineage['finetune_steps'] = state['iter_num'] if lineage['base_checkpoint'] else 0
    atomic_torch_save({
        'model': model.state_dict(), 'model_args': model_args(model), 'optimizer': run.optimizer.state_dict(),
        'iter_num': state['iter_num'], 'best_val_loss': state['best_val'], 'config': dict(cfg),
        'lineage': dict(lineage), 'rng': dict(batches=run.gen.get_state(), **rngs[0], ranks=rngs),
        'dataset': {'data_dir': run.data_dir, 'dataset': cfg['dataset'], 'vocab_size': run.meta['vocab_size'],
                    'tokenizer': run.meta.get('tokenizer'), 'itos': run.meta.get('itos'),
                    **{k: run.meta[k] for k in ('tokenizer_file', 'tokenizer_sha256', 'eot_token')  # a model's own BPE
                       if run.meta.get(k) is not None}},  # (a GGUF's path and sha256): sample.py and the export find it
        'log': state['rows']}, os.path.join(cfg['out_dir'], 'ckpt.pt'))


def restore_state(ckpt, optimizer, gen, rank, device):
    """A resumed run's optimizer, data-order generator and this rank's RNGs; returns its iter/best/log state.
    (A checkpoint from before 'ranks' holds rank 0's RNG states alone.)"""
    optimizer.load_state_dict(ckpt['optimizer'])
    gen.set_state(ckpt['rng']['batches'])
    ranks = ckpt['rng'].get('ranks', [ckpt['rng']])
    if rank < len(ranks):
        torch.set_rng_state(ranks[rank]['torch'])
        if str(device).startswith('cuda') and ranks[rank].get('cuda') is not None:
            torch.cuda.set_rng_state(ranks[rank]['cuda'], device)
    return dict(iter_num=ckpt['iter_num'], best_val=ckpt['best_val_loss'], rows=list(ckpt.get('log', [])))


# ----------------------------------------------------------------------------- the engine

def train_step(model, optimizer, micro, ctx, grad_clip, ddp):
    """One optimizer step over the micro-batches (gradients synchronised on the last one); returns its loss."""
    sizes = [x.numel() for x, _, _ in micro]  # LongRoPE2's mixed step holds other lengths: each token counts once
    for m, (x, y, pos) in enumerate(micro):
        if ddp:
            model.require_backward_grad_sync = m == len(micro) - 1
        with ctx:
            raw = model(x, y, pos=pos)[1]
            loss = raw / len(micro) if len(set(sizes)) == 1 else raw * (sizes[m] / sum(sizes))
        loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return raw.item()


def train(cfg, model=None, lineage=None, ckpt=None):
    """Train `model` (or a new GPT from cfg, or the run in out_dir when init_from='resume') for
    cfg['max_iters'] optimizer steps at length cfg['block_size']. Evaluates every eval_interval steps on
    fixed held-out windows, logs to out_dir/log.jsonl and writes out_dir/ckpt.pt atomically.
    Returns the last evaluation row (dict), on every process."""
    run = setup_run(cfg, model, lineage, ckpt)
    state, master, out_dir = run.state, run.rank == 0, cfg['out_dir']
    if master:
        os.makedirs(out_dir, exist_ok=True)
    start_iter, t_start = state['iter_num'], time.time()
    clock = dict(t=t_start, iter=start_iter, tok_s=0.0, loss=None)  # the rate since the last log line
    last_row = state['rows'][-1] if state['rows'] else None  # a finished run that is resumed returns its last eval
    lr, stop_sig = get_lr(start_iter, cfg), 0
    bar = tqdm(total=cfg['max_iters'], initial=start_iter, disable=not (master and cfg['progress']), unit='it',
               dynamic_ncols=True, desc=os.path.basename(os.path.normpath(out_dir)))
    try:
        with StopOnSignal(run.world, run.device, cfg['log_interval']) as stop:
            while True:
                it = state['iter_num']
                if (it % cfg['eval_interval'] == 0 or it == cfg['max_iters']) and \
                        not (it == start_iter and last_row and last_row['iter'] == it):
                    rngs = rng_states(run)  # every rank's, for an exact resume
                    if master:
                        last_row = evaluate(cfg, run, clock, lr, time.time() - t_start, rngs)
                stop_sig = stop.agreed(it)
                if it >= cfg['max_iters'] or stop_sig:
                    break
                lr = get_lr(it, cfg)
                for group in run.optimizer.param_groups:
                    group['lr'] = lr * group.get('lr_scale', 1.0)  # (the learned position parts may have their own)
                loss = train_step(run.net, run.optimizer, run.get_batch(it), run.ctx, cfg['grad_clip'], run.world > 1)
                state['iter_num'] = it = it + 1
                if it % cfg['log_interval'] == 0 or it == cfg['max_iters']:
                    log_step(clock, it, loss, cfg['batch_size'] * run.W * cfg['gradient_accumulation_steps'], bar, lr)
            rngs = rng_states(run) if stop_sig else None
            if stop_sig and master:
                save_checkpoint(cfg, run, rngs)
                tqdm.write(f"saved {os.path.join(out_dir, 'ckpt.pt')} at iter {state['iter_num']} (stopped by "
                           f"{signal.Signals(stop_sig).name}; continue with --init_from=resume)")
            last_row = from_rank0(last_row, run.world)  # evaluated on rank 0; finetune_long.py reads it on every rank
    except FloatingPointError as e:
        path = os.path.join(out_dir, 'ckpt.pt')
        kept = f"the last good checkpoint {path} is kept" if os.path.exists(path) else "no checkpoint was written"
        raise ConfigError(f"{e}; training stopped ({kept}); lower learning_rate or check the data") from None
    finally:
        bar.close()
        run.net = None
        gc.collect()  # DDP holds reference cycles: free its reducer and this run's model now, not after later runs
    if stop_sig:
        raise KeyboardInterrupt
    return last_row


def evaluate(cfg, run, clock, lr, elapsed, rngs):
    """One evaluation row: validation loss (and beyond L) on the fixed windows; the checkpoint is saved first (when it
    improved, or always), then the row is added to log.jsonl, so the log never names a step whose save failed."""
    state, it, L = run.state, run.state['iter_num'], run.lineage['train_len']
    val, beyond = estimate_loss(run.model, run.val_data, run.val_starts, cfg['block_size'], L, cfg['batch_size'],
                                run.device, run.ctx)
    if not math.isfinite(val):
        raise FloatingPointError(f"validation loss is {val} at iter {it}")
    row = dict(iter=it, train_loss=clock['loss'], val_loss=round(val, 5),
               val_loss_beyond_L=None if beyond is None else round(beyond, 5), lr=lr,
               tokens_per_s=round(clock['tok_s'], 1), elapsed_s=round(elapsed, 2))
    state['rows'].append(row)
    if val < state['best_val'] or cfg['always_save_checkpoint']:
        state['best_val'] = min(state['best_val'], val)
        try:
            save_checkpoint(cfg, run, rngs)
        except BaseException:
            state['rows'].pop()
            raise
    atomic_write_text(os.path.join(cfg['out_dir'], 'log.jsonl'), ''.join(json.dumps(x) + '\n' for x in state['rows']))
    tqdm.write(f"iter {it}: " + ('' if row['train_loss'] is None else f"train {row['train_loss']:.4f}, ") +
               f"val {val:.4f}" + ('' if beyond is None else f", val beyond L={L}: {beyond:.4f}"))
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
    cli(in_group(main))
