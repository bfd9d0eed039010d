# The temperature constants (issue 32), chosen like make knobs' (docs/results.md 'Where each knob was chosen'): on 16
# TRAINING windows, never the held-out plays that are scored. Loss and passkey; the other rooms off.
#   SSMax swapped into the demo's base after training: queries x s ln(n), s in a grid around 1/ln L = 0.206;
#   DroPE's inference temperature 1 + c ln((p + 1)/L) on the 300-step recalibration (3 seeds), c in a grid.
# python eval.py config/studies/eval_temperature_knobs_cpu.py   (make temperature-knobs; needs make demo's base and make drope)
base = 'out/char-base-copy'
ckpt = 'out/char-drope300'
split = 'train'
rope_types = ','.join(['default', 'crop:form=sliding'] + [f'qtemp:shape=ssmax:s={s}' for s in (0.16, 0.2, 0.24, 0.28)])
temperature = '; '.join(f'qtemp:shape=drope:c={c}' for c in (0.1, 0.2, 0.3, 0.5))
eval_len = 1024
num_windows = 16
depth_len = needles = recall_len = word_needles = mv_values = 0
tracking = False
out_dir = 'out/char-temperature-knobs'
