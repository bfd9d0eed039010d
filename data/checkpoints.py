"""
A run's checkpoint read back: the ckpt.pt that train.py writes (atomically, data/common.py's atomic_torch_save), loaded
with weights_only=True and checked, the GPT rebuilt from it, and the names a lineage keeps for its base. Real models'
weights load through the same door: 'gguf:<file>' and 'hf:<folder>' go to the loader their room adds to LOADERS, the
room named in LOADER_MODULES and imported on first use (data/ imports no room at import time).
"""
import importlib
import os


CKPT_KEYS = ('model', 'model_args')
LOADERS = {}  # 'prefix' -> fn(rest) -> checkpoint dict, for 'prefix:rest' paths; filled by the rooms that read them
LOADER_MODULES = {'gguf': 'lab.hf.gguf', 'hf': 'lab.hf.weights'}  # the room of each prefix, imported on first use

def checkpoint_ref(path):
    """How a lineage names its base so that it loads from any directory: a run folder made absolute (links resolved), a loader's
    'prefix:rest' kept ('gguf:smollm2' is a name, not a file) with an existing file or folder after the prefix made
    absolute."""
    prefix, sep, rest = str(path).partition(':')
    if sep and (prefix in LOADERS or prefix in LOADER_MODULES):
        return f"{prefix}:{os.path.realpath(rest)}" if rest and os.path.exists(rest) else str(path)
    return os.path.realpath(path)


def checkpoint_exists(ref):
    """Whether a checkpoint reference (checkpoint_ref's form) names something this machine can load: a run folder
    or file, a loader's 'prefix:rest' with its file or folder there; 'gguf:', 'gguf:smollm2' (the pinned file, which
    its loader fetches) and 'gguf:<a file name>' (looked up in the cache dir by its loader) are taken as found."""
    prefix, sep, rest = str(ref).partition(':')
    if sep and (prefix in LOADERS or prefix in LOADER_MODULES):
        return prefix == 'gguf' and (not rest or rest == 'smollm2' or os.sep not in rest) or os.path.exists(rest)
    return os.path.exists(ref)


def load_checkpoint(path, map_location='cpu'):
    """Load one of our checkpoints (a run folder or its ckpt.pt) with weights_only=True: no code in the
    file can run. Raises ValueError naming the file when it is missing, truncated, unsafe or not ours.
    'gguf:<file>' and 'hf:<folder>' (real models' weights) go to the loader registered in LOADERS."""
    import torch
    prefix, sep, rest = str(path).partition(':')
    if sep and (prefix in LOADERS or prefix in LOADER_MODULES):
        if prefix not in LOADERS:  # its room adds it to LOADERS when first imported
            importlib.import_module(LOADER_MODULES[prefix])
        return LOADERS[prefix](rest)
    if os.path.isdir(path):
        path = os.path.join(path, 'ckpt.pt')
    if not os.path.isfile(path):
        raise ValueError(f"checkpoint {path} does not exist; pass a run folder written by train.py or finetune_long.py")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # truncated zip, pickle with globals, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"checkpoint {path} could not be loaded safely ({first[:160]}); "
                         f"it is truncated or not a checkpoint of this project") from None
    if not isinstance(ckpt, dict) or any(not isinstance(ckpt.get(k), dict) for k in CKPT_KEYS):
        raise ValueError(f"checkpoint {path} is not a checkpoint of this project (no 'model'/'model_args')")
    return ckpt


def train_len(ckpt):
    """L: the length the run's base model was trained at (its lineage), else its block_size."""
    return int((ckpt.get('lineage') or {}).get('train_len') or ckpt['model_args']['block_size'])


def checkpoint_args(ckpt):
    """A checkpoint's model_args as GPTConfig fields (older runs stored smear_keys=True and position_map=None)."""
    from model import GPTConfig  # (data/ stays importable without torch)
    from dataclasses import fields
    args = dict(ckpt['model_args'], **({'attention': 'smear_keys'} if ckpt['model_args'].get('smear_keys') else {}))
    return {k: v for k, v in args.items() if k in {f.name for f in fields(GPTConfig)}}


def model_from_checkpoint(ckpt, **changes):
    """Rebuild the GPT stored in a checkpoint dict (config incl. rope scaling, then weights); changes: config fields
    that change no weight, e.g. layers='4*nope' (DroPE: the same weights with every position encoding removed), or
    that add parameters at their init, e.g. attention='logpos', learned_freqs=True (finetune_long.py switches them
    on): only the parameters a change adds may be missing from the checkpoint, and none of its weights left over."""
    from model import GPT, GPTConfig
    model = GPT(GPTConfig(**{**checkpoint_args(ckpt), **changes}))
    state = {k.removeprefix('_orig_mod.').removeprefix('module.'): v for k, v in ckpt['model'].items()}
    missing, unexpected = model.load_state_dict(state, strict=not changes)
    if missing or unexpected:  # (only with changes: a strict load raises itself)
        own = set(GPT(GPTConfig(**checkpoint_args(ckpt))).state_dict())  # what the checkpoint's own model holds
        wrong = sorted(set(unexpected) | (set(missing) & own))
        if wrong:
            raise ValueError(f"the checkpoint's weights do not fit its model with {changes} ({', '.join(wrong[:3])}"
                             f"{' ...' if len(wrong) > 3 else ''}): a change may only add parameters; drop it")
    return model


def model_args(model):
    """The model's config as a plain dict (what a checkpoint stores)."""
    from dataclasses import asdict
    return asdict(model.config)
