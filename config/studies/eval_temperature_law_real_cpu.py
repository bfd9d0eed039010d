# The temperature-law diagnostic on SmolLM2-135M, read after config/eval_real_model_cpu.py (its model, data and batch):
# the model as shipped inside its L = 8,192 (eval.py needs T >= L), 3 windows, the law of its own rows at its trained
# temperature (no arm past L: n = 16..8,192). 518 s for the arm on one thread (2 cores shared), 9 min in all.
# python eval.py config/eval_real_model_cpu.py config/studies/eval_temperature_law_real_cpu.py
rope_types = 'default'
contrasts = ''
passkey_text = 0
eval_len = 8192
num_windows = 3
entropy_windows = 1
temperature_law = True
law_rows = 16
out_dir = 'out/real-model-temperature-law'
