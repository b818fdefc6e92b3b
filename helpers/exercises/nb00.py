"""00_setup's exercise: the compute ceiling of a workload in images per second.

    from helpers.exercises import nb00 as checks
    check = checks.check_ceiling_img_per_s(ceiling_img_per_s)   # yours, on fresh random inputs
    ceiling_fn = check.value                                    # yours once it passes, else the reference

Try the exercise before reading the reference solution below.
"""

from __future__ import annotations

import math
import random
from typing import Callable

from .common import CheckResult, WrongForm, as_function, as_number, failed, not_done

__all__ = ["ceiling_img_per_s", "check_ceiling_img_per_s"]


# -- the reference solution ----------------------------------------------------------------------------

def ceiling_img_per_s(matmul_tflops: float, gflop_per_image: float) -> float:
    """The most images per second a device could train if it ran every FLOP at its matmul rate."""
    return matmul_tflops * 1e12 / (gflop_per_image * 1e9)


# -- the check -----------------------------------------------------------------------------------------

def check_ceiling_img_per_s(fn: Callable[[float, float], float], *, trials: int = 20, seed: int | None = None) -> CheckResult:
    """Check ``fn(matmul_tflops, gflop_per_image) → img/s`` against the reference on fresh random inputs."""
    name = "00 · compute ceiling in img/s"
    ref = ceiling_img_per_s
    try:
        fn = as_function(fn, what="Your answer", form="the function itself, ceiling_img_per_s (no brackets: the check "
                                                      "calls it with fresh inputs), which returns images per second")
    except WrongForm as e:
        return failed(name, ref, str(e))
    rng = random.Random(seed)
    for _ in range(trials):
        tflops, gflop = rng.uniform(0.05, 1000.0), rng.uniform(0.1, 50.0)
        try:
            got = fn(tflops, gflop)
        except NotImplementedError:
            return not_done(name, ref, "Write ceiling_img_per_s and run this cell again ([00-11] measured the "
                                       "ceilings, [00-13] the FLOPs per image).")
        except Exception as e:
            return failed(name, ref, f"Calling it with ({tflops:.3g}, {gflop:.3g}) raised {type(e).__name__}: {e}.")
        want = ref(tflops, gflop)
        try:  # a numpy scalar or a 0-d tensor is a number too
            got = as_number(got, what="What it returns", form="a number of images per second (a float)")
        except WrongForm as e:
            return failed(name, ref, f"For ({tflops:.3g}, {gflop:.3g}) it returned {e.given}; return the number of "
                                     "images per second (a float).")
        if not math.isclose(got, want, rel_tol=1e-6):
            ratio = got / want if want else float("inf")
            hint = ""
            for power in (3, 6, 9, 12):
                if math.isclose(ratio, 10.0**power, rel_tol=1e-3) or math.isclose(ratio, 10.0**-power, rel_tol=1e-3):
                    hint = f" It is off by exactly 10^{power if ratio > 1 else -power}: check the units (TFLOP = 1e12, GFLOP = 1e9)."
            if math.isclose(got * want, 1.0, rel_tol=1e-3):
                hint = " It looks upside down: images per second is FLOP/s divided by FLOP per image."
            return failed(name, ref, f"For {tflops:.3g} TFLOP/s and {gflop:.3g} GFLOP/image it gave {got:.6g}, expected {want:.6g}.{hint}")
    return CheckResult(name, "passed", f"It matches the reference on {trials} random inputs.", fn)
