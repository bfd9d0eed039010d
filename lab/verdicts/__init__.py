"""
From numbers to words (numpy, scipy and the standard library only; no torch), with the statistics of lab/stats.py
(intervals, paired tests and the four verdicts: better, worse, equivalent, unresolved):

  family        a declared family of contrasts over independent units, Holm across it (the real model's study)
  compare       eval.py's arms compared: named contrasts, vs the best, vs the crop, over bases
  breaks        where a loss-by-position curve breaks, against its crop (python -m lab.verdicts.breaks)
  summary_json  what eval.py writes: an arm's summary.json entry, the CSV/JSON text, --rejudge and --combine
  merge         --merge: one eval measured in parts (other arms, the same windows), judged as if run at once
  against       one eval's arms paired with arms of other evals of the same windows (a new base vs committed ones)
  summary_md    summary.md and bases.md, the tables a person reads, from summary.json / bases.json
  claims        the record behind each claim of README.md and docs/results.md (python -m lab.verdicts.claims)
  agreement     do two runs of one eval reach the same verdicts? (python -m lab.verdicts.agreement a.json b.json)
  side_by_side  the miniature's verdicts (s = 8) beside the earlier 2-window real-model eval's (s = 1.5): its record
  like_for_like the real model's declared family beside the miniature's same contrasts at the same factor (s = 1.5)
"""
