"""SQLAlchemy 2 against the SQL server, through ``postgresql+psycopg`` and ``postgresql+asyncpg``.

SQLAlchemy's first connect asks for ``version()``, ``current_schema()``, the isolation level and
``standard_conforming_strings`` (and psycopg's hstore probe, ``to_regtype`` in a savepoint);
Core DDL goes through ``create_all``/``drop_all`` (which look tables up in pg_catalog first);
statements carry bind casts (``$1::INTEGER``); reflection reads pg_catalog only, and what it
finds is compared with what the same DDL gives on a real Postgres.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from decimal import Decimal

import pytest
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.engine.interfaces import ReflectedForeignKeyConstraint
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from tests.server.conftest import SqlServer

DRIVERS = ["psycopg", "asyncpg"]


def _table(metadata: sa.MetaData, name: str, *, serial: bool = False) -> sa.Table:
    """A table with the common column kinds SQLAlchemy users declare (a ``serial`` key if
    asked, else ids given by the client)."""
    return sa.Table(
        name,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=serial),
        sa.Column("code", sa.String(20), nullable=False, unique=True),
        sa.Column("title", sa.String(100)),
        sa.Column("price", sa.Numeric(10, 2)),
        sa.Column("active", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("created", sa.DateTime),
        sa.Column("seen", sa.DateTime(timezone=True)),
        sa.Column("body", sa.Text),
        sa.Column("qty", sa.BigInteger),
        sa.Index(f"ix_{name}_title", "title"),
    )


@pytest.fixture(scope="module")
def sync_engine(sql_server: SqlServer) -> Iterator[sa.Engine]:
    """A ``postgresql+psycopg`` engine on the server."""
    engine = sa.create_engine(sql_server.url("postgresql+psycopg"))
    yield engine
    engine.dispose()


def _async_url(server: SqlServer) -> str:
    return server.url("postgresql+asyncpg")


# ---------------------------------------------------------------------------- first connect


def test_first_connect_psycopg(sync_engine: sa.Engine) -> None:
    with sync_engine.connect() as conn:
        dialect = conn.dialect
        assert dialect.server_version_info is not None
        assert dialect.server_version_info >= (15,)
        assert dialect.default_schema_name == "public"
        # Snapshot isolation: the server's default level is REPEATABLE READ (docs/transactions.md).
        default = conn.exec_driver_sql("SHOW default_transaction_isolation").scalar_one()
        assert conn.get_isolation_level() == default.upper() == "REPEATABLE READ"
        assert conn.execute(sa.text("SELECT 1 + :x"), {"x": 41}).scalar_one() == 42
        assert conn.execute(sa.select(sa.func.version())).scalar_one().startswith("PostgreSQL")


def test_first_connect_asyncpg(sql_server: SqlServer) -> None:
    async def main() -> None:
        engine = create_async_engine(_async_url(sql_server), pool_pre_ping=True)
        try:
            async with engine.connect() as conn:
                assert conn.dialect.server_version_info >= (15,)
                assert conn.dialect.default_schema_name == "public"
                value = await conn.scalar(sa.text("SELECT 1 + :x"), {"x": 41})
                assert value == 42
            async with engine.connect() as conn:  # pre-ping on checkout
                assert await conn.scalar(sa.text("SELECT 'again'")) == "again"
        finally:
            await engine.dispose()

    asyncio.run(main())


# ---------------------------------------------------------------------------- Core


def _core_crud(conn: sa.Connection, table: sa.Table) -> None:
    when = dt.datetime(2024, 5, 6, 7, 8, 9)
    rows = [
        {
            "id": i,
            "code": f"c{i}",
            "title": f"t{i}",
            "price": Decimal(i) / 4,
            "created": when,
            "qty": i,
        }
        for i in range(1, 6)
    ]
    conn.execute(table.insert(), rows)
    inserted = conn.execute(
        table.insert().returning(table.c.id, table.c.active), {"id": 6, "code": "c6"}
    ).one()
    assert inserted == (6, True)
    conn.execute(table.delete().where(table.c.id == 6))
    query = sa.select(table.c.code, table.c.price, table.c.active).where(
        table.c.price > Decimal("0.5"), table.c.title.like("t%")
    )
    got = conn.execute(query.order_by(table.c.id)).all()
    assert got == [
        ("c3", Decimal("0.75"), True),
        ("c4", Decimal("1.00"), True),
        ("c5", Decimal("1.25"), True),
    ]
    updated = conn.execute(
        table.update().where(table.c.qty >= 4).values(active=False, qty=table.c.qty * 10)
    )
    assert updated.rowcount == 2
    total = conn.execute(sa.select(sa.func.sum(table.c.qty)).where(~table.c.active)).scalar()
    assert total == 90
    assert conn.execute(table.delete().where(table.c.id.in_([1, 2]))).rowcount == 2
    assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 3
    with pytest.raises(sa.exc.IntegrityError) as dup:
        conn.execute(table.insert().values(id=99, code="c3"))
    assert getattr(dup.value.orig, "sqlstate", None) == "23505"


def test_core_create_crud_drop_psycopg(sync_engine: sa.Engine) -> None:
    metadata = sa.MetaData()
    table = _table(metadata, "core_pg")
    metadata.create_all(sync_engine, checkfirst=False)
    with sync_engine.connect() as conn:
        _core_crud(conn, table)
        conn.rollback()
    with sync_engine.begin() as conn:
        conn.execute(table.insert().values(id=1, code="kept"))
    with sync_engine.connect() as conn:
        assert conn.execute(sa.select(table.c.code)).scalars().all() == ["kept"]
    metadata.drop_all(sync_engine, checkfirst=False)


def test_core_create_crud_drop_asyncpg(sql_server: SqlServer) -> None:
    async def main() -> None:
        engine = create_async_engine(_async_url(sql_server))
        metadata = sa.MetaData()
        table = _table(metadata, "core_apg")
        try:
            async with engine.begin() as conn:
                await conn.run_sync(metadata.create_all, checkfirst=False)
            async with engine.connect() as conn:
                await conn.run_sync(_core_crud, table)
                await conn.rollback()
            async with engine.begin() as conn:
                await conn.run_sync(metadata.drop_all, checkfirst=False)
        finally:
            await engine.dispose()

    asyncio.run(main())


@pytest.mark.parametrize("driver", DRIVERS)
def test_create_all_and_drop_all_check_first(sql_server: SqlServer, driver: str) -> None:
    metadata = sa.MetaData()
    table = _table(metadata, f"checked_{driver}")

    def exercise(conn: sa.Connection) -> None:
        metadata.create_all(conn)
        metadata.create_all(conn)  # exists already: no CREATE, no error
        assert sa.inspect(conn).has_table(table.name)
        metadata.drop_all(conn)
        assert not sa.inspect(conn).has_table(table.name)

    if driver == "psycopg":
        engine = sa.create_engine(sql_server.url("postgresql+psycopg"))
        with engine.begin() as conn:
            exercise(conn)
        engine.dispose()
        return

    async def main() -> None:
        engine = create_async_engine(_async_url(sql_server))
        try:
            async with engine.begin() as conn:
                await conn.run_sync(exercise)
        finally:
            await engine.dispose()

    asyncio.run(main())


# ---------------------------------------------------------------------------- ORM


class Base(orm.DeclarativeBase):
    """Declarative base of the ORM tests."""


class Author(Base):
    """An author with books (a relationship without a foreign key constraint)."""

    __tablename__ = "orm_author"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=False)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(50), unique=True)
    books: orm.Mapped[list[Book]] = orm.relationship(
        primaryjoin="Author.id == foreign(Book.author_id)",
        order_by="Book.id",
        lazy="selectin",
    )


class Book(Base):
    """A book."""

    __tablename__ = "orm_book"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=False)
    author_id: orm.Mapped[int]
    title: orm.Mapped[str] = orm.mapped_column(sa.String(100))
    price: orm.Mapped[Decimal | None] = orm.mapped_column(sa.Numeric(8, 2))
    published: orm.Mapped[dt.date | None]


def _orm_crud(session: orm.Session) -> None:
    ann = Author(id=1, name="ann")
    ann.books = [
        Book(id=10, title="first", price=Decimal("10.00"), published=dt.date(2001, 1, 1)),
        Book(id=11, title="second", price=Decimal("12.50")),
    ]
    session.add_all([ann, Author(id=2, name="bob")])
    session.commit()
    session.expunge_all()
    found = session.scalars(sa.select(Author).where(Author.name == "ann")).one()
    assert [b.title for b in found.books] == ["first", "second"]
    cheap = session.scalars(sa.select(Book).where(Book.price < 11).order_by(Book.id)).all()
    assert [b.title for b in cheap] == ["first"]
    cheap[0].price = Decimal("9.99")
    session.commit()
    assert session.scalar(sa.select(Book.price).where(Book.title == "first")) == Decimal("9.99")
    session.delete(session.scalars(sa.select(Book).where(Book.title == "second")).one())
    session.commit()
    counts = session.execute(
        sa.select(Author.name, sa.func.count(Book.id))
        .outerjoin(Book, Book.author_id == Author.id)
        .group_by(Author.name)
        .order_by(Author.name)
    ).all()
    assert counts == [("ann", 1), ("bob", 0)]
    session.add(Author(id=3, name="ann"))
    with pytest.raises(sa.exc.IntegrityError):
        session.commit()
    session.rollback()
    assert session.scalar(sa.select(sa.func.count()).select_from(Author)) == 2


def test_orm_session_psycopg(sync_engine: sa.Engine) -> None:
    Base.metadata.create_all(sync_engine, checkfirst=False)
    try:
        with orm.Session(sync_engine) as session:
            _orm_crud(session)
    finally:
        Base.metadata.drop_all(sync_engine, checkfirst=False)


def test_orm_session_asyncpg(sql_server: SqlServer) -> None:
    async def main() -> None:
        engine = create_async_engine(_async_url(sql_server))
        try:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all, checkfirst=False)
            async with AsyncSession(engine) as session:
                await session.run_sync(_orm_crud)
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.drop_all, checkfirst=False)
        finally:
            await engine.dispose()

    asyncio.run(main())


class Base2(orm.DeclarativeBase):
    """Declarative base of the serial-key test."""


class Note(Base2):
    """A row with a server-generated (serial) key."""

    __tablename__ = "orm_note"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    text: orm.Mapped[str] = orm.mapped_column(sa.String(40))


def _serial_keys(conn: sa.Connection) -> None:
    metadata = sa.MetaData()
    table = _table(metadata, "serial_keys", serial=True)
    metadata.create_all(conn, checkfirst=False)
    Base2.metadata.create_all(conn, checkfirst=False)
    rows = [{"code": f"s{i}"} for i in range(3)]
    ids = conn.execute(table.insert().returning(table.c.id), rows).scalars().all()
    assert sorted(ids) == [1, 2, 3]
    with orm.Session(conn) as session:
        notes = [Note(text="a"), Note(text="b")]
        session.add_all(notes)  # insertmanyvalues: INSERT ... SELECT ... RETURNING
        session.flush()
        assert [n.id for n in notes] == [1, 2]
    # Dropped (not rolled back: see test_rolled_back_serial_starts_again).
    Base2.metadata.drop_all(conn, checkfirst=False)
    metadata.drop_all(conn, checkfirst=False)


def test_serial_keys_psycopg(sync_engine: sa.Engine) -> None:
    with sync_engine.begin() as conn:
        _serial_keys(conn)


def test_serial_keys_asyncpg(sql_server: SqlServer) -> None:
    async def main() -> None:
        engine = create_async_engine(_async_url(sql_server))
        try:
            async with engine.begin() as conn:
                await conn.run_sync(_serial_keys)
        finally:
            await engine.dispose()

    asyncio.run(main())


def test_rolled_back_serial_starts_again(sync_engine: sa.Engine) -> None:
    metadata = sa.MetaData()
    table = _table(metadata, "serial_again", serial=True)
    for _ in range(2):
        with sync_engine.connect() as conn:
            metadata.create_all(conn, checkfirst=False)
            new_id = conn.execute(table.insert().returning(table.c.id), {"code": "x"}).scalar()
            conn.rollback()
    assert new_id == 1


def test_pandas_read_sql(sync_engine: sa.Engine) -> None:
    pd = pytest.importorskip("pandas")
    with sync_engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE frame (id int PRIMARY KEY, x float8, label text)")
        conn.exec_driver_sql("INSERT INTO frame VALUES (1, 0.5, 'a'), (2, 1.5, 'b')")
    frame = pd.read_sql("SELECT id, x, label FROM frame ORDER BY id", sync_engine)
    assert list(frame.columns) == ["id", "x", "label"]
    assert frame["x"].sum() == 2.0 and list(frame["label"]) == ["a", "b"]


def test_pandas_to_sql_round_trip(sync_engine: sa.Engine) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "n": [1, 2, 3],
            "x": [0.5, float("nan"), 2.25],
            "label": ["a", None, "c"],
            "at": pd.to_datetime(["2024-01-01 10:00", "2024-06-01 12:30", None]),
            "flag": [True, False, True],
        }
    )
    for _ in range(2):  # the second time, if_exists="replace" drops and creates it again
        frame.to_sql("pandas_out", sync_engine, if_exists="replace", index=True)
    back = pd.read_sql("SELECT * FROM pandas_out ORDER BY index", sync_engine)
    assert list(back.columns) == ["index", "n", "x", "label", "at", "flag"]
    assert back["n"].tolist() == [1, 2, 3]
    assert back["x"].isna().tolist() == [False, True, False]
    assert back["label"].tolist()[0::2] == ["a", "c"] and back["label"].isna().tolist()[1]
    assert back["at"].iloc[1] == pd.Timestamp("2024-06-01 12:30") and pd.isna(back["at"].iloc[2])
    assert back["flag"].tolist() == [True, False, True]
    frame.to_sql("pandas_out", sync_engine, if_exists="append", index=True)
    assert pd.read_sql("SELECT count(*) AS c FROM pandas_out", sync_engine)["c"][0] == 6


# ---------------------------------------------------------------------------- reflection

REFLECTION_DDL = [
    """CREATE TABLE refl_item (
        id serial PRIMARY KEY,
        code varchar(20) NOT NULL UNIQUE,
        title text,
        price numeric(10,2),
        qty bigint DEFAULT 0,
        small smallint,
        ratio double precision,
        flag boolean NOT NULL,
        created timestamp,
        seen timestamptz,
        day date,
        uid uuid,
        doc jsonb,
        raw bytea)""",
    "CREATE INDEX ix_refl_item_title ON refl_item (title)",
    "CREATE UNIQUE INDEX ix_refl_item_day_small ON refl_item (day, small)",
    "CREATE TABLE refl_pair (a int, b text, note varchar(5), PRIMARY KEY (a, b))",
    """CREATE TABLE refl_gen (
        id int PRIMARY KEY, price numeric(8,2), qty int,
        total numeric GENERATED ALWAYS AS (price * qty) STORED,
        label text GENERATED ALWAYS AS (upper('q' || id)) STORED)""",
    "CREATE TABLE refl_expr (id int PRIMARY KEY, email text, name text, a int, b int)",
    "CREATE UNIQUE INDEX refl_expr_lower_email ON refl_expr (lower(email))",
    "CREATE INDEX refl_expr_mixed ON refl_expr (lower(name), id, (a + b) DESC)",
]


@pytest.fixture(scope="module")
def reflected(sync_engine: sa.Engine, reference_dsn: str) -> Iterator[tuple[sa.Engine, sa.Engine]]:
    """(ours, reference): engines on the server and on the real Postgres, after the same
    REFLECTION_DDL ran on both."""
    reference = sa.create_engine(sa.make_url(reference_dsn).set(drivername="postgresql+psycopg"))
    for engine in (reference, sync_engine):
        with engine.begin() as conn:
            for ddl in REFLECTION_DDL:
                conn.exec_driver_sql(ddl)
    yield sync_engine, reference
    reference.dispose()


REFLECTED = ("refl_item", "refl_pair", "refl_gen", "refl_expr")

# SQLAlchemy reads index and constraint columns with
#   SELECT ..., unnest(pg_catalog.pg_index.indkey) AS attnum,
#          generate_subscripts(pg_catalog.pg_index.indkey, 1) AS ord, ...
#   FROM pg_catalog.pg_constraint JOIN pg_catalog.pg_index ON ... conindid = indexrelid ...
# (get_pk_constraint, get_unique_constraints, get_indexes; MetaData.reflect uses all three):
# set-returning functions in the select list over int2vector, and a $n::regclass parameter.


def _columns(engine: sa.Engine, table: str) -> list[tuple[object, ...]]:
    return [
        (
            c["name"],
            str(c["type"]),
            c["nullable"],
            c.get("autoincrement"),
            c["default"] is None,
            c.get("computed"),  # a generated column: {"sqltext": ..., "persisted": True}
        )
        for c in sa.inspect(engine).get_columns(table)
    ]


def _both(reflected: tuple[sa.Engine, sa.Engine], read: object) -> None:
    """Assert that ``read(engine, table)`` gives the same on both servers for every table."""
    ours, reference = reflected
    for table in REFLECTED:
        expected = read(reference, table)  # type: ignore[operator]
        assert read(ours, table) == expected, table  # type: ignore[operator]


def test_reflect_table_names(reflected: tuple[sa.Engine, sa.Engine]) -> None:
    ours, reference = reflected
    names = sorted(t for t in sa.inspect(reference).get_table_names() if t.startswith("refl_"))
    assert names == sorted(REFLECTED)
    assert sorted(t for t in sa.inspect(ours).get_table_names() if t.startswith("refl_")) == names


def test_reflect_columns(reflected: tuple[sa.Engine, sa.Engine]) -> None:
    _both(reflected, _columns)


def test_reflect_primary_keys(reflected: tuple[sa.Engine, sa.Engine]) -> None:
    _both(reflected, lambda e, t: sa.inspect(e).get_pk_constraint(t)["constrained_columns"])


def test_reflect_indexes(reflected: tuple[sa.Engine, sa.Engine]) -> None:
    def indexes(engine: sa.Engine, table: str) -> list[tuple[object, ...]]:
        found = sa.inspect(engine).get_indexes(table)
        # An index on expressions: None among column_names where Postgres has an expression,
        # the expressions' texts in "expressions", the DESC in column_sorting.
        return sorted(
            (
                i["name"],
                tuple(i["column_names"]),
                i["unique"],
                tuple(i.get("expressions") or ()),
                tuple(sorted((i.get("column_sorting") or {}).items())),
            )
            for i in found
        )

    _both(reflected, indexes)


def test_reflect_unique_constraints(reflected: tuple[sa.Engine, sa.Engine]) -> None:
    def uniques(engine: sa.Engine, table: str) -> list[tuple[object, ...]]:
        found = sa.inspect(engine).get_unique_constraints(table)
        return sorted((u["name"], tuple(u["column_names"])) for u in found)

    _both(reflected, uniques)


def test_metadata_reflect(reflected: tuple[sa.Engine, sa.Engine]) -> None:
    def tables(engine: sa.Engine) -> dict[str, list[tuple[object, ...]]]:
        metadata = sa.MetaData()
        metadata.reflect(engine, only=list(REFLECTED))
        return {
            name: [(c.name, str(c.type), c.primary_key, c.nullable) for c in t.columns]
            for name, t in sorted(metadata.tables.items())
        }

    ours, reference = reflected
    assert tables(ours) == tables(reference)


# ---------------------------------------------------------------------------- foreign keys

FOREIGN_KEY_DDL = [
    "CREATE TABLE fk_parent (id int PRIMARY KEY, code text UNIQUE, a int, b int, UNIQUE (a, b))",
    """CREATE TABLE fk_child (
        id int PRIMARY KEY,
        p int REFERENCES fk_parent ON DELETE CASCADE,
        code text REFERENCES fk_parent (code) ON UPDATE CASCADE ON DELETE SET NULL,
        x int, y int,
        CONSTRAINT fk_child_xy FOREIGN KEY (y, x) REFERENCES fk_parent (b, a)
            ON UPDATE RESTRICT ON DELETE NO ACTION)""",
    "CREATE TABLE fk_tree (id int PRIMARY KEY, up int REFERENCES fk_tree)",
]
FOREIGN_KEY_TABLES = ("fk_parent", "fk_child", "fk_tree")


@pytest.fixture(scope="module")
def with_foreign_keys(
    reflected: tuple[sa.Engine, sa.Engine],
) -> tuple[sa.Engine, sa.Engine]:
    """The reflection engines after FOREIGN_KEY_DDL ran on both servers."""
    for engine in reflected:
        with engine.begin() as conn:
            for ddl in FOREIGN_KEY_DDL:
                conn.exec_driver_sql(ddl)
    return reflected


def test_reflect_foreign_keys(with_foreign_keys: tuple[sa.Engine, sa.Engine]) -> None:
    """get_foreign_keys parses pg_get_constraintdef's text: the same dicts as on Postgres."""
    ours, reference = with_foreign_keys
    found: dict[str, list[ReflectedForeignKeyConstraint]] = {}
    for table in FOREIGN_KEY_TABLES:
        expected = sorted(sa.inspect(reference).get_foreign_keys(table), key=lambda f: f["name"])
        found[table] = sorted(sa.inspect(ours).get_foreign_keys(table), key=lambda f: f["name"])
        assert found[table] == expected, table
    p_fkey = next(f for f in found["fk_child"] if f["name"] == "fk_child_p_fkey")
    assert p_fkey["constrained_columns"] == ["p"]
    assert (p_fkey["referred_table"], p_fkey["referred_columns"]) == ("fk_parent", ["id"])
    assert p_fkey["options"] == {"ondelete": "CASCADE"}


def test_metadata_reflect_foreign_keys(with_foreign_keys: tuple[sa.Engine, sa.Engine]) -> None:
    """MetaData.reflect builds the same ForeignKey objects (it reads all tables' keys at once
    through get_multi_foreign_keys), and sorts tables by them for create/drop order."""

    def keys(engine: sa.Engine) -> tuple[dict[str, list[tuple[object, ...]]], list[str]]:
        metadata = sa.MetaData()
        metadata.reflect(engine, only=list(FOREIGN_KEY_TABLES))
        found = {
            name: sorted(
                (
                    fk.name,
                    tuple(c.name for c in fk.columns),
                    tuple(e.target_fullname for e in fk.elements),
                    fk.ondelete,
                    fk.onupdate,
                )
                for fk in t.foreign_key_constraints
            )
            for name, t in sorted(metadata.tables.items())
        }
        return found, [t.name for t in metadata.sorted_tables]

    ours, reference = with_foreign_keys
    found, order = keys(ours)
    assert (found, order) == keys(reference)
    assert ("fk_child_xy", ("y", "x"), ("fk_parent.b", "fk_parent.a"), None, "RESTRICT") in found[
        "fk_child"
    ]
    assert order.index("fk_parent") < order.index("fk_child")


def test_core_foreign_keys_round_trip(sync_engine: sa.Engine) -> None:
    """Tables declared with ForeignKey in Core: create_all's DDL, then reflection gives the
    keys back."""
    metadata = sa.MetaData()
    sa.Table("rt_owner", metadata, sa.Column("id", sa.Integer, primary_key=True))
    sa.Table(
        "rt_pet",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("owner_id", sa.Integer, sa.ForeignKey("rt_owner.id", ondelete="SET NULL")),
    )
    metadata.create_all(sync_engine)
    try:
        (fk,) = sa.inspect(sync_engine).get_foreign_keys("rt_pet")
        assert fk["constrained_columns"] == ["owner_id"]
        assert (fk["referred_table"], fk["referred_columns"]) == ("rt_owner", ["id"])
        assert fk["options"] == {"ondelete": "SET NULL"}
    finally:
        metadata.drop_all(sync_engine)
    assert not sa.inspect(sync_engine).has_table("rt_pet")
