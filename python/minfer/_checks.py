"""Argument checking shared by the public classes: a TypeError naming an unknown keyword (with the closest
accepted one), a TypeError for a value of the wrong type, a ValueError naming the field for a value out of
range. Ranges that the engine defines (page_size a power of two, top_p in (0, 1], ...) are checked by the C++
side, whose errors name the field too; here only what must hold before a value can cross into C++."""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import numbers
import re
from typing import Callable, Iterable, List, Optional, TypeVar

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1

F = TypeVar("F", bound=Callable)


def unknown_keyword(owner: str, name: str, accepted: Iterable[str]) -> TypeError:
    accepted = sorted(accepted)
    close = difflib.get_close_matches(name, accepted, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else f"; accepted: {', '.join(accepted)}"
    return TypeError(f"{owner}() got an unexpected keyword argument '{name}'{hint}")


def keywords_checked(owner: str) -> Callable[[F], F]:
    """Wraps a function so an unknown keyword raises a TypeError that names it and suggests the closest one.
    The wrapped signature stays visible to help() and inspect.signature()."""

    def wrap(fn: F) -> F:
        params = inspect.signature(fn).parameters
        accepted = [n for n, p in params.items()
                    if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            for name in kwargs:
                if name not in params:
                    raise unknown_keyword(owner, name, accepted)
            return fn(*args, **kwargs)

        return checked  # type: ignore[return-value]

    return wrap


def _type_name(value) -> str:
    return type(value).__name__


def as_int(owner: str, name: str, value, lo: Optional[int] = None, hi: int = INT64_MAX, what: str = "") -> int:
    """value as an int in [lo, hi]; bools and floats are refused (1.5 tokens is a mistake, not a request)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be an int, got {_type_name(value)} {value!r}")
    v = int(value)
    if lo is not None and v < lo:
        raise ValueError(f"{owner}: {name} must be >= {lo}{what}, got {v}")
    if v > hi:
        raise ValueError(f"{owner}: {name} must be <= {hi}{what}, got {v}")
    return v


def as_float(owner: str, name: str, value) -> float:
    """value as a float; the engine checks the range (and refuses NaN)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a number, got {_type_name(value)} {value!r}")
    v = float(value)
    if math.isinf(v):
        raise ValueError(f"{owner}: {name} must be finite, got {v}")
    return v


def as_bool(owner: str, name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be True or False, got {_type_name(value)} {value!r}")
    return value


def as_str(owner: str, name: str, value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{owner}: {name} must be a str, got {_type_name(value)} {value!r}")
    return value


def as_token_ids(owner: str, name: str, value) -> List[int]:
    """A list of token ids (ints in int32 range); numpy arrays and tuples are accepted."""
    if hasattr(value, "tolist") and hasattr(value, "ndim"):
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{owner}: {name} must be a list of int token ids, got {_type_name(value)}")
    ids = []
    for i, t in enumerate(value):
        if isinstance(t, bool) or not isinstance(t, numbers.Integral):
            raise TypeError(f"{owner}: {name}[{i}] must be an int token id, got {_type_name(t)} {t!r}")
        if not 0 <= int(t) <= INT32_MAX:
            raise ValueError(f"{owner}: {name}[{i}] = {int(t)} is not a valid token id (must be >= 0)")
        ids.append(int(t))
    return ids


_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
          "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "t": 1000**4, "tb": 1000**4, "tib": 1024**4}


def as_bytes(owner: str, name: str, value) -> int:
    """A byte count: an int, or a str such as "512MiB", "2GB" or "1.5GiB"."""
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value)
        if not m or m.group(2).lower() not in _UNITS:
            raise ValueError(f"{owner}: {name} must be a byte count such as 536870912, '512MiB' or '2GB', "
                             f"got {value!r}")
        value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    return as_int(owner, name, value, lo=0, what=" bytes (0 = a fraction of free memory)")
