"""Human-readable numbers with SI units for console output.

    fmt_time(0.01776)      -> "17.76 ms"    (4 significant digits below 1 s, trailing zeros dropped)
    fmt_time(3.2e-6)       -> "3.2 µs"
    fmt_time(1.5)          -> "1.50 s"      (two decimals from 1 s up)
    fmt_bandwidth(31.3e9)  -> "31.3 GB/s"   (decimal prefixes: 1 GB/s = 1e9 bytes per second)
    fmt_energy(1.23e-3)    -> "1.23 mJ"
    fmt_count(1234567)     -> "1,234,567"

Each value is scaled to the prefix that puts it in [1, 1000) and shown with `digits` significant digits
(3 by default, 4 for times).
Zero, negative values, inf and nan are handled; nothing here is used for computation.
"""
from __future__ import annotations

import math

__all__ = ["fmt_bandwidth", "fmt_count", "fmt_energy", "fmt_si", "fmt_time"]

# exponent (multiple of 3) -> prefix
_PREFIX = {-15: "f", -12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P"}


def fmt_si(value: float, unit: str, digits: int = 3, *, keep_zeros: bool = False) -> str:
    """`value` with an SI prefix and `digits` significant digits, e.g. fmt_si(3.2e-6, "s") -> "3.2 µs".

    Trailing zeros after the decimal point are dropped unless keep_zeros (then 1.5 -> "1.50")."""
    if value is None:
        return "n/a"
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return f"{'-' if value < 0 else ''}inf {unit}".rstrip()
    if value == 0:
        return f"0 {unit}".rstrip()
    sign = "-" if value < 0 else ""
    mag = abs(value)
    exp3 = max(min(3 * math.floor(math.log10(mag) / 3), max(_PREFIX)), min(_PREFIX))
    scaled = mag / 10.0 ** exp3
    decimals = max(digits - 1 - math.floor(math.log10(scaled)), 0)
    text = f"{scaled:.{decimals}f}"
    if float(text) >= 1000 and exp3 < max(_PREFIX):   # rounding carried into the next prefix (999.96 -> 1.00 k)
        exp3 += 3
        scaled = mag / 10.0 ** exp3
        text = f"{scaled:.{digits - 1}f}"
    if not keep_zeros and "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{sign}{text} {_PREFIX[exp3]}{unit}".rstrip()


def fmt_time(seconds: float, digits: int = 4) -> str:
    """Seconds below 1 s as ms / µs / ns with `digits` significant digits ("17.76 ms", "3.2 µs");
    1 s and above with two decimals ("1.50 s"); minutes are not used."""
    if seconds is not None and math.isfinite(float(seconds)) and abs(float(seconds)) >= 1:
        return f"{float(seconds):.2f} s"
    return fmt_si(seconds, "s", digits)


def fmt_bandwidth(bytes_per_s: float, digits: int = 3) -> str:
    """Bytes per second with a decimal prefix: 31.3e9 -> "31.3 GB/s"."""
    return fmt_si(bytes_per_s, "B/s", digits)


def fmt_energy(joules: float, digits: int = 3) -> str:
    """Joules with an SI prefix: 1.23e-3 -> "1.23 mJ"."""
    return fmt_si(joules, "J", digits)


def fmt_count(n: float) -> str:
    """A count with thousands separators ("1,234,567"); non-integers keep up to 3 significant decimals."""
    if n is None:
        return "n/a"
    if isinstance(n, float) and not math.isfinite(n):
        return str(n)
    if float(n) == int(n):
        return f"{int(n):,}"
    return f"{float(n):,.3g}" if abs(float(n)) < 1000 else f"{float(n):,.1f}"
