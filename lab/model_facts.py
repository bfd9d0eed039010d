"""
What a model is, read once (issue 60). Every tool that takes a model (sample.py, eval.py's arms, finetune_long.py's
sweep, search_longrope.py, lab.knobs, lab.pairs, the export) reads these facts here instead of working them out again:

    config      the GPT it builds (model.GPTConfig): the rotary dims and so the pairs that turn (rotary_dim / 2; a
                partial rotation's other pairs pass through), RoPE or NoPE, window or chunk per layer
                (model.layer_specs), grouped heads (n_kv_head)
    L           the length its RoPE was trained at: a run's lineage train_len; a model shipped with its own scaling
                (a real model's YaRN), that scaling's original_max_position_embeddings
    trained_in  the rope type trained into its weights (a base's own p-RoPE, clip or ABF; None where a new scaling
                may take the place of the one it has: lab.measure.arm_specs.trained_in)
    tokenizer   the 'dataset' entry's tokenizer: its kind, and its file with the file's sha256 where there is one
    source      where it came from, as the user named it

describe(ref) reads a run folder's checkpoint, a GGUF's metadata alone (gguf:<file> or gguf:smollm2: no tensor is
read) or a Hugging Face folder's config.json alone (hf:<folder>); of_checkpoint(ckpt, source) a checkpoint dict
already loaded. A tool that needs a fact the model lacks asks for it by name (ModelFacts.need_rope) and refuses in one
line.
"""
import os
from dataclasses import dataclass

from configurator import ConfigError
from data.checkpoints import checkpoint_args, load_checkpoint, train_len
from lab.measure.arm_specs import trained_in
from model import GPTConfig, layer_specs

TOKENIZER_KEYS = ('tokenizer', 'dataset', 'tokenizer_file', 'tokenizer_sha256', 'vocab_size')


@dataclass(frozen=True)
class ModelFacts:
    source: str
    config: GPTConfig
    L: int
    trained_in: dict = None
    tokenizer: dict = None

    @property
    def head_dim(self):
        return self.config.n_embd // self.config.n_head

    @property
    def rotary_dim(self):
        """The dims that turn in each head (GPTConfig.rotary_dim); 0 where nothing rotates (ALiBi, FIRE, NoPE...)."""
        return self.config.rotary_dim if self.rotates else 0

    @property
    def rotates(self):
        """Whether any layer turns q and k (pos_emb='rope' and a layer with RoPE)."""
        return self.config.pos_emb == 'rope' and any(s.rope for s in layer_specs(self.config)[0])

    @property
    def base(self):
        return float(self.config.rope_base)

    def need_rope(self, what):
        """ConfigError naming `what` (the tool or setting) when this model turns no pair: nothing for it to act on."""
        if not self.rotates:
            why = f"pos_emb={self.config.pos_emb!r}" if self.config.pos_emb != 'rope' else \
                f"layers={self.config.layers!r}: no layer has RoPE"
            raise ConfigError(f"{what}: {self.source} rotates nothing ({why}), so there is nothing for it to scale or "
                              f"read; pass a RoPE model")


def of_checkpoint(ckpt, source):
    """The facts of a loaded checkpoint dict (data.checkpoints.load_checkpoint's, from a run, a GGUF or an HF folder)."""
    config = GPTConfig(**checkpoint_args(ckpt))
    own = (ckpt['model_args'].get('rope_scaling') or {}).get('original_max_position_embeddings')
    ds = ckpt.get('dataset') or {}
    return ModelFacts(str(source), config, int(own or train_len(ckpt)), trained_in(ckpt),
                      {k: ds[k] for k in TOKENIZER_KEYS if ds.get(k) is not None})


def describe(ref):
    """The facts of a model reference: a run folder (or its ckpt.pt), gguf:<file> / gguf:smollm2 (the metadata only),
    hf:<folder> (config.json only). ConfigError naming the reference when it cannot be read."""
    prefix, sep, rest = str(ref).partition(':')
    try:
        if sep and prefix == 'gguf':
            from data.sources import gguf_file
            from lab.hf.gguf import gguf_config, read_gguf
            path = gguf_file(rest or None)
            config, L = gguf_config(read_gguf(path), f'gguf:{os.path.basename(path)}')
            own = (config.rope_scaling or {}).get('original_max_position_embeddings')
            return ModelFacts(str(ref), config, int(own or L), None, {'tokenizer': 'gguf', 'tokenizer_file': path})
        if sep and prefix == 'hf':
            from data.common import read_json
            from lab.hf.weights import hf_args
            path = os.path.join(rest, 'config.json')
            if not os.path.isfile(path):
                raise ValueError(f"{ref}: no config.json there; pass a Hugging Face model folder")
            config, L = hf_args(read_json(path, "restore the model folder's config.json"), str(ref))
            own = (config.rope_scaling or {}).get('original_max_position_embeddings')
            return ModelFacts(str(ref), config, int(own or L), None, {'tokenizer': 'hf'})
        return of_checkpoint(load_checkpoint(ref), ref)
    except ConfigError:
        raise
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(str(e).splitlines()[0] if str(e) else f"{ref}: cannot be read ({type(e).__name__})") from None
