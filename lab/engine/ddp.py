"""
Several processes (torchrun) and stopping cleanly, for train.py: Ctrl-C / SIGTERM caught and agreed on by every
rank, every rank's RNG states gathered for an exact resume, rank 0's result shared, and one process group for the
whole script. A plain `python train.py` (one process) passes straight through all of it.
"""
import gc
import signal

import torch


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


def rng_states(run):
    """Every process's RNG states (dropout's torch generator, CUDA's), gathered on rank 0 (None on the others): a
    collective, so every rank calls it. The data-order generator is the same on every rank and is saved once."""
    mine = dict(torch=torch.get_rng_state(),
                cuda=torch.cuda.get_rng_state(run.device) if str(run.device).startswith('cuda') else None)
    if run.world == 1:
        return [mine]
    every = [None] * run.world if run.rank == 0 else None
    torch.distributed.gather_object(mine, every, dst=0)
    return every


def from_rank0(obj, world):
    """obj as rank 0 has it, on every process (a collective under DDP)."""
    box = [obj]
    if world > 1:
        torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def in_group(main):
    """main(argv), then the end of torchrun's process group if it joined one: one group serves every run of a script
    (a group destroyed and made again under the same torchrun hangs)."""
    def run(argv):
        try:
            return main(argv)
        finally:
            if torch.distributed.is_initialized():
                gc.collect()  # DDP holds reference cycles: free its reducer (it talks to the group) first
                torch.distributed.destroy_process_group()
    return run
