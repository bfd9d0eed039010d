"""The GPU recipe's code path on CPU (issue 58 item 7): finetune_long.py fine-tunes the real SmolLM2-135M GGUF
(gguf:smollm2) with YaRN for two steps at a short length on the fixture plays in its own BPE, the run loads back
with weights_only and names its arm as the GPU study's family does (config/real_model_gpu.py). Skipped where the
pinned GGUF is not in the cache (python data/shakespeare_smollm2/prepare.py fetches it)."""
import os

import pytest
import torch

from data.sources import DEFAULT_CACHE_DIR, SMOLLM2_GGUF

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GGUF = os.path.join(DEFAULT_CACHE_DIR, SMOLLM2_GGUF)


@pytest.mark.skipif(not os.path.isfile(GGUF), reason=f"no {GGUF} (python data/shakespeare_smollm2/prepare.py)")
def test_finetune_long_on_the_real_gguf(tmp_path):
    import eval as ev
    import finetune_long
    from data.common import load_checkpoint
    from data.shakespeare_smollm2.prepare import main as prepare
    from lab.measure.arms import plan_arms
    prepare(['--src', os.path.join(ROOT, 'tests', 'fixtures', 'corpus'), '--out_dir', str(tmp_path / 'data')])
    threads = torch.get_num_threads()
    try:
        finetune_long.main([f'--init_from=gguf:smollm2', f'--dataset={tmp_path / "data"}', '--rope_type=yarn',
                            '--factor=2', '--block_size=48', '--batch_size=1', '--max_iters=2', '--eval_interval=2',
                            '--eval_iters=1', '--learning_rate=2e-5', '--progress=False', f'--out_dir={tmp_path / "ft"}'])
    finally:
        torch.set_num_threads(threads)
    ckpt = load_checkpoint(str(tmp_path / 'ft'))
    scaling = ckpt['model_args']['rope_scaling']
    assert scaling['rope_type'] == 'yarn' and scaling['factor'] == 2 and ckpt['model_args']['n_layer'] == 30
    arms, _, _ = plan_arms(dict(ev.DEFAULTS, base='gguf:smollm2', ckpt=str(tmp_path / 'ft'), rope_types='default',
                                eval_len=16384))
    assert [a['id'] for a in arms] == ['yarn_s2_ft2', 'base_L8192']
