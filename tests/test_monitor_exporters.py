import socket
import time
import urllib.request

import pytest

from helpers.monitor import Monitor


def test_prometheus_endpoint_serves_the_latest_sample(fake_nvml):
    mon = Monitor(backend=fake_nvml(util=(77,)), handles=["h"], live=False, period_s=0.02)
    url = mon.serve_prometheus(port=0)
    assert url.startswith("http://127.0.0.1:")
    try:
        with mon:
            mon.step(images=16, step_ms=0.01)  # an asynchronous step: its host time says 1.6 million img/s
            time.sleep(0.1)
            mon.step(images=16, step_ms=0.01)
            time.sleep(0.05)
        body = urllib.request.urlopen(url, timeout=5).read().decode()
    finally:
        mon.close()
    assert 'gpu_utilization_percent{gpu="0"} 77.0' in body
    assert "train_images_total 32.0" in body
    # images over wall time, as the monitor's plot draws them: 16 images in about 0.1 s, not 16 in 10 µs
    ips = float(next(line.split()[1] for line in body.splitlines() if line.startswith("train_images_per_second ")))
    assert 50 < ips < 170


def test_port_in_use_is_a_clear_error(fake_nvml):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        mon = Monitor(backend=fake_nvml(), handles=["h"], live=False)
        with pytest.raises(RuntimeError, match=f"port {port} .* already in use.*port=0"):
            mon.serve_prometheus(port=port)


def test_bad_port():
    mon = Monitor(live=False)
    with pytest.raises(ValueError, match="port"):
        mon.serve_prometheus(port=70000)


def test_tensorboard_scalars(fake_nvml, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with Monitor(backend=fake_nvml(util=(33,)), handles=["h"], live=False, period_s=0.02) as mon:
        mon.step(images=8, step_ms=4.0)
        time.sleep(0.06)
        mon.step(images=8, step_ms=4.0)
    out = mon.write_tensorboard(tmp_path / "tb")
    acc = EventAccumulator(str(out))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "gpu0/gpu_utilization_percent" in tags and "train/images_per_second" in tags
    assert acc.Scalars("gpu0/gpu_utilization_percent")[0].value == pytest.approx(33.0)
    (ips,) = acc.Scalars("train/images_per_second")  # 8 images over the 60 ms between the steps, not 8 over 4 ms
    assert 40 < ips.value < 140


def test_a_scrape_is_read_back_as_prometheus_parses_it_with_the_host_cpu_beside_the_gpu(fake_nvml):
    from helpers.monitor.exporters import read_metrics

    mon = Monitor(backend=fake_nvml(util=(61,)), handles=["h"], live=False, period_s=0.02)
    url = mon.serve_prometheus(port=0)
    try:
        with mon:
            mon.step(images=16, step_ms=1.0)
            time.sleep(0.08)
            mon.step(images=16, step_ms=1.0)
        metrics = {(m.name, m.labels): m for m in read_metrics(url)}
    finally:
        mon.close()
    util = metrics[("gpu_utilization_percent", (("gpu", "0"),))]
    assert util.value == 61.0 and "NVML" in util.help
    assert metrics[("train_images_total", ())].value == 32.0
    cpu = metrics[("host_cpu_percent", (("gpu", "0"),))]  # the host's CPU on a GPU run, beside the GPU's figures
    assert 0.0 <= cpu.value <= 100.0 and str(util) == 'gpu_utilization_percent{gpu="0"} 61'


def test_reading_an_endpoint_nobody_serves_says_how_to_start_one():
    from helpers.monitor.exporters import read_metrics

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: nothing answers
        with pytest.raises(RuntimeError, match=r"nothing answered at .*serve_prometheus\(\)"):
            read_metrics(f"http://127.0.0.1:{port}/metrics", timeout_s=0.5)


def test_a_training_runs_own_scalars_reach_tensorboard_and_read_back_at_their_steps(tmp_path):
    from helpers.monitor.exporters import TensorBoardLog, read_scalars
    from helpers.train import TrainConfig, Trainer

    cfg = TrainConfig(batch_size=8, steps=6, warmup_steps=2, data="gpu", image_size=16, dataset_size=64)
    log = TensorBoardLog(tmp_path / "train")
    result = Trainer(cfg).run(on_step=log.on_step)
    log.finish(result)
    scalars = read_scalars(tmp_path / "train")
    steps = [s for s, _ in scalars["train/step_ms"]]
    assert len(steps) == len(result.losses) == 6 and steps == sorted(steps)
    assert [s for s, _ in scalars["train/loss"]] == steps  # each loss at the step that computed it
    assert [v for _, v in scalars["train/loss"]] == pytest.approx(list(result.losses), rel=1e-6)


def test_tensorboard_gets_the_host_cpu_once_under_host_on_a_gpu_run(fake_nvml, tmp_path):
    from helpers.monitor.exporters import read_scalars

    with Monitor(backend=fake_nvml(util=(33, 44)), handles=["a", "b"], devices=[0, 1], live=False,
                 period_s=0.02) as mon:
        time.sleep(0.08)
    scalars = read_scalars(mon.write_tensorboard(tmp_path / "tb"))
    assert "host/host_cpu_percent" in scalars and not any(t.startswith("gpu") and "host_cpu" in t for t in scalars)
    samples_per_gpu = len(scalars["gpu0/gpu_utilization_percent"])
    assert len(scalars["host/host_cpu_percent"]) == samples_per_gpu  # once per sample, not once per GPU
    assert mon.summary().mean_host_cpu_pct is not None and "host CPU" in str(mon.summary())
