"""
PoSE (Zhu et al. 2023): train at a short length and still see the position ids of a long one. A window of W tokens is
cut into chunks whose ids skip forward, so relative distances up to the target length T appear while every training
sequence stays short. train.py uses `pose_positions` for its batches when --pose=True; the model takes the ids through
its `pos` seam.
"""
import torch


def pose_positions(gen, shape, W, T, chunks):
    """PoSE position ids (Zhu et al. 2023) for windows of W tokens that should see the positions of a length T >= W:
    LongTensor [*shape, W], drawn from the torch.Generator gen. The window is cut into `chunks` pieces of
    l_k = W // chunks tokens (the first W mod chunks pieces one more), piece k starting at st_k = l_1 + ... + l_{k-1};
    its ids are st_k + u_k, ..., st_k + l_k - 1 + u_k, with u_1 = 0 and u_k ~ Uniform{u_{k-1}, ..., T - W} (the
    paper's skips: non-decreasing), so ids increase, are contiguous inside a piece, and the last is at most T - 1.
    Nothing is drawn when T = W (every skip is 0: the ordinary ids 0..W-1), so gen is left as it was."""
    if not 1 <= chunks <= W <= T:
        raise ValueError(f"PoSE needs 1 <= pose_chunks <= window length <= target length; got pose_chunks={chunks}, "
                         f"window {W}, target {T}")
    lens = torch.tensor([W // chunks + (k < W % chunks) for k in range(chunks)])
    skips = [torch.zeros(shape, dtype=torch.long)]
    for _ in range(chunks - 1):
        u = skips[-1]
        draw = torch.rand(shape, generator=gen, dtype=torch.float64) if T > W else torch.zeros(shape)
        skips.append(u + (draw * (T - W - u + 1)).long())
    return torch.arange(W) + torch.stack(skips, -1).repeat_interleave(lens, dim=-1)
