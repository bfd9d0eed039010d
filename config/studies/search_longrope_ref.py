# LongRoPE's search at the reference implementation's budget (microsoft/LongRoPE
# evolution/default_hyper_params/dim_mono.json: population 64, top 32 kept as parents, 16 mutations + 16 crossovers a
# generation, 40 generations, max_crossover_try 20, list_step 0.01): 64 + 40 x 32 = 1344 candidates, scored on the same
# 16 training windows as the demo's small search (`make longrope`), so the two best losses compare directly.
# python search_longrope.py config/studies/search_longrope_ref.py --overwrite=True
init_from = 'out/char-base-copy'
out_dir = 'out/char-longrope-s8-ref'
factor = 8.0
search_population = 64
search_parents = 32
search_generations = 40
search_mutation = 0.3
search_crossover = 0.5
search_crossover_tries = 20
search_grid = 0.01
search_windows = 16
