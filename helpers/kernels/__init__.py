"""Kernel-level tools for 03_kernels: launches, compile modes, CUDA graphs, a Triton softmax, a CUDA extension,
attention.

    from helpers.kernels import attention, compile_modes, cuda_ext, graphs, launches, softmax

Each module stands alone (none imports another), so any one can be read by itself.
On a machine without a CUDA GPU, Triton kernels run through Triton's interpreter: ``helpers``
sets ``TRITON_INTERPRET=1`` before anything imports Triton, so they are checked for
correctness there (slowly), and timed only on a GPU. (The final challenge's fused ReLU and pool,
``relu_pool_triton``, runs as PyTorch's ops on a CPU unless ``HELPERS_TRITON_ON_CPU=1``: see its docstring.)
"""

from . import attention, compile_modes, cuda_ext, graphs, launches, softmax

__all__ = ["attention", "compile_modes", "cuda_ext", "graphs", "launches", "softmax"]
