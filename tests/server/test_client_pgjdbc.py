"""pgjdbc (the PostgreSQL JDBC driver) against the SQL server.

pgjdbc uses the extended protocol for everything: unnamed statements first, named ones with
binary results from the fifth execution (``prepareThreshold``), batches of Bind/Execute, named
portals with row limits when a fetch size is set outside autocommit, and pg_catalog queries for
DatabaseMetaData. One JVM runs every check (``java/JdbcCheck.java``) and prints one line per
check; the tests assert on those lines.

The driver jar comes from Debian's ``libpostgresql-jdbc-java``; without it the module is skipped.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.server.conftest import SqlServer

JAR = Path("/usr/share/java/postgresql.jar")
SOURCE = Path(__file__).parent / "java" / "JdbcCheck.java"

pytestmark = [
    pytest.mark.skipif(
        not JAR.exists(),
        reason=f"pgjdbc not installed ({JAR} missing): apt-get install -y libpostgresql-jdbc-java",
    ),
    pytest.mark.skipif(
        shutil.which("javac") is None or shutil.which("java") is None,
        reason="no JDK (javac/java) on PATH",
    ),
]

Results = dict[str, tuple[bool, str]]


@pytest.fixture(scope="module")
def jdbc(sql_server: SqlServer, tmp_path_factory: pytest.TempPathFactory) -> Results:
    """Compile and run JdbcCheck once against the server: check name -> (ok, result)."""
    classes = tmp_path_factory.mktemp("jdbc")
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", str(JAR), str(SOURCE)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    url = f"jdbc:postgresql://{sql_server.host}:{sql_server.port}/postgres"
    proc = subprocess.run(
        ["java", "-cp", f"{JAR}:{classes}", "JdbcCheck", url, sql_server.user],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    results: Results = {}
    for line in proc.stdout.splitlines():
        name, status, rest = line.split("\t", 2)
        results[name] = (status == "OK", rest)
    return results


def ok(results: Results, name: str) -> str:
    """The result of a check that must have succeeded."""
    assert name in results, f"check {name} did not run"
    success, value = results[name]
    assert success, f"{name} failed: {value}"
    return value


def error_state(results: Results, name: str) -> str:
    """The SQLSTATE of a check that must have failed."""
    success, value = results[name]
    assert not success, f"{name} should have failed, gave {value}"
    return value.split("\t", 1)[0]


def test_connect_and_create(jdbc: Results) -> None:
    assert ok(jdbc, "connect") == "PostgreSQL 15"
    assert ok(jdbc, "create") == "done"


def test_statement_execute_query(jdbc: Results) -> None:
    assert ok(jdbc, "execute_query") == "1|name1;2|name2;3|name3"


def test_literal_columns(jdbc: Results) -> None:
    assert ok(jdbc, "literal_columns") == "1|two|NULL"


def test_prepared_statement_parameters_and_binary_results(jdbc: Results) -> None:
    assert ok(jdbc, "prepared_insert") == "8"
    # Eight executions: the first four unnamed with text results, then the named statement
    # with binary results; both must read the same.
    rows = ok(jdbc, "prepared_select").split(";")
    assert rows == [
        f"{i}|name{i}|{i}.25|2024-01-0{i} 10:11:12.5|{str(i % 2 == 0).lower()}|NULL"
        for i in range(1, 9)
    ]
    assert ok(jdbc, "prepared_filters") == "3"


def test_execute_batch(jdbc: Results) -> None:
    assert ok(jdbc, "batch") == "100 100"


def test_commit_and_rollback(jdbc: Results) -> None:
    assert ok(jdbc, "transaction") == "200"


def test_fetch_size_reads_through_a_named_portal(jdbc: Results) -> None:
    assert ok(jdbc, "fetch_size") == "100 5050"


def test_result_set_metadata(jdbc: Results) -> None:
    assert ok(jdbc, "result_metadata") == (
        "id:int4:4,name:varchar:12,amount:numeric:2,at:timestamp:93,flag:bool:-7,"
        "scale=2,precision=12"
    )


def test_unique_violation_sqlstate(jdbc: Results) -> None:
    assert error_state(jdbc, "unique_violation") == "23505"
    assert ok(jdbc, "usable_after_error") == "9"


def test_database_metadata_get_tables(jdbc: Results) -> None:
    assert ok(jdbc, "get_tables") == "jf:TABLE,jt:TABLE"


def test_database_metadata_get_columns(jdbc: Results) -> None:
    assert ok(jdbc, "get_columns") == (
        "id:int4:4:NO,name:varchar:12:YES,amount:numeric:2:YES,at:timestamp:93:YES,"
        "flag:bool:-7:YES,note:text:12:YES"
    )


def test_database_metadata_foreign_keys(jdbc: Results) -> None:
    """getImportedKeys / getExportedKeys, as pgjdbc gives them against Postgres 15 (UPDATE_RULE
    2 = SET NULL, DELETE_RULE 0 = CASCADE, DEFERRABILITY 7 = not deferrable)."""
    assert ok(jdbc, "foreign_keys") == (
        "imported,kp.b>kc.y:1:2:0:kc_fk:kp_pkey:7,kp.a>kc.x:2:2:0:kc_fk:kp_pkey:7,"
        "exported,kp.b>kc.y:1:2:0:kc_fk:kp_pkey:7,kp.a>kc.x:2:2:0:kc_fk:kp_pkey:7"
    )
