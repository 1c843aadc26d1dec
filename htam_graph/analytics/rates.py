"""Rates with confidence: the Wilson score interval, and the derived columns every
analytics table shares (success rate, interval, mean reward, mean gain)."""

from __future__ import annotations

import numpy as np
import pandas as pd

# z of a two-sided 95% interval: the 97.5% quantile of the standard normal distribution.
Z95 = 1.959963984540054


def wilson_interval(successes: pd.Series, n: pd.Series, z: float = Z95) -> tuple[pd.Series, pd.Series]:
    """The Wilson score interval of a binomial proportion p = successes / n:

        centre = (p + z²/(2n)) / (1 + z²/n)
        half   = z / (1 + z²/n) * sqrt(p(1 - p)/n + z²/(4n²))
        [centre - half, centre + half]

    Unlike the normal approximation it stays inside [0, 1] and is honest for small n and
    for p near 0 or 1 (0 successes of 3 gives [0, 0.56], not [0, 0]). NaN where n is 0.
    """
    trials = n.astype("float64").where(n > 0)
    p = successes / trials
    shrink = 1.0 + z**2 / trials
    centre = (p + z**2 / (2 * trials)) / shrink
    half = z / shrink * np.sqrt(p * (1.0 - p) / trials + z**2 / (4 * trials**2))
    return (centre - half).clip(lower=0.0), (centre + half).clip(upper=1.0)


def with_rates(df: pd.DataFrame, n: str, gain: bool = False) -> pd.DataFrame:
    """`df` with success_rate, ci_low, ci_high (95% Wilson) and mean_reward (and mean_gain)
    per row, from its `successes`, `reward_sum` (and `gain_sum`) over the count column `n`.
    Rows with n = 0 get NaN."""
    trials = df[n].astype("float64").where(df[n] > 0)
    low, high = wilson_interval(df["successes"], df[n])
    derived = {
        "success_rate": df["successes"] / trials,
        "ci_low": low,
        "ci_high": high,
        "mean_reward": df["reward_sum"] / trials,
    }
    if gain:
        derived["mean_gain"] = df["gain_sum"] / trials
    return df.assign(**derived)
