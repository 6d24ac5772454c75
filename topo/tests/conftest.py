from topo.tests.switch_kinds import pytest_collection_modifyitems, pytest_configure

__all__ = ["pytest_collection_modifyitems", "pytest_configure"]
