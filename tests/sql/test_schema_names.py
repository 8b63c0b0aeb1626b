"""Schema names without a server: catalog keys, the search path, and the rewriting of a
statement's table references (server/sql/schemas.py)."""

from __future__ import annotations

import sqlglot

from percolator.server.sql import schemas
from percolator.server.sql.catalog import Catalog, SchemaDef, TableDef


def _table(name: str, table_id: int) -> TableDef:
    return TableDef(table_id, name, (), (), f"t{table_id}")


def _catalog() -> Catalog:
    catalog = Catalog().with_schema(SchemaDef("s", 20000, "postgres"))
    return catalog.with_table(_table("t", 1)).with_table(_table("s.t", 2))


def _qualified(sql: str, catalog: Catalog) -> str:
    node = sqlglot.parse_one(sql, read="postgres")
    return schemas.qualify(node, catalog).sql(dialect="postgres")


def test_keys_split_into_schema_and_name() -> None:
    assert schemas.key("public", "t") == "t"
    assert schemas.key("s", "t") == "s.t"
    assert schemas.split("s.t") == ("s", "t")
    assert schemas.split("t") == ("public", "t")
    assert schemas.split_text('"S".t') == ["S", "t"]
    assert schemas.split_text("S.T") == ["s", "t"]


def test_a_catalog_stored_before_schemas_is_all_public() -> None:
    catalog = Catalog().with_table(_table("t", 1))
    schemas.use_search_path('"$user", public', "postgres")
    assert schemas.is_default_path(catalog)
    assert schemas.resolve(catalog, "t") == "t"
    node = sqlglot.parse_one("SELECT * FROM t", read="postgres")
    assert schemas.qualify(node, catalog) is node  # nothing to rewrite: the tree is shared


def test_qualified_and_unqualified_references() -> None:
    catalog = _catalog()
    schemas.use_search_path('"$user", public', "postgres")
    assert _qualified("SELECT s.t.a FROM s.t", catalog) == 'SELECT t.a FROM "s.t" AS "t"'
    assert _qualified("SELECT * FROM public.t", catalog) == "SELECT * FROM t"
    schemas.use_search_path("s, public", "postgres")
    assert schemas.current_schemas(Catalog(), False) == ["public"]  # s does not exist there
    assert _qualified("SELECT * FROM t", catalog) == 'SELECT * FROM "s.t" AS "t"'
    assert _qualified("WITH t AS (SELECT 1) SELECT * FROM t", catalog).endswith("FROM t")
    assert _qualified("CREATE TABLE u (a INT)", catalog) == 'CREATE TABLE "s.u" (a INT)'
    schemas.use_search_path('"$user", public', "s")  # $user is the session's user
    assert schemas.path(catalog) == ["s", "public"]
    schemas.use_search_path('"$user", public', "postgres")
