"""
How an arm is measured (eval.py's machinery; nothing here is a method):

  arm_specs    arm specs, the short strings scripts take ('yarn:beta_fast=8'), readable names and folder slugs
  arms         eval.py's arms: identities, ids, seed groups, the base, zero-shot / mapped / retuned arms
  combine      which arm features go together: the stated table, and check_arm on every arm before it runs
  forms        how an arm runs at evaluation (causal, a position map, a crop) and the measurements beside its loss
  scoring      the protocol: each position scored as generated, constant runs, the sampled design
  placement    what the retrieval rooms share: distance buckets, each room's seed stream, the fit inside L
  retrieval    the retrieval rooms' examples: passkey, depth passkey, needles, recall
  ruler        RULER's harder needles: an untrained format, several values, variable tracking
  passkey_text the literature's natural-language passkey (Mohtashami & Jaggi; YaRN's, LongLoRA's form)
  rooms        eval.py's rooms from its settings (retrieval's and ruler's, on the same windows)
  outcomes     the rooms scored with an arm, and their outcomes over seeds
  diagnostics  attention entropy and the weight on the first token (the sink strength), also under the truncated crop
  temperature_law  each attention row's critical inverse temperature and its law in n (Hayase & Karakida 2026)
  workers      arms measured side by side in worker processes (one thread each)
"""
