"""QuantConfig: how weights and activations are quantized when the model is loaded."""

from __future__ import annotations

import dataclasses

from . import _checks
from ._minfer_loader import _minfer

_OWNER = "QuantConfig"


@dataclasses.dataclass(frozen=True)
class QuantConfig:
    """Weight / activation quantization applied at load (MindIE's QuantConfig).

    Args:
        weight_bits: 16 keeps the weights as stored (no quantization); 8 stores int8 weights with scales.
        activation_bits: 16 keeps activations in floating point (W8A16); 8 quantizes them per token to int8
            on the fly (W8A8).
        symmetric: symmetric (zero point 0) quantization.
        group_size: 0 gives one scale per output channel; 32, 64 or 128 input elements share a scale.

    Which combinations the engine supports is checked when the Engine is built; an unsupported one raises
    minfer.MinferError (a ValueError) naming the field.
    """

    weight_bits: int = 16
    activation_bits: int = 16
    symmetric: bool = True
    group_size: int = 0

    def __post_init__(self):
        object.__setattr__(self, "weight_bits", _checks.as_int(_OWNER, "weight_bits", self.weight_bits, lo=1,
                                                                hi=_checks.INT32_MAX))
        object.__setattr__(self, "activation_bits", _checks.as_int(_OWNER, "activation_bits", self.activation_bits,
                                                                    lo=1, hi=_checks.INT32_MAX))
        _checks.as_bool(_OWNER, "symmetric", self.symmetric)
        object.__setattr__(self, "group_size", _checks.as_int(_OWNER, "group_size", self.group_size, lo=0,
                                                               hi=_checks.INT32_MAX))

    @property
    def enabled(self) -> bool:
        """True when the weights are quantized (weight_bits < 16)."""
        return self.weight_bits < 16

    def _to_cpp(self) -> "_minfer.QuantConfig":
        q = _minfer.QuantConfig()
        q.weight_bits = self.weight_bits
        q.activation_bits = self.activation_bits
        q.symmetric = self.symmetric
        q.group_size = self.group_size
        return q


QuantConfig.__init__ = _checks.keywords_checked(_OWNER)(QuantConfig.__init__)  # type: ignore[method-assign]
