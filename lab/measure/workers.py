"""
Arms measured side by side. On a CPU a small model's matmuls cannot keep several cores busy, so eval.py runs
`workers` processes of one thread each, each measuring whole arms, the costliest first (moving-scale arms, then by
seeds). The processes are forked, so they share the run's windows and checkpoints without copying them; only results
come back, in the arms' order. Each arm's numbers are those of a one-after-another run up to float summation order
(a worker runs one thread). One thread is not a choice: a process forked after torch ran OpenMP threads hangs in its
first multi-threaded op (GNU libgomp is not fork-safe). On CUDA/MPS, off Linux, or with one worker, a plain loop.
"""
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import torch
from tqdm import tqdm

from configurator import ConfigError, is_input_error

_JOB = None  # (fn, arms, args) for the forked workers: set just before the pool starts


def worker_count(setting, device, n_arms):
    """workers=0 (auto): one per CPU core this process may use, at most one per arm, on Linux; 1 on CUDA/MPS (one
    device) and elsewhere (macOS does not fork safely)."""
    if not device.startswith('cpu') or n_arms < 2 or (not setting and not sys.platform.startswith('linux')):
        return 1
    if setting > 1 and 'fork' not in multiprocessing.get_all_start_methods():
        raise ConfigError(f"workers={setting} needs processes started by fork, which {sys.platform} does not have; "
                          f"pass --workers=1")
    return min(setting or len(os.sched_getaffinity(0)), n_arms)


def cost(arm):
    """A rough order of an arm's measuring time: a moving scale (Dynamic NTK / YaRN, not LongRoPE's two runs) gives
    every scored position its own forward; then seeds; the truncated crop a forward per position past its window."""
    moving = (arm.get('scaling') or {}).get('rope_type') in ('dynamic', 'dynamic_yarn')
    return (20 if moving else 1) * len(arm['runs']) + (2 if (arm.get('crop') or {}).get('form') == 'truncated' else 0)


def _start():
    torch.set_num_threads(1)


def _measure(i):
    fn, arms, args = _JOB
    t = time.time()
    try:
        return i, fn(arms[i], *args), time.time() - t
    except (ValueError, OSError) as e:  # a refusal, raised in a worker, reaches the user as its one line (lab.engine.cli)
        if not is_input_error(e) or os.environ.get('LONGCTX_DEBUG'):
            raise
        raise ConfigError(f"arm {arms[i]['name']!r}: {e}") from None


def memory_needed(arms, T, batch_size, workers):
    """Bytes a CPU eval holds at its peak, estimated: the base's weights in this process, and in each worker an arm's
    weights (float32) plus 3.6 batches of windows' logits (batch_size x T x vocab floats: the logits, their
    log-softmax and copies). Sized from SmolLM2-135M at T = 12,288 (make real-model-core): a peak of 8.95 GB
    resident, the estimate 9.3 GB a worker."""
    weights = max(sum(t.numel() * 4 for t in a['ckpt']['model'].values() if torch.is_tensor(t)) for a in arms)
    vocab = max(a['ckpt']['model_args']['vocab_size'] for a in arms)
    return weights + workers * (weights + 3.6 * 4 * batch_size * T * vocab)


def check_memory(arms, T, batch_size, workers, device):
    """Refuse, before any arm runs, a CPU eval whose estimated peak (memory_needed) passes this machine's memory."""
    if not device.startswith('cpu') or not hasattr(os, 'sysconf') or 'SC_PHYS_PAGES' not in os.sysconf_names:
        return
    have, need = os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE'), memory_needed(arms, T, batch_size, workers)
    if need > 0.9 * have:
        raise ConfigError(f"eval_len={T}: {workers} worker(s) x batch_size={batch_size} need about {need / 2**30:.1f} GB "
                          f"(each window's logits are {T:,} x {max(a['ckpt']['model_args']['vocab_size'] for a in arms):,} "
                          f"floats), more than this machine's {have / 2**30:.1f} GB; lower --eval_len, --batch_size or "
                          f"--workers (or run on a GPU)")


def map_arms(fn, arms, args, workers, progress=True):
    """[(fn(arm, *args), seconds)] for every arm, in the arms' order, over `workers` processes (1: this one)."""
    global _JOB
    out, bar = [None] * len(arms), tqdm(total=len(arms), unit='arm', disable=not progress, dynamic_ncols=True)
    _JOB = (fn, arms, args)
    try:
        if workers <= 1:
            for i, res, sec in map(_measure, range(len(arms))):
                out[i] = res, sec
                bar.update()
        else:
            order = sorted(range(len(arms)), key=lambda i: -cost(arms[i]))  # handed out first come, first served
            with ProcessPoolExecutor(workers, multiprocessing.get_context('fork'), _start) as pool:
                for done in as_completed([pool.submit(_measure, i) for i in order]):  # a killed worker raises
                    i, res, sec = done.result()                                        # BrokenProcessPool
                    out[i] = res, sec
                    bar.update()
    finally:
        _JOB = None
        bar.close()
    return out
