"""Fakes the tests share (import them: ``from fakes import tiny_session``; pytest puts tests/ on the path)."""

from __future__ import annotations


def tiny_challenge():
    """The final challenge shrunk for a CPU test: 64 training images of 16², 64 held-out, batch 16, one warm-up step."""
    from helpers.challenge.rules import Rules
    from helpers.train import TrainConfig

    return (Rules(images=64, image_size=16, dataset_size=256, heldout=64, size="tiny"),
            TrainConfig(batch_size=16, warmup_steps=1, data="gpu", image_size=16, dataset_size=256))


def tiny_session(rules, *, matmul_tflops: float = 0.1):
    """A judging session on ``rules`` with made-up ceilings (no measuring): ``matmul_tflops`` sets where MFU lands."""
    from helpers import bench, models
    from helpers.challenge.harness import Session

    ceil = bench.Ceilings("test CPU", matmul_tflops=matmul_tflops, matmul_dtype="float32", matmul_n=64,
                          copy_gb_per_s=1.0, copy_bytes=1)
    return Session(rules, ceil, bench.flops_per_image(models.ReferenceCNN(rules.image_size), rules.image_size), "cpu")


class DrawsStep:
    """A random source that makes :meth:`SpotCheck.draw` pick step ``step`` of a run (the harness draws it with the
    operating system's): its ``randrange(n)`` answers 0, "check this one", at that step's draw only."""

    def __init__(self, step: int) -> None:
        self.step, self.calls = step, 0

    def randrange(self, n: int) -> int:
        hit, self.calls = self.calls == self.step, self.calls + 1
        return 0 if hit else n - 1


def next_change_case():
    """A final step on an 800 TFLOP/s, 3 TB/s roofline, as ``(kernels, final, ceil)``: the convolutions at 89% of
    their (memory) roof save 1.67 ms of a 25 ms step at their roof; the fully connected layers, at 50% of theirs, only
    1.5 ms; the pool backward 0.2 ms. So the answer is the convolutions, MFU 28% → 30.0%."""
    import types

    from helpers import bench
    from helpers.challenge.step_roofline import StepKernels
    from helpers.roofline import RooflinePoint

    ceil = bench.Ceilings("test GPU", matmul_tflops=800.0, matmul_dtype="bfloat16", matmul_n=8192,
                          copy_gb_per_s=3000.0, copy_bytes=1)
    points = [RooflinePoint("convolutions", flops=6e12, bytes=4e10, kind="convolution", ms=15.0),
              RooflinePoint("fully connected", flops=1.2e12, bytes=2e9, kind="GEMM", ms=3.0),
              RooflinePoint("fused pool backward", flops=1e9, bytes=6e9, kind="pooling", ms=2.2)]
    kernels = StepKernels(points=points, shares={"convolutions": 68.0, "fully connected": 13.6,
                                                 "fused pool backward": 10.0},
                          unplaced={"elementwise": 8.4}, step_kernel_ms=22.0)
    return kernels, types.SimpleNamespace(step_ms=25.0, mfu_pct=28.0), ceil
