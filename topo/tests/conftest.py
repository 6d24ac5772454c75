from topo.tests import hypothesis_profile
from topo.tests.switch_kinds import pytest_collection_modifyitems, pytest_configure

hypothesis_profile.load()

__all__ = ["pytest_collection_modifyitems", "pytest_configure"]
