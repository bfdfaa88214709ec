"""The heavy tier names tests that exist, and `-m "not heavy"` leaves the fast ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import HEAVY

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("entry", HEAVY)
def test_every_heavy_entry_names_a_test_module_or_a_test(entry: str) -> None:
    path, _, test = entry.partition("::")
    module = ROOT / path
    assert module.is_file(), f"{path} does not exist"
    if test:
        assert re.search(rf"^def {re.escape(test)}\(", module.read_text(), re.M), entry


def test_the_marker_is_registered_for_the_readme_s_fast_loop(pytestconfig: pytest.Config) -> None:
    markers = pytestconfig.getini("markers")
    assert any(marker.startswith("heavy: ") for marker in markers)
