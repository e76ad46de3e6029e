"""agreement(): a difference said against the graders' tolerances, the number only when news."""

from __future__ import annotations

import torch

from labsupport.runtime.capstone import LOSS_RTOL, TOLERANCE
from labsupport.runtime.check.agreement import agreement, rounding_bound


def test_the_bounds_are_the_graders_own() -> None:
    assert rounding_bound(torch.float32) == LOSS_RTOL[torch.float32]
    assert rounding_bound("torch.float64") == LOSS_RTOL[torch.float64]
    assert rounding_bound("float32", relative=False) == TOLERANCE[torch.float32][1]
    assert rounding_bound(torch.float16) == LOSS_RTOL[torch.float32]  # no entry: float32's


def test_rounding_noise_reads_the_same_whatever_its_last_digits() -> None:
    # Notebook 10's loss difference on three CPUs' kernels (AVX-512, AVX2, baseline).
    words = {agreement(x, torch.float32) for x in (1.3e-7, 1.1e-7, 1.0e-7, 0.0)}
    assert words == {"equal to float32 rounding (every difference within 1e-05 relative)"}
    assert agreement(LOSS_RTOL[torch.float32]).startswith("equal")  # the grader passes it too
    assert agreement(6.7e-14, "torch.float64") == (
        "equal to float64 rounding (every difference within 1e-11 relative)"
    )


def test_between_rounding_and_a_scale_it_says_so_and_above_it_gives_the_number() -> None:
    lr = (0.003, "the learning rate")
    weights = {agreement(x, torch.float32, relative=False, below=lr) for x in (1.1e-4, 9.3e-5)}
    assert weights == {"above float32 rounding (1e-05), below the learning rate (0.003)"}
    assert agreement(2e-6, relative=False) == (
        "equal to float32 rounding (every difference within 1e-05)"
    )
    assert agreement(0.012, relative=False, below=lr) == (
        "1.2e-02, above float32 rounding (1e-05) and the learning rate (0.003)"
    )
    assert agreement(2.4e-3) == "2.4e-03 relative, above float32 rounding (1e-05 relative)"
    assert agreement(float("nan")).startswith("nan")  # never "equal"
