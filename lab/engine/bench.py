"""
Speed: training FLOPs per token and model FLOPs utilisation (MFU) per device (one device's share of the tokens against
its peak), for train.py --bench=True (nanoGPT keeps its bench.py apart too); forward tokens/s of any model
(python -m lab.hf.gguf --bench=True: a GGUF in model.py against transformers).
"""
import time

import torch
from tqdm import tqdm

# Peak dense bf16 FLOP/s used for MFU; unknown devices report "n/a" rather than a guess.
PEAK_FLOPS = {'H100': 989e12, 'H200': 989e12, 'A100': 312e12, 'L4': 121e12, 'A10': 125e12, '4090': 165e12, '3090': 71e12}


def flops_per_token(model, T):
    """Approximate training FLOPs per token (PaLM appendix B): 6N + 12·n_layer·n_embd·T."""
    c = model.config
    return 6 * model.get_num_params() + 12 * c.n_layer * c.n_embd * T


def peak_flops(device):
    """One device's peak dense bf16 FLOP/s, or None when it is unknown (e.g. CPU)."""
    if not str(device).startswith('cuda'):
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_FLOPS.items() if k in name), None)


def mfu(model, T, tokens_per_s, device, world=1):
    """Model FLOPs utilisation per device: tokens_per_s is the rate of all `world` processes together (one device
    each), so each device does tokens_per_s / world of them against its own peak. None when the peak is unknown."""
    peak = peak_flops(device)
    return None if peak is None else flops_per_token(model, T) * tokens_per_s / world / peak


def run(cfg, setup_run, train_step, warmup=3):
    """Time cfg['max_iters'] training steps of a new model (no evaluation, no checkpoint) after `warmup` steps
    (which include compilation); print tokens/s and MFU. train.py --bench=True hands in its setup_run and train_step,
    so the steps timed are the engine's own."""
    if cfg['max_iters'] <= warmup:
        raise ValueError(f"bench needs more than {warmup} steps; pass --max_iters=20 or more")
    r = setup_run(dict(cfg, init_from='scratch', overwrite=True))
    sync = torch.cuda.synchronize if str(r.device).startswith('cuda') else (lambda: None)
    for i in tqdm(range(cfg['max_iters']), desc='bench', disable=not (r.rank == 0 and cfg['progress'])):
        if i == warmup:
            sync()
            t0 = time.time()
        train_step(r.net, r.optimizer, r.get_batch(i), r.ctx, cfg['grad_clip'], r.world > 1)
    sync()
    T = r.W  # the window length trained (PoSE trains shorter windows than block_size)
    tok_s = cfg['batch_size'] * T * cfg['gradient_accumulation_steps'] * (cfg['max_iters'] - warmup) / (time.time() - t0)
    frac = mfu(r.model, T, tok_s, r.device, r.world)  # tok_s counts all processes' micro-batches
    mem = torch.cuda.max_memory_allocated(r.device) / 2 ** 30 if str(r.device).startswith('cuda') else None
    if r.rank == 0:
        share = 'n/a' if frac is None else f'{100 * frac:.1f}%'
        print(f"bench: {r.model.get_num_params() / 1e6:.2f}M params, pos_emb={r.model.config.pos_emb}, T={T}, "
              f"batch={cfg['batch_size']}x{cfg['gradient_accumulation_steps']}, device={r.device}, "
              f"compile={cfg['compile']}: {tok_s:,.0f} tokens/s over {r.world} process(es) "
              f"({tok_s / r.world:,.0f} per device), MFU {share} per device" +
              ('' if mem is None else f", peak memory {mem:.2f} GiB per device"))
    return {'tokens_per_s': tok_s, 'tokens_per_s_per_device': tok_s / r.world, 'mfu': frac, 'peak_gib': mem}


@torch.no_grad()
def forward_speed(run, vocab_size, T, B=1, repeat=3, seed=0):
    """Forward tokens/s of run(idx) -> logits on random (B, T) token ids: one warm-up forward, then the fastest of
    `repeat` (the least disturbed by other work on the machine)."""
    idx = torch.randint(vocab_size, (B, T), generator=torch.Generator().manual_seed(seed))
    run(idx)
    best = float('inf')
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(idx)
        best = min(best, time.perf_counter() - t0)
    return B * T / best
