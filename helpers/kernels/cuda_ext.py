"""A custom CUDA kernel built from a notebook cell with ``torch.utils.cpp_extension.load_inline``:
ReLU and 2×2 max-pool fused into one pass (the reference CNN runs them as two kernels).

    ok, why = available()            # a CUDA GPU, nvcc and ninja are needed to build it
    ext = build()                    # compiles once (tens of seconds), then loads from the cache
    y = ext.module.relu_maxpool2x2(x)      # x: (N, C, H, W) contiguous, float32, bfloat16 or float16, even H and W

``max(0, max of four) == max of four (max(0, each))``: applying ReLU after the pool gives the
same result as before it, reads each input once, and writes a quarter as much.
"""

from __future__ import annotations

import dataclasses
import shutil
import time

import torch

__all__ = ["CUDA_SOURCE", "CPP_SOURCE", "available", "build", "reference", "BuildInfo"]

CUDA_SOURCE = r"""
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// PyTorch builds extensions with __CUDA_NO_BFLOAT16_CONVERSIONS__ and __CUDA_NO_HALF_CONVERSIONS__: convert explicitly.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half(v); }

template <typename T>
__global__ void relu_maxpool2x2_kernel(const T* __restrict__ x, T* __restrict__ y,
                                       long planes, int h, int w) {
    const int oh = h / 2, ow = w / 2;
    const long total = planes * oh * ow;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
        const long plane = i / (oh * ow);            // which (image, channel)
        const int r = (i / ow) % oh, c = i % ow;     // which output pixel
        const T* p = x + plane * h * w + (2 * r) * w + 2 * c;
        float m = fmaxf(fmaxf(to_float(p[0]), to_float(p[1])), fmaxf(to_float(p[w]), to_float(p[w + 1])));
        y[i] = from_float<T>(fmaxf(m, 0.0f));        // ReLU after the max: same result, one pass
    }
}

torch::Tensor relu_maxpool2x2(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "relu_maxpool2x2: x must be on a CUDA GPU");
    TORCH_CHECK(x.dim() == 4 && x.is_contiguous(), "relu_maxpool2x2: x must be a contiguous (N, C, H, W) tensor");
    TORCH_CHECK(x.size(2) % 2 == 0 && x.size(3) % 2 == 0, "relu_maxpool2x2: H and W must be even");
    auto y = torch::empty({x.size(0), x.size(1), x.size(2) / 2, x.size(3) / 2}, x.options());
    const long planes = x.size(0) * x.size(1);
    const long total = y.numel();
    const int threads = 256;
    const int blocks = (int)std::min<long>((total + threads - 1) / threads, 65535L * 8);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (x.scalar_type() == torch::kFloat) {
        relu_maxpool2x2_kernel<float><<<blocks, threads, 0, stream>>>(
            x.data_ptr<float>(), y.data_ptr<float>(), planes, x.size(2), x.size(3));
    } else if (x.scalar_type() == torch::kBFloat16) {
        relu_maxpool2x2_kernel<__nv_bfloat16><<<blocks, threads, 0, stream>>>(
            reinterpret_cast<const __nv_bfloat16*>(x.data_ptr()), reinterpret_cast<__nv_bfloat16*>(y.data_ptr()),
            planes, x.size(2), x.size(3));
    } else if (x.scalar_type() == torch::kHalf) {  // a GPU without bf16 (a T4) runs the course in fp16
        relu_maxpool2x2_kernel<__half><<<blocks, threads, 0, stream>>>(
            reinterpret_cast<const __half*>(x.data_ptr()), reinterpret_cast<__half*>(y.data_ptr()),
            planes, x.size(2), x.size(3));
    } else {
        TORCH_CHECK(false, "relu_maxpool2x2: float32, bfloat16 or float16 only");
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
CUDA_SOURCE = "#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAException.h>\n" + CUDA_SOURCE
CPP_SOURCE = "torch::Tensor relu_maxpool2x2(torch::Tensor x);"


def available() -> tuple[bool, str]:
    """(True, "") where the kernel can be built and run; else (False, one line saying what is missing)."""
    from torch.utils import cpp_extension

    if not torch.cuda.is_available():
        return False, "no CUDA GPU here: the custom CUDA kernel is built and timed on a GPU node."
    if cpp_extension.CUDA_HOME is None and shutil.which("nvcc") is None:
        return False, "no CUDA compiler (nvcc) found: install the CUDA toolkit or set CUDA_HOME to build the kernel."
    if not cpp_extension.is_ninja_available():
        return False, "ninja is not installed: `pip install ninja` (torch.utils.cpp_extension builds with it)."
    return True, ""


@dataclasses.dataclass(frozen=True)
class BuildInfo:
    """The loaded extension (``module.relu_maxpool2x2``) and how long building or loading it took."""

    module: object = dataclasses.field(repr=False)
    seconds: float


def build(*, verbose: bool = False) -> BuildInfo:
    """Compile (first time, tens of seconds) or load (cached in ``TORCH_EXTENSIONS_DIR``) the extension."""
    ok, why = available()
    if not ok:
        raise RuntimeError(why)
    from torch.utils.cpp_extension import load_inline

    t0 = time.perf_counter()
    module = load_inline(name="gpu_perf_lab_relu_maxpool", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                         functions=["relu_maxpool2x2"], extra_cuda_cflags=["-O3"], verbose=verbose)
    return BuildInfo(module, time.perf_counter() - t0)


def reference(x: torch.Tensor) -> torch.Tensor:
    """The same computation as two PyTorch ops: ReLU, then a 2×2 max-pool."""
    return torch.nn.functional.max_pool2d(torch.relu(x), 2)
