"""The statistics of the regression verdict (scipy/numpy; nothing by hand).

The run (one boot, or one fresh tool run on the local board) is the unit of
replication: samples inside a run are correlated (a host stall or a noisy
neighbour shifts thousands of them at once) and the spread between runs
dominates. So each run is reduced to a few run-level statistics (p50, p99,
p99.9, the maximum as the extreme value it is, the share of samples at or
above a threshold) and the runs of a baseline and a candidate are compared.

The test, per statistic: a one-sided Welch t-test on the logarithm of the
run-level statistic, optionally Yuen-trimmed (``scipy.stats.ttest_ind(...,
equal_var=False, trim=..., alternative="greater")``).

Why this one (measured: ``bench/bench_verdict.py``, ``rtlab/compare.py``):

- logarithms, because latency effects are multiplicative ("p99 doubled") and
  run-to-run spread grows with the level; the effect is then a ratio, with
  a confidence interval from the same test;
- a t-test, not a rank test: an exact one-sided Mann-Whitney at 5 vs 5 runs
  cannot give p below 1/252 = 0.004, which never survives a campaign-wide
  correction over dozens of keys; the t-test's p is continuous and, on
  log-normal-ish run statistics, has the power the targets ask for;
- Welch (unequal variances): a regression often changes the spread too;
- one wild run (a ~7 ms host stall) inflates its side's variance, so a
  plain Welch test does not call it a shift; trimming (Yuen) removes it
  altogether, but at 5 runs a side it keeps only 3 and loses most of the
  power (simulated: 38 % against 96 % for a doubled p99), so it is an option
  of the policy, off by default;
- where the t statistic is undefined (every run of both sides the same
  value, as quantised histograms give), the exact Mann-Whitney U test
  decides instead: honest, if weak;
- where a percentile of some run lies beyond its histogram's range, it is
  censored at the range (at least that; the overflow count makes the rank
  exact) and a one-sided Mann-Whitney U with the censored runs tied at the
  top decides (:func:`censored_shift_test`), never "unknowable". On TCG the
  run-level max gates instead (budgets/default.yaml): measured on
  qemu-aarch64 with a 400 ms kernel stall, the censored p99.9 found it in
  45 of 200 comparisons (the baseline's own stalled runs are censored too),
  the max in 200 of 200, at 7/200 A/A false alarms.

False alarms are controlled per campaign, over every key and statistic
tested at once, with Benjamini-Hochberg (``scipy.stats.false_discovery_control``):
when nothing changed (A/A) every hypothesis is null and BH's false discovery
rate is the probability of any false alarm in the campaign; when a kernel
commit does regress, it usually regresses many keys at once, where BH keeps
more power than Holm.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from scipy import stats as sps

from .model import ThreadResult
#: run-level statistics: the names a policy may gate on, read off a run's
#: combined thread (percentiles are the model's nearest-rank ones, so the
#: gate and the comparison agree on what "p99" is)
from .policy import RUN_STATISTICS


def run_statistics(t: ThreadResult, threshold_us: Optional[float] = None) -> dict[str, Optional[float]]:
    """The run-level statistics of one run of one key (all threads as one).

    A percentile beyond the histogram's range (overflows) is None: unknowable,
    never a guess. ``share`` (samples at or above ``threshold_us``) only
    where a threshold is given.
    """
    out: dict[str, Optional[float]] = {}
    pct = t.percentiles_us
    for name in RUN_STATISTICS:
        if name == "max":
            out[name] = float(t.max_us) if t.cycles else None
        else:
            v = pct.get(name[1:])
            out[name] = None if v is None else float(v)
    if threshold_us is not None:
        out["share"] = t.share_at_or_above(threshold_us)
    return out


def censored_at(values: dict[str, Optional[float]], top_us: Optional[float]) -> dict[str, float]:
    """The percentiles missing from run-level *values* (:func:`run_statistics`,
    or the same read back from the store), each with the histogram's range
    *top_us*: the overflow count makes the rank exact, so such a percentile
    is known to be at least the range (right-censored), which a rank test
    can use. Empty where the range is unknown (then they stay unknowable)."""
    if not top_us:
        return {}
    return {name: float(top_us) for name in RUN_STATISTICS if name != "max" and values.get(name) is None}


def censored_statistics(t: ThreadResult) -> dict[str, float]:
    """:func:`censored_at` for one run's combined thread."""
    h = t.histogram
    top = h.size * h.bucket_us if h is not None and h.size and t.cycles else None
    return censored_at(run_statistics(t), top)


@dataclass(frozen=True)
class ShiftTest:
    """One statistic, candidate runs against baseline runs."""

    #: one-sided p-value of "the candidate is higher" (before correction)
    p: float
    #: estimated ratio candidate / baseline (trimmed geometric means)
    ratio: float
    #: two-sided confidence interval of the ratio
    ratio_low: float
    ratio_high: float
    method: str

    @property
    def relative(self) -> float:
        return self.ratio - 1.0


def _logs(values: Sequence[float], floor: float) -> np.ndarray:
    # a p50 in the first bucket reads as 0 us: the log needs a floor, and
    # half a bucket is what "below the resolution" means
    return np.log(np.maximum(np.asarray(values, dtype=float), floor))


def shift_test(baseline: Sequence[float], candidate: Sequence[float], *, trim: float = 0.0,
               confidence: float = 0.95, floor: float = 0.5) -> ShiftTest:
    """Is the candidate's run-level statistic higher than the baseline's?

    Needs at least two runs per side. ``trim``: fraction trimmed from each
    end of each side (Yuen's test; 0.2 trims one run of five)."""
    return shift_tests([(baseline, candidate)], trim=trim, confidence=confidence, floor=floor)[0]


def shift_tests(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], *, trim: float = 0.0,
                confidence: float = 0.95, floor: float | Sequence[float] = 0.5) -> list[ShiftTest]:
    """:func:`shift_test` for many (baseline, candidate) pairs at once: pairs
    with the same run counts go through scipy in one vectorised call (a
    campaign's keys usually share them), which keeps a comparison of dozens
    of keys, and the benchmark's thousands, cheap."""
    floors = [floor] * len(pairs) if isinstance(floor, (int, float)) else list(floor)
    out: list[Optional[ShiftTest]] = [None] * len(pairs)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (b, c) in enumerate(pairs):
        if len(b) < 2 or len(c) < 2:
            raise ValueError("a shift test needs at least two runs per side")
        groups.setdefault((len(b), len(c)), []).append(i)
    method = f"Welch t on log, trim {trim:g}" if trim else "Welch t on log"
    for idx in groups.values():
        B = np.stack([_logs(pairs[i][0], floors[i]) for i in idx])
        C = np.stack([_logs(pairs[i][1], floors[i]) for i in idx])
        est = sps.trim_mean(C, trim, axis=1) - sps.trim_mean(B, trim, axis=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # zero variance: handled below
            one = sps.ttest_ind(C, B, axis=1, equal_var=False, trim=trim, alternative="greater")
            two = sps.ttest_ind(C, B, axis=1, equal_var=False, trim=trim, alternative="two-sided")
            lo, hi = two.confidence_interval(confidence_level=confidence)
        for row, i in enumerate(idx):
            p, t = float(np.atleast_1d(one.pvalue)[row]), float(np.atleast_1d(one.statistic)[row])
            e = float(est[row])
            if math.isfinite(p) and math.isfinite(t):
                out[i] = ShiftTest(p=p, ratio=math.exp(e), ratio_low=math.exp(float(np.atleast_1d(lo)[row])),
                                   ratio_high=math.exp(float(np.atleast_1d(hi)[row])), method=method)
            else:
                # no spread on either side (quantised values): a t-test would
                # say p=0; the exact rank test is honest, if weak
                mw = sps.mannwhitneyu(C[row], B[row], alternative="greater", method="exact")
                out[i] = ShiftTest(p=float(mw.pvalue), ratio=math.exp(e), ratio_low=math.exp(e),
                                   ratio_high=math.exp(e),
                                   method="exact Mann-Whitney U (no spread for a t-test)")
    return out


def censored_shift_test(baseline: Sequence[float], baseline_censored: Sequence[bool],
                        candidate: Sequence[float], candidate_censored: Sequence[bool]) -> ShiftTest:
    """:func:`shift_test` for a statistic some runs only bound from below
    (a percentile beyond the histogram's range, censored at the range).

    A mean of logs needs every value, so this is a rank test: one-sided
    Mann-Whitney U with every censored run a tie at the top (it is at least
    the range, which every uncensored value is below), its p from the exact
    permutation distribution (``scipy.stats.PermutationMethod``: every split
    of the runs, ties included; 252 splits at 5 vs 5, so p >= 1/252 = 0.004).
    The effect is the ratio of the medians with censored runs at the range:
    a lower bound when the candidate's median is censored, the interval
    [that, unbounded)."""
    b = np.where(np.asarray(baseline_censored, dtype=bool), np.inf, np.asarray(baseline, dtype=float))
    c = np.where(np.asarray(candidate_censored, dtype=bool), np.inf, np.asarray(candidate, dtype=float))
    if len(b) < 2 or len(c) < 2:
        raise ValueError("a shift test needs at least two runs per side")
    res = sps.mannwhitneyu(c, b, alternative="greater", method=sps.PermutationMethod(n_resamples=20000))
    ratio = median(candidate) / max(median(baseline), 1e-9)
    # bounds, not a confidence interval: censored medians only bound it
    low = 0.0 if any(baseline_censored) else ratio
    high = math.inf if any(candidate_censored) else ratio
    return ShiftTest(p=float(res.pvalue), ratio=ratio, ratio_low=low, ratio_high=high,
                     method="Mann-Whitney U, censored runs tied at the top (exact permutation)")


def adjust(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values over one campaign's tests."""
    if not len(pvalues):
        return []
    return [float(x) for x in sps.false_discovery_control(np.asarray(pvalues, dtype=float), method="bh")]


def median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=float)))


def upper_prediction_bound(values: Sequence[float], level: float = 0.99, floor: float = 0.5) -> float:
    """The value one more run stays below with probability `level`, from
    repeated runs (log-normal run-to-run spread: a t prediction interval on
    the logs). What an absolute budget derived from repeated runs is."""
    x = _logs(values, floor)
    n = len(x)
    if n < 3:
        raise ValueError("a prediction bound needs at least three runs")
    t = sps.t.ppf(level, df=n - 1)
    return float(math.exp(x.mean() + t * x.std(ddof=1) * math.sqrt(1 + 1 / n)))
