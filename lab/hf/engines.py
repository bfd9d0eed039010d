"""
How five inference engines read a model's rope config: one data table, each row citing the source file and the
version it was read from. lab/hf/inspect.py reads it; plain data, the standard library only.

  ENGINES          name -> version, config_form (where the engine reads rope settings in config.json), override (how a
                   user changes them), source
  READINGS         one Reading per (engine, rope_type): the fields read, where L (the training length) comes from,
                   where the attention factor goes, deviations, and warn entries the inspector evaluates on a config
  LLAMA_CPP_FLAGS  rope field -> llama.cpp CLI flag and GGUF key
  readings()       a filter over READINGS

Conventions. `reads` lists the rope-dict fields that reach the computation for that type; rope_theta and
partial_rotary_factor (COMMON_FIELDS) are read by every type and left out unless a type uses them differently.
A warn entry is (condition, message): 'has:<field>' the config's rope dict has the field, 'top:<field>' the whole
config.json has it at the top level, 'lacks:<field>' the rope dict lacks it, 'nested' the rope parameters are keyed by
layer type, 'always'; terms joined by '&' must all hold, a term after '!' must not (applies() evaluates one). s = factor, L = the original
(training) length, M = max_position_embeddings, d = the rotary dimension,
get_mscale(s, m) = 0.1*m*ln(s) + 1 (1 for s <= 1).

Where the sources came from. The search tool's `fetch` refused all four repositories (snapshots over its 500 MiB
limit), so the files were read from the packages on PyPI: transformers 4.57.6 (the last 4.x), 5.19.0 and 5.22.2
wheels and the installed 5.25.0; the vLLM 0.34.0 wheel (commit g62d4bc3c7); the SGLang 0.5.23 wheel; llama.cpp as
vendored, at commit 0c1e57098, in the llama-cpp-python 0.3.36 sdist. The repository paths below are those files'
paths in their repositories. vLLM 0.34.0 stands in for "current main". PR and issue numbers appear only where the
search tool found the thread. checked='tested here' marks the transformers 5.x rows: tests/test_hf_engines.py checks
them against the installed transformers; every other row is 'read, not run'.
"""
from typing import NamedTuple


class Reading(NamedTuple):
    engine: str       # one of ENGINES' keys
    rope_type: str    # the HF rope_type (or an engine-specific one) this row is about
    supported: bool   # False: the engine has no such type (the note says what happens)
    reads: tuple      # rope-dict fields that reach the computation (COMMON_FIELDS left out)
    L_from: str       # where the training length L comes from
    factor_on: str    # 'cos/sin' | 'q and k' | 'softmax scale' | 'logits' | 'none'
    note: str         # what it computes; deviations from the paper / HF
    warn: tuple       # ((condition, message), ...): 'has:<f>', 'top:<f>', 'lacks:<f>', 'always'
    source: str       # 'path/in/repo @ <tag or short commit> (<date>)'
    checked: str      # 'tested here' | 'read, not run'


COMMON_FIELDS = ('rope_theta', 'partial_rotary_factor')
FACTOR_ON = ('cos/sin', 'q and k', 'softmax scale', 'logits', 'none')
WARN_PREFIXES = ('has:', 'top:', 'lacks:')
TESTED, READ = 'tested here', 'read, not run'
L3_FIELDS = ('factor', 'low_freq_factor', 'high_freq_factor', 'original_max_position_embeddings')

# -- versions and files ---------------------------------------------------------------------------------------------
T4 = 'v4.57.6 (PyPI wheel, 2026-01-16)'
T5 = 'v5.25.0 (installed here; read 2026-12-05)'
VL = 'v0.34.0 (g62d4bc3c7, PyPI wheel, 2026-11-16)'
SG = 'v0.5.23 (PyPI wheel, 2026-10-30)'
LC = '0c1e57098 (vendored in llama-cpp-python 0.3.36; commit date not read)'

T4_ROPE = f'src/transformers/modeling_rope_utils.py @ {T4}'
T5_ROPE = f'src/transformers/modeling_rope_utils.py @ {T5}'
V_GET = f'vllm/model_executor/layers/rotary_embedding/__init__.py @ {VL}'
S_GET = f'python/sglang/srt/layers/rotary_embedding/factory.py @ {SG}'
S_VAR = f'python/sglang/srt/layers/rotary_embedding/rope_variant.py @ {SG}'
L_CONV = f'conversion/base.py (convert_hf_to_gguf.py) @ {LC}'
L_CTX = f'src/llama-context.cpp @ {LC}'


def _v(name):
    return f'vllm/model_executor/layers/rotary_embedding/{name} @ {VL}'


ENGINES = {
    'transformers 4.x': dict(
        version='4.57.6, the last 4.x release (PyPI wheel, 2026-01-16)',
        config_form="config.rope_scaling (a dict with 'rope_type', or the legacy 'type') and a top-level rope_theta "
                    "and partial_rotary_factor; a 'rope_parameters' key (what transformers 5 writes) is not read "
                    "at all. "
                    "ROPE_INIT_FUNCTIONS[rope_type](config) gives inv_freq and the attention factor, which the "
                    "rotary module multiplies into cos and sin.",
        override="edit config.json, or pass rope_scaling={...} and rope_theta=... to from_pretrained / the config "
                 "class (kwargs override config.json)",
        source=f'{T4_ROPE}; src/transformers/models/llama/configuration_llama.py and modeling_llama.py @ {T4}'),
    'transformers 5.x': dict(
        version='5.25.0, installed here (5.19.0 and 5.22.2 read too: same standardisation code)',
        config_form="config.rope_parameters holds everything, rope_theta and partial_rotary_factor included; a "
                    "non-empty rope_scaling in config.json wins over rope_parameters (convert_rope_params_to_dict); a "
                    "top-level rope_theta / partial_rotary_factor fills the dict; the dict is nested by layer type "
                    "when its keys are layer types (Gemma 3/4, OLMo 3, ...). config.rope_scaling is only an alias of "
                    "rope_parameters, so it is non-None even with no scaling ({'rope_type': 'default', 'rope_theta': "
                    "...}); saving writes rope_parameters only (no rope_scaling, no top-level rope_theta). Per-layer "
                    "bases: layer_rope_theta (Granite-SWA, GraniteMoE-SWA, Muse Spark/Glimmer; 0 = NoPE).",
        override="pass rope_parameters={...} (or the older rope_scaling={...}, which wins) to from_pretrained / the "
                 "config class; the rotary module computes inv_freq when it is built, so changing "
                 "config.rope_parameters on a loaded model does nothing until it is rebuilt",
        source=f'{T5_ROPE}; src/transformers/configuration_utils.py @ {T5}; '
               f'src/transformers/models/granite_swa/configuration_granite_swa.py @ {T5}'),
    'vLLM': dict(
        version='0.34.0 (PyPI wheel, commit g62d4bc3c7, 2026-11-16; requires transformers>=5.16.1,<5.23)',
        config_form="config.json is parsed by transformers 5 (so rope_scaling wins over rope_parameters and the dict "
                    "is standardised), then patch_rope_parameters maps rotary_emb_base -> rope_theta, rotary_pct / "
                    "rotary_emb_fraction -> partial_rotary_factor, the legacy 'type', 'su' -> longrope, 'mrope' -> "
                    "default, 'telechat3-yarn' -> yarn, and re-runs standardize_rope_params. Models pass "
                    "config.rope_parameters to get_rope(max_position=config.max_position_embeddings), which "
                    "dispatches on rope_type (one class per file in rotary_embedding/); rope_theta defaults to 10000 "
                    "when absent from the dict. max_model_len defaults to M x factor for types other than yarn, "
                    "longrope, llama3, deepseek_yarn (and never for Gemma 3); for longrope to the top-level "
                    "original_max_position_embeddings. Per-layer bases: granite.py reads layer_rope_theta (0 = NoPE).",
        override="--hf-overrides JSON, e.g. '{\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                 "\"original_max_position_embeddings\": 32768, \"rope_theta\": ...}}' with --max-model-len; the "
                 "--rope-scaling and --rope-theta flags were removed (PR #28006). A top-level dict override replaces "
                 "the whole dict after the config is loaded and patched: repeat rope_theta and "
                 "original_max_position_embeddings in it (as read)",
        source=f'{V_GET}; vllm/transformers_utils/config.py, vllm/config/model.py @ {VL}'),
    'SGLang': dict(
        version='0.5.23 (PyPI wheel, 2026-10-30; pins transformers==5.19.0)',
        config_form="config.json is parsed by transformers 5.19 (rope_scaling wins over rope_parameters, rope_theta "
                    "inside the dict); model files pass rope_parameters (else the v4 rope_scaling) to "
                    "get_rope(rope_scaling=..., base=rope_theta, max_position=config.max_position_embeddings); the "
                    "factory logs a warning for every scaling key it has to default, because v5's rope_scaling alias "
                    "is non-None even with no scaling. llama.py copies a top-level original_max_position_embeddings "
                    "into the rope dict. Per-layer bases: granite.py reads layer_rope_theta (0 = NoPE).",
        override="--json-model-override-args JSON (e.g. '{\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": "
                 "4.0}}'); for an HF folder a rope_scaling / rope_parameters override is merged into the existing "
                 "dict, so rope_theta is kept (a native GGUF's config is updated plainly)",
        source=f'{S_GET}; python/sglang/srt/utils/hf_transformers/config.py and common.py, '
               f'python/sglang/srt/models/llama.py @ {SG}'),
    'llama.cpp': dict(
        version='commit 0c1e57098, as vendored in the llama-cpp-python 0.3.36 sdist (commit date not read)',
        config_form="Not config.json at run time: convert_hf_to_gguf.py (conversion/base.py) reads rope_parameters, "
                    "else rope_scaling (the reverse of transformers 5 when both exist), fills a missing rope_theta / "
                    "original_max_position_embeddings from the top level, takes the 'full_attention' entry of a nested "
                    "dict (the 'sliding_attention' one gives only freq_base_swa), and writes GGUF keys "
                    "{arch}.rope.freq_base and {arch}.rope.scaling.type / .factor / .original_context_length (yarn: "
                    "also .yarn_ext_factor, .yarn_attn_factor, .yarn_beta_fast, .yarn_beta_slow). The GGUF types are "
                    "none / linear / yarn / longrope; llama3 is baked into a rope_freqs tensor. src/llama-model.cpp "
                    "reads the keys, src/llama-context.cpp merges them with the CLI flags.",
        override="CLI flags (common/arg.cpp): --rope-scaling {none,linear,yarn}, --rope-scale N, --rope-freq-base N, "
                 "--rope-freq-scale N, --yarn-orig-ctx N, --yarn-ext-factor N, --yarn-attn-factor N, "
                 "--yarn-beta-fast N, --yarn-beta-slow N; see LLAMA_CPP_FLAGS",
        source=f'{L_CONV}; src/llama-model.cpp, src/llama-context.cpp, common/arg.cpp, '
               f'gguf-py/gguf/constants.py @ {LC}'),
}

# -- warn entries shared by every row of an engine ------------------------------------------------------------------
W_T4 = (
    ('top:rope_parameters&!top:rope_scaling', "transformers 4.x reads only rope_scaling and a top-level rope_theta: a config.json "
                            "written by transformers 5 (rope_parameters only, rope_theta inside) loads with no "
                            "scaling and the config class's default rope_theta (10000 for Llama)"),
)
W_T5 = (
    ('top:rope_scaling&top:rope_parameters', "config.json has both rope_scaling and rope_parameters: transformers 5 takes the (non-empty) rope_scaling; "
                         "it saves rope_parameters only"),
    ('top:layer_rope_theta', "transformers 5.25 (Granite-SWA, GraniteMoE-SWA, Muse Spark/Glimmer): a per-layer base, "
                             "0 = NoPE; every RoPE layer gets the same rope_parameters scaling at its own base"),
)
W_VLLM = (
    ('top:rope_scaling&top:rope_parameters', "config.json has both rope_scaling and rope_parameters: vLLM (parsing with transformers 5) takes the "
                         "non-empty rope_scaling"),
    ('always', "vLLM has no --rope-scaling / --rope-theta flags since PR #28006; use --hf-overrides. A top-level "
               "'rope_parameters' override is set after loading with no standardisation (as read): without "
               "rope_theta get_rope uses 10000, without original_max_position_embeddings yarn/llama3/longrope fail; "
               "a 'rope_scaling' override leaves rope_theta None (transformers 5's setter, seen here with 5.25)"),
)
W_SGL = (
    ('top:rope_scaling&top:rope_parameters', "config.json has both rope_scaling and rope_parameters: SGLang (parsing with transformers 5.19) takes the "
                         "non-empty rope_scaling"),
)
W_LCPP = (
    ('top:rope_scaling&top:rope_parameters', "config.json has both rope_scaling and rope_parameters: convert_hf_to_gguf takes rope_parameters and "
                         "ignores rope_scaling: the reverse of transformers 5"),
    ('top:sliding_window', "llama.cpp: sliding-window layers use the model's own SWA base and scale "
                           "(rope_freq_base/scale_train_swa, copied from the full layers' trained values or left at "
                           "1.0 as for Gemma 3); --rope-scale, --rope-freq-base and --rope-scaling never reach them "
                           "(still so at 0c1e57098)"),
    ('top:layer_rope_theta', "convert_hf_to_gguf does not read layer_rope_theta: the Granite-SWA converter writes a "
                             "RoPE/NoPE pattern only from no_rope_layers, with one rope_theta for every layer"),
)

# -- warn entries about one field, reused across types ---------------------------------------------------------------
W5_TOP_L = ('top:original_max_position_embeddings',
            "transformers 5 replaces rope_parameters['original_max_position_embeddings'] with the top-level value "
            "(standardize_rope_params, re-run by the init function): the top level wins, Phi-3.5 style")
W5_NO_L = ('lacks:original_max_position_embeddings&!top:original_max_position_embeddings',
           "missing: transformers 5 fills it with max_position_embeddings, i.e. L becomes the extended length unless a "
           "top-level original_max_position_embeddings exists")
WV_TOP_L = ('top:original_max_position_embeddings',
            "vLLM re-runs transformers' standardize_rope_params after loading (patch_rope_parameters), so the "
            "top-level value replaces the rope dict's (as read)")
WS_TOP_L = ('top:original_max_position_embeddings',
            "SGLang's llama.py copies a top-level original_max_position_embeddings into the rope dict, over the dict's "
            "own; other model files need not")
WL_TOP_L = ('top:original_max_position_embeddings',
            "convert_hf_to_gguf keeps the rope dict's original_max_position_embeddings and uses the top-level one only "
            "when the dict lacks it: the reverse of transformers 5")

# FoPE (Intern-S1-Pro): its model files turn it on when the rope dict sets fope_init_factor, fope_sep_head or
# num_inv_freq; the pairs it stops (past num_inv_freq, else those with theta <= 2 pi / max_position_embeddings) are
# padded with cos 1 and sin 1 by the trainer (xtuner) and by both engines as released (lab/fope.py)
FOPE_FIELDS = ('fope_init_factor', 'fope_sep_head', 'num_inv_freq')  # read by the Intern-S1-Pro model files
_FOPE_PAD = ("the pairs FoPE stops get cos 1 and sin 1, as xtuner trained them: a fixed 45-degree turn that doubles "
             "their share of every score")
W_FOPE_V = ('has:fope_init_factor', f"FoPE (models/interns1_pro.py l. 383-394 sets use_fope): {_FOPE_PAD} (fope.py l. "
            "114-124); vLLM's later fope.py (151a2c74, issue #55204 / PR #55243) pads sin with 0 instead, which "
            "serves such a checkpoint with other scores: pin the vLLM version")
W_FOPE_S = ('has:fope_init_factor', f"FoPE (models/interns1pro.py l. 47-52 sets use_fope and num_kv_heads): {_FOPE_PAD} "
            "(rope_variant.py, FourierRotaryEmbedding._compute_cos_sin_cache), as vLLM 0.34.0 does")


def _unsupported(engine, rope_type, note, source, checked=READ, warn=()):
    return Reading(engine, rope_type, False, (), 'not used', 'none', note, tuple(warn), source, checked)


_T4_NONE = ("no such type in ROPE_INIT_FUNCTIONS (default, linear, dynamic, yarn, longrope, llama3): validation only "
            "logs 'Missing validation function', then building the model raises KeyError")
_T5_NONE = ("no such type in ROPE_INIT_FUNCTIONS (linear, dynamic, yarn, longrope, llama3, proportional; 'default' is "
            "the model's own): validate_rope only logs a warning, then building the model raises KeyError")
_V_NONE = "get_rope raises ValueError('Unknown RoPE scaling type') (transformers' validation only warned)"
_S_NONE = "get_rope raises ValueError('Unknown RoPE scaling type')"
_L_NONE = ("convert_hf_to_gguf logs 'Unknown RoPE type' and writes no scaling keys: the GGUF runs as plain RoPE at "
           "rope_theta, silently unscaled at run time")


READINGS = [
    # ---------------------------------------------------------------- transformers 4.x (4.57.6)
    Reading('transformers 4.x', 'default', True, (), 'not used', 'none',
            "θ_i = rope_theta^(-2i/d) over d = head_dim x partial_rotary_factor; also used when rope_scaling is None",
            W_T4, T4_ROPE, READ),
    Reading('transformers 4.x', 'linear', True, ('factor',), 'not used', 'none',
            "θ_i / factor (PI)", W_T4, T4_ROPE, READ),
    Reading('transformers 4.x', 'dynamic', True, ('factor',), 'config.max_position_embeddings', 'none',
            "per forward longer than the cached length: base x (s·l/M - (s-1))^(d/(d-2)), l = that length, M = "
            "max_position_embeddings; back to plain RoPE when a forward is shorter than M (cached keys keep their "
            "base)",
            W_T4 + (('has:original_max_position_embeddings',
                     "ignored by 4.x dynamic (a TODO in the source): L = max_position_embeddings"),),
            T4_ROPE, READ),
    Reading('transformers 4.x', 'yarn', True,
            ('factor', 'original_max_position_embeddings', 'attention_factor', 'mscale', 'mscale_all_dim',
             'beta_fast', 'beta_slow', 'truncate'),
            "rope_scaling['original_max_position_embeddings'], else config.max_position_embeddings", 'cos/sin',
            "paper YaRN; attention factor = attention_factor, else get_mscale(s, mscale)/get_mscale(s, mscale_all_dim) "
            "when both are non-zero, else get_mscale(s); truncate (default True) floors/ceils the correction range. "
            "DeepSeek-V3's modelling also multiplies the softmax scale by get_mscale(s, mscale_all_dim)^2; "
            "DeepSeek-V2's does not in 4.57 (added in 5.x by PR #47435)",
            W_T4 + (('top:original_max_position_embeddings',
                     "ignored by 4.x yarn: L = rope_scaling['original_max_position_embeddings'] or "
                     "max_position_embeddings"),
                    ('lacks:original_max_position_embeddings',
                     "4.x yarn then takes L = max_position_embeddings, the extended length: correction dims come "
                     "from the wrong length")),
            f'{T4_ROPE}; src/transformers/models/deepseek_v3/modeling_deepseek_v3.py @ {T4}', READ),
    Reading('transformers 4.x', 'llama3', True,
            L3_FIELDS,
            "rope_scaling['original_max_position_embeddings'] (required: KeyError without it)", 'none',
            "Llama 3.1 wavelength bands: keep θ below L/high_freq_factor, θ/s above L/low_freq_factor, smooth between",
            W_T4 + (('top:original_max_position_embeddings',
                     "ignored by 4.x llama3: only rope_scaling['original_max_position_embeddings'] is read"),),
            T4_ROPE, READ),
    Reading('transformers 4.x', 'longrope', True, ('long_factor', 'short_factor', 'factor', 'attention_factor'),
            "config.original_max_position_embeddings (top level), else config.max_position_embeddings", 'cos/sin',
            "θ_i / f_i with f = long_factor once a forward is longer than L, short_factor otherwise; attention factor "
            "= attention_factor, else sqrt(1 + ln s / ln L) (1 for s <= 1); with a top-level original length, s is "
            "recomputed as M / L, overriding rope_scaling['factor']",
            W_T4 + (('has:original_max_position_embeddings',
                     "ignored by 4.x longrope: L comes only from the top-level original_max_position_embeddings "
                     "(else max_position_embeddings)"),
                    ('top:original_max_position_embeddings',
                     "4.x longrope sets s = max_position_embeddings / original_max_position_embeddings, whatever "
                     "rope_scaling['factor'] says")),
            T4_ROPE, READ),
    _unsupported('transformers 4.x', 'deepseek_yarn',
                 _T4_NONE + ". DeepSeek configs say 'yarn' (see the yarn row)", T4_ROPE, warn=W_T4),
    _unsupported('transformers 4.x', 'proportional', _T4_NONE + " (a transformers 5 type: 5.19.0 has it)", T4_ROPE,
                 warn=W_T4),
    _unsupported('transformers 4.x', 'ntk', _T4_NONE, T4_ROPE, warn=W_T4),
    _unsupported('transformers 4.x', 'dynamic_yarn', _T4_NONE, T4_ROPE, warn=W_T4),
    _unsupported('transformers 4.x', 'ntk_by_parts', _T4_NONE, T4_ROPE, warn=W_T4),

    # ---------------------------------------------------------------- transformers 5.x (5.25.0, installed)
    Reading('transformers 5.x', 'default', True, (), 'not used', 'none',
            "the model's compute_default_rope_parameters: θ_i = rope_theta^(-2i/d), d = head_dim (not in "
            "ROPE_INIT_FUNCTIONS)", W_T5, f'{T5_ROPE}; src/transformers/models/llama/modeling_llama.py @ {T5}', TESTED),
    Reading('transformers 5.x', 'linear', True, ('factor',), 'not used', 'none', "θ_i / factor (PI)",
            W_T5, T5_ROPE, TESTED),
    Reading('transformers 5.x', 'dynamic', True, ('factor',), 'config.max_position_embeddings', 'none',
            "as 4.x: per forward longer than the cached length, base x (s·l/M - (s-1))^(d/(d-2)); back to plain RoPE "
            "below M. L is max_position_embeddings, so it must hold the training length",
            W_T5 + (('has:original_max_position_embeddings',
                     "ignored by dynamic (validation calls it an unrecognised key): L = max_position_embeddings"),),
            T5_ROPE, TESTED),
    Reading('transformers 5.x', 'yarn', True,
            ('factor', 'original_max_position_embeddings', 'attention_factor', 'mscale', 'mscale_all_dim',
             'beta_fast', 'beta_slow', 'truncate'),
            "rope_parameters['original_max_position_embeddings'], filled by standardize_rope_params: the top-level "
            "original_max_position_embeddings when the config has one, else the dict's, else max_position_embeddings",
            'cos/sin',
            "as 4.x: attention factor = attention_factor, else the mscale/mscale_all_dim ratio when both are non-zero, "
            "else get_mscale(s), on cos and sin; factor None -> M / L. MLA models (deepseek_v2/v3/v32, mistral4, "
            "mistral_large4, glm4_moe_lite, longcat_flash, minicpm3, ...) also multiply the softmax scale by "
            "get_mscale(s, mscale_all_dim)^2 (yarn_apply_mscale). truncate is read from config.rope_parameters "
            "itself, so inside a per-layer-type dict it is ignored (True)",
            W_T5 + (W5_TOP_L, W5_NO_L,
                    ('has:truncate&nested', "transformers 5.25 ignores truncate inside a nested (per-layer-type) "
                                     "rope_parameters: it reads config.rope_parameters.get('truncate', True)")),
            T5_ROPE, TESTED),
    Reading('transformers 5.x', 'llama3', True,
            L3_FIELDS,
            "rope_parameters['original_max_position_embeddings'] (standardised as for yarn: the top level wins)",
            'none', "as 4.x (Llama 3.1 wavelength bands)", W_T5 + (W5_TOP_L, W5_NO_L), T5_ROPE, TESTED),
    Reading('transformers 5.x', 'longrope', True,
            ('long_factor', 'short_factor', 'factor', 'attention_factor', 'original_max_position_embeddings'),
            "rope_parameters['original_max_position_embeddings'] (standardised: the top-level one wins, Phi-3.5's "
            "place)", 'cos/sin',
            "θ_i / f_i, f = long_factor once a forward is longer than L, short_factor otherwise (keys cached with the "
            "short factors are not re-rotated); attention factor = attention_factor, else sqrt(1 + ln s / ln L), "
            "s = factor, else M / L. Unlike 4.x, an explicit factor is kept",
            W_T5 + (W5_TOP_L, W5_NO_L), T5_ROPE, TESTED),
    Reading('transformers 5.x', 'proportional', True, ('factor', 'partial_rotary_factor'), 'not used', 'none',
            "Gemma 4's global layers: the first floor(p·d/2) pairs keep θ_i = rope_theta^(-2i/d) (exponent over the "
            "full head_dim), the rest θ = 0, all divided by factor; p = partial_rotary_factor", W_T5, T5_ROPE, TESTED),
    _unsupported('transformers 5.x', 'deepseek_yarn',
                 _T5_NONE + ". DeepSeek configs say 'yarn'; the MLA models put get_mscale(s, mscale_all_dim)^2 on the "
                            "softmax scale (see the yarn row)", T5_ROPE, TESTED, W_T5),
    _unsupported('transformers 5.x', 'ntk', _T5_NONE, T5_ROPE, TESTED, W_T5),
    _unsupported('transformers 5.x', 'dynamic_yarn', _T5_NONE, T5_ROPE, TESTED, W_T5),
    _unsupported('transformers 5.x', 'ntk_by_parts', _T5_NONE, T5_ROPE, TESTED, W_T5),

    # ---------------------------------------------------------------- vLLM 0.34.0
    Reading('vLLM', 'default', True, FOPE_FIELDS, 'not used', 'none',
            "RotaryEmbedding, a cos/sin table of max_position rows; an 'mrope_section' key switches to "
            "MRotaryEmbedding, 'use_fope' to Fourier RoPE", W_VLLM + (W_FOPE_V,),
            f"{V_GET}; {_v('fope.py')}; vllm/model_executor/models/interns1_pro.py @ {VL}", READ),
    Reading('vLLM', 'linear', True, ('factor',), 'not used', 'none',
            "positions / factor over a table of M x factor rows (same frequencies as HF)", W_VLLM,
            f"{V_GET}; {_v('linear_scaling_rope.py')}", READ),
    Reading('vLLM', 'dynamic', True, ('factor', 'alpha', 'max_trained_positions'),
            "rope_parameters['max_trained_positions'], else the model's max_position (config.max_position_embeddings)",
            'none',
            "not dynamic: one base for every length, base x (s·M/T - (s-1))^(d/(d-2)) with M = max_position, T = "
            "max_trained_positions (PR #41277 changed it from a constant (s²-s+1) form); with T absent T = M and the "
            "base is unchanged. 'alpha' instead gives Hunyuan's base x alpha^(d/(d-2))",
            W_VLLM + (('lacks:max_trained_positions',
                       "vLLM's dynamic NTK with T = max_position_embeddings leaves the base unchanged (as read): no "
                       "NTK stretch, while max_model_len defaults to M x factor"),),
            f"{V_GET}; {_v('dynamic_ntk_scaling_rope.py')}", READ),
    Reading('vLLM', 'yarn', True,
            ('factor', 'original_max_position_embeddings', 'beta_fast', 'beta_slow', 'mscale', 'mscale_all_dim',
             'attention_factor', 'truncate'),
            "rope_parameters['original_max_position_embeddings'] (required; standardised by transformers, the "
            "top-level one wins)", 'cos/sin',
            "as HF: mscale = attention_factor, else get_mscale(s, mscale)/get_mscale(s, mscale_all_dim) when both "
            "are non-zero, else get_mscale(s), multiplied into the cos/sin table (L x factor rows); truncate read. "
            "With 'mrope_section' the same keys go to MRotaryEmbedding; DeepSeek-family models turn yarn into "
            "deepseek_yarn (that row)",
            W_VLLM + (WV_TOP_L,
                      ('has:attention_factor', "vLLM before the fix present in 0.34.0 dropped attention_factor and "
                                               "used get_mscale(s) (1.416 for factor 64 where 1.0 was asked; PRs "
                                               "#46280, #48351)"),
                      ('has:mscale_all_dim', "vLLM before the fix present in 0.34.0 ignored mscale/mscale_all_dim on "
                                             "plain yarn (issue #48621: v0.25.0 gave Ministral 3 1.277 instead of "
                                             "1.0)")),
            f"{V_GET}; {_v('yarn_scaling_rope.py')}; {_v('common.py')}", READ),
    Reading('vLLM', 'deepseek_yarn', True,
            ('factor', 'original_max_position_embeddings', 'beta_fast', 'beta_slow', 'mscale', 'mscale_all_dim'),
            "rope_parameters['original_max_position_embeddings'] (required)", 'softmax scale',
            "DeepSeek models (deepseek_v2.py and kin) rename any non-default rope_type to 'deepseek_yarn' "
            "('deepseek_llama_scaling' when attention_factor == 1.0): cos/sin get get_mscale(s, mscale)/get_mscale(s, "
            "mscale_all_dim) with defaults mscale 1, mscale_all_dim 0, and the attention multiplies its softmax scale "
            "by get_mscale(s, mscale_all_dim)^2 (not for deepseek_llama_scaling); truncate is not read (always "
            "floor/ceil)",
            W_VLLM + (('lacks:mscale_all_dim', "vLLM's DeepSeek path then uses mscale_all_dim 0: cos/sin get "
                                               "get_mscale(s, mscale), where HF gives get_mscale(s) (differs when "
                                               "mscale != 1)"),
                      ('has:truncate', "ignored on vLLM's DeepSeek path (always floor/ceil)"),
                      ('has:attention_factor', "vLLM's DeepSeek models switch to deepseek_llama_scaling (no softmax "
                                               "fold) when attention_factor == 1.0 and ignore other values")),
            f"{V_GET}; {_v('deepseek_scaling_rope.py')}; vllm/model_executor/models/deepseek_v2.py @ {VL}", READ),
    Reading('vLLM', 'llama3', True, L3_FIELDS,
            "rope_parameters['original_max_position_embeddings'] (required; standardised, the top-level one wins)",
            'none', "as HF (smooth = 0 when low_freq_factor == high_freq_factor)", W_VLLM + (WV_TOP_L,),
            f"{V_GET}; {_v('llama3_rope.py')}", READ),
    Reading('vLLM', 'longrope', True,
            ('short_factor', 'long_factor', 'original_max_position_embeddings', 'short_mscale', 'long_mscale'),
            "rope_parameters['original_max_position_embeddings'] (standardised, the top-level one wins)", 'cos/sin',
            "long factors for every position whenever max_model_len > L (chosen once, so the KV cache never mixes); "
            "attention factor = short_mscale / long_mscale, else sqrt(1 + ln(M/L) / ln L) from max_position: "
            "'factor' and 'attention_factor' are not read",
            W_VLLM + (WV_TOP_L,
                      ('has:attention_factor', "ignored by vLLM's longrope: it takes short_mscale/long_mscale or "
                                               "sqrt(1 + ln(M/L)/ln L)"),
                      ('has:factor', "ignored by vLLM's longrope: the scale is max_position_embeddings / L"),
                      ('top:original_max_position_embeddings', "with longrope, vLLM's default max_model_len is the "
                                                               "top-level original_max_position_embeddings: pass "
                                                               "--max-model-len to serve longer (then long factors "
                                                               "apply at every length)")),
            f"{V_GET}; {_v('phi3_long_rope_scaled_rope.py')}; vllm/config/model.py @ {VL}", READ),
    Reading('vLLM', 'proportional', True, ('partial_rotary_factor',), 'not used', 'none',
            "Gemma4RotaryEmbedding: the first p·d/2 angles rotate with exponents over the full head, the rest not; "
            "'factor' is not passed (HF divides by it)",
            W_VLLM + (('has:factor', "vLLM's proportional ignores factor (HF 5 divides every θ by it)"),),
            f"{V_GET}; {_v('gemma4_rope.py')}", READ),
    Reading('vLLM', 'ntk', True, ('factor', 'mixed_b'), 'not used', 'none',
            "static NTK as kexue.fm/archives/9706: θ_i = (b·s)^(-2i/d) / s^(2/d) (pair 0 scaled too, unlike "
            "b·s^(d/(d-2))); with mixed_b, θ_i / exp(a·(i+1)^b), a = ln s / (d/2)^b. No HF counterpart",
            W_VLLM, f"{V_GET}; {_v('ntk_scaling_rope.py')}", READ),
    _unsupported('vLLM', 'dynamic_yarn', _V_NONE, V_GET, warn=W_VLLM),
    _unsupported('vLLM', 'ntk_by_parts', _V_NONE, V_GET, warn=W_VLLM),

    # ---------------------------------------------------------------- SGLang 0.5.23
    Reading('SGLang', 'default', True, FOPE_FIELDS, 'not used', 'none',
            "RotaryEmbedding; 'mrope_section' -> MRotaryEmbedding, 'use_fope' -> FourierRotaryEmbedding",
            W_SGL + (W_FOPE_S,), f"{S_GET}; {S_VAR}; python/sglang/srt/models/interns1pro.py @ {SG}", READ),
    Reading('SGLang', 'linear', True, ('factor',), 'not used', 'none',
            "positions / factor over a table of M x factor rows; factor defaults to 1.0 with a warning", W_SGL,
            f'{S_GET}; python/sglang/srt/layers/rotary_embedding/base.py @ {SG}', READ),
    Reading('SGLang', 'dynamic', True, ('factor', 'alpha'), "the model's max_position (config.max_position_embeddings)",
            'none',
            "not dynamic: one base for every length, base x (s²-s+1)^(d/(d-2)), HF's dynamic frozen at length s·M "
            "(the form vLLM replaced in PR #41277); 'alpha' gives Hunyuan's base x alpha^(d/(d-2))",
            W_SGL + (('always', "SGLang's dynamic NTK is static: base x (s²-s+1)^(d/(d-2)) at every length, short "
                                "inputs included"),),
            f'{S_GET}; {S_VAR}', READ),
    Reading('SGLang', 'yarn', True,
            ('factor', 'original_max_position_embeddings', 'beta_fast', 'beta_slow', 'mscale', 'mscale_all_dim',
             'truncate', 'attn_factor', 'extrapolation_factor'),
            "rope dict original_max_position_embeddings, else max_position (with a warning)", 'cos/sin',
            "mscale = get_mscale(s, mscale)/get_mscale(s, mscale_all_dim) when both are present (not None), else "
            "get_mscale(s), times attn_factor; HF's attention_factor is not read; truncate read. DeepSeek-family "
            "models turn it into deepseek_yarn (that row)",
            W_SGL + (WS_TOP_L,
                     ('has:attention_factor', "SGLang's generic yarn drops attention_factor (it reads attn_factor, a "
                                              "multiplier on its own get_mscale(s)); copying it into attn_factor "
                                              "applies the temperature twice (fixed for Laguna only, PR #33558)"),
                     ('has:mscale', "SGLang uses the mscale ratio when both keys are present even if one is 0; HF "
                                    "needs both non-zero")),
            f"{S_GET}; python/sglang/srt/layers/rotary_embedding/yarn.py @ {SG}", READ),
    Reading('SGLang', 'deepseek_yarn', True,
            ('factor', 'original_max_position_embeddings', 'beta_fast', 'beta_slow', 'mscale', 'mscale_all_dim',
             'attn_factor', 'extrapolation_factor'),
            "rope dict original_max_position_embeddings, else max_position (with a warning)", 'softmax scale',
            "deepseek_v2.py renames any rope_scaling to 'deepseek_yarn': cos/sin get get_mscale(s, mscale) / "
            "get_mscale(s, mscale_all_dim) x attn_factor (defaults 1, 0, 1) and MLA's softmax scale x get_mscale(s, "
            "mscale_all_dim)^2 (compute_mla_mscale_scaling; skipped when apply_yarn_scaling is false); truncate not "
            "read",
            W_SGL + (('has:attention_factor', "ignored by SGLang's DeepSeek path"),
                     ('has:truncate', "ignored by SGLang's DeepSeek path (always floor/ceil)")),
            f"{S_GET}; {S_VAR}; python/sglang/srt/configs/model_config.py @ {SG}", READ),
    Reading('SGLang', 'llama3', True, L3_FIELDS,
            "rope dict original_max_position_embeddings, else max_position (with a warning)", 'none',
            "as HF; missing keys default (factor 1, low 1, high 4) with a warning", W_SGL + (WS_TOP_L,),
            f'{S_GET}; {S_VAR}', READ),
    Reading('SGLang', 'longrope', True,
            ('short_factor', 'long_factor', 'original_max_position_embeddings', 'short_mscale', 'long_mscale'),
            "rope dict original_max_position_embeddings, else max_position", 'cos/sin',
            "long factors for the whole batch when any position exceeds L; attention factor = short_mscale / "
            "long_mscale, else sqrt(1 + ln(M/L)/ln L): 'factor' and 'attention_factor' not read",
            W_SGL + (WS_TOP_L,
                     ('has:attention_factor', "ignored by SGLang's longrope (short_mscale/long_mscale or "
                                              "sqrt(1 + ln(M/L)/ln L))")),
            f'{S_GET}; {S_VAR}', READ),
    Reading('SGLang', 'proportional', True, ('partial_rotary_factor',), 'not used', 'none',
            "Gemma4RotaryEmbedding: the first p·d/2 angles rotate with exponents over the full head; 'factor' not read",
            W_SGL + (('has:factor', "SGLang's proportional ignores factor (HF 5 divides every θ by it)"),),
            f'{S_GET}; {S_VAR}', READ),
    _unsupported('SGLang', 'ntk', _S_NONE, S_GET, warn=W_SGL),
    _unsupported('SGLang', 'dynamic_yarn', _S_NONE, S_GET, warn=W_SGL),
    _unsupported('SGLang', 'ntk_by_parts', _S_NONE, S_GET, warn=W_SGL),

    # ---------------------------------------------------------------- llama.cpp 0c1e57098
    Reading('llama.cpp', 'default', True, (), 'not used', 'none',
            "rope_theta -> {arch}.rope.freq_base; no scaling type written (the loader's default 'linear' with no "
            "factor is plain RoPE)", W_LCPP, f'{L_CONV}; src/llama-model.cpp @ {LC}', READ),
    Reading('llama.cpp', 'linear', True, ('factor',), 'not used', 'none',
            "{arch}.rope.scaling.type = linear, .factor = factor; freq_scale = 1/factor on the full layers", W_LCPP,
            f'{L_CONV}; src/llama-model.cpp @ {LC}', READ),
    _unsupported('llama.cpp', 'dynamic',
                 "convert_hf_to_gguf writes no scaling for 'dynamic' (only HunYuan's alpha form, in its own model "
                 "class), without a warning: the GGUF runs as plain RoPE at rope_theta", L_CONV,
                 warn=W_LCPP + (('always', "a 'dynamic' config converts to a GGUF with plain RoPE; use --rope-scaling "
                                           "linear --rope-scale N or --rope-freq-base by hand"),)),
    Reading('llama.cpp', 'yarn', True, ('factor', 'original_max_position_embeddings'),
            "GGUF {arch}.rope.scaling.original_context_length (converter: the rope dict's, the top-level one only when "
            "the dict lacks it), else {arch}.context_length; --yarn-orig-ctx overrides", 'cos/sin',
            "ggml multiplies cos/sin by 1 + 0.1·ln(s) inside the kernel; llama-context sets yarn_attn_factor = "
            "get_mscale(s) / (1 + 0.1·ln(s)) (the DeepSeek ratio in its place when yarn_log_multiplier is set), so "
            "the net is HF's default get_mscale(s), times {arch}.rope.scaling.attn_factor. The converter also "
            "writes attention_factor, beta_fast, beta_slow, extrapolation_factor to .yarn_* keys that only the Grok "
            "(and, for betas, Mistral 3) loaders read; "
            "mscale/mscale_all_dim are not written for generic models; the correction range is always floor/ceil. "
            "Phi-3-class converters also write .attn_factor = 0.1·ln(s) + 1 for yarn, which would apply the "
            "temperature twice (as read, unverified). DeepSeek-family GGUFs: the deepseek_yarn row",
            W_LCPP + (WL_TOP_L,
                      ('has:attention_factor', "llama.cpp ignores attention_factor for generic models: the net "
                                               "magnitude is get_mscale(s) (the converter's .yarn_attn_factor is "
                                               "overwritten in llama-context whenever YaRN is on)"),
                      ('has:beta_fast', "llama.cpp reads the GGUF's yarn_beta_fast/slow only for Grok and Mistral 3: "
                                        "other models use 32/1 unless --yarn-beta-fast/--yarn-beta-slow is given"),
                      ('has:mscale_all_dim', "llama.cpp's generic yarn ignores mscale/mscale_all_dim (only the "
                                             "DeepSeek and Mistral 3 loaders read yarn_log_multiplier)"),
                      ('has:truncate', "llama.cpp always floors/ceils the correction range (truncate=False is "
                                       "ignored)")),
            f'{L_CONV}; {L_CTX}; ggml/src/ggml.c, ggml/src/ggml-cpu/ops.cpp @ {LC}', READ),
    Reading('llama.cpp', 'deepseek_yarn', True, ('factor', 'original_max_position_embeddings', 'mscale_all_dim'),
            "GGUF {arch}.rope.scaling.original_context_length", 'softmax scale',
            "DeepSeek-V2/V3 GGUFs (HF 'yarn'): the converter writes .yarn_log_multiplier = 0.1 x mscale_all_dim (the "
            "loader divides by 0.1); cos/sin get get_mscale(s, mscale)/get_mscale(s, mscale_all_dim) with mscale "
            "assumed 1 (DeepSeek-V2: = mscale_all_dim when != 1), call it a, and kq_scale = (a·get_mscale(s, "
            "mscale_all_dim))^2 / sqrt(d_k) on the whole logit (PR #17945); a = 1 for DeepSeek-V3, where this is "
            "HF's result",
            W_LCPP + (('has:mscale', "llama.cpp does not read mscale (assumed 1; a TODO in llama-context.cpp)"),),
            f'conversion/deepseek.py @ {LC}; src/models/deepseek2.cpp @ {LC}; {L_CTX}', READ),
    Reading('llama.cpp', 'llama3', True, L3_FIELDS,
            "the rope dict's original_max_position_embeddings at conversion (8192 if missing)", 'none',
            "no GGUF scaling type: the Llama converter bakes the per-pair divisors into a rope_freqs tensor "
            "(defaults factor 8, low 1, high 4); the CLI cannot change them",
            W_LCPP + (('lacks:original_max_position_embeddings&!top:original_max_position_embeddings',
                       "llama.cpp's converter then assumes L = 8192 (transformers 5 would use "
                       "max_position_embeddings)"),),
            f'conversion/llama.py @ {LC}; src/llama-model.cpp @ {LC}', READ),
    Reading('llama.cpp', 'longrope', True, ('long_factor', 'short_factor', 'original_max_position_embeddings'),
            "GGUF {arch}.rope.scaling.original_context_length (the rope dict's, else the top-level value)", 'cos/sin',
            "Phi-3 / MiniCPM converters write rope_factors_long/short tensors and .attn_factor = sqrt(1 + ln s/ln L), "
            "s = M / L; long factors when the context size n_ctx exceeds L (chosen once per context). 'factor' and "
            "'attention_factor' are not read",
            W_LCPP + (WL_TOP_L,
                      ('has:attention_factor', "ignored by the Phi-3 converter: it writes sqrt(1 + ln(M/L)/ln L)")),
            f'conversion/phi.py @ {LC}; src/llama-model.cpp @ {LC}', READ),
    Reading('llama.cpp', 'proportional', True, ('partial_rotary_factor',), 'not used', 'none',
            "Gemma 4 converter only: the global layers get a rope_freqs tensor of 1 for the rotated pairs and 1e30 "
            "(θ ≈ 0) for the rest; 'factor' not read",
            W_LCPP + (('has:factor', "llama.cpp's Gemma 4 converter ignores proportional's factor"),),
            f'conversion/gemma.py @ {LC}', READ),
    _unsupported('llama.cpp', 'ntk', _L_NONE, L_CONV, warn=W_LCPP),
    _unsupported('llama.cpp', 'dynamic_yarn', _L_NONE, L_CONV, warn=W_LCPP),
    _unsupported('llama.cpp', 'ntk_by_parts', _L_NONE, L_CONV, warn=W_LCPP),

    # ---------------------------------------------------------------- the engine-only variants (rope.py's last section)
    # ntk_mixed is vLLM's 'ntk' row above, ntk_alpha the 'dynamic' rows with 'alpha' (lab.hf.config.engine_type maps
    # those names); Grok's yarn_log and TeleChat3's YaRN are read from the files rope.py cites (the code index's copies)
    _unsupported('transformers 4.x', 'yarn_log', _T4_NONE, T4_ROPE, warn=W_T4),
    _unsupported('transformers 5.x', 'yarn_log', _T5_NONE, T5_ROPE, TESTED, W_T5),
    _unsupported('vLLM', 'yarn_log', "not a get_rope type: Grok's model file builds its own class "
                 "(grok1_scaling_rope.py, read at e443db5a), so another model naming it gets " + _V_NONE, V_GET,
                 warn=W_VLLM),
    Reading('SGLang', 'yarn_log', True, ('factor', 'original_max_position_embeddings', 'beta_fast', 'beta_slow'),
            "rope dict original_max_position_embeddings", 'none',
            "Grok only (ScalingRotaryEmbedding, extra_method='yarn_log'): theta_i / s^ramp_i, YaRN's ramp blended in "
            "log space, the range always truncated; its mscale is computed and left off cos/sin (Grok's attention "
            "temperature is a separate per-query logit scale, attn_temperature_len)", W_SGL,
            'python/sglang/srt/models/grok.py @ 031ad4ce (the code index)', READ),
    _unsupported('llama.cpp', 'yarn_log', "unverified: how llama.cpp's Grok loader blends the frequencies was not "
                 "read; its generic yarn is the paper's (linear blend)", L_CONV, warn=W_LCPP),
    _unsupported('transformers 4.x', 'yarn_telechat', _T4_NONE, T4_ROPE, warn=W_T4),
    _unsupported('transformers 5.x', 'yarn_telechat', _T5_NONE, T5_ROPE, TESTED, W_T5),
    Reading('vLLM', 'yarn_telechat', True, ('factor', 'original_max_position_embeddings', 'beta_fast', 'beta_slow'),
            "rope dict original_max_position_embeddings", 'cos/sin',
            "TeleChat3's class: YaRN's frequencies with the temperature 0.07 ln s + 1 in place of 0.1 ln s + 1, on "
            "cos and sin; which rope_type name get_rope routes to it was not found in the versions read, and 0.34.0 "
            "may pass the 0.07 as an explicit attention_factor (unverified)", W_VLLM,
            'vllm/model_executor/layers/rotary_embedding/telechat3_scaling_rope.py @ d5a17e05 (the code index)', READ),
    _unsupported('SGLang', 'yarn_telechat', "not found in the files read (factory.py, yarn.py, rope_variant.py)",
                 S_GET, warn=W_SGL),
    _unsupported('llama.cpp', 'yarn_telechat', "not found in the files read: the generic yarn's temperature is "
                 "0.1 ln s + 1", L_CTX, warn=W_LCPP),
]

_ARG = f'common/arg.cpp @ {LC}'
_KEYS = f'gguf-py/gguf/constants.py @ {LC}'
LLAMA_CPP_FLAGS = {
    'rope_type': dict(flag='--rope-scaling {none,linear,yarn} (env LLAMA_ARG_ROPE_SCALING_TYPE)',
                      gguf='{arch}.rope.scaling.type',
                      note="values none / linear / yarn / longrope in the GGUF; the flag takes no longrope; 'none' "
                           "forces freq_scale 1", source=f'{_ARG}; {_KEYS}; src/llama-context.cpp @ {LC}'),
    'factor': dict(flag='--rope-scale N (= --rope-freq-scale 1/N)', gguf='{arch}.rope.scaling.factor',
                   note="freq_scale = 1/factor; reaches full-attention layers only (SWA layers keep their own)",
                   source=f'{_ARG}; {_KEYS}; src/llama-model.cpp @ {LC}'),
    'rope_theta': dict(flag='--rope-freq-base N', gguf='{arch}.rope.freq_base',
                       note="full-attention layers; a sliding_attention rope_theta goes to {arch}.rope.freq_base_swa, "
                            "which no flag changes", source=f'{_ARG}; {_KEYS}; {L_CONV}'),
    'original_max_position_embeddings': dict(
        flag='--yarn-orig-ctx N', gguf='{arch}.rope.scaling.original_context_length',
        note="default: the GGUF key, else {arch}.context_length; the GGUF key also picks longrope's long factors "
             "(n_ctx > it)", source=f'{_ARG}; {_KEYS}; {L_CTX}; src/llama-model.cpp @ {LC}'),
    'attention_factor': dict(flag='--yarn-attn-factor N', gguf='{arch}.rope.scaling.yarn_attn_factor',
                             note="both are overwritten when YaRN is on (ext_factor != 0): the magnitude becomes "
                                  "get_mscale(s) times {arch}.rope.scaling.attn_factor (no flag)",
                             source=f'{_ARG}; {_KEYS}; {L_CTX}'),
    'extrapolation_factor': dict(flag='--yarn-ext-factor N', gguf='{arch}.rope.scaling.yarn_ext_factor',
                                 note="-1 (unset) -> 1 for yarn, 0 otherwise; the key is read only by the Grok loader",
                                 source=f'{_ARG}; {_KEYS}; {L_CTX}'),
    'beta_fast': dict(flag='--yarn-beta-fast N', gguf='{arch}.rope.scaling.yarn_beta_fast',
                      note="default 32; the key is read only by the Grok and Mistral 3 loaders",
                      source=f'{_ARG}; {_KEYS}; src/models/mistral3.cpp @ {LC}'),
    'beta_slow': dict(flag='--yarn-beta-slow N', gguf='{arch}.rope.scaling.yarn_beta_slow',
                      note="default 1; the key is read only by the Grok and Mistral 3 loaders",
                      source=f'{_ARG}; {_KEYS}; src/models/mistral3.cpp @ {LC}'),
    'mscale_all_dim': dict(flag=None, gguf='{arch}.rope.scaling.yarn_log_multiplier',
                           note="DeepSeek converter writes 0.1 x mscale_all_dim, the DeepSeek2 loader divides by 0.1",
                           source=f'conversion/deepseek.py, src/models/deepseek2.cpp @ {LC}; {_KEYS}'),
    'long_factor': dict(flag=None, gguf='tensor rope_factors_long.weight',
                        note="Phi-3 / MiniCPM converters; short_factor -> rope_factors_short.weight",
                        source=f'conversion/phi.py @ {LC}; {_KEYS}'),
    'low_freq_factor': dict(flag=None, gguf='tensor rope_freqs.weight',
                            note="llama3: low/high_freq_factor, factor and L baked into per-pair divisors",
                            source=f'conversion/llama.py @ {LC}'),
    'truncate': dict(flag=None, gguf=None, note="not representable: ggml_rope_yarn_corr_dims always floors/ceils",
                     source=f'ggml/src/ggml.c @ {LC}'),
    'mscale': dict(flag=None, gguf=None, note="not read: assumed 1 (DeepSeek-V2 special case aside)",
                   source=L_CTX),
}


def applies(cond, fields, top):
    """Whether a warn condition holds for a config whose rope dict has `fields` and whose top level is `top` (dict)."""
    def term(t):
        neg, t = t.startswith('!'), t.lstrip('!')
        kind, _, f = t.partition(':')
        rp = top.get('rope_scaling') or top.get('rope_parameters')
        got = {'always': True, 'has': f in fields, 'lacks': f not in fields,
               'top': top.get(f) not in (None, {}, []),  # (an empty rope_scaling counts as absent)
               'nested': isinstance(rp, dict) and any(isinstance(v, dict) for v in rp.values())}[kind]
        return got != neg
    return all(term(t) for t in cond.split('&'))


def readings(engine=None, rope_type=None):
    """The READINGS rows for one engine and/or one rope_type (None: any)."""
    return [r for r in READINGS if (engine is None or r.engine == engine) and
            (rope_type is None or r.rope_type == rope_type)]
