"""
Smeared keys (Olsson et al. 2022's induction-head shortcut), attention='smear_keys': each head's key mixes in the
previous token's key, k_t += g_h (k_{t-1} - k_t) with a learned gate g_h = sigmoid(smear_h) (0.5 at init), on the
content before RoPE puts it at position t; one layer can then find "the token after the previous occurrence". The copy
mix's bases train with it (lab/copy_mix.py); lab/temperature.py, lab/sinks.py and lab/gated.py build their
'smear_keys_*' classes on it.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from model import ATTENTION, CausalSelfAttention, rotate


class SmearedKeyAttention(CausalSelfAttention):
    lookback = 1  # a key depends on the previous token's: the KV cache feeds that token again (lab/kv_cache.py)
    keys_per_head = True  # the gate is per query head, after grouped heads' repeat: the KV cache keeps every head's key

    def __init__(self, config, spec):
        super().__init__(config, spec)
        self.smear = nn.Parameter(torch.zeros(config.n_head, 1, 1))

    def qkv(self, x, rope):
        q, k, v = super().qkv(x, None)
        k = k + torch.sigmoid(self.smear).to(k.dtype) * (F.pad(k, (0, 0, 1, -1)) - k)
        return (*rotate(q, k, rope), v)


ATTENTION['smear_keys'] = SmearedKeyAttention
