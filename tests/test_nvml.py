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
