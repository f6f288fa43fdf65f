"""The worst case, estimated: a probabilistic WCET (pWCET) from a run's
per-block maxima and histogram tail, by extreme value theory (EVT).

Verdict-free: this module never judges. It says "the latency exceeded with
probability 1e-9 per sample (and per hour of one measuring thread) is about
X µs, [lo, hi] at 90 %", or "cannot estimate: <reason>" when a check that
makes such a number meaningful fails. The gate judges the observed samples
only; a pWCET is context for a release manager, shown beside the observed
maximum (table, report.html, vendor tables, store).

The method (as measurement-based probabilistic timing analysis, MBPTA-CV,
does it; scipy/numpy only):

* **Peaks over threshold** on the histogram tail: the samples above a high
  threshold *u* (the histogram's p99.9, lowered to keep at least
  ``MIN_TAIL_POINTS`` of them) are fitted with a generalised Pareto
  distribution (GPD) by maximum likelihood. The histogram keeps 1 µs
  buckets, so each tail sample is spread uniformly within its bucket
  (seeded) before fitting; samples beyond the histogram's range (overflows:
  their value unknown) enter the likelihood as censored at the range's top,
  never dropped and never guessed. P(X > x) = ζ·S_GPD(x − u), ζ the share
  of samples above *u*, so the per-sample quantile is
  ``u + GPD.isf(p / ζ)``.
* **Block maxima** (one per checkpoint segment, in time order) when there
  are at least ``MIN_TAIL_POINTS`` of them and no histogram tail: a
  generalised extreme value (GEV) fit, P(block max > x) = 1 − (1 − p)^b
  for blocks of b samples.
* **Per hour**: the latency whose exceedance within one hour of one
  measuring thread (3600 s / interval samples) has probability 1e-9:
  per-sample p_h = 1 − (1 − 1e-9)^(1/n_hour), computed with log1p/expm1.
* **Confidence interval**: a seeded parametric bootstrap (the fitted model
  resampled, refitted ``BOOTSTRAP`` times; ζ resampled binomially), the
  percentile interval of the quantile. Its coverage is tested on samples of
  known distributions (tests/unit/test_pwcet.py).

The checks, each at ``ALPHA`` (a failing one refuses the estimate):

* independence: Ljung-Box on the block maxima (autocorrelation up to lag
  min(10, n/5)): correlated blocks break EVT's assumptions;
* stationarity: Kendall's tau of block maxima against time (the
  Mann-Kendall trend test) and a two-sample Kolmogorov-Smirnov test of the
  first half of the blocks against the second half;
* goodness of fit: a Kolmogorov-Smirnov test of the (jittered) tail samples
  against the fitted GPD (GEV: the block maxima against the fitted GEV);
  with estimated parameters its p is conservative, so a refusal means a
  clearly bad fit;
* enough data: ``MIN_BLOCKS`` blocks for the tests above, ``MIN_TAIL_POINTS``
  tail points for the fit (MBPTA-CV's 50);
* a light tail: the fitted shape xi > 0 (a heavy, Pareto-like tail with no
  upper bound) refuses the estimate when a one-sided likelihood-ratio test
  of xi = 0 (the exponential tail MBPTA-CV takes as its reference) against
  the free fit rejects at ``ALPHA``. A latency tail that is significantly
  heavy is a mixture of causes (a rare stall on top of the kernel's own
  latencies: steal, SMIs, a throttled host), and extrapolating it to 1e-9
  gives a number set by the shape's last decimal, not by the board.
* a bounded tail is not believed either: a fitted shape xi < 0 has an upper
  end point, and the 1e-9 level sits just under it, an extrapolation as
  much as a heavy tail's. The exponential tail (xi = 0; block maxima: the
  Gumbel) is taken instead, an upper bound for every lighter tail, as
  MBPTA-CV does; the fitted shape stays in ``fit["fitted_shape_xi"]``.
  Measured (bench/bench_soak.py --validate, the local board): a first half
  fitted with xi = -0.36 gave 3,999 µs [3,489-4,352] at 1e-9 per sample,
  and the next 150,000 samples reached 4,417 µs.

Without block maxima (a run that was not checkpointed) nothing can say the
samples were independent and identically distributed over time: "cannot
estimate: no block maxima". The estimate is of the measured conditions
(load, variant, board) only: EVT cannot see a rare cause that never occurred
in the samples (a mixture in the tail; see the field notes).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize
from scipy import stats as sps

from ..core.model import Histogram

#: exceedance probability of the estimate, per sample and per hour
PROBABILITY = 1e-9
#: significance level of each check (independence, stationarity, fit)
ALPHA = 0.01
#: fewest tail points (exceedances, or block maxima for GEV) to fit
MIN_TAIL_POINTS = 50
#: fewest distinct histogram buckets the tail spans (fewer: nothing to fit a shape to)
MIN_TAIL_BUCKETS = 5
#: fewest blocks for the independence and stationarity tests
MIN_BLOCKS = 10
#: bootstrap resamples for the interval, and its level
BOOTSTRAP = 200
LEVEL = 0.90
#: the tail begins at this quantile of the histogram (lowered to keep MIN_TAIL_POINTS)
THRESHOLD_QUANTILE = 0.999


@dataclass
class Estimate:
    """A pWCET, or why there is none (``refused``)."""

    #: "pot-gpd" | "bm-gev" | "" (refused)
    method: str = ""
    #: the latency exceeded with PROBABILITY per sample / per hour (µs)
    per_sample_us: Optional[float] = None
    per_sample_ci_us: Optional[tuple[float, float]] = None
    per_hour_us: Optional[float] = None
    per_hour_ci_us: Optional[tuple[float, float]] = None
    observed_max_us: Optional[float] = None
    probability: float = PROBABILITY
    level: float = LEVEL
    #: the fit: threshold_us, shape (xi), scale_us, tail_points, zeta...
    fit: dict[str, Any] = field(default_factory=dict)
    #: each check's name -> {"p": p-value, "ok": bool}
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: "cannot estimate: <reason>" (None: estimated)
    refused: Optional[str] = None
    #: the return-level curve for the report's plot: [p, level, lo, hi] per
    #: per-sample exceedance probability p (lo/hi: the bootstrap's interval
    #: at that p, None where too few resamples fitted)
    curve: list[list[Optional[float]]] = field(default_factory=list)
    #: the block maxima in time order and their samples per block (the
    #: observed points of the plot; kept for a refused estimate too)
    block_maxima: list[float] = field(default_factory=list)
    block_samples: Optional[int] = None

    @property
    def ok(self) -> bool:
        return self.refused is None and self.per_sample_us is not None

    def cell(self) -> str:
        """The table's cell: "≈X [lo-hi]" or the refusal, short."""
        if not self.ok:
            return "n/a"
        lo, hi = self.per_sample_ci_us or (math.nan, math.nan)
        return f"{self.per_sample_us:.0f} [{lo:.0f}-{hi:.0f}]"

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "per_sample_us": self.per_sample_us,
                "per_sample_ci_us": list(self.per_sample_ci_us) if self.per_sample_ci_us else None,
                "per_hour_us": self.per_hour_us,
                "per_hour_ci_us": list(self.per_hour_ci_us) if self.per_hour_ci_us else None,
                "observed_max_us": self.observed_max_us, "probability": self.probability,
                "level": self.level, "fit": self.fit, "checks": self.checks, "refused": self.refused,
                "curve": self.curve, "block_maxima": self.block_maxima, "block_samples": self.block_samples}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Estimate":
        def pair(v):
            return (float(v[0]), float(v[1])) if v else None
        return cls(method=d.get("method", ""), per_sample_us=d.get("per_sample_us"),
                   per_sample_ci_us=pair(d.get("per_sample_ci_us")), per_hour_us=d.get("per_hour_us"),
                   per_hour_ci_us=pair(d.get("per_hour_ci_us")), observed_max_us=d.get("observed_max_us"),
                   probability=float(d.get("probability", PROBABILITY)), level=float(d.get("level", LEVEL)),
                   fit=dict(d.get("fit") or {}), checks=dict(d.get("checks") or {}), refused=d.get("refused"),
                   curve=[list(r) for r in d.get("curve") or []],
                   block_maxima=[float(v) for v in d.get("block_maxima") or []],
                   block_samples=d.get("block_samples"))


def per_hour_probability(p_hour: float, samples_per_hour: float) -> float:
    """Per-sample exceedance probability whose hourly maximum exceeds with *p_hour*."""
    return -math.expm1(math.log1p(-p_hour) / samples_per_hour)


# -- the checks ---------------------------------------------------------------

def ljung_box(x: ArrayLike, lags: Optional[int] = None) -> float:
    """p-value of the Ljung-Box test of no autocorrelation up to *lags*."""
    a = np.asarray(x, dtype=float)
    n = len(a)
    h = lags or max(1, min(10, n // 5))
    d = a - a.mean()
    denom = float(np.dot(d, d))
    if denom == 0.0:
        return 1.0  # constant: no correlation to see
    r = np.array([np.dot(d[k:], d[:-k]) / denom for k in range(1, h + 1)])
    q = n * (n + 2) * float(np.sum(r * r / (n - np.arange(1, h + 1))))
    return float(sps.chi2.sf(q, h))


def check_blocks(block_maxima: ArrayLike, alpha: float = ALPHA) -> tuple[dict, Optional[str]]:
    """(checks, refusal) for the block maxima in time order."""
    bm = np.asarray(block_maxima, dtype=float)
    checks: dict[str, dict[str, Any]] = {}
    if len(bm) < MIN_BLOCKS:
        return checks, (f"only {len(bm)} block maxima (checkpoint segments), need >= {MIN_BLOCKS} "
                        f"to test independence and stationarity")
    if np.ptp(bm) == 0:
        p_mk = p_ks = 1.0
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p_mk = float(sps.kendalltau(np.arange(len(bm)), bm).pvalue)
            half = len(bm) // 2
            p_ks = float(sps.ks_2samp(bm[:half], bm[half:]).pvalue)
    if math.isnan(p_mk):
        p_mk = 1.0
    checks["stationarity (Mann-Kendall trend)"] = {"p": p_mk, "ok": p_mk > alpha}
    checks["stationarity (KS first vs second half)"] = {"p": p_ks, "ok": p_ks > alpha}
    # after the trend tests: a trend makes the series autocorrelated too, and
    # "a trend" is the better reason to give
    p_lb = ljung_box(bm)
    checks["independence (Ljung-Box)"] = {"p": p_lb, "ok": p_lb > alpha}
    for name, c in checks.items():
        if not c["ok"]:
            return checks, f"{name} failed (p={c['p']:.2g} <= {alpha})"
    return checks, None


# -- GPD fit (peaks over threshold), censored at the histogram's top ----------

def _gpd_nll(theta, y, n_cens: int, cens_at: float) -> float:
    # the GPD's log-likelihood written out in numpy: scipy.stats' logpdf costs
    # ~0.1 ms a call in overhead, and a bootstrap makes ~10^5 calls
    xi, log_sigma = theta
    sigma = math.exp(log_sigma)
    if abs(xi) < 1e-7:
        ll = -len(y) * log_sigma - float(np.sum(y)) / sigma
        if n_cens:
            ll -= n_cens * cens_at / sigma
        return -ll
    z = 1.0 + xi * y / sigma
    if np.any(z <= 0.0):
        return 1e300
    ll = -len(y) * log_sigma - (1.0 + 1.0 / xi) * float(np.sum(np.log(z)))
    if n_cens and math.isfinite(cens_at):
        zc = 1.0 + xi * cens_at / sigma
        if zc <= 0.0:
            return 1e300  # the censored samples lie beyond the fitted support
        ll -= n_cens / xi * math.log(zc)
    return -ll


def fit_gpd(y: np.ndarray, n_cens: int = 0, cens_at: float = math.inf) -> tuple[float, float]:
    """(shape xi, scale) of a GPD by maximum likelihood on exceedances *y*
    (> 0), with *n_cens* more known only to exceed *cens_at*."""
    # start from the method of moments (one Nelder-Mead run from there costs
    # ~60 likelihood evaluations; its default tolerances are far below a
    # bucket's width in the quantile)
    mean = float(np.mean(y)) if len(y) else 1.0
    var = float(np.var(y)) if len(y) > 1 else mean * mean
    ratio = mean * mean / var if var > 0 else 1.0
    xi0 = min(0.4, max(-0.4, 0.5 * (1.0 - ratio)))
    sigma0 = max(0.5 * mean * (ratio + 1.0), 1e-9)
    r = optimize.minimize(_gpd_nll, x0=[xi0, math.log(sigma0)], args=(y, n_cens, cens_at),
                          method="Nelder-Mead")
    return float(r.x[0]), float(math.exp(r.x[1]))


def _exponential_scale(y: np.ndarray, n_cens: int, top: float) -> float:
    """The exponential tail's (GPD xi = 0) maximum-likelihood scale, *n_cens*
    exceedances censored at *top*: the total excess over the uncensored count."""
    return (float(np.sum(y)) + (n_cens * top if n_cens and math.isfinite(top) else 0.0)) / len(y)


def heavy_tail_p(nll_free: float, nll_exponential: float, xi: float) -> float:
    """One-sided p of the likelihood-ratio test of xi = 0 against xi > 0 (a
    boundary-free one-parameter test: half the chi-square(1) tail when the
    free fit is heavier, else at least 0.5)."""
    lr = max(0.0, 2.0 * (nll_exponential - nll_free))
    half = 0.5 * float(sps.chi2.sf(lr, 1))
    return half if xi > 0 else 1.0 - half


def _heavy_tail_check(est: Estimate, xi: float, p: float) -> bool:
    """Record the light-tail check; True (and the refusal set) when the tail is heavy."""
    name = "light tail (LR test of shape xi = 0 against xi > 0)"
    est.checks[name] = {"p": p, "ok": p > ALPHA}
    if p > ALPHA:
        return False
    est.refused = (f"cannot estimate: heavy tail (shape xi = {xi:.2f} > 0, p={p:.2g} <= {ALPHA}): "
                   f"an unbounded, mixed tail; its 1e-9 level would be an extrapolation of the shape")
    return True


def _gpd_level(u: float, xi: float, sigma: float, zeta: float, p: float) -> float:
    if p >= zeta:
        return u
    return u + float(sps.genpareto.isf(p / zeta, xi, scale=sigma))


def tail_of(hist: Histogram, rng: np.random.Generator,
            min_tail: int = MIN_TAIL_POINTS) -> tuple[float, np.ndarray, int]:
    """(threshold u, exceedances over u jittered within their buckets, censored count)."""
    n = hist.total
    want = max(min_tail, int(math.ceil((1 - THRESHOLD_QUANTILE) * n)))
    idx = sorted(hist.counts, reverse=True)
    cut = None
    inside = 0
    for i in idx:  # the highest bucket with >= want samples inside the range at or above it
        inside += hist.counts[i]
        if inside >= want:
            cut = i
            break
    if cut is None:
        return 0.0, np.array([]), hist.overflows
    u = cut * hist.bucket_us
    vals = []
    for i in idx:
        if i < cut:
            break
        vals.append(np.full(hist.counts[i], i * hist.bucket_us))
    x = np.concatenate(vals) if vals else np.array([])
    x = x + rng.uniform(0.0, hist.bucket_us, size=len(x))
    return u, x - u, hist.overflows


def estimate(*, histogram: Optional[Histogram] = None, block_maxima: Sequence[float] = (),
             block_samples: Optional[int] = None, interval_us: Optional[float] = None,
             observed_max_us: Optional[float] = None, probability: float = PROBABILITY,
             seed: int = 0, bootstrap: int = BOOTSTRAP, level: float = LEVEL,
             check_time_order: bool = True) -> Estimate:
    """A pWCET from a run's merged histogram and per-block maxima (time order).

    *block_samples*: samples per block (GEV); *interval_us*: the tool's period
    (per hour); *check_time_order*: False only where the caller vouches for
    independent identically distributed samples (the unit tests' synthetic data)."""
    est = Estimate(observed_max_us=observed_max_us, probability=probability, level=level,
                   block_maxima=[float(v) for v in block_maxima],
                   block_samples=int(block_samples) if block_samples else None)
    bm = np.asarray(list(block_maxima), dtype=float)
    if check_time_order:
        if len(bm) == 0:
            est.refused = ("cannot estimate: no block maxima (run it checkpointed, `checkpoint_s`) to "
                           "test independence and stationarity")
            return est
        est.checks, why = check_blocks(bm)
        if why:
            est.refused = f"cannot estimate: {why}"
            return est
    rng = np.random.default_rng(seed)
    samples_per_hour = 3600e6 / interval_us if interval_us else None
    p_hour = per_hour_probability(probability, samples_per_hour) if samples_per_hour else None
    if histogram is not None and histogram.total:
        return _pot(est, histogram, rng, probability, p_hour, bootstrap, level)
    if len(bm) >= MIN_TAIL_POINTS and block_samples:
        return _gev(est, bm, int(block_samples), rng, probability, p_hour, bootstrap, level)
    est.refused = (f"cannot estimate: too few tail points: no histogram and {len(bm)} block maxima "
                   f"(< {MIN_TAIL_POINTS})")
    return est


def _ci(values: np.ndarray, level: float) -> Optional[tuple[float, float]]:
    v = values[np.isfinite(values)]
    if len(v) < 10:
        return None
    a = (1 - level) / 2
    return float(np.quantile(v, a)), float(np.quantile(v, 1 - a))


def _pot(est: Estimate, hist: Histogram, rng, p: float, p_hour: Optional[float],
         bootstrap: int, level: float) -> Estimate:
    n = hist.total
    u, y, n_cens = tail_of(hist, rng)
    k = len(y) + n_cens
    top = (hist.size * hist.bucket_us - u) if hist.size else math.inf
    if len(y) < MIN_TAIL_POINTS:
        est.refused = (f"cannot estimate: too few tail points: {len(y)} samples above the threshold "
                       f"in the histogram (< {MIN_TAIL_POINTS})")
        return est
    buckets = len({int(i) for i in np.floor((y + u) / hist.bucket_us)})
    if buckets < MIN_TAIL_BUCKETS:
        est.refused = (f"cannot estimate: the tail lies in {buckets} histogram bucket(s) "
                       f"(< {MIN_TAIL_BUCKETS}): too coarse to fit")
        return est
    if n_cens > len(y):
        est.refused = (f"cannot estimate: {n_cens} samples beyond the histogram's range outnumber the "
                       f"{len(y)} tail samples inside it: widen histogram_us")
        return est
    zeta = k / n
    xi, sigma = fit_gpd(y, n_cens, top)
    fitted = sps.genpareto(xi, scale=sigma)
    # the samples inside the range follow the fitted GPD truncated at the range's top
    inside = float(fitted.cdf(top)) if math.isfinite(top) else 1.0
    p_fit = float(sps.kstest(y, lambda v: fitted.cdf(v) / inside).pvalue)
    est.checks["goodness of fit (KS, tail vs GPD)"] = {"p": p_fit, "ok": p_fit > ALPHA}
    est.method = "pot-gpd"
    est.fit = {"threshold_us": u, "shape_xi": xi, "scale_us": sigma, "tail_points": len(y),
               "censored": n_cens, "zeta": zeta, "samples": n}
    if p_fit <= ALPHA:
        est.refused = f"cannot estimate: goodness of fit (KS, tail vs GPD) failed (p={p_fit:.2g} <= {ALPHA})"
        return est
    sigma0 = _exponential_scale(y, n_cens, top)
    p_heavy = heavy_tail_p(_gpd_nll([xi, math.log(sigma)], y, n_cens, top),
                           _gpd_nll([0.0, math.log(sigma0)], y, n_cens, top), xi)
    if _heavy_tail_check(est, xi, p_heavy):
        return est
    if xi < 0:  # a bounded tail's end is not trusted: the exponential tail bounds it from above
        est.fit.update(shape_xi=0.0, scale_us=sigma0, fitted_shape_xi=xi)
        xi, sigma = 0.0, sigma0
    est.per_sample_us = _gpd_level(u, xi, sigma, zeta, p)
    if p_hour is not None:
        est.per_hour_us = _gpd_level(u, xi, sigma, zeta, p_hour)
    boot_s, boot_h = np.full(bootstrap, np.nan), np.full(bootstrap, np.nan)
    fits: list[tuple[float, float, float]] = []
    gen = sps.genpareto(xi, scale=sigma)
    for b in range(bootstrap):
        kb = int(rng.binomial(n, zeta))
        if kb < 5:
            continue
        yb = gen.rvs(size=kb, random_state=rng)
        cb = int(np.sum(yb >= top))
        yb = yb[yb < top]
        if len(yb) < 5:
            continue
        xb, sb = fit_gpd(yb, cb, top)
        if xb < 0:  # as the estimate itself
            xb, sb = 0.0, _exponential_scale(yb, cb, top)
        fits.append((xb, sb, kb / n))
        boot_s[b] = _gpd_level(u, xb, sb, kb / n, p)
        if p_hour is not None:
            boot_h[b] = _gpd_level(u, xb, sb, kb / n, p_hour)
    est.per_sample_ci_us = _ci(boot_s, level)
    est.per_hour_ci_us = _ci(boot_h, level) if p_hour is not None else None
    fa = np.array(fits, dtype=float).reshape(-1, 3)
    est.curve = _curve(lambda pp: _gpd_level(u, xi, sigma, zeta, pp),
                       lambda pp: _gpd_levels(u, fa[:, 0], fa[:, 1], fa[:, 2], pp),
                       curve_probabilities(zeta, min(p, p_hour or p), also=(p, p_hour)), level)
    return est


def curve_probabilities(p_top: float, p_bottom: float, per_decade: int = 4,
                        also: Sequence[Optional[float]] = ()) -> list[float]:
    """Per-sample exceedance probabilities from *p_top* (the tail's start)
    down to *p_bottom* (the estimate's), *per_decade* a decade, and the
    estimate's own (*also*, exactly: the plot marks them), largest first."""
    if not (0 < p_bottom < p_top <= 1):
        return []
    hi, lo = math.log10(p_top), math.log10(p_bottom)
    n = max(2, int(math.ceil((hi - lo) * per_decade)) + 1)
    grid = [10 ** (hi - (hi - lo) * i / (n - 1)) for i in range(n)]
    extra = [a for a in also if a is not None and p_bottom <= a < p_top]
    return sorted(set(grid[:-1] + extra + [p_bottom]), reverse=True)


def _curve(level_of, boot_levels, probabilities: Sequence[float], level: float) -> list[list[Optional[float]]]:
    """[p, level, lo, hi] along *probabilities*: the fitted model's return
    level and the bootstrap fits' percentile interval at each p
    (*boot_levels(p)*: every bootstrap fit's level at p, one array)."""
    out: list[list[Optional[float]]] = []
    for pp in probabilities:
        vals = np.asarray(boot_levels(pp), dtype=float)
        ci = _ci(vals, level) if len(vals) else None
        out.append([pp, float(level_of(pp)), ci[0] if ci else None, ci[1] if ci else None])
    return out


def _gpd_levels(u: float, xi: np.ndarray, sigma: np.ndarray, zeta: np.ndarray, p: float) -> np.ndarray:
    """_gpd_level for many fits at once (numpy, the GPD's quantile written out:
    a scipy call per fit and point would cost seconds per report)."""
    q = p / zeta
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        small = np.abs(xi) < 1e-7
        safe = np.where(small, 1.0, xi)
        y = np.where(small, -sigma * np.log(q), sigma / safe * (q ** (-xi) - 1.0))
    return np.where(q >= 1.0, u, u + y)


def _gev(est: Estimate, bm: np.ndarray, b: int, rng, p: float, p_hour: Optional[float],
         bootstrap: int, level: float) -> Estimate:
    def level_of(c, loc, scale, pp):
        pb = -math.expm1(b * math.log1p(-pp))  # a block of b samples exceeds with pb
        return float(sps.genextreme.isf(pb, c, loc=loc, scale=scale))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c, loc, scale = sps.genextreme.fit(bm)
    p_fit = float(sps.kstest(bm, sps.genextreme(c, loc=loc, scale=scale).cdf).pvalue)
    est.checks["goodness of fit (KS, block maxima vs GEV)"] = {"p": p_fit, "ok": p_fit > ALPHA}
    est.method = "bm-gev"
    est.fit = {"shape_xi": -c, "loc_us": loc, "scale_us": scale, "tail_points": len(bm), "block_samples": b}
    if p_fit <= ALPHA:
        est.refused = f"cannot estimate: goodness of fit (KS, block maxima vs GEV) failed (p={p_fit:.2g} <= {ALPHA})"
        return est
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, loc0, scale0 = sps.genextreme.fit(bm, fc=0.0)  # Gumbel: the exponential tail's block maxima
    p_heavy = heavy_tail_p(-float(np.sum(sps.genextreme.logpdf(bm, c, loc=loc, scale=scale))),
                           -float(np.sum(sps.genextreme.logpdf(bm, 0.0, loc=loc0, scale=scale0))), -c)
    if _heavy_tail_check(est, -c, p_heavy):
        return est
    if c > 0:  # a bounded (Weibull) tail is not trusted: the Gumbel, the exponential tail's, bounds it
        est.fit.update(shape_xi=0.0, loc_us=loc0, scale_us=scale0, fitted_shape_xi=-c)
        c, loc, scale = 0.0, loc0, scale0
    est.per_sample_us = level_of(c, loc, scale, p)
    if p_hour is not None:
        est.per_hour_us = level_of(c, loc, scale, p_hour)
    boot_s, boot_h = np.full(bootstrap, np.nan), np.full(bootstrap, np.nan)
    fits: list[tuple[float, float, float]] = []
    for i in range(bootstrap):
        xb = sps.genextreme.rvs(c, loc=loc, scale=scale, size=len(bm), random_state=rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cb, lb, sb = sps.genextreme.fit(xb, c, loc=loc, scale=scale)
            if cb > 0:  # as the estimate itself
                cb, lb, sb = sps.genextreme.fit(xb, fc=0.0, loc=loc, scale=scale)
        fits.append((cb, lb, sb))
        boot_s[i] = level_of(cb, lb, sb, p)
        if p_hour is not None:
            boot_h[i] = level_of(cb, lb, sb, p_hour)
    est.per_sample_ci_us = _ci(boot_s, level)
    est.per_hour_ci_us = _ci(boot_h, level) if p_hour is not None else None
    # from a block's own exceedance probability (1/b per sample) down to the estimate's
    fa = np.array(fits, dtype=float).reshape(-1, 3)
    est.curve = _curve(lambda pp: level_of(c, loc, scale, pp),
                       lambda pp: sps.genextreme.isf(-math.expm1(b * math.log1p(-pp)), fa[:, 0],
                                                     loc=fa[:, 1], scale=fa[:, 2]),
                       curve_probabilities(min(0.5, 1.0 / b), min(p, p_hour or p), also=(p, p_hour)), level)
    return est


def return_levels(est: Estimate, probabilities: Sequence[float]) -> list[tuple[float, float]]:
    """(p, latency exceeded with p per sample) along the fitted tail, for the return-level plot."""
    if est.method != "pot-gpd" or not est.fit:
        return []
    f = est.fit
    return [(pp, _gpd_level(f["threshold_us"], f["shape_xi"], f["scale_us"], f["zeta"], pp))
            for pp in probabilities if pp < f["zeta"]]
