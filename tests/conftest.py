"""Shared fixtures: a fake NVML, an isolated results folder, smoke scale."""

from __future__ import annotations

import shutil
import types
from pathlib import Path

import pytest

from helpers import machine_profiles, nvml


@pytest.fixture(autouse=True)
def _isolate(tmp_path, monkeypatch):
    """Every test writes results and caches under its own tmp folder, at smoke scale, with NVML forgotten."""
    monkeypatch.setenv("HELPERS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("HELPERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HELPERS_SCALE", "smoke")
    monkeypatch.delenv("HELPERS_PROFILE", raising=False)  # a test that wants a learner-machine profile sets it
    nvml.reset_for_tests()
    yield
    nvml.reset_for_tests()
    machine_profiles.forget()


class FakeNvml(types.SimpleNamespace):
    """The slice of ``pynvml`` the helpers use, with values a test controls."""

    def __init__(self, util=(50,), mem_used_gib=1.0, power_mw=300_000, power_supported=True, clock_reasons=0,
                 gpm=None):
        super().__init__()
        self._util = list(util)
        self._i = 0
        self.mem_used = int(mem_used_gib * 2**30)
        self.power_mw = power_mw
        self.power_supported = power_supported
        self.power_calls = 0
        self.energy_mj = 1_000_000
        self.clock_reasons = clock_reasons
        self.gpm_values = gpm  # {metric id: value}, or None for a GPU without GPM
        self.gpm_allocated = 0
        self.gpm_freed = 0
        if gpm is not None:
            self.NVML_GPM_METRICS_GET_VERSION = 1
            self.c_nvmlGpmMetricsGet_t = _FakeMetricsGet
            self.nvmlGpmSampleAlloc = self._gpm_alloc
            self.nvmlGpmSampleFree = self._gpm_free
            self.nvmlGpmSampleGet = lambda h, sample: sample
            self.nvmlGpmMetricsGet = self._gpm_get

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return "handle"

    def nvmlDeviceGetHandleByIndex(self, i):
        return "handle"

    def nvmlDeviceGetUtilizationRates(self, h):
        v = self._util[min(self._i, len(self._util) - 1)]
        self._i += 1
        return types.SimpleNamespace(gpu=v, memory=0)

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(used=self.mem_used, total=80 * 2**30, free=0)

    def nvmlDeviceGetPowerUsage(self, h):
        self.power_calls += 1
        if not self.power_supported:
            raise RuntimeError("Not Supported")
        return self.power_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self.energy_mj += self.power_mw // 10  # a counter that only grows, as the board's does
        return self.energy_mj

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 55

    def nvmlDeviceGetClockInfo(self, h, clock):
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self.clock_reasons

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        return 2_000 if counter == 0 else 3_000  # KB/s

    def _gpm_alloc(self):
        self.gpm_allocated += 1
        return object()

    def _gpm_free(self, sample):
        self.gpm_freed += 1

    def _gpm_get(self, req):
        for i in range(req.numMetrics):
            m = req.metrics[i]
            m.value = self.gpm_values[m.metricId]
            m.nvmlReturn = 0
        return req

    def nvmlSystemGetDriverVersion(self):
        return b"580.159.04"

    def nvmlSystemGetNVMLVersion(self):
        return "13.580.159"

    def nvmlSystemGetCudaDriverVersion(self):
        return 13000

    def nvmlDeviceGetName(self, h):
        return "NVIDIA Fake 80GB"


class _FakeMetricsGet:
    def __init__(self):
        self.version = self.numMetrics = 0
        self.sample1 = self.sample2 = None
        self.metrics = [types.SimpleNamespace(metricId=0, nvmlReturn=1, value=0.0) for _ in range(8)]


@pytest.fixture
def fake_nvml():
    return FakeNvml


@pytest.fixture(scope="session")
def warm_start_cache(tmp_path_factory):
    """A function that seeds a data cache folder with the smoke challenge's start weights, trained once for the
    whole test session: a class judge's session process trains them where its cache lacks them (about 20 s on two
    cores), and three judgings here would train the same weights three times. What they are trained from, and
    that a missing or cut file is trained again, is tested in test_accuracy_rule.py."""
    from helpers.challenge import start
    from helpers.challenge.rules import Rules

    cache = tmp_path_factory.mktemp("warm-start-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HELPERS_CACHE", str(cache))
        rules = Rules.at_scale("smoke")
        key = (rules.image_size, rules.dataset_size, rules.warm_start_images, rules.seed, rules.seed)
        state = start._warm_state(*key)  # trained here, or this process's copy from an earlier test
        path = start._warm_path(*key)
        if not path.exists():
            start._save_atomic(state, path)

    def seed(folder: Path) -> Path:
        shutil.copytree(cache / "challenge", Path(folder) / "challenge", dirs_exist_ok=True)
        return Path(folder)

    return seed
