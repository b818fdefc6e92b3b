"""Say a thing once: notebooks call the helpers many times, and a notice repeated every call is noise.

    from helpers import notices
    notices.say_once("no-gpu", "No CUDA GPU visible: running on the CPU at smoke scale.")
    notices.say_once("no-gpu", "...")       # prints nothing: said already
    notices.forget("nvml:")                 # say the notices whose keys start with "nvml:" again

The bottom of the helpers' layers: every module may use it, it uses none of them.
"""

from __future__ import annotations

__all__ = ["say_once", "forget"]

_said: set[str] = set()


def say_once(key: str, message: str) -> bool:
    """Print ``message`` the first time ``key`` is seen in this process; return whether it was printed."""
    if key in _said:
        return False
    _said.add(key)
    print(message)
    return True


def forget(prefix: str = "") -> None:
    """Forget the notices whose keys start with ``prefix`` (all of them by default), so they are said again."""
    _said.difference_update({k for k in _said if k.startswith(prefix)})
