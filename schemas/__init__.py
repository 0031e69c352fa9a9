"""The user's contract: Pydantic models, their versions, and what is derived from them."""

from schemas.contract import RecordRejected, SchemaContract, schema_hash
from schemas.registry import SchemaNotFoundError, import_model, lookup, register

__all__ = [
    "RecordRejected",
    "SchemaContract",
    "SchemaNotFoundError",
    "import_model",
    "lookup",
    "register",
    "schema_hash",
]
