"""Step detection on synthetic series whose steps are known."""

from __future__ import annotations

import numpy as np
import pytest

from accelbench.analysis.changepoints import (
    NOISE_FLOOR,
    detect,
    noise_sigma,
    points_needed,
    relative_noise,
    segments,
)


def _series(levels: list[tuple[int, float]], noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.full(n, level) for n, level in levels])
    return y * (1 + noise * rng.standard_normal(y.size))


@pytest.mark.parametrize("seed", range(5))
def test_one_step_is_found_where_it_is(seed) -> None:
    y = _series([(20, 100.0), (15, 90.0)], noise=0.01, seed=seed)
    assert detect(y) == [20]


@pytest.mark.parametrize("seed", range(5))
def test_several_steps_up_and_down(seed) -> None:
    y = _series([(12, 1.0), (10, 1.15), (8, 0.95), (12, 1.05)], noise=0.01, seed=seed)
    assert detect(y) == [12, 22, 30]


@pytest.mark.parametrize("seed", range(10))
def test_noise_alone_has_no_step(seed) -> None:
    assert detect(_series([(40, 1.0)], noise=0.02, seed=seed)) == []


def test_heavy_tailed_noise_and_a_single_outlier_are_not_steps() -> None:
    rng = np.random.default_rng(3)
    y = 1 + 0.01 * rng.standard_t(3, 40)
    y[17] = 1.4  # one bad run is an outlier, not a new level
    assert detect(y) == []


def test_step_detection_is_not_a_threshold_against_the_previous_point() -> None:
    # Noisy runs jump by more than 5% from one to the next, yet the level never moves...
    y = _series([(40, 1.0)], noise=0.03, seed=2)
    assert np.max(np.abs(np.diff(y) / y[:-1])) > 0.05
    assert detect(y) == []
    # ...while a 3% step under 0.3% noise is a step although no jump reaches 5%.
    y = _series([(15, 1.0), (15, 0.97)], noise=0.003, seed=1)
    assert detect(y) == [15]


def test_short_and_flat_series() -> None:
    assert detect([]) == []
    assert detect([1.0, 2.0, 3.0]) == []  # too short for two segments of two
    assert detect([5.0] * 20) == []
    assert detect([5.0] * 10 + [4.0] * 10) == [10]
    assert detect([1.0, float("nan"), 1.0, 1.0]) == []


def test_noise_estimate_and_segments() -> None:
    rng = np.random.default_rng(5)
    y = rng.standard_normal(4000)
    assert noise_sigma(y) == pytest.approx(1.0, rel=0.1)
    assert noise_sigma(np.concatenate([y[:2000], y[2000:] + 50])) == pytest.approx(1.0, rel=0.1)
    assert segments(10, [3, 7]) == [(0, 3), (3, 7), (7, 10)]


def test_the_points_needed_a_side_see_a_step_of_the_effect_most_times() -> None:
    noise = 0.02
    m = points_needed(noise, 0.05)
    assert m is not None

    def seen(per_side: int) -> int:
        return sum(bool(detect(_series([(per_side, 1.0), (per_side, 0.95)], noise, seed=s)))
                   for s in range(60))

    assert seen(m) >= 42  # about 4 times in 5
    assert seen(m // 3) < 30  # a third as many: missed more often than not


def test_points_needed_grow_with_the_noise_and_shrink_with_the_effect() -> None:
    def needed(noise: float, effect: float, n: int = 0) -> int:
        m = points_needed(noise, effect, n=n)
        assert m is not None
        return m

    needs = [needed(noise, 0.05) for noise in (0.005, 0.01, 0.02, 0.05, 0.3)]
    assert needs == sorted(needs) and needs[0] == 2 and needs[-1] > 1000
    assert needed(0.03, 0.10) < needed(0.03, 0.05)
    assert needed(0.02, 0.05, n=200) >= needed(0.02, 0.05)  # a longer series
    assert points_needed(0.01, 0.0) is None and points_needed(float("nan"), 0.05) is None


def test_relative_noise_is_the_noise_detect_weighs_steps_against() -> None:
    y = _series([(400, 250.0)], noise=0.02, seed=4)
    assert relative_noise(y) == pytest.approx(noise_sigma(y / np.median(y)))
    assert relative_noise(y) == pytest.approx(0.02, rel=0.15)
    assert relative_noise([5.0] * 10) == NOISE_FLOOR
    assert np.isnan(relative_noise([1.0]))
