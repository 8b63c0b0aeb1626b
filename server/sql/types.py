"""SQL types: identity, Postgres OIDs and names, and the Python value of each.

A :class:`SqlType` is a base type (:class:`TypeId`) plus a type modifier (``varchar(n)``,
``numeric(p,s)``, ``char(n)``), or an array of a base type. Values travel through the engine as
Python objects:

========================  ==========================================================
type                      Python value
========================  ==========================================================
smallint/integer/bigint   ``int``   (also oid, regclass, regtype, regproc)
real/double precision     ``float``
numeric                   ``decimal.Decimal`` (also NaN and +-Infinity)
boolean                   ``bool``
text/varchar/char/name    ``str``   (also the one-byte ``"char"``)
bytea                     ``bytes``
date                      ``datetime.date``
time                      ``datetime.time`` (naive)
timestamp                 ``datetime.datetime``, naive
timestamptz               ``datetime.datetime``, aware, in UTC
interval                  :class:`Interval`
uuid                      ``uuid.UUID``
json/jsonb                ``str``: the JSON text (jsonb: Postgres's normalised output form)
arrays                    ``list`` of element values (None for NULL elements)
unknown                   ``str`` (an untyped literal or parameter before coercion)
========================  ==========================================================

SQL NULL is ``None`` for every type. Codecs live beside this module: ``textio`` (text format,
the wire's and casts'), ``binaryio`` (the wire's binary format), ``storage_codec`` (cell bytes)
and ``casts``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

from percolator.server.sql.keycodec import KeyType


class Category(Enum):
    """Postgres's type categories (pg_type.typcategory), which drive implicit coercion."""

    NUMERIC = "N"
    STRING = "S"
    BOOLEAN = "B"
    DATETIME = "D"
    TIMESPAN = "T"
    USER = "U"
    ARRAY = "A"
    ENUM = "E"
    UNKNOWN = "X"


class TypeId(Enum):
    """A base type: (oid, canonical name as format_type prints it, typlen, category, array oid)."""

    BOOL = (16, "boolean", 1, Category.BOOLEAN, 1000)
    BYTEA = (17, "bytea", -1, Category.USER, 1001)
    CHAR = (18, '"char"', 1, Category.STRING, 1002)
    NAME = (19, "name", 64, Category.STRING, 1003)
    INT8 = (20, "bigint", 8, Category.NUMERIC, 1016)
    INT2 = (21, "smallint", 2, Category.NUMERIC, 1005)
    INT2VECTOR = (22, "int2vector", -1, Category.ARRAY, 1006)
    INT4 = (23, "integer", 4, Category.NUMERIC, 1007)
    REGPROC = (24, "regproc", 4, Category.NUMERIC, 1008)
    TEXT = (25, "text", -1, Category.STRING, 1009)
    OID = (26, "oid", 4, Category.NUMERIC, 1028)
    OIDVECTOR = (30, "oidvector", -1, Category.ARRAY, 1013)
    JSON = (114, "json", -1, Category.USER, 199)
    FLOAT4 = (700, "real", 4, Category.NUMERIC, 1021)
    FLOAT8 = (701, "double precision", 8, Category.NUMERIC, 1022)
    UNKNOWN = (705, "unknown", -2, Category.UNKNOWN, 0)
    BPCHAR = (1042, "character", -1, Category.STRING, 1014)
    VARCHAR = (1043, "character varying", -1, Category.STRING, 1015)
    DATE = (1082, "date", 4, Category.DATETIME, 1182)
    TIME = (1083, "time without time zone", 8, Category.DATETIME, 1183)
    TIMESTAMP = (1114, "timestamp without time zone", 8, Category.DATETIME, 1115)
    TIMESTAMPTZ = (1184, "timestamp with time zone", 8, Category.DATETIME, 1185)
    INTERVAL = (1186, "interval", 16, Category.TIMESPAN, 1187)
    NUMERIC = (1700, "numeric", -1, Category.NUMERIC, 1231)
    REGCLASS = (2205, "regclass", 4, Category.NUMERIC, 2210)
    REGTYPE = (2206, "regtype", 4, Category.NUMERIC, 2211)
    UUID = (2950, "uuid", 16, Category.USER, 2951)
    JSONB = (3802, "jsonb", -1, Category.USER, 3807)
    REGNAMESPACE = (4089, "regnamespace", 4, Category.NUMERIC, 4090)
    VOID = (2278, "void", 4, Category.USER, 0)
    RECORD = (2249, "record", -1, Category.USER, 2287)

    @property
    def oid(self) -> int:
        return self.value[0]

    @property
    def pg_name(self) -> str:
        """The name format_type() prints (without a modifier)."""
        return self.value[1]

    @property
    def typlen(self) -> int:
        return self.value[2]

    @property
    def category(self) -> Category:
        return self.value[3]

    @property
    def array_oid(self) -> int:
        return self.value[4]


def _quote_name(name: str) -> str:
    plain = re.fullmatch(r"[a-z_][a-z0-9_$]*", name) is not None
    return name if plain else '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class EnumType:
    """A user-defined enum type (``CREATE TYPE mood AS ENUM (...)``), also its catalog entry.

    It stands in :attr:`SqlType.id` where a built-in type has its :class:`TypeId`, with the same
    properties (``oid``, ``pg_name``, ``typlen``, ``category``, ``array_oid``), so code that
    copies a type (``SqlType(t.id, -1, t.array)``) keeps the enum. Values are the labels
    (``str``); they order by ``sort_orders`` (pg_enum.enumsortorder), which never change for an
    existing label: ADD VALUE BEFORE picks a number between its neighbours and RENAME VALUE
    keeps it, so cells and key bytes, which hold the sort order, survive ALTER TYPE.
    ``labels`` are kept in sort order (``sort_orders`` ascending). Equality covers the labels,
    so caches keyed by a type and catalog comparisons see a change.
    """

    oid: int
    array_oid: int
    type_name: str
    labels: tuple[str, ...] = ()
    sort_orders: tuple[float, ...] = ()

    @property
    def name(self) -> str:
        """Like ``TypeId.name``: the type's name."""
        return self.type_name

    @property
    def pg_name(self) -> str:
        """The name as format_type prints it (quoted when it needs to be; a type of another
        schema than public is keyed ``schema.name``, each part quoted on its own)."""
        return ".".join(_quote_name(part) for part in self.type_name.split(".", 1))

    @property
    def typlen(self) -> int:
        return 4

    @property
    def category(self) -> Category:
        return Category.ENUM

    @cached_property
    def _order(self) -> dict[str, float]:
        return dict(zip(self.labels, self.sort_orders, strict=True))

    @cached_property
    def _label(self) -> dict[float, str]:
        return dict(zip(self.sort_orders, self.labels, strict=True))

    def sort_order(self, label: str) -> float:
        """The label's position for comparisons and keys (labels are validated on input)."""
        return self._order[label]

    def label_of(self, sort_order: float) -> str:
        """The label at a sort order (the inverse of :meth:`sort_order`, for key decoding)."""
        return self._label[sort_order]

    def has_label(self, label: str) -> bool:
        return label in self._order


@dataclass(frozen=True, slots=True)
class SqlType:
    """A SQL type: a base type, its modifier (-1 for none), and whether it is an array of it."""

    id: TypeId | EnumType
    typmod: int = -1
    array: bool = False

    @property
    def oid(self) -> int:
        """The OID sent in RowDescription and ParameterDescription."""
        return self.id.array_oid if self.array else self.id.oid

    @property
    def typlen(self) -> int:
        return -1 if self.array else self.id.typlen

    @property
    def category(self) -> Category:
        return Category.ARRAY if self.array else self.id.category

    @property
    def element(self) -> SqlType:
        """The element type of an array type."""
        return SqlType(self.id, self.typmod)

    def array_of(self) -> SqlType:
        return SqlType(self.id, self.typmod, True)

    @property
    def length(self) -> int | None:
        """n of varchar(n) / char(n)."""
        if self.id in (TypeId.VARCHAR, TypeId.BPCHAR) and self.typmod >= 4:
            return self.typmod - 4
        return None

    @property
    def precision_scale(self) -> tuple[int, int] | None:
        """(p, s) of numeric(p, s)."""
        if self.id is TypeId.NUMERIC and self.typmod >= 4:
            mod = self.typmod - 4
            return (mod >> 16) & 0xFFFF, mod & 0xFFFF
        return None

    @property
    def fractional_digits(self) -> int | None:
        """p of timestamp(p), timestamptz(p) and time(p): the fractional-second digits kept."""
        if self.id in _PRECISION_TYPES and self.typmod >= 0:
            return self.typmod
        return None

    def format(self) -> str:
        """The type as format_type(oid, typmod) prints it: ``character varying(20)``,
        ``numeric(10,2)``, ``timestamp(2) without time zone``, ``integer[]``."""
        name = self.id.pg_name
        if self.length is not None:
            name = f"{name}({self.length})"
        elif (ps := self.precision_scale) is not None:
            name = f"numeric({ps[0]},{ps[1]})"
        elif (p := self.fractional_digits) is not None:
            word, rest = name.split(" ", 1)
            name = f"{word}({p}) {rest}"
        elif self.id is TypeId.BPCHAR and self.typmod < 0 and not self.array:
            name = "bpchar"
        return name + "[]" if self.array else name

    def __str__(self) -> str:
        return self.format()


# Types whose modifier is a fractional-second precision (interval's modifier also holds its
# fields, which we do not keep).
_PRECISION_TYPES = (TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ, TypeId.TIME)
MAX_TIME_PRECISION = 6


def varchar(n: int | None = None) -> SqlType:
    return SqlType(TypeId.VARCHAR, -1 if n is None else n + 4)


def bpchar(n: int | None = None) -> SqlType:
    return SqlType(TypeId.BPCHAR, -1 if n is None else n + 4)


def numeric(precision: int | None = None, scale: int = 0) -> SqlType:
    if precision is None:
        return SqlType(TypeId.NUMERIC)
    return SqlType(TypeId.NUMERIC, ((precision << 16) | scale) + 4)


BOOL = SqlType(TypeId.BOOL)
BYTEA = SqlType(TypeId.BYTEA)
CHAR = SqlType(TypeId.CHAR)
NAME = SqlType(TypeId.NAME)
INT2 = SqlType(TypeId.INT2)
INT4 = SqlType(TypeId.INT4)
INT8 = SqlType(TypeId.INT8)
FLOAT4 = SqlType(TypeId.FLOAT4)
FLOAT8 = SqlType(TypeId.FLOAT8)
NUMERIC = SqlType(TypeId.NUMERIC)
TEXT = SqlType(TypeId.TEXT)
VARCHAR = SqlType(TypeId.VARCHAR)
BPCHAR = SqlType(TypeId.BPCHAR)
DATE = SqlType(TypeId.DATE)
TIME = SqlType(TypeId.TIME)
TIMESTAMP = SqlType(TypeId.TIMESTAMP)
TIMESTAMPTZ = SqlType(TypeId.TIMESTAMPTZ)
INTERVAL = SqlType(TypeId.INTERVAL)
UUID = SqlType(TypeId.UUID)
JSON = SqlType(TypeId.JSON)
JSONB = SqlType(TypeId.JSONB)
OID = SqlType(TypeId.OID)
REGCLASS = SqlType(TypeId.REGCLASS)
REGTYPE = SqlType(TypeId.REGTYPE)
REGPROC = SqlType(TypeId.REGPROC)
REGNAMESPACE = SqlType(TypeId.REGNAMESPACE)
INT2VECTOR = SqlType(TypeId.INT2VECTOR)
OIDVECTOR = SqlType(TypeId.OIDVECTOR)
UNKNOWN = SqlType(TypeId.UNKNOWN)
VOID = SqlType(TypeId.VOID)
RECORD = SqlType(TypeId.RECORD)
TEXT_ARRAY = TEXT.array_of()
INT2_ARRAY = INT2.array_of()
OID_ARRAY = OID.array_of()

_BY_OID: dict[int, SqlType] = {}
for _t in TypeId:
    _BY_OID[_t.oid] = SqlType(_t)
    if _t.array_oid:
        _BY_OID[_t.array_oid] = SqlType(_t, array=True)


def type_by_oid(oid: int) -> SqlType | None:
    """The type with this OID (base or array), or None if we do not know it."""
    return _BY_OID.get(oid)


# Spellings accepted in DDL and casts, lower-cased with single spaces; modifiers are separate.
_NAMES: dict[str, TypeId] = {
    "bool": TypeId.BOOL, "boolean": TypeId.BOOL,
    "bytea": TypeId.BYTEA,
    '"char"': TypeId.CHAR,
    "name": TypeId.NAME,
    "int8": TypeId.INT8, "bigint": TypeId.INT8, "bigserial": TypeId.INT8, "serial8": TypeId.INT8,
    "int2": TypeId.INT2, "smallint": TypeId.INT2, "smallserial": TypeId.INT2,
    "serial2": TypeId.INT2,
    "int4": TypeId.INT4, "int": TypeId.INT4, "integer": TypeId.INT4, "serial": TypeId.INT4,
    "serial4": TypeId.INT4,
    "text": TypeId.TEXT,
    "oid": TypeId.OID,
    "json": TypeId.JSON, "jsonb": TypeId.JSONB,
    "float4": TypeId.FLOAT4, "real": TypeId.FLOAT4,
    "float8": TypeId.FLOAT8, "double precision": TypeId.FLOAT8, "float": TypeId.FLOAT8,
    "bpchar": TypeId.BPCHAR, "char": TypeId.BPCHAR, "character": TypeId.BPCHAR,
    "varchar": TypeId.VARCHAR, "character varying": TypeId.VARCHAR,
    "date": TypeId.DATE,
    "time": TypeId.TIME, "time without time zone": TypeId.TIME,
    "timestamp": TypeId.TIMESTAMP, "timestamp without time zone": TypeId.TIMESTAMP,
    "timestamptz": TypeId.TIMESTAMPTZ, "timestamp with time zone": TypeId.TIMESTAMPTZ,
    "interval": TypeId.INTERVAL,
    "numeric": TypeId.NUMERIC, "decimal": TypeId.NUMERIC,
    "regclass": TypeId.REGCLASS, "regtype": TypeId.REGTYPE, "regproc": TypeId.REGPROC,
    "regnamespace": TypeId.REGNAMESPACE,
    "uuid": TypeId.UUID,
    "int2vector": TypeId.INT2VECTOR, "oidvector": TypeId.OIDVECTOR,
    "unknown": TypeId.UNKNOWN, "void": TypeId.VOID, "record": TypeId.RECORD,
}  # fmt: skip

SERIAL_NAMES = frozenset({"serial", "serial4", "bigserial", "serial8", "smallserial", "serial2"})


def lookup_type_name(name: str) -> TypeId | None:
    """The base type a spelling names (``int``, ``character varying``, ``pg_catalog.int4``)."""
    key = " ".join(name.lower().split())
    if key.startswith("pg_catalog."):
        key = key[len("pg_catalog.") :]
    return _NAMES.get(key)


def make_type(name: str, modifiers: tuple[int, ...] = (), array: bool = False) -> SqlType | None:
    """The type for a spelling and its modifiers, or None for an unknown name.

    Raises ValueError for modifiers the type does not take or out of range.
    """
    tid = lookup_type_name(name)
    if tid is None:
        return None
    typmod = -1
    if modifiers:
        if tid in (TypeId.VARCHAR, TypeId.BPCHAR):
            (n,) = modifiers
            if not 1 <= n <= 10_485_760:
                raise ValueError(f"length for type {tid.pg_name} must be at least 1")
            typmod = n + 4
        elif tid is TypeId.NUMERIC:
            p, s = (*modifiers, 0)[:2]
            if not 1 <= p <= 1000:
                raise ValueError(f"NUMERIC precision {p} must be between 1 and 1000")
            if not 0 <= s <= p:
                raise ValueError(f"NUMERIC scale {s} must be between 0 and precision {p}")
            typmod = ((p << 16) | s) + 4
        elif tid in _PRECISION_TYPES:
            typmod = _time_precision(tid, modifiers)
        elif tid is TypeId.INTERVAL:
            typmod = -1  # fractional-second precision: accepted, microseconds kept
        elif tid is TypeId.FLOAT8 and name.lower() == "float":
            # float(p): real up to 24 bits of precision, double precision up to 53.
            (p,) = modifiers
            if p < 1:
                raise ValueError("precision for type float must be at least 1 bit")
            if p > 53:
                raise ValueError("precision for type float must be less than 54 bits")
            if p <= 24:
                tid = TypeId.FLOAT4
        else:
            raise ValueError(f"type {tid.pg_name} takes no modifiers")
    elif tid is TypeId.BPCHAR and name.lower() in ("char", "character"):
        typmod = 1 + 4  # char without a length is char(1)
    return SqlType(tid, typmod, array)


def _time_precision(tid: TypeId, modifiers: tuple[int, ...]) -> int:
    """The typmod of timestamp(p) / timestamptz(p) / time(p): p, at most 6 (Postgres reduces
    a larger one to 6 with a warning)."""
    if len(modifiers) != 1:
        raise ValueError("invalid type modifier")
    (p,) = modifiers
    if p < 0:
        word = "TIME" if tid is TypeId.TIME else "TIMESTAMP"
        tz = "" if tid is not TypeId.TIMESTAMPTZ else " WITH TIME ZONE"
        raise ValueError(f"{word}({p}){tz} precision must not be negative")
    return min(p, MAX_TIME_PRECISION)


_KEY_TYPES: dict[TypeId, KeyType] = {
    TypeId.INT2: KeyType.INT, TypeId.INT4: KeyType.INT, TypeId.INT8: KeyType.INT,
    TypeId.OID: KeyType.INT, TypeId.DATE: KeyType.INT, TypeId.TIME: KeyType.INT,
    TypeId.TIMESTAMP: KeyType.INT, TypeId.TIMESTAMPTZ: KeyType.INT,
    TypeId.FLOAT4: KeyType.FLOAT, TypeId.FLOAT8: KeyType.FLOAT,
    TypeId.BOOL: KeyType.BOOL,
    TypeId.TEXT: KeyType.TEXT, TypeId.VARCHAR: KeyType.TEXT, TypeId.BPCHAR: KeyType.TEXT,
    TypeId.NAME: KeyType.TEXT, TypeId.CHAR: KeyType.TEXT,
    TypeId.BYTEA: KeyType.BYTES,
    TypeId.NUMERIC: KeyType.NUMERIC,
    TypeId.UUID: KeyType.UUID,
}  # fmt: skip


def key_type(t: SqlType) -> KeyType | None:
    """How values of ``t`` are encoded in a primary or index key; None if ``t`` cannot be a key
    column (json, jsonb, interval, arrays)."""
    if t.array:
        return None
    if isinstance(t.id, EnumType):
        return KeyType.FLOAT  # the label's sort order (storage_codec.key_value_fn)
    return _KEY_TYPES.get(t.id)


@dataclass(frozen=True, slots=True)
class Interval:
    """A Postgres interval: months, days and microseconds are kept apart, as Postgres does."""

    months: int = 0
    days: int = 0
    microseconds: int = 0

    def __neg__(self) -> Interval:
        return Interval(-self.months, -self.days, -self.microseconds)

    def __add__(self, other: Interval) -> Interval:
        return Interval(
            self.months + other.months,
            self.days + other.days,
            self.microseconds + other.microseconds,
        )

    def __sub__(self, other: Interval) -> Interval:
        return self + (-other)

    def sort_key(self) -> int:
        """Postgres compares intervals as if a month were 30 days and a day 24 hours."""
        return (self.months * 30 + self.days) * 86_400_000_000 + self.microseconds
