"""The Wilson score interval: textbook values, and its defining property checked directly."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from htam_graph.analytics import Z95, wilson_interval


def test_textbook_values_and_edges():
    low, high = wilson_interval(pd.Series([5, 0, 10, 0]), pd.Series([10, 3, 10, 0]))
    assert low.tolist()[:3] == pytest.approx([0.236593, 0.0, 0.722467], abs=1e-6)
    assert high.tolist()[:3] == pytest.approx([0.763407, 0.561497, 1.0], abs=1e-6)
    assert math.isnan(low[3]) and math.isnan(high[3])  # no observations, no interval


@pytest.mark.parametrize("successes, n", [(1, 2), (3, 7), (17, 40), (99, 100), (1, 1000)])
def test_endpoints_are_where_the_score_test_just_rejects(successes, n):
    """The interval holds every p with |p_hat - p| <= z * sqrt(p (1 - p) / n): its ends
    solve that with equality, and it contains the observed rate."""
    low, high = wilson_interval(pd.Series([successes]), pd.Series([n]))
    p_hat = successes / n
    for p in (low[0], high[0]):
        assert (p_hat - p) ** 2 == pytest.approx(Z95**2 * p * (1 - p) / n, rel=1e-9)
    assert low[0] < p_hat < high[0]
