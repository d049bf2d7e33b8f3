"""Imports the compiled extension with an error that says how to build it."""

try:
    from . import _minfer  # noqa: F401  (re-exported)
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "minfer: the compiled extension minfer._minfer is missing or does not load "
        f"({e}). Build it with CMake (`cmake --preset release && cmake --build --preset release`, "
        "MINFER_BUILD_PYTHON=ON, needs pybind11-dev and python3-dev) and put the build's python folder on the "
        "path: PYTHONPATH=build/release/python") from e
