"""The system catalogs (pg_catalog, information_schema) and catalog functions, checked against a
real Postgres: the same schema is created there and in a Catalog, and the rows clients read
(pg_attribute, pg_index, pg_constraint, pg_attrdef, pg_type, information_schema.columns, ...)
and the functions' text (format_type, pg_get_indexdef, pg_get_constraintdef, pg_get_expr) must
agree. A drift test compares every declared column list with the real catalog's."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
import sqlglot

from percolator.server.sql import catalog_functions as cf
from percolator.server.sql import pg_catalog_tables as pgc
from percolator.server.sql import system_tables
from percolator.server.sql import types as T
from percolator.server.sql.catalog import (
    FIRST_USER_OID,
    Catalog,
    CheckDef,
    ColumnDef,
    FkAction,
    ForeignKeyDef,
    IndexDef,
    RoleDef,
    SequenceDef,
    TableDef,
)
from percolator.server.sql.types import SqlType, TypeId
from tests.conftest import create_database

# The schema, as Postgres DDL and as the Catalog our DDL builds for it.
DDL = """
CREATE TABLE orders (
    a int, b varchar(20), c numeric(10,2) CHECK (c > 0), d serial, e text DEFAULT 'x',
    f char(3), g timestamptz DEFAULT CURRENT_TIMESTAMP, h bool DEFAULT true, i int DEFAULT -1,
    j bigint, k double precision, l int[], m uuid, n date, o jsonb, p smallint, q bytea,
    "Mixed" text, r timestamp, s numeric,
    PRIMARY KEY (a, b), UNIQUE (e), CHECK (a > 0 AND b IS NOT NULL)
);
CREATE UNIQUE INDEX orders_f_idx ON orders (f DESC, a);
CREATE TABLE items (id bigserial PRIMARY KEY, name text NOT NULL, qty int DEFAULT 2 + 3);
CREATE INDEX items_name_idx ON items (name);
CREATE SEQUENCE counter START 10 INCREMENT 5;
CREATE TABLE lines (
    id int PRIMARY KEY, item_id bigint REFERENCES items ON DELETE CASCADE, oa int,
    ob varchar(20), note text, ff char(3), "Up" int REFERENCES lines,
    FOREIGN KEY (oa, ob) REFERENCES orders ON UPDATE CASCADE ON DELETE SET NULL,
    FOREIGN KEY (ob, oa) REFERENCES orders (b, a) ON UPDATE RESTRICT ON DELETE SET DEFAULT,
    CONSTRAINT "Note FK" FOREIGN KEY (note) REFERENCES orders (e) ON UPDATE SET NULL,
    FOREIGN KEY (oa, ff) REFERENCES orders (a, f) ON DELETE RESTRICT
);
"""


def build_catalog() -> Catalog:
    c = ColumnDef
    orders = TableDef(
        id=1,
        name="orders",
        columns=(
            c(1, "a", T.INT4, True),
            c(2, "b", T.varchar(20), True),
            c(3, "c", T.numeric(10, 2)),
            c(4, "d", T.INT4, True, "nextval('orders_d_seq'::regclass)", "orders_d_seq"),
            c(5, "e", T.TEXT, False, "'x'"),
            c(6, "f", T.bpchar(3)),
            c(7, "g", T.TIMESTAMPTZ, False, "CURRENT_TIMESTAMP"),
            c(8, "h", T.BOOL, False, "TRUE"),
            c(9, "i", T.INT4, False, "-1"),
            c(10, "j", T.INT8),
            c(11, "k", T.FLOAT8),
            c(12, "l", T.INT4.array_of()),
            c(13, "m", T.UUID),
            c(14, "n", T.DATE),
            c(15, "o", T.JSONB),
            c(16, "p", T.INT2),
            c(17, "q", T.BYTEA),
            c(18, "Mixed", T.TEXT),
            c(19, "r", T.TIMESTAMP),
            c(20, "s", T.NUMERIC),
        ),
        primary_key=(1, 2),
        storage="t2",
        indexes=(
            IndexDef(4, "orders_e_key", (5,), True, "i4", constraint=True),
            IndexDef(5, "orders_f_idx", (6, 1), True, "i5", descending=(True, False)),
        ),
        # As sqlglot writes the expressions DDL received.
        checks=(
            CheckDef("orders_c_check", "c > 0"),
            CheckDef("orders_check", "a > 0 AND NOT b IS NULL"),
        ),
        next_column_id=21,
    )
    items = TableDef(
        id=7,
        name="items",
        columns=(
            c(1, "id", T.INT8, True, "nextval('items_id_seq'::regclass)", "items_id_seq"),
            c(2, "name", T.TEXT, True),
            c(3, "qty", T.INT4, False, "2 + 3"),
        ),
        primary_key=(1,),
        storage="t8",
        indexes=(IndexDef(10, "items_name_idx", (2,), False, "i10"),),
        next_column_id=4,
    )
    fk = ForeignKeyDef
    lines = TableDef(
        id=11,
        name="lines",
        columns=(
            c(1, "id", T.INT4, True),
            c(2, "item_id", T.INT8),
            c(3, "oa", T.INT4),
            c(4, "ob", T.varchar(20)),
            c(5, "note", T.TEXT),
            c(6, "ff", T.bpchar(3)),
            c(7, "Up", T.INT4),
        ),
        primary_key=(1,),
        storage="t12",
        # Named as Postgres names them; (oa, ff) references the plain unique index orders_f_idx.
        foreign_keys=(
            fk("lines_item_id_fkey", (2,), 7, (1,), on_delete=FkAction.CASCADE),
            fk("lines_Up_fkey", (7,), 11, (1,)),
            fk("lines_oa_ob_fkey", (3, 4), 1, (1, 2), FkAction.SET_NULL, FkAction.CASCADE),
            fk("lines_ob_oa_fkey", (4, 3), 1, (2, 1), FkAction.SET_DEFAULT, FkAction.RESTRICT),
            fk("Note FK", (5,), 1, (5,), on_update=FkAction.SET_NULL),
            fk("lines_oa_ff_fkey", (3, 6), 1, (1, 6), on_delete=FkAction.RESTRICT),
        ),
        next_column_id=8,
    )
    catalog = Catalog(next_id=13).with_table(orders).with_table(items).with_table(lines)
    catalog = catalog.with_sequence(SequenceDef("orders_d_seq", FIRST_USER_OID + 3, "orders"))
    catalog = catalog.with_sequence(SequenceDef("items_id_seq", FIRST_USER_OID + 9, "items"))
    catalog = catalog.with_sequence(
        SequenceDef("counter", FIRST_USER_OID + 12, "", start=10, increment=5)
    )
    return catalog.with_role(RoleDef("alice", 16500, scram_verifier="SCRAM-SHA-256$4096:x"))


@dataclass
class FakeCtx:
    catalog: Catalog
    user: str = "postgres"
    database: str = "shop"
    backend_pid: int = 4242
    settings: dict[str, str] = field(
        default_factory=lambda: {"application_name": "psql", "timezone": "UTC", "work_mem": "4MB"}
    )
    bootstrap_user: str = "postgres"
    transaction_time: dt.datetime = dt.datetime(2024, 1, 2, tzinfo=dt.UTC)
    statement_time: dt.datetime = dt.datetime(2024, 1, 2, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def ctx() -> FakeCtx:
    return FakeCtx(build_catalog())


def rows_of(ctx: FakeCtx, schema: str, name: str) -> list[dict[str, object]]:
    table = system_tables.lookup(schema, name)
    assert table is not None, f"{schema}.{name} is not registered"
    names = [c for c, _ in table.columns]
    return [dict(zip(names, r, strict=True)) for r in table.rows(ctx)]


# -- a real Postgres with the same schema -------------------------------------------------------


@pytest.fixture(scope="module")
def pg(embedded_pg: Any) -> Iterator[psycopg.Connection]:
    dsn = asyncio.run(create_database(embedded_pg.dsn, "pgcat"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(DDL)
        yield conn


def query(conn: psycopg.Connection, sql: str, *params: object) -> list[tuple[Any, ...]]:
    return conn.execute(sql, params).fetchall()


def pg_oid(conn: psycopg.Connection, name: str) -> int:
    return query(conn, "SELECT %s::regclass::oid", name)[0][0]


# -- shapes ---------------------------------------------------------------------------------------


def _value_ok(t: SqlType, v: object) -> bool:
    if v is None:
        return True
    if t.array or t.id in (TypeId.INT2VECTOR, TypeId.OIDVECTOR):
        return isinstance(v, list)
    if t.id in (TypeId.INT2, TypeId.INT4, TypeId.INT8, TypeId.OID, TypeId.REGPROC, TypeId.REGTYPE):
        return isinstance(v, int) and not isinstance(v, bool)
    if t.id is TypeId.FLOAT4:
        return isinstance(v, float)
    if t.id is TypeId.BOOL:
        return isinstance(v, bool)
    if t.id is TypeId.CHAR:
        return isinstance(v, str) and len(v) <= 1
    if t.id in (TypeId.NAME, TypeId.TEXT, TypeId.VARCHAR):
        return isinstance(v, str) and (t.length is None or len(v) <= t.length)
    if t.id is TypeId.TIMESTAMPTZ:
        return isinstance(v, dt.datetime) and v.tzinfo is not None
    return False


def test_every_row_fits_its_columns(ctx: FakeCtx) -> None:
    tables = system_tables.all_tables()
    assert len({t.oid for t in tables}) == len(tables), "system table OIDs must be unique"
    for table in tables:
        rows = table.rows(ctx)
        if hasattr(rows, "__aiter__"):
            continue  # read from the store (percolator.*): checked in tests/observers
        for row in rows:
            assert len(row) == len(table.columns), table.name
            for (name, t), v in zip(table.columns, row, strict=True):
                assert _value_ok(t, v), f"{table.schema}.{table.name}.{name} = {v!r} ({t})"


def test_relation_oids_are_unique(ctx: FakeCtx) -> None:
    oids = [r.oid for r in pgc.relations(ctx.catalog)]
    assert len(oids) == len(set(oids))
    constraints = [c.oid for c in pgc.all_constraints(ctx.catalog)]
    assert len(constraints) == len(set(constraints))
    assert not set(constraints) & set(oids)


def test_pg_class(ctx: FakeCtx) -> None:
    by_name = {r["relname"]: r for r in rows_of(ctx, "pg_catalog", "pg_class")}
    orders = by_name["orders"]
    assert orders["oid"] == FIRST_USER_OID + 1
    assert (orders["relkind"], orders["relnamespace"], orders["relam"]) == ("r", 2200, 2)
    assert (orders["relnatts"], orders["relchecks"], orders["relhasindex"]) == (20, 2, True)
    # Referenced by lines: Postgres's foreign key triggers live on both tables.
    assert orders["relhastriggers"] is True
    assert by_name["orders_pkey"]["oid"] == pgc.pk_index_oid(ctx.catalog.tables["orders"])
    assert (by_name["orders_pkey"]["relkind"], by_name["orders_pkey"]["relam"]) == ("i", 403)
    assert by_name["orders_d_seq"]["relkind"] == "S"
    assert by_name["pg_class"]["oid"] == 1259
    assert by_name["pg_class"]["relnamespace"] == 11
    assert by_name["pg_roles"]["relkind"] == "v"


def test_pg_attribute_typmods_and_flags(ctx: FakeCtx) -> None:
    orders = ctx.catalog.tables["orders"]
    attrs = {
        r["attname"]: r
        for r in rows_of(ctx, "pg_catalog", "pg_attribute")
        if r["attrelid"] == orders.oid
    }
    assert attrs["b"]["atttypmod"] == 24
    assert attrs["c"]["atttypmod"] == 655366
    assert attrs["a"]["attnotnull"] and attrs["b"]["attnotnull"]
    assert attrs["d"]["atthasdef"] and not attrs["a"]["atthasdef"]
    assert [attrs[n]["attnum"] for n in ("a", "b", "c")] == [1, 2, 3]
    assert attrs["b"]["attcollation"] == 100 and attrs["a"]["attcollation"] == 0
    assert attrs["a"]["attidentity"] == "" and attrs["a"]["attisdropped"] is False


def test_pg_index_keys(ctx: FakeCtx) -> None:
    orders = ctx.catalog.tables["orders"]
    idx = {r["indexrelid"]: r for r in rows_of(ctx, "pg_catalog", "pg_index")}
    pk = idx[pgc.pk_index_oid(orders)]
    assert pk["indkey"] == [1, 2] and pk["indisprimary"] and pk["indisunique"]
    assert pk["indnatts"] == pk["indnkeyatts"] == 2
    f_idx = idx[FIRST_USER_OID + 5]
    assert f_idx["indkey"] == [6, 1] and f_idx["indoption"] == [3, 0]
    assert not f_idx["indisprimary"] and f_idx["indpred"] is None


def test_roles_never_show_verifiers_in_pg_roles(ctx: FakeCtx) -> None:
    roles = {r["rolname"]: r for r in rows_of(ctx, "pg_catalog", "pg_roles")}
    assert roles["postgres"]["oid"] == 10 and roles["postgres"]["rolsuper"]
    assert roles["alice"]["rolpassword"] == "********"
    authid = {r["rolname"]: r for r in rows_of(ctx, "pg_catalog", "pg_authid")}
    assert authid["alice"]["rolpassword"] == "SCRAM-SHA-256$4096:x"
    assert cf.pg_get_userbyid(ctx, 16500) == "alice"


def test_functions_resolve_constraint_and_index_oids(ctx: FakeCtx) -> None:
    orders = ctx.catalog.tables["orders"]
    pk = pgc.pk_index_oid(orders)
    assert cf.pg_get_indexdef(ctx, pk) == (
        "CREATE UNIQUE INDEX orders_pkey ON public.orders USING btree (a, b)"
    )
    for c in pgc.constraints_of(orders):
        if c.index is not None:  # an index's OID finds the constraint it implements
            assert cf.pg_get_constraintdef(ctx, c.index.oid) == cf.pg_get_constraintdef(ctx, c.oid)
    assert cf.pg_get_constraintdef(ctx, 12345) is None
    assert cf.relation_oid(ctx, "orders_pkey") == pk
    assert cf.relation_oid(ctx, "public.orders_d_seq") == FIRST_USER_OID + 3
    assert cf.relation_oid(ctx, "pg_catalog.pg_class") == 1259
    assert cf.relation_name(ctx, pk) == "orders_pkey"
    assert int(cf.proc_lookup("pg_catalog.array_in")) == 750


# -- against a real Postgres ----------------------------------------------------------------------


def test_pg_attribute_matches_postgres(ctx: FakeCtx, pg: psycopg.Connection) -> None:
    for table in ("orders", "items"):
        real = query(
            pg,
            """SELECT attname, format_type(atttypid, atttypmod), atttypid, atttypmod, attlen,
                      attnum, attnotnull, atthasdef, attcollation, attbyval, attalign,
                      attstorage, attndims
               FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0
               ORDER BY attnum""",
            table,
        )
        oid = ctx.catalog.tables[table].oid
        ours = [
            (
                r["attname"],
                cf.format_type(r["atttypid"], r["atttypmod"]),
                r["atttypid"],
                r["atttypmod"],
                r["attlen"],
                r["attnum"],
                r["attnotnull"],
                r["atthasdef"],
                r["attcollation"],
                r["attbyval"],
                r["attalign"],
                r["attstorage"],
                r["attndims"],
            )
            for r in rows_of(ctx, "pg_catalog", "pg_attribute")
            if r["attrelid"] == oid
        ]
        assert ours == [tuple(x) for x in real]


def test_defaults_match_postgres(ctx: FakeCtx, pg: psycopg.Connection) -> None:
    real = query(
        pg,
        """SELECT c.relname, a.attname, pg_get_expr(d.adbin, d.adrelid),
                  pg_get_expr(d.adbin, d.adrelid, true)
           FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
           JOIN pg_class c ON c.oid = d.adrelid ORDER BY 1, 2""",
    )
    names = {t.oid: (t.name, [c.name for c in t.columns]) for t in ctx.catalog.tables.values()}
    ours = sorted(
        (
            names[r["adrelid"]][0],
            names[r["adrelid"]][1][r["adnum"] - 1],
            cf.pg_get_expr(ctx, r["adbin"], r["adrelid"]),
            cf.pg_get_expr(ctx, r["adbin"], r["adrelid"], True),
        )
        for r in rows_of(ctx, "pg_catalog", "pg_attrdef")
    )
    assert ours == sorted(tuple(x) for x in real)


def test_constraints_match_postgres(ctx: FakeCtx, pg: psycopg.Connection) -> None:
    real = query(
        pg,
        """SELECT conname, contype, conkey, connoinherit, convalidated, conindid <> 0,
                  pg_get_constraintdef(oid), pg_get_constraintdef(oid, true)
           FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY conname""",
    )
    ours = sorted(
        (
            r["conname"],
            r["contype"],
            r["conkey"],
            r["connoinherit"],
            r["convalidated"],
            r["conindid"] != 0,
            cf.pg_get_constraintdef(ctx, r["oid"]),
            cf.pg_get_constraintdef(ctx, r["oid"], True),
        )
        for r in rows_of(ctx, "pg_catalog", "pg_constraint")
    )
    assert ours == [tuple(x) for x in real]


def test_indexes_match_postgres(ctx: FakeCtx, pg: psycopg.Connection) -> None:
    real = query(
        pg,
        """SELECT c.relname, t.relname, indkey::int2[], indoption::int2[], indcollation::oid[],
                  indclass::oid[], indisunique, indisprimary, indnatts,
                  pg_get_indexdef(indexrelid), pg_get_indexdef(indexrelid, 0, true),
                  pg_get_indexdef(indexrelid, 1, true), pg_get_indexdef(indexrelid, 3, true)
           FROM pg_index JOIN pg_class c ON c.oid = indexrelid
           JOIN pg_class t ON t.oid = indrelid
           WHERE t.relnamespace = 'public'::regnamespace ORDER BY 1""",
    )
    tables = {t.oid: t.name for t in ctx.catalog.tables.values()}
    names = {r.oid: r.name for r in pgc.relations(ctx.catalog)}
    ours = sorted(
        (
            names[r["indexrelid"]],
            tables[r["indrelid"]],
            r["indkey"],
            r["indoption"],
            r["indcollation"],
            r["indclass"],
            r["indisunique"],
            r["indisprimary"],
            r["indnatts"],
            cf.pg_get_indexdef(ctx, r["indexrelid"]),
            cf.pg_get_indexdef(ctx, r["indexrelid"], 0, True),
            cf.pg_get_indexdef(ctx, r["indexrelid"], 1, True),
            cf.pg_get_indexdef(ctx, r["indexrelid"], 3, True),
        )
        for r in rows_of(ctx, "pg_catalog", "pg_index")
    )
    assert ours == [tuple(x) for x in real]
    indexes = {r["indexname"]: r["indexdef"] for r in rows_of(ctx, "pg_catalog", "pg_indexes")}
    real_indexes = dict(
        query(pg, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")
    )
    assert indexes == real_indexes


def test_pg_class_flags_match_postgres(ctx: FakeCtx, pg: psycopg.Connection) -> None:
    real = query(
        pg,
        """SELECT relname, relkind, relnatts, relchecks, relhasindex, relam, relpersistence,
                  relreplident, relhastriggers, relispartition, reltuples
           FROM pg_class WHERE relnamespace = 'public'::regnamespace ORDER BY relname""",
    )
    ours = sorted(
        (
            r["relname"],
            r["relkind"],
            r["relnatts"],
            r["relchecks"],
            r["relhasindex"],
            r["relam"],
            r["relpersistence"],
            r["relreplident"],
            r["relhastriggers"],
            r["relispartition"],
            r["reltuples"],
        )
        for r in rows_of(ctx, "pg_catalog", "pg_class")
        if r["relnamespace"] == 2200
    )
    assert ours == [tuple(x) for x in real]


def test_sequences_match_postgres(ctx: FakeCtx, pg: psycopg.Connection) -> None:
    for table, column in (("orders", "d"), ("items", "id"), ("orders", "a")):
        (real,) = query(pg, "SELECT pg_get_serial_sequence(%s, %s)", table, column)[0]
        assert cf.pg_get_serial_sequence(ctx, table, column) == real
    real_seq = query(
        pg,
        """SELECT c.relname, seqtypid, seqstart, seqincrement, seqmax, seqmin, seqcache, seqcycle
           FROM pg_sequence JOIN pg_class c ON c.oid = seqrelid ORDER BY 1""",
    )
    names = {r.oid: r.name for r in pgc.relations(ctx.catalog)}
    ours = sorted(
        (names[r[0]], *r[1:]) for r in system_tables.lookup("pg_catalog", "pg_sequence").rows(ctx)
    )  # type: ignore[union-attr]
    assert ours == [tuple(x) for x in real_seq]
    real_view = query(
        pg,
        """SELECT sequencename, data_type::text, start_value, min_value, max_value, increment_by,
                  cycle, cache_size FROM pg_sequences ORDER BY 1""",
    )
    ours_view = sorted(
        (r["sequencename"], str(r["data_type"]), r["start_value"], r["min_value"], r["max_value"],
         r["increment_by"], r["cycle"], r["cache_size"])
        for r in rows_of(ctx, "pg_catalog", "pg_sequences")
    )  # fmt: skip
    assert ours_view == [tuple(x) for x in real_view]
    real_info = query(
        pg,
        """SELECT sequence_name, data_type, numeric_precision, numeric_precision_radix,
                  numeric_scale, start_value, minimum_value, maximum_value, increment,
                  cycle_option FROM information_schema.sequences ORDER BY 1""",
    )
    ours_info = sorted(
        tuple(r)[2:] for r in system_tables.lookup("information_schema", "sequences").rows(ctx)
    )  # type: ignore[union-attr]
    assert ours_info == [tuple(x) for x in real_info]


def test_pg_type_matches_postgres(pg: psycopg.Connection) -> None:
    oids = list(pgc.PG_TYPES)
    real = query(
        pg,
        """SELECT oid, typname, typnamespace, typlen, typbyval, typtype, typcategory,
                  typispreferred, typisdefined, typdelim, typrelid, typsubscript::text, typelem,
                  typarray, typinput::text, typoutput::text, typreceive::text, typsend::text,
                  typmodin::text, typmodout::text, typanalyze::text, typalign, typstorage,
                  typnotnull, typbasetype, typtypmod, typndims, typcollation
           FROM pg_type WHERE oid = ANY(%s) ORDER BY oid""",
        oids,
    )
    table = system_tables.lookup("pg_catalog", "pg_type")
    assert table is not None
    names = [c for c, _ in table.columns]
    wanted = [
        "oid", "typname", "typnamespace", "typlen", "typbyval", "typtype", "typcategory",
        "typispreferred", "typisdefined", "typdelim", "typrelid", "typsubscript", "typelem",
        "typarray", "typinput", "typoutput", "typreceive", "typsend", "typmodin", "typmodout",
        "typanalyze", "typalign", "typstorage", "typnotnull", "typbasetype", "typtypmod",
        "typndims", "typcollation",
    ]  # fmt: skip
    ours = []
    for row in table.rows(None):
        values = dict(zip(names, row, strict=True))
        ours.append(
            tuple(
                str(values[n]) if isinstance(values[n], cf.OidName) else values[n] for n in wanted
            )
        )
    assert sorted(ours) == [tuple(x) for x in real]
    # Every type the engine knows has its row (and its array type's).
    for t in TypeId:
        assert t.oid in pgc.PG_TYPES and (not t.array_oid or t.array_oid in pgc.PG_TYPES)


def test_format_type_matches_postgres(pg: psycopg.Connection) -> None:
    cases = [
        (T.varchar(20), "varchar(20)"), (T.numeric(10, 2), "numeric(10,2)"),
        (T.bpchar(3), "char(3)"), (T.NUMERIC, "numeric"), (T.INT4.array_of(), "int[]"),
        (T.varchar(5).array_of(), "varchar(5)[]"), (T.TIMESTAMPTZ, "timestamptz"),
        (T.TIMESTAMP, "timestamp"), (T.TIME, "time"), (T.CHAR, '"char"'), (T.NAME, "name"),
        (T.FLOAT8, "float8"), (T.FLOAT4, "real"), (T.BPCHAR, "bpchar"), (T.INT2, "int2"),
        (T.JSONB, "jsonb"), (T.UUID, "uuid"), (T.INTERVAL, "interval"), (T.BYTEA, "bytea"),
        (T.OID, "oid"), (T.REGCLASS, "regclass"), (T.TEXT.array_of(), "text[]"),
    ]  # fmt: skip
    for t, spelled in cases:
        (real,) = query(
            pg, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = 'x'",
            _probe_table(pg, spelled),
        )[0]  # fmt: skip
        assert cf.format_type(t.oid, t.typmod) == real, spelled
    assert cf.format_type(None, None) is None
    assert query(pg, "SELECT format_type(23, NULL), format_type(1043, NULL)")[0] == (
        cf.format_type(23, None),
        cf.format_type(1043, None),
    )


_probes: dict[str, str] = {}


def _probe_table(pg: psycopg.Connection, type_text: str) -> str:
    name = f"probe_{len(_probes)}"
    pg.execute(f"CREATE TABLE {name} (x {type_text})")
    _probes[type_text] = name
    return name


def test_information_schema_columns_match_postgres(ctx: FakeCtx, pg: psycopg.Connection) -> None:
    cols = """table_name, column_name, ordinal_position, column_default, is_nullable, data_type,
        character_maximum_length, character_octet_length, numeric_precision,
        numeric_precision_radix, numeric_scale, datetime_precision, udt_schema, udt_name,
        dtd_identifier, is_identity, is_generated, is_updatable"""
    real = query(
        pg,
        f"SELECT {cols} FROM information_schema.columns WHERE table_schema = 'public' "
        "AND table_name IN ('orders', 'items', 'lines') ORDER BY 1, 3",
    )
    wanted = [c.strip() for c in cols.split(",")]
    ours = sorted(
        (tuple(r[c] for c in wanted) for r in rows_of(ctx, "information_schema", "columns")
         if r["table_schema"] == "public"),
        key=lambda r: (r[0], r[2]),
    )  # fmt: skip
    assert ours == [tuple(x) for x in real]


def test_information_schema_constraints_match_postgres(
    ctx: FakeCtx, pg: psycopg.Connection
) -> None:
    real_oids = {t: pg_oid(pg, t) for t in ("orders", "items", "lines")}
    ours_oids = {t.name: t.oid for t in ctx.catalog.tables.values()}

    def normal(name: str, table: str, oids: dict[str, int]) -> str:
        return name.replace(f"_{oids[table]}_", "_<oid>_")

    real = query(
        pg,
        """SELECT constraint_name, table_name, constraint_type, is_deferrable, initially_deferred,
                  enforced, nulls_distinct
           FROM information_schema.table_constraints WHERE table_schema = 'public'""",
    )
    ours = [
        (r["constraint_name"], r["table_name"], r["constraint_type"], r["is_deferrable"],
         r["initially_deferred"], r["enforced"], r["nulls_distinct"])
        for r in rows_of(ctx, "information_schema", "table_constraints")
    ]  # fmt: skip
    assert sorted((normal(r[0], r[1], ours_oids), *r[1:]) for r in ours) == sorted(
        (normal(r[0], r[1], real_oids), *r[1:]) for r in real
    )
    real_keys = query(
        pg,
        """SELECT constraint_name, table_name, column_name, ordinal_position,
                  position_in_unique_constraint
           FROM information_schema.key_column_usage WHERE table_schema = 'public'""",
    )
    ours_keys = [
        (r["constraint_name"], r["table_name"], r["column_name"], r["ordinal_position"],
         r["position_in_unique_constraint"])
        for r in rows_of(ctx, "information_schema", "key_column_usage")
    ]  # fmt: skip
    assert sorted(ours_keys) == sorted(tuple(x) for x in real_keys)


def test_foreign_keys_match_postgres(ctx: FakeCtx, pg: psycopg.Connection) -> None:
    """pg_constraint's foreign key columns (OIDs compared as names), pg_get_constraintdef, and
    the information_schema views that describe references."""
    real = query(
        pg,
        """SELECT conname, conrelid::regclass::text, confrelid::regclass::text,
                  conindid::regclass::text, conkey, confkey, confupdtype, confdeltype,
                  confmatchtype, condeferrable, condeferred, convalidated, conislocal,
                  coninhcount, connoinherit, contypid, conparentid,
                  pg_get_constraintdef(oid), pg_get_constraintdef(oid, true)
           FROM pg_constraint WHERE contype = 'f' ORDER BY conname""",
    )
    names = {r.oid: r.name for r in pgc.relations(ctx.catalog)}
    ours = sorted(
        (
            r["conname"], names[r["conrelid"]], names[r["confrelid"]], names[r["conindid"]],
            r["conkey"], r["confkey"], r["confupdtype"], r["confdeltype"], r["confmatchtype"],
            r["condeferrable"], r["condeferred"], r["convalidated"], r["conislocal"],
            r["coninhcount"], r["connoinherit"], r["contypid"], r["conparentid"],
            cf.pg_get_constraintdef(ctx, r["oid"]), cf.pg_get_constraintdef(ctx, r["oid"], True),
        )
        for r in rows_of(ctx, "pg_catalog", "pg_constraint")
        if r["contype"] == "f"
    )  # fmt: skip
    assert len(ours) == 6
    assert ours == [tuple(x) for x in real]
    for view, order in (
        ("referential_constraints", "constraint_name"),
        ("constraint_column_usage", "constraint_name, table_name, column_name"),
    ):
        table = system_tables.lookup("information_schema", view)
        assert table is not None
        assert table.oid == pg_oid(pg, f"information_schema.{view}")
        cols = [c for c, _ in table.columns if not c.endswith("_catalog")]
        real_rows = query(
            pg,
            f"SELECT {', '.join(cols)} FROM information_schema.{view} "
            f"WHERE constraint_schema = 'public' ORDER BY {order}",
        )
        ours_rows = sorted(
            tuple(r[c] for c in cols) for r in rows_of(ctx, "information_schema", view)
        )
        assert ours_rows == sorted(tuple(x) for x in real_rows), view
        catalogs = {
            r[c]
            for r in rows_of(ctx, "information_schema", view)
            for c in r
            if c.endswith("_catalog")
        }
        assert catalogs <= {ctx.database, None}


def test_fixed_catalog_rows_match_postgres(ctx: FakeCtx, pg: psycopg.Connection) -> None:
    checks = {
        "pg_am": ("SELECT oid, amname, amhandler::text, amtype FROM pg_am WHERE oid IN (2, 403)",
                  ("oid", "amname", "amhandler", "amtype")),
        "pg_collation": ("SELECT oid, collname, collnamespace, collprovider, collcollate, "
                         "collctype FROM pg_collation WHERE oid IN (100, 950, 951)",
                         ("oid", "collname", "collnamespace", "collprovider", "collcollate",
                          "collctype")),
        "pg_tablespace": ("SELECT oid, spcname FROM pg_tablespace", ("oid", "spcname")),
        "pg_opclass": ("SELECT oid, opcmethod, opcname, opcfamily, opcintype, opcdefault, "
                       "opckeytype FROM pg_opclass WHERE oid = ANY(%s)",
                       ("oid", "opcmethod", "opcname", "opcfamily", "opcintype", "opcdefault",
                        "opckeytype")),
    }  # fmt: skip
    for name, (sql, cols) in checks.items():
        ours = sorted(
            tuple(str(r[c]) if isinstance(r[c], cf.OidName) else r[c] for c in cols)
            for r in rows_of(ctx, "pg_catalog", name)
        )
        params = [[r["oid"] for r in rows_of(ctx, "pg_catalog", name)]] if "%s" in sql else []
        assert ours == sorted(tuple(x) for x in query(pg, sql, *params)), name
    namespaces = {r["nspname"]: r["oid"] for r in rows_of(ctx, "pg_catalog", "pg_namespace")}
    real_ns = dict(query(pg, "SELECT nspname, oid FROM pg_namespace"))
    for n in ("pg_catalog", "public", "pg_toast"):
        assert namespaces[n] == real_ns[n]
    real_owner = query(
        pg, "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'public'"
    )
    assert cf.pg_get_userbyid(ctx, cf.DATABASE_OWNER_ROLE_OID) == real_owner[0][0]


def test_pg_size_pretty_matches_postgres(pg: psycopg.Connection) -> None:
    sizes = [0, 1, 10239, 10240, 10752, 20479, 1234567, 10**10, 10**15, 10**18, -20000, -1]
    real = [query(pg, "SELECT pg_size_pretty(%s::bigint)", n)[0][0] for n in sizes]
    assert [cf.pg_size_pretty(n) for n in sizes] == real


# -- drift: the declared columns are the real catalogs' -------------------------------------------

_REAL_COLUMNS = """
SELECT a.attname,
       CASE WHEN t.typbasetype <> 0 THEN format_type(t.typbasetype, t.typtypmod)
            ELSE format_type(a.atttypid, a.atttypmod) END
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
"""


def test_declared_columns_are_postgres_columns(pg: psycopg.Connection) -> None:
    """Names, order and types of every declared table equal the real catalog's (information
    schema domains compared by their base types)."""
    assert pgc.SPECS
    for (schema, name), spec in pgc.SPECS.items():
        real = query(pg, _REAL_COLUMNS, f"{schema}.{name}")
        assert spec == [tuple(x) for x in real], f"{schema}.{name}"
        table = system_tables.lookup(schema, name)
        assert table is not None and [c for c, _ in table.columns] == [c for c, _ in spec]


# -- expression text: checks and defaults as Postgres deparses them -----------------------------

CHECKS = [
    "e LIKE 'a%'", "p BETWEEN 1 AND 5", "k > 0", "e IN ('a','b')", "a IN (1, 2, 3)",
    "(a > 0 OR a < -10) AND p <> 3", "lower(e) <> ''", "a + p * 2 > 3", "b <> 'x'",
    "a - (p - 1) > 0", "a - p - 1 > 0", "NOT (a = 1)", "e IS NULL OR a > 0", "c >= 1.5",
    "k < 2.5", "length(e) < 10", "e ILIKE 'x%'", "b = 'x' OR b IS NULL", "n > '2020-01-01'",
    "j > 0", "a <> -1", "e || 'x' <> 'y'", "COALESCE(a, 0) > 0", "a * (p + 1) > 0",
    "upper(b) = 'X'", "(a + 1) IS NOT NULL", "a > 0 AND (p > 0 OR j > 0)",
    "NOT (a > 0 AND p > 0)", "a * p / 2 > 1", "a / (p * 2) > 1",
    "a IN (1, 2) AND a > 0", "b IN ('x', 'y')", "e NOT IN ('q')", "a IN (1)", "NOT (a IN (1, 2))",
]  # fmt: skip

DEFAULTS = [
    ("bigint", T.INT8, "0"), ("smallint", T.INT2, "0"), ("numeric", T.NUMERIC, "0.5"),
    ("real", T.FLOAT4, "1.5"), ("varchar(5)", T.varchar(5), "'ab'"),
    ("date", T.DATE, "'2020-01-01'"), ("timestamp", T.TIMESTAMP, "current_timestamp"),
    ("bigint", T.INT8, "-3"), ("text", T.TEXT, "''"), ("bool", T.BOOL, "false"),
    ("uuid", T.UUID, "gen_random_uuid()"), ("numeric(10,2)", T.numeric(10, 2), "1.25"),
    ("jsonb", T.JSONB, "'{}'"), ("int", T.INT4, "2+3"), ("char(2)", T.bpchar(2), "'x'"),
    ("date", T.DATE, "current_date"), ("text", T.TEXT, "lower('X')"), ("int", T.INT4, "null"),
    ("text", T.TEXT, "'it''s'"), ("int", T.INT4, "(1 + 2) * 3"), ("numeric", T.NUMERIC, "-1.5"),
    ("int[]", T.INT4.array_of(), "'{1,2}'"),
]  # fmt: skip

_CHECK_COLUMNS = (
    ("a", "int", T.INT4), ("b", "varchar(20)", T.varchar(20)),
    ("c", "numeric(10,2)", T.numeric(10, 2)), ("e", "text", T.TEXT),
    ("k", "double precision", T.FLOAT8), ("p", "smallint", T.INT2),
    ("n", "date", T.DATE), ("j", "bigint", T.INT8),
)  # fmt: skip


def _as_ddl_stores(sql: str) -> str:
    """Expression text as our DDL keeps it (sqlglot's rendering)."""
    return sqlglot.parse_one(sql, read="postgres").sql(dialect="postgres")


def test_check_text_matches_postgres(pg: psycopg.Connection) -> None:
    columns = ", ".join(f"{n} {ty}" for n, ty, _ in _CHECK_COLUMNS)
    checks = ", ".join(f"CONSTRAINT c{i} CHECK ({x})" for i, x in enumerate(CHECKS))
    pg.execute(f"CREATE TABLE chk ({columns}, {checks})")
    real = {
        name: (plain, pretty)
        for name, plain, pretty in query(
            pg,
            "SELECT conname, pg_get_constraintdef(oid), pg_get_constraintdef(oid, true) "
            "FROM pg_constraint WHERE conrelid = 'chk'::regclass",
        )
    }
    table = TableDef(
        1, "chk",
        tuple(ColumnDef(i + 1, n, t) for i, (n, _, t) in enumerate(_CHECK_COLUMNS)),
        (), "t2",
        checks=tuple(CheckDef(f"c{i}", _as_ddl_stores(x)) for i, x in enumerate(CHECKS)),
    )  # fmt: skip
    ctx = FakeCtx(Catalog().with_table(table))
    for c in pgc.constraints_of(table):
        ours = (cf.pg_get_constraintdef(ctx, c.oid), cf.pg_get_constraintdef(ctx, c.oid, True))
        assert ours == real[c.name], CHECKS[int(c.name[1:])]


def test_default_text_matches_postgres(pg: psycopg.Connection) -> None:
    columns = ", ".join(f"c{i} {ty} DEFAULT {d}" for i, (ty, _, d) in enumerate(DEFAULTS))
    pg.execute(f"CREATE TABLE dflt ({columns})")
    real = dict(
        query(
            pg,
            """SELECT attname,
                      pg_get_expr(adbin, adrelid) || ' | ' || pg_get_expr(adbin, adrelid, true)
               FROM pg_attribute LEFT JOIN pg_attrdef ON attrelid = adrelid AND attnum = adnum
               WHERE attrelid = 'dflt'::regclass AND attnum > 0""",
        )
    )
    cols = tuple(
        ColumnDef(i + 1, f"c{i}", t, False, _as_ddl_stores(d))
        for i, (_, t, d) in enumerate(DEFAULTS)
    )
    table = TableDef(1, "dflt", cols, (), "t2")
    ctx = FakeCtx(Catalog().with_table(table))
    for c in cols:
        text = pgc.default_text(c)
        ours = None if text is None else f"{text} | {cf.pg_get_expr(ctx, text, table.oid, True)}"
        assert ours == real[c.name], c.default


def test_pg_get_expr_of_null_is_null(ctx: FakeCtx) -> None:
    """psql's \\d of an index passes indpred, NULL without a WHERE, with pretty = true."""
    assert cf.pg_get_expr(ctx, None, FIRST_USER_OID, True) is None


def test_tableoid_is_the_catalog_oid(ctx: FakeCtx) -> None:
    """System tables carry the hidden tableoid column (psql's \\dd joins on it)."""
    table = system_tables.lookup("pg_catalog", "pg_namespace")
    assert table is not None
    rows = list(system_tables.rows_with_tableoid(table)(ctx))  # type: ignore[arg-type]
    assert rows and all(r[-1] == 2615 for r in rows)
