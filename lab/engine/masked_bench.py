"""
Masked attention at about the cost of causal attention (issue 58): one forward of a model at T through each masked
arm's attention (the sink-kept crop, ReRoPE, Leaky ReRoPE, Self-Extend, DCA) against its causal forward, each arm in
a process of its own so that its peak memory is its own; times are the median of `repeat` forwards after one warm-up.
'layers:w=W' times model.py's own windowed layers (every layer given a window of W keys: model.local_attention), the
path a windowed or chunked model takes with no arm.

    python -m lab.engine.masked_bench --ckpt=gguf:smollm2 --T=12288 --out=assets/studies/masked_bench/bench.json

Prints one line per arm (seconds, the ratio to causal, peak resident memory and its rise over the loaded model) and
writes them as JSON (atomically). A benchmark to read, not a test: CPU timings vary with the host.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch

from configurator import get_config
from data.common import atomic_write_text
from lab.engine.cli import cli

ARMS = ('default', 'crop:form=sliding:sink=4', 'crop:form=sliding:sink=4:at=cache', 'rerope:window=4096',
        'leaky_rerope:window=4096:k=8', 'self_extend:window=2048:group=4', 'dca:chunk=6144:window=512',
        'layers:w=4096')  # the last: every layer of the model made a windowed layer (model.local_attention)
DEFAULTS = dict(ckpt='gguf:smollm2', T=12288, arms=','.join(ARMS), repeat=1, out='', arm='', threads=0)


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # (Linux: kilobytes)


def one_arm(cfg):
    """Time cfg['arm'] in this process: {arm, seconds [each forward], peak_mb, model_mb}."""
    from lab.measure.arms import ARM_DEFAULTS, arm_model, plan_arms
    from lab.measure.forms import arm_form
    from lab.measure.scoring import scoring_plan
    if cfg['threads']:
        torch.set_num_threads(cfg['threads'])
    window = int(cfg['arm'][len('layers:w='):]) if cfg['arm'].startswith('layers:w=') else None
    arms, _, T = plan_arms(dict(ARM_DEFAULTS, base=cfg['ckpt'], rope_types='default' if window else cfg['arm'],
                                eval_len=cfg['T']))
    arm = arms[0]
    model = arm_model(arm, arm['runs'][0]['ckpt']).eval()
    attend = arm_form(model, arm, scoring_plan(model, T, 0), None, 1).attend
    if window:  # the model's own windowed layers, no arm around them
        for block in model.transformer.h:
            block.attn.window = window
        arm = dict(arm, name=f"every layer windowed, w={window}")
    x = torch.randint(0, model.config.vocab_size, (1, T), generator=torch.Generator().manual_seed(0))
    loaded = peak_mb()
    times = []
    with torch.no_grad():
        for _ in range(1 + cfg['repeat']):
            t0 = time.perf_counter()
            model(x, attend=attend)
            times.append(time.perf_counter() - t0)
    return dict(arm=arm['name'], spec=cfg['arm'], seconds=[round(t, 2) for t in times[1:]],
                warmup_s=round(times[0], 2), peak_mb=round(peak_mb()), model_mb=round(loaded))


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    if cfg['arm']:  # the child: one arm, its line of JSON on stdout
        print('RESULT ' + json.dumps(one_arm(cfg)))
        return 0
    specs = [a.strip() for a in cfg['arms'].split(',') if a.strip()]
    if not specs or specs[0] != 'default':
        raise ValueError(f"arms={cfg['arms']!r} must begin with 'default', the causal forward the others are timed against")
    rows = []
    for spec in specs:
        args = [f'--{k}={v}' for k, v in dict(cfg, arm=spec, out='', arms='').items()]
        got = subprocess.run([sys.executable, '-m', 'lab.engine.masked_bench', *args], capture_output=True, text=True)
        line = next((ln for ln in got.stdout.splitlines() if ln.startswith('RESULT ')), None)
        if line is None:
            raise RuntimeError(f"arm {spec!r} failed:\n{got.stderr.strip()[-2000:]}")
        r = json.loads(line[7:])
        r['median_s'] = statistics.median(r['seconds'])
        rows.append(r)
        ratio = r['median_s'] / rows[0]['median_s']
        r['vs_causal'] = round(ratio, 3)
        print(f"{r['arm']:40s} {r['median_s']:7.1f} s  {ratio:5.2f}x causal  peak {r['peak_mb']:,} MB "
              f"(+{r['peak_mb'] - r['model_mb']:,} over the loaded model)", flush=True)
    out = dict(ckpt=cfg['ckpt'], T=cfg['T'], repeat=cfg['repeat'], threads=cfg['threads'] or torch.get_num_threads(),
               torch=torch.__version__, date=time.strftime('%Y-%m-%d'), machine=f"{os.cpu_count()} cores", arms=rows)
    if cfg['out']:
        atomic_write_text(cfg['out'], json.dumps(out, indent=1) + '\n')
        print(f"wrote {cfg['out']}")
    return out


if __name__ == '__main__':
    cli(main)
