"""The gate kit's statistics: a pooled Pearson chi-square goodness-of-fit test of observed counts against a
closed-form law, its Bonferroni level, and the power it has against any law a given total-variation distance
away. It knows count vectors and probability vectors, not engines, rules or tokens.

The test. Cells the law gives probability 0 must stay empty (a draw there fails outright: no false alarm is
possible). The other cells are pooled in order of increasing probability: consecutive cells join one pooled
cell until its expected count N * law reaches MIN_EXPECTED, then the next pooled cell starts (a cell expected
that often stays alone; a short remainder joins the last full pooled cell). Then
X^2 = sum (O - E)^2 / E over the pooled cells is compared with the chi-square law with (cells - 1) degrees of
freedom. A gate of C cases fails a case when its p-value is below ALPHA_GATE / (C * TAIL_MARGIN): Bonferroni
over the cases, with a margin for the chi-square approximation, which understates the exact tail of the pooled
statistic at these levels (exact simulation of the cases' multinomials at level ALPHA_GATE / C gave 1.3e-3 to
1.5e-3 per gate, up to 2.9x a case's share). With the margin the gate's false-alarm rate is at most
ALPHA_GATE = 1e-3, measured, not assumed: null_rate simulates a case's null law and counts (dflash-verify's
tests/gates/test_exact_power.py does so for every case of its own gates).

The power. A law at total-variation distance delta from the null moves the pooled cells by d with
sum |d| = 2 delta' (delta' <= delta: pooling only merges cells, so delta is meant over the pooled cells) and,
by Cauchy-Schwarz, its noncentrality N * sum d^2 / law >= 4 N delta'^2. X^2 is then noncentral chi-square, and
its rejection probability grows with the noncentrality: the smallest delta whose bound 4 N delta^2 clears the
critical value with probability 0.99 is detected with probability >= 0.99 whatever its direction.

The chi-square and noncentral chi-square tails are written out over torch.special.gammaincc (the regularised
upper incomplete gamma function) in float64: the project carries torch, and scipy only for this would be a
new dependency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy
import torch

ALPHA_GATE = 1e-3  # each exact gate's false-alarm rate per run, split over its cases
TAIL_MARGIN = 4.0  # each case tests at a quarter of its share (the module docstring)
MIN_EXPECTED = 10.0  # pooled cells' smallest expected count
POWER = 0.99  # the detection probability the reported total-variation distances are computed for


def case_level(cases: int) -> float:
    """The level each of a gate's `cases` cases is tested at."""
    return ALPHA_GATE / (cases * TAIL_MARGIN)


ALPHA_CHECK = case_level(1)  # one check alone: 2.5e-4, a false-alarm rate of at most ALPHA_GATE with the margin


def chi2_sf(x: float, df: int) -> float:
    """P(chi^2_df > x)."""
    if x <= 0:
        return 1.0
    return float(
        torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), torch.tensor(x / 2, dtype=torch.float64))
    )


def chi2_isf(alpha: float, df: int) -> float:
    """The x with P(chi^2_df > x) = alpha, by bisection (the tail is monotone)."""
    low, high = 0.0, float(df) + 10.0
    while chi2_sf(high, df) > alpha:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if chi2_sf(mid, df) > alpha else (low, mid)
    return high


def ncx2_sf(x: float, df: int, noncentrality: float) -> float:
    """P(chi'^2_df(lambda) > x): a Poisson(lambda / 2) mixture of central tails with df + 2j degrees."""
    half = noncentrality / 2
    terms = int(half + 12 * math.sqrt(half) + 60)
    j = torch.arange(terms, dtype=torch.float64)
    log_weights = -half + j * math.log(half) - torch.lgamma(j + 1) if half > 0 else torch.where(j == 0, 0.0, -math.inf)
    tails = torch.special.gammaincc((df + 2 * j) / 2, torch.full_like(j, x / 2))
    return float((log_weights.exp() * tails).sum())


def detectable_tv(num_draws: int, df: int, alpha: float, power: float = POWER) -> float:
    """The smallest total-variation distance detected with probability >= `power` by the level-`alpha` test on
    `num_draws` draws over df + 1 pooled cells, whatever the direction of the change (the module docstring)."""
    critical = chi2_isf(alpha, df)
    low, high = 0.0, 1.0
    while ncx2_sf(critical, df, high) < power:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if ncx2_sf(critical, df, mid) < power else (low, mid)
    return math.sqrt(high / (4 * num_draws))


def pooling(law: torch.Tensor, num_draws: int, min_expected: float = MIN_EXPECTED) -> torch.Tensor:
    """A pooled-cell index per cell of `law` (-1 for the cells of probability 0), by the module's rule."""
    group = torch.full(law.shape, -1, dtype=torch.long)
    support = (law > 0).nonzero()[:, 0]
    order = support[law[support].argsort()].tolist()  # ascending expected counts
    expected = (num_draws * law).tolist()
    index, pooled = 0, 0.0
    for cell in order:
        group[cell] = index
        pooled += expected[cell]
        if pooled >= min_expected:  # this pooled cell is full: the next cells start another
            index, pooled = index + 1, 0.0
    if 0 < pooled < min_expected and index > 0:  # the largest cells' leftover joins the pooled cell before it
        group[group == index] = index - 1
    return group


@dataclass(frozen=True, slots=True)
class FitResult:
    """One case's goodness of fit: the pooled Pearson statistic and whatever fell where the law has no mass."""

    statistic: float
    df: int
    p_value: float
    alpha: float
    num_draws: int
    impossible: int  # draws in cells of probability 0
    worst_cell: int  # the cell (before pooling) with the largest standardised residual

    @property
    def passed(self) -> bool:
        return self.impossible == 0 and self.p_value >= self.alpha

    @property
    def detectable_tv(self) -> float:
        return detectable_tv(self.num_draws, self.df, self.alpha)

    @property
    def gate_p_value(self) -> float:
        """The p-value this case states for a red, on the scale of the gate's false-alarm rate (what
        `dflash verify` compares with conclusive_p_value): 0 after a draw of probability 0 (no correct engine
        makes one), else the chi-square p-value times the case's share of ALPHA_GATE (Bonferroni over the cases
        and the tail margin, as case_level splits it), never less than TAIL_MARGIN times it."""
        if self.impossible:
            return 0.0
        return min(1.0, self.p_value * max(TAIL_MARGIN, ALPHA_GATE / self.alpha))


class LawMismatch(AssertionError):
    """A statistical check's red with the p-value it states (`FitResult.gate_p_value`): `dflash verify` reads
    `p_value` from the exception, and a red whose p-value is conclusive needs no second seed."""

    def __init__(self, message: str, p_value: float) -> None:
        super().__init__(message)
        self.p_value = p_value


class NotALaw(AssertionError, ValueError):
    """The law handed to a check is not a probability law (negative, or not summing to 1). Where a gate builds it
    from the engine's own distributions (its softmax, its tables), that is the engine's bug, caught by the check:
    so it is an AssertionError (a kill, not a crash), and still a ValueError for code that caught the old error."""


def pearson_fit(counts: torch.Tensor, law: torch.Tensor, alpha: float) -> FitResult:
    """counts: observed draws per cell; law: the closed-form probability per cell (sums to 1)."""
    law = law.double().flatten()
    counts = counts.double().flatten()
    num_draws = int(counts.sum())
    if not bool(torch.isfinite(law).all()) or abs(float(law.sum()) - 1) > 1e-9 or bool((law < 0).any()):
        raise NotALaw(
            f"the closed form is not a probability law (sum {float(law.sum())!r}, least {float(law.min())!r}): "
            "if it comes from the engine's own distributions, they are broken"
        )
    group = pooling(law, num_draws)
    num_groups = int(group.max()) + 1
    if num_groups < 2:
        raise ValueError("a case whose law pools into one cell has nothing to test: refused")
    kept = group >= 0
    observed = torch.zeros(num_groups, dtype=torch.float64).index_add_(0, group[kept], counts[kept])
    expected = torch.zeros(num_groups, dtype=torch.float64).index_add_(0, group[kept], num_draws * law[kept])
    statistic = float(((observed - expected) ** 2 / expected).sum())
    df = num_groups - 1
    residual = (counts - num_draws * law) / (num_draws * law).clamp_min(1e-12).sqrt()
    return FitResult(
        statistic=statistic,
        df=df,
        p_value=chi2_sf(statistic, df),
        alpha=alpha,
        num_draws=num_draws,
        impossible=int(counts[~kept].sum()),
        worst_cell=int(residual.abs().argmax()),
    )


def proportion_p_value(num_trials: int, deviation: float, num_checks: int = 1) -> float:
    """A bound on the chance that a share of `num_trials` independent trials lies `deviation` or further from its
    probability, either way: Hoeffding's 2 exp(-2 n d^2), exact as a bound at any n (no normal approximation,
    so it holds deep in the tail, where a red's p-value is read), times `num_checks` for as many shares checked
    together (Bonferroni). State it for a red with pytest's record_property("p_value", ...)."""
    if num_trials <= 0:
        return 1.0
    return min(1.0, num_checks * 2.0 * math.exp(-2.0 * num_trials * deviation**2))


def null_rate(law: torch.Tensor, num_draws: int, level: float, reps: int, seed: int) -> float:
    """The false-alarm rate of the test of `num_draws` draws from `law` at `level`, measured by simulation: `reps`
    draws of its pooled counts under the law itself (pooling depends on the law alone, and pooled multinomial
    counts are multinomial), counted against the chi-square critical value the test uses. Measure your own
    check's rate with it: a stated rate is a claim until this counts it."""
    law = law.double().flatten()
    group = pooling(law, num_draws)
    kept = group >= 0
    pooled = torch.zeros(int(group.max()) + 1, dtype=torch.float64).index_add_(0, group[kept], law[kept]).numpy()
    critical, expected = chi2_isf(level, len(pooled) - 1), num_draws * pooled
    generator, hits = numpy.random.default_rng(seed), 0
    for start in range(0, reps, 50_000):
        counts = generator.multinomial(num_draws, pooled / pooled.sum(), size=min(50_000, reps - start))
        hits += int((((counts - expected) ** 2 / expected).sum(-1) > critical).sum())
    return hits / reps
