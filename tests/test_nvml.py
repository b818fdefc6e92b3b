import sys
import types

from helpers import nvml


def test_missing_package_is_said_once_without_traceback(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    assert nvml.load() is None
    assert nvml.load() is None
    assert nvml.driver_info() is None
    out = capsys.readouterr().out
    assert out.count("NVML unavailable") == 1 and "pip install nvidia-ml-py" in out


def test_wrong_binding_names_the_right_package(monkeypatch, capsys):
    old = types.ModuleType("pynvml")  # the unmaintained binding lacks UUID lookups
    old.nvmlInit = lambda: None
    monkeypatch.setitem(sys.modules, "pynvml", old)
    assert nvml.load() is None
    out = capsys.readouterr().out
    assert "nvidia-ml-py" in out and "uninstall" in out


def test_no_driver_is_explained(monkeypatch, capsys):
    mod = types.ModuleType("pynvml")
    mod.nvmlDeviceGetHandleByUUID = lambda u: None

    def fail():
        raise OSError("NVML Shared Library Not Found")

    mod.nvmlInit = fail
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    assert not nvml.available()
    nvml.load()
    assert "No NVIDIA driver" in capsys.readouterr().out


def test_driver_info_and_handles_with_a_fake(fake_nvml):
    nvml.reset_for_tests(fake_nvml())
    info = nvml.driver_info()
    assert info == nvml.DriverInfo(driver="580.159.04", nvml="13.580.159", cuda_driver="13.0")
    assert nvml.handle_for_cuda_device(0) == "handle"
    assert nvml.gpm_supported("handle") is False  # the fake has no GPM
    assert nvml.mig_enabled("handle") is None


def test_cuda_devices_map_to_nvml_by_uuid_even_when_reordered(monkeypatch, fake_nvml):
    # CUDA_VISIBLE_DEVICES=1,0: CUDA device 0 is NVML's GPU 1. The UUID decides, not the index.
    import torch

    nv = fake_nvml()
    nv.nvmlDeviceGetHandleByUUID = lambda uuid: {"GPU-bbbb": "nvml-gpu-1", "GPU-aaaa": "nvml-gpu-0"}[uuid]
    nv.nvmlDeviceGetHandleByIndex = lambda i: f"nvml-gpu-{i}"
    nvml.reset_for_tests(nv)
    uuids = {0: "bbbb", 1: "aaaa"}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(uuid=uuids[i]))
    assert nvml.handle_for_cuda_device(0) == "nvml-gpu-1"
    assert nvml.handle_for_cuda_device(1) == "nvml-gpu-0"
