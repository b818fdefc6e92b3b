"""03_kernels' exercises: a fused Triton softmax, the network's bias + ReLU + max-pool fused in Triton, a CUDA graph
capture, two kernels placed on the roofline.

    from helpers.exercises import nb03 as checks
    checks.check_fused_softmax(my_softmax, device="cuda")
    checks.check_bias_relu_pool(my_bias_relu_pool, device="cuda", dtype=torch.bfloat16)
    checks.check_fast_step(my_fast_step, device="cuda", dtype=torch.bfloat16, image_size=224, batch=128)
    my_prediction = checks.predict(convolution_share_pct=60)           # before the profile
    checks.check_prediction(my_prediction, by_kind, started=started)   # by_kind: the profile's share per kind
    checks.check_cuda_graph(my_graphed, device="cuda")
    checks.check_graph_break(MyScaleLoggedMLP, device="cuda")         # the dashboard check without a graph break
    checks.check_roofline(my_placements, ceil)

Correctness comes first, on fresh random inputs every time; speed is checked only on a GPU.
Try the exercises before reading the reference solutions below (the Triton kernels themselves are in
``helpers/kernels/softmax_triton.py`` and ``helpers/kernels/relu_pool_triton.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random
from typing import Any, Callable

import torch
import torch.nn.functional as F

from .. import bench, env, models, tables
from ..bench import Ceilings
from ..kernels.compile_practice import ScaleLoggedMLP, counting_backend, graph_breaks, quiet_torch_logs
from ..kernels.graphs import graph_launches, graph_speedup
from ..kernels.launches import triton_launches
from ..kernels.softmax import naive_softmax
from ..roofline import RooflinePoint, attainable_tflops, ridge_intensity
from . import predictions
from .predictions import Prediction, measuring
from .common import (CheckResult, WrongForm, as_choice, as_function, as_instance, as_mapping, as_number, blank,
                     describe, failed, not_done)

__all__ = ["fused_softmax", "bias_relu_pool", "graphed", "ScaleLoggedNoBreak", "check_graph_break", "fast_step", "eager_step", "Placement", "GivenKernel", "given_kernels", "placements", "measure_given",
           "check_fused_softmax", "check_bias_relu_pool", "check_cuda_graph", "check_fast_step", "check_roofline",
           "predict", "measuring", "check_prediction"]


#: An eager function timed against itself lands near 1× either way; the reference's replay runs several times
#: faster than eager on an H100 (``cuda_graph_speedup`` in results/). Well above the one, well below the other.
MIN_GRAPH_SPEEDUP = 1.5


# -- the reference solutions ---------------------------------------------------------------------------

def fused_softmax(x: torch.Tensor) -> torch.Tensor:
    """Row softmax in one Triton kernel (helpers/kernels/softmax_triton.py)."""
    from ..kernels import softmax_triton  # imports Triton: only when a softmax is asked for

    return softmax_triton.softmax(x)


def bias_relu_pool(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``max_pool2d(relu(x + bias per channel), 2)`` in one Triton kernel (helpers/kernels/relu_pool_triton.py):
    the bias and the ReLU applied after the pool, to a quarter of the values."""
    from ..kernels import relu_pool_triton  # imports Triton: only when the kernel is asked for

    with torch.no_grad():
        return relu_pool_triton.relu_maxpool2x2_kernel(x, bias)  # the kernel itself, on a CPU too (the interpreter)


def unfused_bias_relu_pool(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The network's block after its convolution, as PyTorch runs it op by op: three kernels, each a pass over memory."""
    return F.max_pool2d(F.relu(x + bias[:, None, None]), 2)


def graphed(model: torch.nn.Module, example: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """``model``'s forward captured once as a CUDA graph; the returned function replays it on new inputs."""
    static_x = example.clone()  # the graph reads its input from this tensor's memory, every replay
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():  # warm up on a side stream: cuBLAS sets itself up outside the capture
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_y = model(static_x)  # recorded, not run: static_y's memory is where every replay writes

    def run(x: torch.Tensor) -> torch.Tensor:
        static_x.copy_(x)  # new data into the captured input
        graph.replay()
        return static_y.clone()  # the next replay overwrites static_y: hand out a copy

    return run


class ScaleLoggedNoBreak(ScaleLoggedMLP):
    """The MLP with its dashboard check kept as a tensor: the graph stays whole and the host never waits on it;
    whoever draws the dashboard reads ``float(m.scale)`` when it wants to."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.front(x)
        self.scale = h.detach().abs().mean()  # a tensor on the device: traced into the graph, no sync
        return self.back(h)


def fast_step(model: torch.nn.Module, opt: torch.optim.Optimizer, *, dtype: torch.dtype = torch.bfloat16
              ) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A training step for ``model`` that runs its convolutions in channels_last, compiled, and on a GPU replayed as
    CUDA graphs: ``step(x, y)`` trains one step on a batch and returns its loss, kept on the device."""
    model.to(memory_format=torch.channels_last)  # the weights: every convolution then runs in channels_last
    cuda = next(model.parameters()).is_cuda
    # reduce-overhead: Inductor's kernels, the forward's and the backward's each captured once and replayed
    compiled = torch.compile(model, mode="reduce-overhead" if cuda else "default")

    # the batch comes in NCHW: converted here, once, rather than by the first convolution
    return _step(lambda x: compiled(x.contiguous(memory_format=torch.channels_last)), opt, dtype)


def eager_step(model: torch.nn.Module, opt: torch.optim.Optimizer, *, dtype: torch.dtype = torch.bfloat16
               ) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The same step, eager, in the layout the batches come in (NCHW): what :func:`fast_step` is judged against."""
    return _step(model, opt, dtype)


def _step(forward: Callable[[torch.Tensor], torch.Tensor], opt: torch.optim.Optimizer, dtype: torch.dtype
          ) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.autocast(x.device.type, dtype=dtype):
            loss = F.cross_entropy(forward(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


@dataclasses.dataclass(frozen=True)
class Placement:
    """Your answer for one kernel: its FLOPs, the bytes it must move, and which roof bounds it."""

    flops: float | None = None
    bytes: float | None = None
    bound: str | None = None  # "memory" or "compute"


@dataclasses.dataclass(frozen=True)
class GivenKernel:
    """A kernel to place on the roofline: ``c = a + b`` on ``n`` elements, or an ``n×n @ n×n`` matmul, in bf16."""

    name: str
    n: int

    @property
    def what(self) -> str:
        if self.name == "add":
            return f"c = a + b on three bf16 tensors of {self.n:,} elements each"
        return f"C = A @ B with A, B and C bf16 matrices of {self.n:,} × {self.n:,}"


def given_kernels(scale: str | None = None) -> dict[str, GivenKernel]:
    """The exercise's two kernels (smaller at smoke scale, so a CPU can time them)."""
    full = (scale or env.scale()) == "full"
    return {"add": GivenKernel("add", 2**26 if full else 2**20), "matmul": GivenKernel("matmul", 4096 if full else 512)}


def _flops_bytes(k: GivenKernel) -> tuple[float, float]:
    """FLOPs and the least bytes moved: 2 per bf16 element, every input read and every output written once."""
    if k.name == "add":
        return float(k.n), 3.0 * k.n * 2
    return 2.0 * k.n**3, 3.0 * k.n**2 * 2


def placements(kernels: dict[str, GivenKernel], ceil: Ceilings) -> dict[str, Placement]:
    """The reference answers: FLOPs, bytes, and the roof that bounds each kernel on the device ``ceil`` describes."""
    out = {}
    for name, k in kernels.items():
        flops, moved = _flops_bytes(k)
        out[name] = Placement(flops, moved, "memory" if flops / moved < ridge_intensity(ceil) else "compute")
    return out


def measure_given(kernels: dict[str, GivenKernel], *, device: torch.device | str | None = None) -> list[RooflinePoint]:
    """Run and time the given kernels here: roofline points with their measured times."""
    dev = torch.device(device) if device is not None else env.device()
    points = []
    for name, k in kernels.items():
        shape = (k.n,) if k.name == "add" else (k.n, k.n)
        a, b = (torch.randn(*shape, device=dev, dtype=torch.bfloat16) for _ in range(2))
        c = torch.empty_like(a)
        op = torch.add if k.name == "add" else torch.mm
        ms = bench.time_it(lambda: op(a, b, out=c), warmup=3, repeats=20, device=dev).median_ms
        flops, moved = _flops_bytes(k)
        # each reads two operands and writes one: two thirds of the bytes are reads
        points.append(RooflinePoint(f"given: {name}", flops, moved, "elementwise" if k.name == "add" else "GEMM", ms,
                                    read_bytes=moved * 2 / 3))
    return points


# -- the checks ----------------------------------------------------------------------------------------

_NOT_WRITTEN_BY_YOURS = ("It launched a Triton kernel, but the tensor it returned is memory no kernel of yours was "
                         "handed: the result came from somewhere else (PyTorch's ops, or a compiled function). Write "
                         "the result in your kernel: hand it the output tensor and store into it.")


def _fresh_shapes(cuda: bool, rng: random.Random) -> list[tuple[int, int]]:
    # The first shape is the one the notebook's example uses; the others a kernel written only for it gets wrong.
    rows = (lambda: rng.randint(64, 300)) if cuda else (lambda: rng.randint(3, 9))
    odd = rng.choice([c for c in range(97, 1500) if c & (c - 1)])  # not a power of two
    return [(rows(), 1024), (rows(), odd), (rows(), rng.randint(5, 60))]


def check_fused_softmax(fn: Callable | None, *, device, seed: int | None = None, bench_rows: int = 16384,
                        bench_cols: int = 2048) -> CheckResult:
    """``fn(x)`` must equal ``torch.softmax(x, dim=-1)`` for fresh random 2-D fp32 inputs of several shapes and
    large values, leave ``x`` unchanged, launch a Triton kernel of its own (:func:`triton_launches`: PyTorch's
    softmax or a compiled function launches none), and, on a GPU, beat the unfused ops at ``bench_rows ×
    bench_cols``."""
    name = "03 · a fused softmax in Triton"
    ref = fused_softmax
    if fn is None or fn is ...:
        return not_done(name, ref, "Write the kernel, set my_softmax = softmax_rows, and run this cell "
                                   "again ([03-31] says what each program does).")
    try:
        fn = as_function(fn, what="my_softmax", form="a function x -> softmax of x's rows: my_softmax = softmax_rows "
                                                     "(no brackets)")
    except WrongForm as e:
        return failed(name, ref, str(e))
    dev = torch.device(device)
    rng = random.Random(seed if seed is not None else random.randrange(2**31))
    g = torch.Generator().manual_seed(rng.randrange(2**31))
    kernels: list[str] = []
    untouched = False  # a kernel ran, but what was returned is memory no kernel of the learner's was handed
    for i, (r, c) in enumerate(_fresh_shapes(dev.type == "cuda", rng)):
        x = torch.randn(r, c, generator=g).to(dev)
        before = x.clone()
        try:
            with triton_launches() as launched:
                got = fn(x)
            kernels += [k for k in launched if k not in kernels]
            untouched = untouched or (bool(launched) and isinstance(got, torch.Tensor) and not launched.touched(got))
        except NotImplementedError:
            return not_done(name, ref, "Write the kernel and run this cell again.")
        except Exception as e:
            return failed(name, ref, f"On a {r}×{c} input it raised {type(e).__name__}: {str(e)[:300]}")
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != (r, c):
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            return failed(name, ref, f"On a {r}×{c} input it returned {shape}; return a tensor shaped like x.")
        if not torch.equal(x, before):
            return failed(name, ref, "It changed its input: write the result into a new tensor (torch.empty_like(x)).")
        want = torch.softmax(x, dim=-1)
        if not torch.allclose(got.float(), want, atol=1e-6, rtol=1e-4):
            err = float((got.float() - want).abs().nan_to_num(float("inf")).max())
            if i == 0:
                why = (f"On a {r}×{c} input it differs from torch.softmax by up to {err:.2g}. Each program should "
                       "handle one row: load it, subtract its max, exponentiate, divide by the sum, store.")
            else:
                why = (f"It matches for 1024 columns but not for {c} (error up to {err:.2g}): the kernel is right only "
                       "for the example's shape. Use BLOCK = triton.next_power_of_2(n_cols) and mask the columns "
                       "past n_cols (load them as -inf, do not store them).")
            return failed(name, ref, why)
    big = torch.randn(8, 333, generator=g).to(dev) * 200  # exp(200) overflows fp32
    got = fn(big)
    if not torch.isfinite(got).all() or not torch.allclose(got.float(), torch.softmax(big, -1), atol=1e-6, rtol=1e-4):
        return failed(name, ref, "With large inputs (|x| up to ~800) it gives inf or NaN: exp overflows. Subtract each "
                                 "row's max before exp; the result is the same, and the largest term becomes exp(0) = 1.")
    if untouched:
        return failed(name, ref, _NOT_WRITTEN_BY_YOURS)
    if not kernels:
        return failed(name, ref, "It matches torch.softmax, but it launched no Triton kernel of its own: it calls "
                                 "PyTorch (torch.softmax, or a compiled function), and the exercise is to write the "
                                 "kernel. Launch yours from the function: softmax_kernel[(n_rows,)](out, x, ...).")
    yours = ", ".join(k.rsplit(".", 1)[-1] for k in kernels)
    if dev.type != "cuda":
        return CheckResult(name, "passed", f"It runs your Triton kernel ({yours}) and matches torch.softmax on fresh "
                                           "inputs of three shapes and on large values (run by Triton's interpreter "
                                           "on this CPU; its speed is measured on a GPU).", fn)
    x = torch.randn(bench_rows, bench_cols, device=dev)
    t_fn = bench.time_it(lambda: fn(x), warmup=3, repeats=20, device=dev).median_ms
    t_naive = bench.time_it(lambda: naive_softmax(x), warmup=3, repeats=20, device=dev).median_ms
    gbs = 2 * x.numel() * 4 / (t_fn * 1e-3) / 1e9
    if t_fn >= t_naive:
        return failed(name, ref, f"It is correct but takes {t_fn:.3f} ms against {t_naive:.3f} ms for the unfused ops "
                                 f"on {bench_rows}×{bench_cols}: read each row once and write it once, one program "
                                 "per row.")
    return CheckResult(name, "passed", f"It runs your Triton kernel ({yours}), matches torch.softmax on fresh inputs, "
                                       f"and on {bench_rows}×{bench_cols} "
                                       f"fp32 runs {t_naive / t_fn:.1f}× faster than the unfused ops "
                                       f"({t_fn:.3f} ms, {gbs:,.0f} GB/s).", fn)


#: Shapes a kernel written only for the example gets wrong: odd sides (the pool drops the last row or column),
#: channels_last (strides are not NCHW's), one channel, one image. Small on a CPU: Triton's interpreter runs it.
def _pool_cases(cuda: bool, rng: random.Random) -> list[tuple[tuple[int, int, int, int], bool]]:
    big = cuda  # on a GPU sizes that need many programs and a 64-bit-safe index
    n, c = (rng.randint(2, 8), rng.randint(17, 70)) if big else (rng.randint(2, 3), rng.randint(3, 6))
    side = (lambda: rng.randint(20, 90)) if big else (lambda: rng.randint(4, 9))
    even = lambda: 2 * (side() // 2)
    odd = lambda: 2 * (side() // 2) + 1
    return [((n, c, even(), even()), False),           # the example's kind: NCHW, even sides
            ((n, c, odd(), even()), False),             # an odd height: its last row belongs to no window
            ((n, c, even(), odd()), False),             # an odd width: a row of x is longer than two of y's
            ((n, c, odd(), odd()), True),               # channels_last: x's strides are not NCHW's
            ((1, 1, even(), even()), False)]            # one image, one channel


def check_bias_relu_pool(fn: Callable | None, *, device, dtype: torch.dtype = torch.float32,
                         seed: int | None = None, bench_shape: tuple[int, int, int, int] = (128, 64, 224, 224)
                         ) -> CheckResult:
    """``fn(x, bias)`` must equal ``max_pool2d(relu(x + bias[:, None, None]), 2)`` on fresh random 4-D inputs (odd
    sides, channels_last, one channel; fp32, and ``dtype`` on a GPU), leave ``x`` unchanged, launch a Triton kernel
    of its own (PyTorch's ops or a compiled function launch none), and, on a GPU, beat the three unfused ops on a
    ``bench_shape`` activation in ``dtype`` (the first block's, at full scale)."""
    name = "03 · bias + ReLU + max-pool fused in Triton"
    ref = bias_relu_pool
    if fn is None or fn is ...:
        return not_done(name, ref, "Write bias_relu_pool_kernel in the cell above, set my_bias_relu_pool = "
                                   "bias_relu_pool, and run this cell again (the fused softmax [03-32] shows the "
                                   "pattern: a program, its block of indices, masked loads and stores).")
    try:
        fn = as_function(fn, what="my_bias_relu_pool", form="a function (x, bias) -> the pooled tensor: "
                                                            "my_bias_relu_pool = bias_relu_pool (no brackets)")
    except WrongForm as e:
        return failed(name, ref, str(e))
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    rng = random.Random(seed if seed is not None else random.randrange(2**31))
    g = torch.Generator().manual_seed(rng.randrange(2**31))
    kernels: list[str] = []
    untouched = False
    cases = [(shape, cl, torch.float32) for shape, cl in _pool_cases(cuda, rng)]
    if cuda and dtype != torch.float32:
        cases.append((_pool_cases(cuda, rng)[0][0], True, dtype))  # the precision the network trains in
    for shape, channels_last, dt in cases:
        x = torch.randn(*shape, generator=g).to(dev, dt)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        bias = (torch.randn(shape[1], generator=g) * 0.5).to(dev, dt)
        before = x.clone()
        what = f"a {'×'.join(map(str, shape))} {str(dt).replace('torch.', '')} input" + \
            (" in channels_last" if channels_last else "")
        try:
            with triton_launches() as launched:
                got = fn(x, bias)
            kernels += [k for k in launched if k not in kernels]
            untouched = untouched or (bool(launched) and isinstance(got, torch.Tensor) and not launched.touched(got))
        except NotImplementedError:
            return not_done(name, ref, "Write the kernel and run this cell again.")
        except Exception as e:
            return failed(name, ref, f"On {what} it raised {type(e).__name__}: {str(e)[:300]}")
        want = unfused_bias_relu_pool(x.float(), bias.float())
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
            got_shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            return failed(name, ref, f"On {what} it returned {got_shape}, not {tuple(want.shape)}: the pool halves "
                                     "each side, rounding down (an odd side's last row or column is in no window).")
        if not torch.equal(x, before):
            return failed(name, ref, "It changed its input: store the result into a new tensor (y), never into x.")
        tol = 1e-6 if dt == torch.float32 else 2e-2
        if not torch.allclose(got.float(), want, atol=tol, rtol=tol):
            err = float((got.float() - want).abs().nan_to_num(float("inf")).max())
            neg = bool(((got.float() < 0) & (want == 0)).any())
            if neg:
                why = "some outputs are negative: the ReLU is missing (max(0, ·) after the bias)."
            elif channels_last:
                why = ("it matches for NCHW inputs but not for this channels_last one: read x through its strides "
                       "(x.stride()), never assuming NCHW's.")
            elif shape[2] % 2 or shape[3] % 2:
                why = ("it is right for even sides but not for an odd one: the output has H // 2 × W // 2 positions, "
                       "and each window starts at (2·oh, 2·ow) of the input, whose row length is W, not 2·OW.")
            else:
                why = ("each output is the largest of its 2×2 window plus the channel's bias, then max(0, ·); the "
                       "bias is the same for every position of a channel.")
            return failed(name, ref, f"On {what} it differs from max_pool2d(relu(x + bias)) by up to {err:.2g}: {why}")
    if untouched:
        return failed(name, ref, _NOT_WRITTEN_BY_YOURS)
    if not kernels:
        return failed(name, ref, "It matches, but it launched no Triton kernel of its own: it calls PyTorch's ops "
                                 "(or a compiled function), and the exercise is to write the kernel. Launch yours "
                                 "from the function: bias_relu_pool_kernel[grid](...).")
    yours = ", ".join(k.rsplit(".", 1)[-1] for k in kernels)
    if not cuda:
        return CheckResult(name, "passed", f"It runs your Triton kernel ({yours}) and matches max_pool2d(relu(x + "
                                           "bias)) on fresh inputs with odd sides, in channels_last and with one "
                                           "channel (run by Triton's interpreter on this CPU; its speed is measured on "
                                           "a GPU).", fn)
    x = torch.randn(*bench_shape, device=dev, dtype=dtype)
    bias = torch.randn(bench_shape[1], device=dev, dtype=dtype)
    t_fn = bench.time_it(lambda: fn(x, bias), warmup=3, repeats=20, device=dev).median_ms
    t_ops = bench.time_it(lambda: unfused_bias_relu_pool(x, bias), warmup=3, repeats=20, device=dev).median_ms
    moved = x.numel() * x.element_size() * 1.25  # the least: read x once, write a quarter of it
    shape_txt = "×".join(map(str, bench_shape))
    if t_fn >= t_ops:
        return failed(name, ref, f"It is correct but takes {t_fn:.3f} ms against {t_ops:.3f} ms for the three "
                                 f"unfused ops on a {shape_txt} activation: read each input once, in blocks of "
                                 "neighbouring elements, and write each output once.")
    return CheckResult(name, "passed", f"It runs your Triton kernel ({yours}), matches on fresh inputs, and on a "
                                       f"{shape_txt} {str(dtype).replace('torch.', '')} activation runs "
                                       f"{t_ops / t_fn:.1f}× faster than the three unfused ops ({t_fn:.3f} ms against "
                                       f"{t_ops:.3f} ms; {moved / (t_fn * 1e-3) / 1e9:,.0f} GB/s).", fn)


#: What the profiler shows of a forward that ran eagerly: the network's pools and ReLUs as ops of their own (compiled,
#: Inductor fuses them into its kernels and they never appear).
_EAGER_FORWARD = ("aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::relu")


def _how_it_ran(step, x: torch.Tensor, y: torch.Tensor) -> tuple[bool, bool]:
    """One profiled step: (something compiled ran, the network's forward ran eagerly). Read from what ran, not from
    the compiler's counters, which a compile that found its cache (a cell run twice) leaves where they were."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step(x, y)
    names = {e.name for e in prof.events()}
    compiled = any("Torch-Compiled Region" in n or "CompiledFunction" in n or "CompiledFxGraph" in n
                   or "GraphLaunch" in n for n in names)
    return compiled, any(n in names for n in _EAGER_FORWARD)


def _update_gap(a: torch.nn.Module, b: torch.nn.Module, before: list[torch.Tensor]) -> float:
    """How far apart two networks' updates from the same start are, as a share of the second's: the norm of the
    difference of their weights' changes over the norm of ``b``'s change (0: the same update; bf16 and fused
    kernels leave a few percent)."""
    da = torch.cat([(p.detach().float() - w).flatten() for p, w in zip(a.parameters(), before)])
    db = torch.cat([(p.detach().float() - w).flatten() for p, w in zip(b.parameters(), before)])
    return float((da - db).norm() / db.norm().clamp_min(1e-12))


#: The largest gap between your step's update and the eager step's that still counts as the same training. Measured
#: on a 2-core CPU (bf16 autocast, compiled against eager, 3 steps): 0.02%; a step that skips zeroing the
#: gradients is 94% off.
_MAX_UPDATE_GAP = 0.15


def check_fast_step(make_step: Callable | None, *, device, dtype: torch.dtype = torch.float32, image_size: int = 32,
                    batch: int = 8, steps: int = 3, seed: int | None = None) -> CheckResult:
    """``make_step(model, opt)`` must return ``step(x, y) -> loss`` that trains like :func:`eager_step` on fresh
    batches (the same losses, the same direction of update), with the network's convolution weights in
    channels_last, compiled by ``torch.compile``, and on a GPU replaying CUDA graphs and beating the eager step."""
    name = "03 · your step: channels_last, compiled, captured"
    ref = fast_step
    if make_step is None or make_step is ...:
        return not_done(name, ref, "Write my_fast_step in [03-step-2] and run this cell again (the compile modes "
                                   "[03-17] and the CUDA graph [03-21] show what each part does).")
    try:
        make_step = as_function(make_step, what="my_fast_step", form="the function itself, my_fast_step (no brackets: "
                                                                     "the check calls it with a model and an optimizer)")
    except WrongForm as e:
        return failed(name, ref, str(e))
    dev = torch.device(device)
    rng = random.Random(seed if seed is not None else random.randrange(2**31))
    torch.manual_seed(rng.randrange(2**31))
    base = models.ReferenceCNN(image_size).to(dev)
    yours, theirs = copy.deepcopy(base), copy.deepcopy(base)
    before = [p.detach().float().clone() for p in base.parameters()]
    sgd = lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)  # noqa: E731
    try:
        step = make_step(yours, sgd(yours))
        step = as_function(step, what="What my_fast_step returns", form="a function step(x, y) -> loss")
        eager = eager_step(theirs, sgd(theirs), dtype=dtype)
        g = torch.Generator().manual_seed(rng.randrange(2**31))
        got, want = [], []
        for _ in range(steps):
            x = torch.randn(batch, 3, image_size, image_size, generator=g).to(dev)
            y = torch.randint(0, 10, (batch,), generator=g).to(dev)
            loss = step(x, y)
            want.append(float(eager(x, y)))
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                return failed(name, ref, f"step(x, y) returned {type(loss).__name__}: return the loss, a tensor of one "
                                         "value (loss.detach()).")
            got.append(float(loss))
    except NotImplementedError:
        return not_done(name, ref, "Write my_fast_step and run this cell again.")
    except WrongForm as e:
        return failed(name, ref, str(e))
    except Exception as e:
        return failed(name, ref, f"It raised {type(e).__name__}: {str(e)[:300]}")
    tol = 1e-3 if dtype == torch.float32 else 5e-2
    gap = _update_gap(yours, theirs, before)
    if not all(math.isclose(a, b, rel_tol=tol, abs_tol=tol) for a, b in zip(got, want)) or not gap <= _MAX_UPDATE_GAP:
        return failed(name, ref, f"It trains differently from the eager step: losses {', '.join(f'{v:.4f}' for v in got)} "
                                 f"against {', '.join(f'{v:.4f}' for v in want)}, its update {gap:.0%} away from the "
                                 "eager step's. "
                                 "One step: forward under autocast, cross-entropy, zero the gradients, backward, the "
                                 "optimizer's step; return the loss.")
    convs = [m for m in yours.modules() if isinstance(m, torch.nn.Conv2d)]
    if not all(c.weight.is_contiguous(memory_format=torch.channels_last) for c in convs):
        return failed(name, ref, "It trains right, but the convolutions' weights are still NCHW: convert the model "
                                 "(model.to(memory_format=torch.channels_last)); with its weights in channels_last, "
                                 "each convolution runs in channels_last whatever the batch's layout.")
    x = torch.randn(batch, 3, image_size, image_size, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    try:
        compiled, eager_forward = _how_it_ran(step, x, y)
    except Exception as e:
        return failed(name, ref, f"A profiled step raised {type(e).__name__}: {str(e)[:300]}")
    if not compiled or eager_forward:
        return failed(name, ref, "It trains right in channels_last, but the network's forward ran eagerly: its pools "
                                 "and ReLUs ran as PyTorch ops of their own" + ("" if compiled else ", and nothing "
                                 "compiled ran") + ". Wrap the model (or its forward) in torch.compile inside "
                                 "my_fast_step.")
    if dev.type != "cuda":
        return CheckResult(name, "passed", f"It trains like the eager step ({steps} steps on fresh batches), in "
                                           "channels_last, compiled. CUDA graphs and the speed are checked on a GPU.",
                           make_step)
    if graph_launches(step, x, y) == 0:
        return failed(name, ref, "It trains right, in channels_last, compiled, but a step replays no CUDA graph: "
                                 "compile with mode=\"reduce-overhead\", which captures the compiled forward and backward "
                                 "and replays them.")
    t_eager = bench.time_it(lambda: eager(x, y), warmup=3, repeats=20, device=dev).median_ms
    t_yours = bench.time_it(lambda: step(x, y), warmup=3, repeats=20, device=dev).median_ms
    if t_yours >= t_eager:
        return failed(name, ref, f"It is right but takes {t_yours:.2f} ms a step against {t_eager:.2f} ms eager "
                                 f"(batch {batch}, {image_size}×{image_size}).")
    yours_ms, eager_ms = tables.sig(t_yours), tables.sig(t_eager)  # the ratio from the two times as printed
    return CheckResult(name, "passed", f"It trains like the eager step, in channels_last, compiled, replaying CUDA "
                                       f"graphs, and runs a step of batch {batch} at {image_size}×{image_size} in "
                                       f"{yours_ms} ms against {eager_ms} ms eager "
                                       f"({tables.times_as_shown(eager_ms, yours_ms)}).",
                       make_step)


def check_cuda_graph(make_graphed: Callable | None, *, device, seed: int | None = None,
                     batch: int = 64) -> CheckResult:
    """``make_graphed(model, example)`` must return a function that gives ``model(x)`` for fresh inputs ``x``,
    keeps earlier results intact, replays a CUDA graph (the profiler sees a graph launch in one call), and runs at
    least :data:`MIN_GRAPH_SPEEDUP` × the eager model's speed with every timed round faster than every eager round
    (small MLP, ``batch`` rows): an eager function, however fast the timing's noise makes it look, fails."""
    name = "03 · a CUDA graph capture"
    dev = torch.device(device)
    unwritten = make_graphed is None or make_graphed is ...
    if not unwritten:  # the answer's form needs no GPU: say it on any machine
        try:
            as_function(make_graphed, what="my_graphed", form="a function (model, example) -> a function x -> model(x) "
                                                               "that replays a CUDA graph: pass my_graphed (no brackets)")
        except WrongForm as e:
            return failed(name, graphed if dev.type == "cuda" else None, str(e))
    if dev.type != "cuda":
        return CheckResult(name, "not done", "CUDA graphs need a CUDA GPU; this check runs on a GPU node. The notebook "
                                             "carries on without graphs here.", None)
    if unwritten:
        return not_done(name, graphed, "Write my_graphed and run this cell again ([03-21] gives the "
                                       "four steps).")
    torch.manual_seed(seed if seed is not None else random.randrange(2**31))
    model = models.small_mlp().to(dev).eval()
    example = torch.randn(batch, 256, device=dev)
    x1, x2 = torch.randn(batch, 256, device=dev), torch.randn(batch, 256, device=dev)
    try:
        run = make_graphed(model, example)
        y1 = run(x1)
        y1_kept = y1.clone()
        y2 = run(x2)
    except NotImplementedError:
        return not_done(name, graphed, "Write my_graphed and run this cell again ([03-21] gives the "
                                       "four steps).")
    except Exception as e:
        return failed(name, graphed, f"It raised {type(e).__name__}: {str(e)[:300]}")
    with torch.no_grad():
        want1, want2, want_example = model(x1), model(x2), model(example)
    close = lambda a, b: isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=1e-5, rtol=1e-4)  # noqa: E731
    if not close(y1_kept, want1):
        if close(y1_kept, want_example):
            return failed(name, graphed, "The replay returned the outputs for the input it was captured with, not for "
                                         "the new one: a graph reads the same memory every replay. Keep a static input "
                                         "tensor, copy each new input into it (static_x.copy_(x)), then replay.")
        return failed(name, graphed, "For a fresh input its output differs from model(x). Capture model(static_x) "
                                     "inside torch.cuda.graph(g) and replay that graph.")
    if not close(y2, want2):
        return failed(name, graphed, "The first call was right, the second was not: copy every new input into the "
                                     "static input before each replay.")
    if not close(y1, want1):
        return failed(name, graphed, "The first result changed when the graph replayed again: every replay writes into "
                                     "the same output tensor. Return a copy (static_y.clone()).")
    launched = graph_launches(run, x1)
    if launched == 0:
        return failed(name, graphed, "Its outputs are right, but one call replayed no CUDA graph (the profiler saw no "
                                     "graph launch): it runs the model eagerly. Capture model(static_x) once inside "
                                     "torch.cuda.graph(g), and call g.replay() in the function you return.")
    with torch.no_grad():
        s = graph_speedup(lambda: model(x1), lambda: run(x1), device=dev)
    if not s.separated or s.speedup < MIN_GRAPH_SPEEDUP:
        return failed(name, graphed, f"It replays a graph, but is not clearly faster than eager: {s}. A replay should "
                                     f"be at least {MIN_GRAPH_SPEEDUP:g}× faster in every round. Capture once, outside "
                                     "the function you return; inside it, only copy the input in, replay and clone.")
    return CheckResult(name, "passed", f"It matches the model on fresh inputs, replays a graph ({launched} graph "
                                       f"launch{'es' * (launched > 1)} per call) and runs {s}.",
                       make_graphed)  # like the reference it stands in for: a function that captures


def _compiles_over_calls(model: torch.nn.Module, xs: list[torch.Tensor]) -> int:
    """Graphs Dynamo compiles for ``model`` over calls on ``xs`` (one shape): more than the first call's means the
    forward's guards fail on every call (they read something it changes each time: a growing list's length)."""
    compiled_graphs = [0]
    torch._dynamo.reset()
    fn = torch.compile(model, backend=counting_backend("eager", compiled_graphs))  # Dynamo alone: graphs, no code
    with torch.no_grad(), quiet_torch_logs():
        fn(xs[0])
        first = compiled_graphs[0]
        for x in xs[1:]:
            fn(x)
    torch._dynamo.reset()
    return compiled_graphs[0] - first


def check_graph_break(cls: type | None, *, device, seed: int | None = None, batch: int = 64) -> CheckResult:
    """``cls``: a subclass of :class:`ScaleLoggedMLP` whose ``forward`` gives the same output, keeps the call's scale
    in ``self.scale`` (read with ``float()``, the activations' mean size halfway through), compiles as one graph with
    no break (``torch._dynamo.explain`` on a fresh input), and compiles nothing more on later calls of one shape.
    Fresh weights and inputs on every run; the reference's ``.item()`` values are what each scale must equal."""
    name = "03 · a graph break found and removed"
    hint = ("Write MyScaleLoggedMLP.forward and run this cell again ([03-break-1] (under \"Exercise: keep the check, "
            "lose the graph break\") says what it must do).")
    if cls is None or cls is ...:
        return not_done(name, ScaleLoggedNoBreak, hint)
    if not (isinstance(cls, type) and issubclass(cls, ScaleLoggedMLP)):
        return failed(name, ScaleLoggedNoBreak, f"MyScaleLoggedMLP should be a class made from ScaleLoggedMLP "
                                                f"(class MyScaleLoggedMLP(ScaleLoggedMLP): ...); you gave {describe(cls)}.")
    dev = torch.device(device)
    torch.manual_seed(seed if seed is not None else random.randrange(2**31))
    ref = ScaleLoggedMLP().to(dev)
    xs = [torch.randn(batch, 256, device=dev) for _ in range(3)]
    got, scales, want, want_scales = [], [], [], []
    try:
        mine = cls().to(dev)
        mine.load_state_dict(ref.state_dict())
        with torch.no_grad():
            for x in xs[:2]:
                got.append(mine(x))
                scales.append(getattr(mine, "scale", None))
                scales[-1] = float(scales[-1]) if scales[-1] is not None else None
    except NotImplementedError:
        return not_done(name, ScaleLoggedNoBreak, hint)
    except Exception as e:
        return failed(name, ScaleLoggedNoBreak, f"It raised {type(e).__name__}: {str(e)[:300]}")
    with torch.no_grad():
        for x in xs[:2]:
            want.append(ref(x))
            want_scales.append(ref.scale)
    if not all(isinstance(g, torch.Tensor) and g.shape == w.shape and torch.allclose(g, w, atol=1e-5, rtol=1e-4)
               for g, w in zip(got, want)):
        return failed(name, ScaleLoggedNoBreak, "Its output differs from ScaleLoggedMLP's for the same weights and "
                                                "input: keep the two halves, self.front then self.back.")
    if any(v is None for v in scales):
        return failed(name, ScaleLoggedNoBreak, "After a call, self.scale should hold that call's scale; it held "
                                                "None. Set it in forward, as ScaleLoggedMLP does.")
    if not all(abs(v - w) <= 1e-4 * max(1.0, abs(w)) for v, w in zip(scales, want_scales)):
        return failed(name, ScaleLoggedNoBreak, f"The scales it kept ({', '.join(f'{v:.4g}' for v in scales)}) are not "
                                                f"the activations' mean size halfway through "
                                                f"({', '.join(f'{w:.4g}' for w in want_scales)}): "
                                                "h.detach().abs().mean() of the front half's output.")
    found = graph_breaks(mine, xs[0])
    if found.breaks:
        where = "; ".join(f"{b.where} ({b.line}): {b.reason}" for b in found.breaks)
        return failed(name, ScaleLoggedNoBreak, f"The numbers are right, but it still compiles as {found.graphs} "
                                                f"graphs: {where}. Keep the scale a tensor on the device: no .item(), "
                                                "float() or print of it inside forward.")
    again = _compiles_over_calls(mine, xs)
    if again:
        return failed(name, ScaleLoggedNoBreak, f"It compiles as one graph, but compiled {again} more on two later "
                                                "calls of the same shape: its guards fail every call, because forward "
                                                "changes something they read (a list that grows, a counter). Keep one "
                                                "tensor in self.scale and replace it each call.")
    return CheckResult(name, "passed", f"Same output and scales as ScaleLoggedMLP, {found}, and no recompile on "
                                       "later calls.", cls)


def _ratio_hint(got: float, want: float, what: str) -> str | None:
    r = got / want
    for factor, text in ((2.0, "twice"), (0.5, "half")):
        if abs(r - factor) < 0.01 * factor:
            if what == "bytes":
                return (f"is {text} the right value: bf16 is 2 bytes per element, so count "
                        + ("2 bytes, not 4." if factor == 2.0 else "bytes, not elements."))
            return f"is {text} the right value: " + ("count 2 FLOPs per multiply-add." if factor == 0.5
                                                   else "count one multiply-add as 2 FLOPs, once.")
    if what == "bytes" and abs(r - 2 / 3) < 0.01:
        return "leaves out a third of the traffic: count both inputs read and the output written."
    return None


def check_roofline(answers: dict[str, Placement] | None, ceil: Ceilings, *,
                   kernels: dict[str, GivenKernel] | None = None) -> CheckResult:
    """Each given kernel's FLOPs and bytes within 1% of the reference, and the roof that bounds it on this device."""
    name = "03 · two kernels on the roofline"
    kernels = kernels or given_kernels()
    ref = placements(kernels, ceil)
    if blank(answers):
        return not_done(name, ref, "Fill in flops, bytes and bound for both kernels and run this cell "
                                   "again ([03-24] defines arithmetic intensity and the ridge point).")
    one = "Placement(flops=..., bytes=..., bound='memory' or 'compute')"
    try:
        answers = as_mapping(answers, what="my_placements", form="a dict of one Placement per kernel: {'add': " + one
                                                                 + ", 'matmul': " + one + "}")
        for key, a in answers.items():
            if a is not None:
                label = repr(key) if isinstance(key, str) else describe(key)
                as_instance(a, Placement, what=f"my_placements[{label}]", form=one)
    except WrongForm as e:
        return failed(name, ref, str(e))
    if all(a is None or (a.flops is None and a.bytes is None) for a in answers.values()):
        return not_done(name, ref, "Fill in flops, bytes and bound for both kernels and run this cell "
                                   "again ([03-24] defines arithmetic intensity and the ridge point).")
    for key, want in ref.items():
        got = answers.get(key)
        if got is None or got.flops is None or got.bytes is None or got.bound is None:
            return not_done(name, ref, f"Fill in flops, bytes and bound for {key!r}.")
        try:
            flops = as_number(got.flops, what=f"my_placements[{key!r}].flops", form="a count of floating-point operations above 0, "
                                                                    "such as 2e9", above=0)
            moved = as_number(got.bytes, what=f"my_placements[{key!r}].bytes", form="a count of bytes moved above 0, such as 6e6",
                              above=0)
            bound = as_choice(got.bound, ("memory", "compute"), what=f"my_placements[{key!r}].bound", noun="a roof")
        except WrongForm as e:
            return failed(name, ref, str(e))
        for what, g, w in (("FLOPs", flops, want.flops), ("bytes", moved, want.bytes)):
            if not (g > 0) or abs(g / w - 1) > 0.01:
                hint = _ratio_hint(g, w, what) if g > 0 else None
                return failed(name, ref, f"{key}: your {what} value ({g:.4g}) " + (hint or "is off. "
                                         + ("An add does one FLOP per element; " if key == "add" else
                                            "An n×n @ n×n product does n³ multiply-adds; ")
                                         + "bytes are every input read and every output written once, 2 per bf16 element."))
        if bound != want.bound:
            ai = want.flops / want.bytes
            return failed(name, ref, f"{key}: at {ai:.3g} FLOP/byte it is {want.bound}-bound on this device, whose "
                                     f"ridge is at {ridge_intensity(ceil):.0f} FLOP/byte (peak ÷ bandwidth).")
    msg = "; ".join(f"{k}: {ref[k].flops / ref[k].bytes:.3g} FLOP/byte, {ref[k].bound}-bound, at most "
                    f"{attainable_tflops(ref[k].flops / ref[k].bytes, ceil):,.3g} TFLOP/s here" for k in ref)
    return CheckResult(name, "passed", f"Both placed right. {msg}.", answers)


# -- the prediction, written before the profile -------------------------------------------------------------------

_CONV = predictions.Question("convolution_share_pct", "the share of the step's kernel time spent in convolutions", "%",
                             60.0)


def predict(*, convolution_share_pct: Any = None) -> Prediction:
    """Your prediction, made before the profile: ``my_prediction = checks.predict(convolution_share_pct=60)``."""
    return Prediction({"convolution_share_pct": convolution_share_pct})


def check_prediction(prediction: Any, by_kind, *, started: predictions.MeasurementStart) -> CheckResult:
    """Your prediction beside the profile's share of the kernel time (the aten ops' on a CPU) by kind, as a
    ``Series`` of shares from 0 to 1 indexed by kind."""
    name = "03 · your prediction"
    share = 100 * float(by_kind.get("convolution", 0.0))
    rest = [f"{kind} {100 * float(v):.0f}%" for kind, v in by_kind.items() if kind != "convolution"][:3]
    note = ("The rest went to " + ", ".join(rest) + ": ops that do little arithmetic per byte still read and write "
            "whole activations, and the roofline below shows what that costs." if rest else "")
    return predictions.check_prediction(name, prediction, {"convolution_share_pct": share}, started=started,
                                        cell="03-pred-2", questions=[_CONV], note=note)
