"""Derivatives of long-time averages of chaotic flows (least-squares shadowing)."""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax.shadowing.sensitivity import ShadowingResult, shadowing_sensitivity

__all__ = ["ShadowingResult", "shadowing_sensitivity"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.shadowing.sensitivity": ("ShadowingResult", "shadowing_sensitivity"),
    },
)
