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
