"""The pydantic base every contract model shares: snake_case in Python, the spec's camelCase on the wire.

Models build their validators and serializers on first use (``defer_build``), not when their class is
defined: the contract has some sixty models and a delivery uses a handful, and building them all was a fifth
of the flow function's import (bench/cold_start.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=False,
        defer_build=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The spec's JSON shape (camelCase keys, ISO datetimes, no unset optionals)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
