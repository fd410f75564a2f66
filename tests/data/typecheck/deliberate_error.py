"""A module with one deliberate type error, for tests/test_typecheck.py: mypy must report it on the line marked
below, proof that a type error in tileprobe/ makes the test command (and CI) fail."""
from __future__ import annotations


def cores(machine: str) -> int:
    """How many CPU cores ``machine`` names (``"2-core"`` → 2)."""
    return int(machine.split("-")[0])


CORES: int = cores(2)  # deliberate: an int where a str is declared (arg-type)
