"""The input pipeline's CUDA paths (nvJPEG, pinned copies, normalising after the copy); skipped without a GPU.

scripts/gpu_test.py runs this file on a GPU node before the notebooks.
"""

import dataclasses

import pytest
import torch

from helpers import data, loaders, train
from helpers.loaders import LoaderSpec

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (runs in the GPU test run)")


def test_nvjpeg_batches_match_the_pil_decode(tmp_path):
    root = data.ensure_jpeg_folder(64, root=tmp_path)
    ordered = torch.utils.data.DataLoader(data.JpegBytes(root), batch_size=16, collate_fn=data.collate_bytes,
                                          num_workers=2)
    packed, labels = next(iter(ordered))
    from torchvision.io import ImageReadMode, decode_jpeg

    on_gpu = torch.stack(decode_jpeg(packed.unpack(), mode=ImageReadMode.RGB, device="cuda"))
    assert on_gpu.is_cuda and on_gpu.dtype == torch.uint8
    via_gpu = data.gpu_resize_normalize(on_gpu, 48).cpu()
    via_pil = torch.stack([data.JpegFolder(root, transform=data.reference_transform(48))[i][0] for i in range(16)])
    # nvJPEG upsamples chroma differently from libjpeg: on these 32×32 images the two differ by about 0.05 on
    # average (in normalised units), while two different images differ by about 0.3.
    assert (via_gpu - via_pil).abs().mean() < 0.1
    # and every decoded image is nearest to its own file: the packed bytes were split in the right places
    dist = (via_gpu[:, None] - via_pil[None]).abs().flatten(2).mean(-1)
    assert dist.argmin(1).tolist() == list(range(16))
    x, y = next(iter(data.GpuJpegLoader(root, batch_size=16, image_size=48, device="cuda", num_workers=2)))
    assert x.is_cuda and y.is_cuda and x.shape == (16, 3, 48, 48)


def test_uint8_from_pinned_workers_normalised_on_the_gpu_trains_like_the_reference():
    cfg = train.TrainConfig(batch_size=16, steps=4, warmup_steps=1, image_size=32, dataset_size=128)
    ref = train.train(cfg, device="cuda")
    fast = train.train(dataclasses.replace(cfg, num_workers=2, pin_memory=True, non_blocking=True,
                                           normalize_on_device=True), device="cuda")
    # The same batches in the same order (the loader's generator is seeded), so the same losses up to
    # float rounding and cuDNN's choice of algorithms.
    assert fast.losses == pytest.approx(ref.losses, rel=1e-3, abs=1e-4)


def test_loader_timing_and_step_ceiling_on_the_gpu():
    images, labels = data.synthetic_images(512)
    ds = data.InMemoryImages(images, labels, transform=data.resize_transform(64))
    assert loaders.loader_img_per_s(ds, LoaderSpec(32, 2, True), batches=6, device="cuda") > 0
    for kw in ({"pinned": False}, {"pinned": True, "non_blocking": True}, {"pinned": True, "pin_each_copy": True}):
        gbs, host_ms = loaders.host_to_device_gb_per_s(torch.randn(8, 3, 64, 64), device="cuda", **kw)
        assert gbs > 0 and host_ms >= 0
    cfg = train.TrainConfig(batch_size=32, image_size=64, cudnn_benchmark=True, channels_last=True)
    assert train.compute_only_img_per_s(cfg, device="cuda", warmup=2, repeats=3) > 0


def test_the_loop_exercise_on_a_gpu_reference_passes_classic_refused_and_the_finder_sees_cuda_syncs():
    from helpers import syncs
    from helpers.exercises import nb02

    assert nb02.check_loop_without_syncs(nb02.train_loop, device="cuda", seed=0).passed
    assert nb02.check_loop_from_bytes(nb02.train_loop, device="cuda", seed=0).passed
    res = nb02.check_loop_without_syncs(nb02.bytes_loop_with_syncs, device="cuda", seed=1)
    assert res.status == "failed" and "12 times in 4 steps" in res.message and res.message.count(
        "torch.cuda.synchronize() × 4 at nb02.py:") == 2 and "item() × 4" in res.message, res.message
    x = torch.ones(4, device="cuda")
    with syncs.SyncFinder() as found:
        (x * 2).sum().item()
        x.cpu()
        torch.cuda.synchronize()
    assert [s.what for s in found.syncs] == ["item()", ".cpu()", "torch.cuda.synchronize()"]
    assert found.cuda_warnings >= 2  # PyTorch's own finder saw the item() and the copy to the host
    lines = {s.line for s in found.cuda_syncs}  # each on its own line: the item() and the copy to the host
    assert {found.syncs[0].line, found.syncs[1].line} <= lines, (found.syncs, found.cuda_syncs)
    assert "PyTorch's finder" in found.table().columns
    assert torch.cuda.get_sync_debug_mode() == 0 and torch.cuda.synchronize.__module__ == "torch.cuda"  # put back

