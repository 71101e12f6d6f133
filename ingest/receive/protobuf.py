"""A protobuf `ExportTraceServiceRequest` as OTLP JSON: exactly what protobuf's own
`json_format.MessageToDict` makes of it (camelCase names, ids in base64, 64-bit integers as
strings, enums by name, fields at their default left out), at a fraction of its cost.

MessageToDict dispatches on each field's type through several calls per value; on the spans an
OpenTelemetry SDK exports that was the receiver's largest single cost (bench_receive: ~32 µs a
span, a 512-span export 16 ms). Here each field descriptor is looked up once in a table of small
converters, and a message is walked by `ListFields()` (protobuf's C code) as MessageToDict walks
it, so the output is the same dict, key for key and in the same order (tests/test_receive_protobuf.py
holds the two side by side on SDK-made and generated requests).

What OTLP's trace messages never hold — maps, 32-bit floats, well-known types, extensions, an
enum number its enum does not name, a double that is not finite — is left to MessageToDict: on
meeting one, the whole request is converted by it instead (`Rare`), so an odd request costs what
it always did and is never converted differently.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message


class Rare(Exception):
    """A field this module leaves to MessageToDict."""


_INT64 = (FD.CPPTYPE_INT64, FD.CPPTYPE_UINT64)
_PLAIN = (FD.CPPTYPE_INT32, FD.CPPTYPE_UINT32, FD.CPPTYPE_BOOL)


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("utf-8")


def _double(value: float) -> float:
    if math.isinf(value) or math.isnan(value):
        raise Rare  # MessageToDict writes "Infinity" / "NaN"
    return value


def _enum(field: FD) -> Callable[[int], str]:
    names = {v.number: v.name for v in field.enum_type.values if not v.GetOptions().ListFields()}

    def name(value: int) -> str:
        try:
            return names[value]
        except KeyError:
            raise Rare from None  # an unnamed number, or a value with a JSON name option
    return name


def _rare(value: Any) -> Any:
    raise Rare


def _scalar(field: FD) -> Callable[[Any], Any]:
    ctype = field.cpp_type
    if ctype == FD.CPPTYPE_MESSAGE:
        full = field.message_type.full_name
        if full.startswith("google.protobuf.") or field.message_type.GetOptions().map_entry:
            return _rare  # well-known types and maps have their own JSON forms
        return message_dict
    if ctype == FD.CPPTYPE_STRING:
        return _b64 if field.type == FD.TYPE_BYTES else str
    if ctype in _INT64:
        return str
    if ctype in _PLAIN:
        return bool if ctype == FD.CPPTYPE_BOOL else int
    if ctype == FD.CPPTYPE_DOUBLE:
        return _double
    if ctype == FD.CPPTYPE_ENUM and field.enum_type.full_name != "google.protobuf.NullValue":
        return _enum(field)
    return _rare  # 32-bit floats (MessageToDict rounds them to their shortest form)


def _converter(field: FD) -> tuple[str, Callable[[Any], Any]]:
    one = _scalar(field)
    if field.is_extension:
        one = _rare
    if field.is_repeated and one is not _rare:
        each = one
        if each is message_dict:
            def one(values: Any) -> list[Any]:
                return [message_dict(v) for v in values]
        else:
            def one(values: Any) -> list[Any]:
                return [each(v) for v in values]
    return field.json_name, one


_CONVERTERS: dict[FD, tuple[str, Callable[[Any], Any]]] = {}


def message_dict(msg: Message) -> dict[str, Any]:
    """One message's fields as MessageToDict renders them (raises Rare where it would not)."""
    out: dict[str, Any] = {}
    for field, value in msg.ListFields():
        try:
            name, convert = _CONVERTERS[field]
        except KeyError:
            name, convert = _CONVERTERS[field] = _converter(field)
        out[name] = convert(value)
    return out


def to_dict(msg: Message) -> dict[str, Any]:
    """`MessageToDict(msg)`, the fast way where it can be."""
    try:
        return message_dict(msg)
    except Rare:
        return MessageToDict(msg)


__all__ = ["to_dict"]
