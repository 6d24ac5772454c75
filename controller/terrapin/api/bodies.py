"""How a response body is made from a record of the controller's model: the body's fields that
bear a record's name for a figure are read from the record's attribute of that name, and only
the others (a renamed figure, a port split into switch and number, a nested list) are given.
A figure added to both under one name then needs no third line here.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

Body = TypeVar("Body", bound=BaseModel)


def body_from(model: type[Body], record: object, **given: Any) -> Body:
    """`model` with `given`, and every other field read from `record`'s attribute of the same
    name (an AttributeError names a field that is neither)."""
    read = {name: getattr(record, name) for name in model.model_fields if name not in given}
    return model(**read, **given)
