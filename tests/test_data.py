import numpy as np
import pytest
import torch

from helpers import data


def test_synthetic_images_are_deterministic_uint8():
    a, la = data.synthetic_images(100, seed=1)
    b, lb = data.synthetic_images(100, seed=1)
    c, _ = data.synthetic_images(100, seed=2)
    assert a.shape == (100, 32, 32, 3) and a.dtype == np.uint8 and la.dtype == np.int64
    assert np.array_equal(a, b) and np.array_equal(la, lb)
    assert not np.array_equal(a, c)
    assert set(np.unique(la)) <= set(range(10))


def test_synthetic_images_are_learnable():
    # A nearest-class-mean classifier fitted on one half must do far better than chance (10%) on the
    # other: the set carries signal, so a falling loss in the notebooks means real learning. It must
    # not be perfect either: 10% of the labels are redrawn at random.
    x, y = data.synthetic_images(2000, seed=0)
    x = x.reshape(len(x), -1).astype(np.float32)
    means = np.stack([x[:1000][y[:1000] == c].mean(0) for c in range(10)])
    pred = np.argmin(((x[1000:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert 0.5 < (pred == y[1000:]).mean() < 0.92


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="n > 0"):
        data.synthetic_images(0)


def test_in_memory_dataset_applies_the_reference_transform():
    x, y = data.synthetic_images(8)
    ds = data.InMemoryImages(x, y, transform=data.reference_transform(64))
    img, label = ds[3]
    assert img.shape == (3, 64, 64) and img.dtype == torch.float32
    assert -1.0 <= img.min() and img.max() <= 1.0
    assert label == y[3]
    raw, _ = data.InMemoryImages(x, y)[3]
    assert raw.shape == (3, 32, 32) and raw.dtype == torch.uint8


def test_in_memory_dataset_checks_its_input():
    x, y = data.synthetic_images(8)
    with pytest.raises(ValueError, match="uint8"):
        data.InMemoryImages(x.astype(np.float32), y)
    with pytest.raises(ValueError, match="labels"):
        data.InMemoryImages(x, y[:3])


def test_gpu_resize_matches_the_pil_transform():
    # The batched tensor version must compute what the per-item PIL version computes
    # (PIL rounds to uint8 after resizing: one step of 2/255 in normalised units).
    x, y = data.synthetic_images(16, seed=4)
    ds = data.InMemoryImages(x, y, transform=data.reference_transform(96))
    ref = torch.stack([ds[i][0] for i in range(16)])
    got = data.gpu_resize_normalize(torch.from_numpy(x).permute(0, 3, 1, 2), 96)
    assert got.shape == ref.shape
    assert (got - ref).abs().max() <= 2 / 255 + 1e-6


def test_resize_then_normalize_on_device_equals_the_reference_transform():
    # Workers hand over uint8 and the device normalises: the same numbers as ToTensor + Normalize per item.
    x, y = data.synthetic_images(8, seed=5)
    ref = torch.stack([data.InMemoryImages(x, y, transform=data.reference_transform(48))[i][0] for i in range(8)])
    u8 = torch.stack([data.InMemoryImages(x, y, transform=data.resize_transform(48))[i][0] for i in range(8)])
    assert u8.dtype == torch.uint8 and u8.shape == ref.shape
    assert torch.allclose(data.normalize_u8(u8), ref, atol=1e-6)
    with pytest.raises(ValueError, match="uint8"):
        data.normalize_u8(ref)


def test_jpeg_folder_round_trip(tmp_path):
    root = data.ensure_jpeg_folder(40, root=tmp_path)
    assert (root / "done.json").exists()
    files = list(root.glob("*/*.jpg"))
    assert len(files) == 40
    ds = data.JpegFolder(root, transform=data.reference_transform(32))
    img, label = ds[0]
    assert img.shape == (3, 32, 32) and 0 <= label < 10
    mtime = (root / "done.json").stat().st_mtime_ns
    assert data.ensure_jpeg_folder(40, root=tmp_path) == root  # second call reuses the set
    assert (root / "done.json").stat().st_mtime_ns == mtime


def test_interrupted_jpeg_folder_is_not_taken_as_complete(tmp_path):
    root = data.ensure_jpeg_folder(20, root=tmp_path)
    (root / "done.json").unlink()  # as if interrupted before the marker
    again = data.ensure_jpeg_folder(20, root=tmp_path)
    assert (again / "done.json").exists() and len(list(again.glob("*/*.jpg"))) == 20


def test_missing_dataset_folder_says_how_to_generate_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="ensure_jpeg_folder"):
        data.JpegFolder(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="ensure_jpeg_folder"):
        data.JpegFolder(tmp_path / "empty")


def test_gpu_resident_loader_yields_full_shuffled_batches():
    x, y = data.synthetic_images(50, seed=0)
    loader = data.GpuResidentLoader(x, y, batch_size=16, image_size=32, device="cpu")
    batches = list(loader)
    assert len(batches) == len(loader) == 3
    xb, yb = batches[0]
    assert xb.shape == (16, 3, 32, 32) and yb.shape == (16,)
    first = torch.cat([b[1] for b in batches])
    second = torch.cat([b[1] for b in loader])
    assert not torch.equal(first, second) or len(set(y.tolist())) == 1  # a new order each epoch


def test_gpu_resident_loader_refuses_bad_batch_sizes():
    x, y = data.synthetic_images(10)
    with pytest.raises(ValueError, match="batch_size"):
        data.GpuResidentLoader(x, y, batch_size=0, image_size=32, device="cpu")
    with pytest.raises(ValueError, match="larger than the dataset"):
        data.GpuResidentLoader(x, y, batch_size=11, image_size=32, device="cpu")


def test_cifar10_without_network_gives_a_clear_message(tmp_path):
    with pytest.raises(RuntimeError, match="synthetic"):
        data.cifar10(tmp_path, download=False)


def test_the_loops_data_phase_is_placed_against_the_two_rates_timed_alone():
    """01 read "feeds about 1,404 img/s … inside the loop its data phase made 692 img/s", and its prose called a 2×
    gap host drift "by tens of percent", where 692 is the one-thread rate the cell had also timed (708)."""
    from helpers.data import loop_against_alone

    assert loop_against_alone(692, 1404, 708, 16).startswith("about the one-thread rate")
    assert loop_against_alone(1350, 1404, 708, 16) == "about the rate timed alone with 16 threads"
    assert loop_against_alone(1000, 1404, 708, 16).startswith("between the two rates timed alone")
    assert loop_against_alone(500, 1404, 708, 16).startswith("below both rates timed alone")
    assert loop_against_alone(1800, 1404, 708, 16).startswith("above both rates timed alone")
    assert loop_against_alone(1000, 1040, 990, 2).startswith("about both rates timed alone")
    # the H100's earlier reading, 1,094 in the loop against 851 alone (and the one-thread rate below it)
    assert loop_against_alone(1094, 851, 700, 16).startswith("above both")
