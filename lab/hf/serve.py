"""
The serving engines' command lines for a Hugging Face folder written by lab/hf/export.py (a real model's own
architecture: lab/hf/export_llama.py): vLLM and llama.cpp's llama-server, each told the rope the lab computes, or one
line `<engine>: cannot express <what>` in place of a command that would run another model. What the engines read
(lab/hf/engines.py tabulates it per engine and rope type, with the source of each row; checked here against vLLM's
vllm/model_executor/layers/rotary_embedding/ and llama.cpp's common/arg.cpp and src/llama-context.cpp):

  vLLM       `vllm serve <folder>` reads config.json's rope_parameters (transformers 5's form). Its --rope-scaling
             flag is gone; a rope goes in through --hf-overrides '{"rope_parameters": {...}}' (docs.vllm.ai,
             features/context_extension), which replaces the whole dict, rope_theta included. --max-model-len s*L is
             passed (vLLM derives its own from max_position_embeddings and the factor). yarn: L =
             original_max_position_embeddings, beta_fast / beta_slow / truncate read; attention_factor (and mscale /
             mscale_all_dim) read since the fix of PRs #46280 / #48351 (in 0.34.0; older releases used 0.1 ln s + 1).
             longrope: the temperature is short_mscale / long_mscale (default sqrt(1 + ln s / ln L), s =
             max_position_embeddings / L; attention_factor not read), and long_factor at every position once
             max_model_len > L. dynamic: one base for every length, not HF's and the lab's per-length base.
  llama.cpp  llama-server: --rope-scaling {none,linear,yarn}, --rope-scale N (freq_scale = 1/N), --rope-freq-base,
             --yarn-orig-ctx, --yarn-beta-fast, --yarn-beta-slow, -c (common/arg.cpp). With YaRN on, llama-context.cpp
             sets the temperature from the factor itself (0.1 ln s + 1; --yarn-attn-factor is overwritten, PR #17945),
             and ggml floors and ceils the correction dims (HF's truncate=True). No dynamic NTK, no flag for Llama
             3.1's per-pair factors (the GGUF's rope_freqs tensor, which convert_hf_to_gguf.py writes from a llama3
             config) nor LongRoPE's; Self-Extend's group attention (-gan/-gaw) is registered for llama-cli and
             llama-passkey only. A folder without a source GGUF goes through convert_hf_to_gguf.py first.

Not rope types at all (position maps, the crop, a query temperature) are refused by name, for Hugging Face by the
export and for both engines here (NOT_ROPE); a per-layer pattern by the export's checks.
"""
import json
import math
import os
import shlex

from lab.hf.engines import LLAMA_CPP_FLAGS
from rope import longrope_attention_factor, yarn_mscale

FLAG = {k: v['flag'].split()[0] for k, v in LLAMA_CPP_FLAGS.items() if v['flag']}  # rope field -> llama-server flag

NOT_ROPE = {  # arm-spec heads that change attention, not the frequencies -> what they are
    'rerope': 'ReRoPE (a position map: every key past the window w scored at distance w)',
    'leaky_rerope': 'Leaky ReRoPE (a position map: distances past w grow k times slower)',
    'self_extend': 'Self-Extend (a position map: grouped positions past the neighbour window)',
    'dca': 'DCA (dual chunk attention: three position maps merged by their softmax normalisers)',
    'crop': 'the crop (a sliding window of L keys with sink tokens)',
    'qtemp': 'a query temperature (a factor on the queries at their absolute position)',
}
ENGINES = ('vLLM', 'llama.cpp')


def not_rope_what(spec):
    """What an arm spec that is no rope type names (NOT_ROPE's words), or None for a rope type's spec."""
    head = spec.strip().split(':')[0]
    if '+' in spec or head == 'qtemp':
        return NOT_ROPE['qtemp']
    return NOT_ROPE.get(head)


def cannot(what):
    """One line per engine: '<engine>: cannot express <what>'."""
    return [f"{e}: cannot express {what}" for e in ENGINES]


def gguf_source(ckpt_path):
    """The GGUF file a 'gguf:<file>' (or 'gguf:smollm2') checkpoint was read from, or None for another source."""
    prefix, sep, rest = str(ckpt_path).partition(':')
    if not (sep and prefix == 'gguf'):
        return None
    from data.sources import gguf_file
    return os.path.abspath(gguf_file(rest or None))


def num(x):
    """A number as a command line writes it: 4.0 -> '4', 1.25 -> '1.25', 100000.0 -> '100000'."""
    return f"{x:.10g}"


def vllm_line(config, folder, af):
    """vLLM's line for an exported folder (config.json's dict); af: the attention factor HF and the lab compute."""
    rp, M = config['rope_parameters'], config['max_position_embeddings']
    t, s = rp['rope_type'], rp.get('factor', 1.0)
    cmd, note = ['vllm', 'serve', folder, '--max-model-len', str(M)], ''
    if t == 'dynamic':
        return ["vLLM: cannot express Dynamic NTK (vLLM fixes one base for every length; the lab and transformers "
                "recompute it per forward length)"]
    if t == 'yarn' and not math.isclose(af, yarn_mscale(s), rel_tol=1e-12):
        note = (f"   # attention factor {af:.6g} from config.json: vLLM reads it since PRs #46280 / #48351 (0.34.0); "
                f"older releases use 0.1 ln s + 1 = {yarn_mscale(s):.6g}")
    if t == 'longrope':
        if rp['short_factor'] != rp['long_factor']:
            return ["vLLM: cannot express LongRoPE's switch from short_factor to long_factor at L (vLLM uses "
                    "long_factor at every position once --max-model-len exceeds original_max_position_embeddings)"]
        L = rp['original_max_position_embeddings']
        if not math.isclose(af, longrope_attention_factor(M / L, L), rel_tol=1e-12):  # vLLM reads no attention_factor
            over = {'rope_parameters': {**rp, 'short_mscale': af, 'long_mscale': af}}
            cmd += ['--hf-overrides', json.dumps(over, separators=(',', ':'))]
    return ['vLLM: ' + shlex.join(cmd) + note]


def llama_cpp_lines(config, folder, af, gguf, base):
    """llama-server's line: on the source GGUF, else on the folder converted by convert_hf_to_gguf.py. base: the
    model's own RoPE base (a raised one, NTK-aware's or ABF's, goes in as --rope-freq-base)."""
    rp, M = config['rope_parameters'], config['max_position_embeddings']
    t, s = rp['rope_type'], rp.get('factor', 1.0)
    window = config.get('sliding_window')
    why = {'dynamic': "Dynamic NTK (llama.cpp has no length-dependent base)",
           'longrope': "per-pair factors (LongRoPE's short_factor / long_factor, or the lab's curve written as them) "
                       "with flags",
           'llama3': "Llama 3.1's per-pair factors with flags (they are the GGUF's rope_freqs tensor: convert this "
                     f"folder with `python convert_hf_to_gguf.py {shlex.quote(folder)}`, which writes them)"}.get(t)
    if window:
        why = f"the sliding window of {window} keys (no llama-server flag sets it; not checked for converted GGUFs)"
    elif t == 'yarn' and not rp.get('truncate', True):
        why = "YaRN with truncate=false (ggml floors and ceils the correction dims)"
    elif t == 'yarn' and not math.isclose(af, yarn_mscale(s), rel_tol=1e-12):
        why = (f"YaRN's attention factor {af:.6g} (llama-server sets it from the factor itself, 0.1 ln s + 1 = "
               f"{yarn_mscale(s):.6g}; --yarn-attn-factor is overwritten when YaRN is on)")
    if why:
        return [f"llama.cpp: cannot express {why}"]
    lines, model = [], gguf
    if model is None:
        model = os.path.normpath(folder) + '.gguf'
        lines.append('llama.cpp: ' + shlex.join(['python', 'convert_hf_to_gguf.py', folder, '--outfile', model,
                                                 '--outtype', 'f32']) + '   # (llama.cpp/convert_hf_to_gguf.py)')
    flags = []  # (the flags' names: lab/hf/engines.py's LLAMA_CPP_FLAGS, each cited)
    if t == 'default' and rp['rope_theta'] != base:
        flags = [FLAG['rope_theta'], num(rp['rope_theta'])]
    elif t == 'linear':
        flags = [FLAG['rope_type'], 'linear', FLAG['factor'], num(s)]
    elif t == 'yarn':  # (the betas as flags: llama.cpp's generic loader does not read them from a GGUF)
        flags = [FLAG['rope_type'], 'yarn', FLAG['factor'], num(s), FLAG['original_max_position_embeddings'],
                 str(rp['original_max_position_embeddings']), FLAG['beta_fast'], num(rp.get('beta_fast', 32.0)),
                 FLAG['beta_slow'], num(rp.get('beta_slow', 1.0))]
    lines.append('llama.cpp: ' + shlex.join(['llama-server', '-m', model, *flags, '-c', str(M)]))
    return lines


def engine_lines(config, folder, af, gguf=None, base=None):
    """The vLLM and llama.cpp lines for an exported folder: config is its config.json (dict), af the attention factor
    of its rope (rope_config.rope_inv_freq's, which HF computes too), gguf the source GGUF or None, base the model's
    own RoPE base."""
    return vllm_line(config, folder, af) + llama_cpp_lines(config, folder, af, gguf, base)
