#!/usr/bin/env python3
"""Does a learner-machine profile's SM limit hold on every route a kernel can take? Figures: ``route_*_tflops``.

A green context limits only the streams that belong to it. Kernels reach the GPU on the current stream (eager and
compiled code), on side streams (warm-ups before a CUDA-graph capture, NCCL), in CUDA graphs replayed (captured on
``torch.cuda.graph``'s capture stream) and in torch.compile's graph trees (mode ``reduce-overhead``, captured on a
side stream of their own). This probe times the same fp16 matmul on each, and says which stream belongs to a green
context::

    python3 scripts/probes/profile_routes.py                    # this GPU as it is
    HELPERS_PROFILE=t4 python3 scripts/probes/profile_routes.py  # under the t4 profile: every route near 8 SMs' rate

It prints one JSON object (``--out FILE`` writes it too). tests/test_machine_profiles_gpu.py runs it both ways
and asserts that the profile cuts every route.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4096, help="the matmul's size (n×n @ n×n, fp16)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)

    import torch

    from helpers import bench, env, machine_profiles

    if not torch.cuda.is_available():
        print("error: no CUDA GPU is visible; this probe measures one.", file=sys.stderr)
        return 2
    dev = env.device()  # applies the profile in force, before any kernel runs
    n = args.n
    a = torch.randn(n, n, device=dev, dtype=torch.float16)
    b = torch.randn(n, n, device=dev, dtype=torch.float16)

    def tflops(fn) -> float:
        return 2 * n**3 / (bench.time_it(fn, warmup=3, repeats=20, device=dev).median_ms * 1e-3) / 1e12

    out: dict = {"device": env.device_label(), "torch": torch.__version__, "n": n, "date": env.today()}
    out["route_current_tflops"] = tflops(lambda: a @ b)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out["route_side_stream_tflops"] = tflops(lambda: a @ b)
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture: cuBLAS sets itself up
        a @ b
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        a @ b
    out["route_cuda_graph_tflops"] = tflops(graph.replay)

    compiled = torch.compile(lambda x, y: x @ y, mode="reduce-overhead")
    for _ in range(3):  # record, then replay
        compiled(a, b)
    out["route_compiled_graph_tree_tflops"] = tflops(lambda: compiled(a, b))

    green = machine_profiles.stream_is_green  # which streams belong to a green context (None: the driver cannot say)
    out["green"] = {"current": green(torch.cuda.current_stream().cuda_stream),
                    "side": green(torch.cuda.Stream().cuda_stream),
                    "graph_capture": green(torch.cuda.graph.default_capture_stream.cuda_stream)
                    if torch.cuda.graph.default_capture_stream is not None else None}
    applied = machine_profiles.applied()
    out["profile"] = applied.lines() if applied is not None else None
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
