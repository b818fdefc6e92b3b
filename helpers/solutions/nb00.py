"""Reference solutions for notebooks/00_setup."""

__all__ = ["ceiling_img_per_s"]


def ceiling_img_per_s(matmul_tflops: float, gflop_per_image: float) -> float:
    """The most images per second a device could train if it ran every FLOP at its matmul rate."""
    return matmul_tflops * 1e12 / (gflop_per_image * 1e9)
