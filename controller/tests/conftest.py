import sys
from pathlib import Path

from topo.tests import hypothesis_profile
from topo.tests.switch_kinds import pytest_collection_modifyitems, pytest_configure

hypothesis_profile.load()

sys.path.insert(0, str(Path(__file__).parent))

__all__ = ["pytest_collection_modifyitems", "pytest_configure"]
