"""
Does an exported folder run the model the lab measured? Load the folder with transformers (AutoModelForCausalLM, no
custom code) and the source with the lab (model.py, the same rope), feed both one row of T tokens, and record the
largest logit difference: the export's end-to-end check on a whole real model (tests/test_hf_export_llama.py holds
tiny models and a 2-layer slice of SmolLM2 to it in the suite). transformers is needed here, as in the tests.

    python -m lab.hf.roundtrip --folder=out/hf/smollm2-yarn4 --ckpt=gguf:smollm2 --rope_type=yarn --factor=4 \
        --T=8704 --out=assets/hf_bridge/roundtrip.json
"""
import json
import time

import torch

from configurator import get_config
from data.common import atomic_write_text
from data.checkpoints import load_checkpoint, model_from_checkpoint
from lab.engine.cli import cli
from lab.measure.arm_specs import parse_arm
from lab.verdicts.summary_json import provenance

DEFAULTS = dict(folder='', ckpt='gguf:smollm2', rope_type='', factor=0.0, T=512, seed=0, out='')


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    if not cfg['folder']:
        raise ValueError("folder='' : give the exported folder (--folder=out/hf/...), written by lab.hf.export")
    transformers = __import__('transformers')
    theirs = transformers.AutoModelForCausalLM.from_pretrained(cfg['folder'], dtype=torch.float32).eval()
    ours = model_from_checkpoint(load_checkpoint(cfg['ckpt'])).eval()
    if cfg['rope_type']:  # switched on as lab.hf.export switches it on
        ours.set_rope_scaling(parse_arm(cfg['rope_type'], cfg['factor'] or 1.0, ours.config.block_size))
    x = torch.randint(0, ours.config.vocab_size, (1, cfg['T']), generator=torch.Generator().manual_seed(cfg['seed']))
    t0 = time.time()
    with torch.no_grad():
        a = ours(x)[0].float()
        b = theirs(x).logits.float()
    diff = (a - b).abs()
    out = dict(folder=cfg['folder'].rstrip('/').split('/')[-1], ckpt=cfg['ckpt'], rope=ours.config.rope_scaling,
               T=cfg['T'], max_abs_diff=float(diff.max()), mean_abs_diff=float(diff.mean()),
               max_abs_logit=float(a.abs().max()), same_argmax=int((a.argmax(-1) == b.argmax(-1)).sum()),
               seconds=round(time.time() - t0, 1), transformers=transformers.__version__,
               provenance=dict(provenance(None), command=' '.join(['python -m lab.hf.roundtrip', *argv])))
    print(f"{out['folder']}: T = {cfg['T']}, max |logit difference| {out['max_abs_diff']:.2e} (logits up to "
          f"{out['max_abs_logit']:.1f}), the same argmax at {out['same_argmax']:,} of {cfg['T']:,} positions")
    if cfg['out']:
        atomic_write_text(cfg['out'], json.dumps(out, indent=1) + '\n')
        print(f"wrote {cfg['out']}")
    return out


if __name__ == '__main__':
    cli(main)
