"""scripts/uv_install.py: pip's settings handed to uv, so uv installs what pip would, from where pip would."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("uv_install", ROOT / "scripts" / "uv_install.py")
uv_install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uv_install)

LISTING = """:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/old.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
"""


def test_pips_settings_become_uvs_options_and_the_environment_wins():
    settings = uv_install.pip_settings(LISTING)
    assert settings["cert"] == ["/etc/ssl/certs/ca-certificates.crt"]  # the environment over pip's config files
    args, env = uv_install.uv_arguments(settings)
    assert args == ["--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url", "file:///opt/pypi-more/simple",
                    "--find-links", "/opt/wheels", "--constraint", "/etc/xdg/pip/constraints.txt"]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}
    assert "default-timeout" not in " ".join(args)  # a setting uv has no option for is left to uv's default


def test_no_pip_settings_give_uvs_defaults():
    assert uv_install.uv_arguments(uv_install.pip_settings("")) == ([], {})


def test_bootstrap_falls_back_to_pip_when_uv_cannot():
    text = (ROOT / "scripts" / "bootstrap.sh").read_text()
    assert "scripts/uv_install.py -e \".[test]\"" in text
    uv_at = text.index("uv_install.py")
    assert "pip install --quiet --disable-pip-version-check -e \".[test]\"" in text[uv_at:]  # the fallback after it
