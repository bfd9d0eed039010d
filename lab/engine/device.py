"""
Where a script runs: the device (auto: cuda, else mps, else cpu), the number format (autocast), and torchrun's ranks
and process group. Plumbing every script shares; a learner need not open it.
"""
import os
from contextlib import nullcontext

import torch

from configurator import ConfigError


def pick_device(name):
    """'auto' -> cuda, else mps, else cpu; an explicit name is checked against this machine."""
    if name == 'auto':
        return 'cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu'
    kind = name.split(':')[0]
    if kind not in ('cpu', 'cuda', 'mps'):
        raise ConfigError(f"device={name!r} is unknown; use auto, cpu, cuda, cuda:N or mps")
    if kind == 'cuda' and not torch.cuda.is_available() or kind == 'mps' and not torch.backends.mps.is_available():
        raise ConfigError(f"device={name!r} is not available on this machine; use --device=cpu or --device=auto")
    return name


def autocast_context(device_type, dtype, training=False):
    """(dtype actually run, context). 'auto' is bfloat16 on CUDA when supported, else float32. bfloat16 runs
    under autocast on CUDA and on CPU alike. float16 needs loss scaling to train, which this engine does not do,
    so training refuses it; evaluation may use it on CUDA. RoPE tables stay float32 either way (rope.py)."""
    if dtype == 'auto':
        dtype = 'bfloat16' if device_type == 'cuda' and torch.cuda.is_bf16_supported() else 'float32'
    if dtype not in ('float32', 'bfloat16', 'float16'):
        raise ConfigError(f"dtype={dtype!r} is unknown; use auto, float32, bfloat16 or float16")
    if dtype == 'float16' and (training or device_type != 'cuda'):
        raise ConfigError("dtype=float16 " + ("would train without loss scaling (gradients underflow)" if training
                          else "runs on CUDA only") + "; use --dtype=bfloat16 or --dtype=float32")
    if dtype == 'float32':
        return dtype, nullcontext()
    return dtype, torch.autocast(device_type=device_type, dtype=getattr(torch, dtype))


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
