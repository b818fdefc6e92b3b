import warnings

import pandas as pd

import pytest
import torch

from helpers import data, env, loaders, results
from helpers.loaders import LoaderSpec


@pytest.fixture(scope="module")
def dataset():
    x, y = data.synthetic_images(256)
    return data.InMemoryImages(x, y, transform=data.reference_transform(32))


def test_spec_validation_and_label():
    with pytest.raises(ValueError, match="batch_size"):
        LoaderSpec(batch_size=0)
    with pytest.raises(ValueError, match="num_workers"):
        LoaderSpec(num_workers=-1)
    with pytest.raises(ValueError, match="num_workers ≥ 1"):
        LoaderSpec(persistent_workers=True)
    assert LoaderSpec(64, 4, True, True, 4).label() == "batch 64, 4 workers, pinned, persistent, prefetch 4"


def test_loader_throughput_counts_images_over_time(dataset):
    ips = loaders.loader_img_per_s(dataset, LoaderSpec(16, 0), batches=5, device="cpu")
    assert ips > 0
    with pytest.raises(ValueError, match="larger dataset"):
        loaders.loader_img_per_s(dataset, LoaderSpec(128, 0), batches=5, device="cpu")


def test_grid_best_and_heatmap(dataset):
    df = loaders.grid(dataset, batch_sizes=[8, 16], workers=[0, 1], pins=[False, True], batches=3, device="cpu",
                      progress=False)
    assert len(df) == 8 and set(df.columns) == {"batch_size", "num_workers", "pin_memory", "img_per_s"}
    fake = df.assign(img_per_s=range(8))  # the best is the last row: batch 16, 1 worker, pinned
    assert loaders.best_spec(fake) == LoaderSpec(16, 1, True)
    fig = loaders.heatmap(fake)
    assert [t.type for t in fig.data].count("heatmap") == 2
    pinned = [t for t in fig.data if t.type == "heatmap"][1]
    assert pinned.text[1][1].startswith("★ ") and "★" not in "".join(sum(map(list, pinned.text[:1]), []))
    (outline,) = fig.layout.shapes  # around the best cell (batch 16 is row 1, 1 worker column 1), its value kept
    assert (outline.x0, outline.x1, outline.y0, outline.y1, outline.xref) == (0.5, 1.5, 0.5, 1.5, "x2")
    # the colour bar is named and writes thousands as the cells do (02's read "3000" beside cells of "3,951")
    assert pinned.colorbar.title.text == "img/s" and pinned.colorbar.tickformat == ","


def test_worker_sweep_goes_one_step_past_the_cores(dataset, monkeypatch):
    monkeypatch.setattr(env, "usable_cpus", lambda: 2)
    df = loaders.worker_sweep(dataset, batch_size=8, batches=2)
    assert list(df.num_workers) == [0, 1, 2, 3]
    assert list(df.beyond_cores) == [False, False, False, True]
    assert set(df.source) == {"measured"}


def test_worker_sweep_reuses_what_the_grid_measured(dataset, monkeypatch):
    import pandas as pd

    monkeypatch.setattr(env, "usable_cpus", lambda: 2)
    measured = []
    real = loaders.loader_img_per_s
    monkeypatch.setattr(loaders, "loader_img_per_s", lambda ds, spec, **kw: measured.append(spec.num_workers) or real(ds, spec, **kw))
    grid = pd.DataFrame([
        {"batch_size": 8, "num_workers": 0, "pin_memory": True, "img_per_s": 111.0},
        {"batch_size": 8, "num_workers": 2, "pin_memory": True, "img_per_s": 222.0},
        {"batch_size": 8, "num_workers": 1, "pin_memory": False, "img_per_s": 999.0},  # other pinning: not reused
        {"batch_size": 16, "num_workers": 1, "pin_memory": True, "img_per_s": 999.0},  # other batch: not reused
    ])
    df = loaders.worker_sweep(dataset, batch_size=8, batches=2, pin_memory=True, known=grid)
    assert measured == [1, 3]  # no measurement taken twice
    assert list(df.source) == ["grid", "measured", "grid", "measured"]
    assert list(df.img_per_s)[0] == 111.0 and list(df.img_per_s)[2] == 222.0
    # a worker count the grid measured that the sweep would not have chosen (all cores but one, 15 of 16 on an H100
    # node, the grid's best cell) is in the sweep too, from the grid
    grid.loc[len(grid)] = {"batch_size": 8, "num_workers": 5, "pin_memory": True, "img_per_s": 555.0}
    measured.clear()
    df = loaders.worker_sweep(dataset, batch_size=8, batches=2, pin_memory=True, known=grid)
    assert list(df.num_workers) == [0, 1, 2, 3, 5] and measured == [1, 3]
    assert df.set_index("num_workers").loc[5, "source"] == "grid" and bool(df.set_index("num_workers").loc[5, "beyond_cores"])


def test_too_many_workers_warns_with_the_measured_alternative(monkeypatch):
    monkeypatch.setattr(env, "usable_cpus", lambda: 4)
    with pytest.warns(UserWarning, match=r"num_workers=8 exceeds the 4 cores.*num_workers ≤ 4"):
        loaders.check_workers(8)
    results.record({"loader_best_workers": 3})
    with pytest.warns(UserWarning, match=r"measured the most img/s within this machine's \d+ usable cores with num_workers=3"):
        loaders.check_workers(8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaders.check_workers(4)  # at the limit: no warning


def test_too_many_workers_names_only_a_figure_this_host_measured(monkeypatch):
    """A results file of the same GPU can come from another host (16 cores) or from this one before a profile
    limited its cores: its best worker count is not this machine's, and the warning does not claim it is."""
    monkeypatch.setattr(env, "usable_cpus", lambda: 2)
    path = results.record({"loader_best_workers": 16})  # more than this host's cores: not measured here
    with pytest.warns(UserWarning) as caught:
        loaders.check_workers(8)
    assert "use num_workers ≤ 2" in str(caught[0].message) and "measured the most" not in str(caught[0].message)
    results.record({"loader_best_workers": 2}, header={"host_cpu": "Another CPU (16 usable cores)"})
    assert results.load(path)["host_cpu"] == "Another CPU (16 usable cores)"
    with pytest.warns(UserWarning) as caught:
        loaders.check_workers(8)
    assert "measured the most" not in str(caught[0].message)  # another host's figure, though it would fit
    results.record({"loader_best_workers": 2})  # this host again
    with pytest.warns(UserWarning, match="measured the most img/s within this machine's 2 usable cores with num_workers=2"):
        loaders.check_workers(8)


def test_training_with_too_many_workers_warns(monkeypatch):
    from helpers import train

    monkeypatch.setattr(env, "usable_cpus", lambda: 1)
    cfg = train.TrainConfig(batch_size=8, steps=2, warmup_steps=0, image_size=16, dataset_size=64, num_workers=2)
    with pytest.warns(UserWarning, match="exceeds the 1 cores"):
        train.train(cfg)


def test_copy_bandwidth_on_a_cpu():
    for kw in ({"pinned": False}, {"pinned": True, "non_blocking": True}, {"pinned": True, "pin_each_copy": True}):
        gbs, host_ms = loaders.host_to_device_gb_per_s(torch.randn(4, 3, 32, 32), device="cpu", **kw)
        assert gbs > 0 and host_ms >= 0


def test_gpu_jpeg_loader_matches_the_cpu_decode(tmp_path):
    root = data.ensure_jpeg_folder(64, root=tmp_path)
    gpu = data.GpuJpegLoader(root, batch_size=16, image_size=32, device="cpu", num_workers=1)
    x, y = next(iter(gpu))
    assert x.shape == (16, 3, 32, 32) and y.shape == (16,) and x.dtype == torch.float32
    # no shuffling: decode the same files both ways and compare
    ordered = torch.utils.data.DataLoader(data.JpegBytes(root), batch_size=8, collate_fn=data.collate_bytes)
    packed, labels = next(iter(ordered))
    from torchvision.io import decode_jpeg

    encoded = packed.unpack()
    assert len(packed) == 8 and [e.numel() for e in encoded] == [f.stat().st_size for f in data.JpegFolder(root).files[:8]]
    via_batch = data.gpu_resize_normalize(torch.stack(decode_jpeg(encoded)), 32)
    via_pil = torch.stack([data.JpegFolder(root, transform=data.reference_transform(32))[i][0] for i in range(8)])
    assert (via_batch - via_pil).abs().mean() < 0.02  # two JPEG decoders: close, not bit-identical
    assert labels.tolist() == [data.JpegFolder(root)[i][1] for i in range(8)]


def test_jpeg_bytes_on_a_missing_folder_says_how_to_generate(tmp_path):
    with pytest.raises(FileNotFoundError, match="ensure_jpeg_folder"):
        data.JpegBytes(tmp_path / "missing")


def test_worker_backlog_is_drained_before_timing(dataset, monkeypatch):
    # 4 workers prefetch 2 batches each up front: timing starts after those 8 (and 2 more), and spans two rounds
    # of the backlog (16 batches) where the dataset holds them, else one round at least (8)
    timed = []
    monkeypatch.setattr(loaders, "stream_img_per_s", lambda it, *, warmup, batches, device: timed.append((warmup, batches)) or 1.0)
    loaders.loader_img_per_s(dataset, LoaderSpec(8, 4), batches=5, device="cpu")  # 32 batches held
    loaders.loader_img_per_s(torch.utils.data.Subset(dataset, range(200)), LoaderSpec(8, 4), batches=5, device="cpu")
    assert timed == [(10, 16), (10, 15)]
    with pytest.raises(ValueError, match="18 batches of 8"):  # 15 held: not even the warm-up and one round
        loaders.loader_img_per_s(torch.utils.data.Subset(dataset, range(120)), LoaderSpec(8, 4), batches=5, device="cpu")
    assert loaders.measurement_batches(LoaderSpec(256, 48), batches=10) == (98, 96, 192)


def test_worker_sweep_leaves_out_and_says_counts_the_dataset_cannot_time(dataset, monkeypatch):
    # 64 images at batch 8 hold 8 batches: 1 worker needs 4 + 2, 2 workers 6 + 4, so 2 and 3 are left out
    monkeypatch.setattr(env, "usable_cpus", lambda: 2)
    monkeypatch.setattr(loaders, "loader_img_per_s", lambda ds, spec, **kw: 100.0 * (1 + spec.num_workers))
    df = loaders.worker_sweep(torch.utils.data.Subset(dataset, range(64)), batch_size=8, batches=2)
    assert list(df.num_workers) == [0, 1]
    assert df.attrs["unfit"] == {"workers": [2, 3], "images": 64, "batch_size": 8}
    said = loaders.worker_sweep_reading(df, cores=2)
    assert "2 and 3 workers were not measured" in said and "dataset's 64 images at batch 8" in said


def test_best_spec_can_be_restricted():
    df = pd.DataFrame([
        {"batch_size": 64, "num_workers": 16, "pin_memory": False, "img_per_s": 5000.0},
        {"batch_size": 256, "num_workers": 16, "pin_memory": True, "img_per_s": 4500.0},
        {"batch_size": 256, "num_workers": 8, "pin_memory": False, "img_per_s": 4000.0},
    ])
    assert loaders.best_spec(df) == LoaderSpec(64, 16, False)
    assert loaders.best_spec(df, batch_size=256) == LoaderSpec(256, 16, True)
    assert loaders.best_spec(df, batch_size=256, max_workers=15) == LoaderSpec(256, 8, False)
    assert loaders.best_spec(df, pin_memory=False) == LoaderSpec(64, 16, False)
    assert loaders.best_spec(df, batch_size=256, pin_memory=False) == LoaderSpec(256, 8, False)
    with pytest.raises(ValueError, match="no grid row"):
        loaders.best_spec(df, batch_size=32)


def test_the_worker_sweep_names_the_cores_above_the_data_and_the_first_gain_is_a_dash():
    """02: the "16 usable cores" label sat on the measured line; the gain column showed 0 for its first row."""
    import pandas as pd

    from helpers import figure_check

    sweep = pd.DataFrame({"num_workers": [0, 1, 2, 4, 8, 16, 24], "img_per_s": [300.0, 560, 1000, 1800, 2900, 3300, 3100],
                          "beyond_cores": [False] * 6 + [True], "source": ["measured"] * 7})
    fig = loaders.worker_sweep_figure(sweep, cores=16, batch_size=128)
    (label,) = fig.layout.annotations
    assert label.text == "16 usable cores" and label.yref == "paper" and label.y >= 1 and label.yanchor == "bottom"
    assert figure_check.problems(fig) == []
    # the cores' line under the points (02's export hid the 16-worker marker), the grid's points told apart
    assert fig.layout.shapes[0].layer == "below"
    mixed = sweep.assign(source=["grid", "measured", "measured", "grid", "measured", "measured", "measured"])
    marks = {t.name: list(t.x) for t in loaders.worker_sweep_figure(mixed, cores=16, batch_size=128).data
             if t.mode == "markers"}
    assert marks == {"measured by the sweep": [1, 2, 8, 16, 24], "from the grid above": [0, 4]}
    t = loaders.worker_sweep_table(sweep)
    gains = list(t.shown.iloc[:, -1])
    assert gains[0] == "—" and gains[1] != "—" and any("no row before it" in n for n in t.notes)



def test_the_worker_sweep_loader_gains_divide_the_img_per_s_as_the_table_shows_them():
    """02's gain column read 73.8 / 113.8 / 78.2 from the unrounded rates, beside 671, 1,165, 2,492 and 4,439 img/s,
    which give 73.6, 113.9 and 78.1: each gain is now the reader's own division of the two rows as shown."""
    sweep = _sweep({1: 670.6, 2: 1165.4, 4: 2491.6, 8: 4439.3}, 16)
    assert [round(g, 1) for g in sweep.img_per_s.pct_change()[1:] * 100] == [73.8, 113.8, 78.2]  # the case reported
    t = loaders.worker_sweep_table(sweep)
    rates = list(t.shown["img/s"])
    assert rates == ["671", "1,165", "2,492", "4,439"]
    gains = list(t.shown["gain over previous %"])
    assert gains == ["—", "73.6", "113.9", "78.1"]
    rate = [float(r.replace(",", "")) for r in rates]
    assert gains[1:] == [f"{100 * (b / a - 1):.1f}" for a, b in zip(rate, rate[1:])]  # the reader's arithmetic
    assert t.data["gain_over_previous_pct"].iloc[1] == pytest.approx(100 * (1165 / 671 - 1))  # data: from them too

def _sweep(rates: dict[int, float], cores: int):
    import pandas as pd

    return pd.DataFrame({"num_workers": list(rates), "img_per_s": list(rates.values()),
                         "beyond_cores": [w > cores for w in rates], "source": ["measured"] * len(rates)})


def test_the_worker_sweep_says_what_its_own_numbers_show_past_the_cores_and_for_one_worker():
    """02 said "past the cores, workers only take turns" beside a sweep whose fastest point was past them, and
    never said why one worker read less than none: the sentences now come from the rows."""
    gained = loaders.worker_sweep_reading(_sweep({0: 593, 1: 425, 8: 3000, 16: 3960, 24: 4082 * 1.05}, 16), cores=16)
    assert "24 workers read 4,286 img/s against 3,960" in gained and "8.2% more" in gained  # as the table rounds it
    assert "One worker reads 425 img/s, below no workers' 593" in gained
    lost = loaders.worker_sweep_reading(_sweep({0: 500, 1: 700, 2: 1200, 3: 900}, 2), cores=2)
    assert "25.0% less" in lost and "share them" in lost and "above no workers' 500" in lost
    same = loaders.worker_sweep_reading(_sweep({0: 500, 1: 510, 2: 1200, 3: 1210}, 2), cores=2)
    assert "about the same" in same and "about what no workers read" in same
    assert loaders.worker_sweep_reading(_sweep({2: 1200, 4: 1500}, 4), cores=4) == ""  # nothing past, no 0 and 1


def test_the_sweeps_gain_past_the_cores_is_the_tables_gain_of_the_rates_as_printed():
    """02 on one H200 read "24 workers read 4,892 img/s against 4,570 for 16 … 7.1% more" beside the table's gain
    column's 7.0: the sentence divided the unrounded rates (4,892.45 ÷ 4,569.6 is 1.0707), the table the printed
    ones (4,892 ÷ 4,570 is 1.0705)."""
    sweep = _sweep({0: 848, 1: 572, 16: 4569.6, 24: 4892.45}, 16)
    said = loaders.worker_sweep_reading(sweep, cores=16)
    table_gain = loaders.worker_sweep_table(sweep).shown["gain over previous %"].iloc[-1]
    assert table_gain == "7.0"
    assert "24 workers read 4,892 img/s against 4,570 for 16, the largest count within them: 7.0% more" in said


def test_a_fall_that_came_within_the_cores_is_not_blamed_on_them():
    """02 on one H200 (16 cores): "24 workers read 3,760 against 4,641 for the best within them (15 workers): 19.0%
    less. Past the cores the workers share them…", while 16 workers, within the cores, had already read 3,969."""
    sweep = _sweep({0: 996, 1: 458, 2: 883, 4: 1979, 8: 3092, 15: 4641, 16: 3969, 24: 3760}, 16)
    sweep.loc[sweep.num_workers.isin([0, 4, 15]), "source"] = "grid"
    said = loaders.worker_sweep_reading(sweep, cores=16)
    assert "24 workers read 3,760 img/s against 3,969 for 16, the largest count within them: 5.3% less" in said
    assert "came at 15 workers (4,641, read from the grid, timed apart from the sweep); 16 read 14.5% less" in said
    assert "sharing cores does not explain that fall" in said
    # where the fastest within the cores is the last count within them, no such sentence
    assert "does not explain" not in loaders.worker_sweep_reading(_sweep({0: 500, 8: 3000, 16: 3960, 24: 3000}, 16),
                                                                   cores=16)


def test_a_grid_cut_short_reads_pinning_as_not_measured_and_draws_its_one_batch_size():
    """02 with its time boxes shrunk: one batch size measured, the most workers only pageable. The pinning sentence
    said "+nan%", and the best cell's outline (category position 0) was read as sitting far from batch size 32."""
    import pandas as pd

    from helpers import figure_check
    from helpers.tables import not_a_number_figures

    cut = pd.DataFrame({"batch_size": [32] * 5, "num_workers": [0, 0, 4, 4, 15],
                        "pin_memory": [False, True, False, True, False],
                        "img_per_s": [1204.0, 1177.0, 2157.0, 2336.0, 4269.0]})
    said = loaders.pinning_reading(cut)
    assert not_a_number_figures(said) == [] and "-2% with 0 workers" in said
    assert "+8% with 4 workers" in said  # every worker count the grid measured, not only its two ends
    assert "not measured (the grid's time box cut it short) with 15 workers" in said
    assert "slower in 1 of the grid's 2 batch × workers cells measured both ways; most at batch 32 with 0 workers" in said
    assert figure_check.problems(loaders.heatmap(cut)) == []
    one_way = cut[~cut.pin_memory]
    assert "pinning: not measured" in loaders.pinning_reading(one_way)
    faster = cut.assign(img_per_s=[1000.0, 1100.0, 2000.0, 2300.0, 4000.0])
    assert "slower in 0 of" in loaders.pinning_reading(faster) and "most at" not in loaders.pinning_reading(faster)
