import pytest

from helpers import env, notices


def test_scale_reads_the_environment(monkeypatch):
    monkeypatch.setenv("HELPERS_SCALE", "smoke")
    assert env.scale() == "smoke"
    assert env.pick(smoke=1, full=2) == 1
    monkeypatch.setenv("HELPERS_SCALE", " FULL ")
    assert env.scale() == "full"
    assert env.pick(smoke=1, full=2) == 2


def test_scale_defaults_to_the_hardware(monkeypatch):
    monkeypatch.delenv("HELPERS_SCALE")
    monkeypatch.setattr(env, "has_cuda", lambda: False)
    assert env.scale() == "smoke"
    monkeypatch.setattr(env, "has_cuda", lambda: True)
    assert env.scale() == "full"


def test_bad_scale_says_what_is_allowed(monkeypatch):
    monkeypatch.setenv("HELPERS_SCALE", "huge")
    with pytest.raises(ValueError, match="'smoke'.*'full'"):
        env.scale()


def test_no_gpu_is_said_once(capsys):
    notices.forget()
    assert env.device().type == "cpu"
    env.device()
    out = capsys.readouterr().out
    assert out.count("No CUDA GPU visible") == 1


def test_gpu_slug():
    assert env.gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert env.gpu_slug(None) == "cpu"
    assert env.gpu_slug("  ") == "cpu"


def test_report_names_the_scale(capsys):
    rep = env.report()
    assert rep.scale == "smoke"
    assert rep.cpus >= 1
    assert "scale   smoke" in capsys.readouterr().out


def test_seed_everything_repeats():
    import torch

    env.seed_everything(3)
    a = torch.rand(3)
    env.seed_everything(3)
    assert torch.equal(a, torch.rand(3))


def test_notices_are_said_once_until_forgotten(capsys):
    notices.forget()
    assert notices.say_once("demo:a", "hello") is True
    assert notices.say_once("demo:a", "hello") is False
    notices.forget("other:")
    assert notices.say_once("demo:a", "hello") is False
    notices.forget("demo:")
    assert notices.say_once("demo:a", "hello") is True
    assert capsys.readouterr().out == "hello\nhello\n"


def test_compile_backend_is_inductor_on_a_gpu_and_aot_eager_on_a_cpu():
    assert env.compile_backend("cuda") == "inductor" and env.compile_backend("cpu") == "aot_eager"
    assert env.compile_backend() == ("inductor" if env.has_cuda() else "aot_eager")


@pytest.mark.slow  # compiles in two child processes: `make test-slow`
def test_a_run_limited_to_avx2_keeps_its_own_compile_cache():
    """Inductor's cache does not key its CPU kernels by ATEN_CPU_CAPABILITY: sharing one cache between an AVX-512
    run and an AVX2-limited run on one machine gave wrong numbers, so a limited run gets a cache of its own."""
    import os
    import subprocess
    import sys

    code = "import os, helpers; print(os.environ.get('TORCHINDUCTOR_CACHE_DIR', 'unset'))"
    base = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "TORCHINDUCTOR_CACHE_DIR")}
    limited = subprocess.run([sys.executable, "-c", code], env={**base, "ATEN_CPU_CAPABILITY": "avx2"},
                             capture_output=True, text=True, check=True).stdout.strip()
    plain = subprocess.run([sys.executable, "-c", code], env=base, capture_output=True, text=True,
                           check=True).stdout.strip()
    chosen = subprocess.run([sys.executable, "-c", code], env={**base, "ATEN_CPU_CAPABILITY": "avx2",
                                                               "TORCHINDUCTOR_CACHE_DIR": "/tmp/mine"},
                            capture_output=True, text=True, check=True).stdout.strip()
    assert limited.endswith("_avx2") and plain == "unset" and chosen == "/tmp/mine"
