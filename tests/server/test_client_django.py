"""Django, a real web framework, against the SQL server.

A small Django project is written to a temporary directory and driven through ``manage.py``
in subprocesses (Django's settings are process-wide, so each command gets its own process),
over psycopg 3 (``django.db.backends.postgresql``). What it exercises is what a Django
application does to a database:

- ``makemigrations`` / ``migrate`` / ``sqlmigrate`` / ``showmigrations``: DDL in a transaction,
  deferrable foreign keys, ``varchar_pattern_ops`` indexes, partial indexes and a conditional
  UniqueConstraint (``CREATE UNIQUE INDEX ... WHERE``), CHECK constraints, and a second
  migration that renames and alters fields and swaps constraints (and its reversal);
- the ORM: CRUD, lookups (icontains, startswith, in, range, date parts, JSON keys), annotate
  (``GROUP BY`` the primary key while selecting the row's other columns), Subquery / Exists,
  F expressions, select_related / prefetch_related, nested ``atomic`` (savepoints),
  ``select_for_update(nowait / skip_locked)`` against a second connection holding the lock,
  ``bulk_create`` (``INSERT ... SELECT * FROM unnest(%s::type[], ...)``) with
  ``ignore_conflicts`` and ``update_conflicts``, get_or_create / update_or_create;
- ``dumpdata`` / ``flush`` / ``loaddata`` (which resets sequences with ``SELECT setval(
  pg_get_serial_sequence(...), coalesce(max(id), 1), max(id) IS NOT NULL) FROM t``) and
  ``inspectdb``;
- the test runner: ``manage.py test --keepdb`` with the test database named as the
  deployment's one database; without ``--keepdb`` Django's ``CREATE DATABASE test_...`` is
  refused (a deployment has one database, docs/sql.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.server.conftest import SqlServer

pytest.importorskip("django")

SETTINGS = """
import os

SECRET_KEY = "test"
DEBUG = False
USE_TZ = True
TIME_ZONE = "Europe/Paris"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "shop"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": os.environ["PERCOLATOR_USER"],
        "HOST": os.environ["PERCOLATOR_HOST"],
        "PORT": os.environ["PERCOLATOR_PORT"],
        "TEST": {"NAME": os.environ.get("TEST_DB_NAME", "test_postgres")},
    }
}
"""

MANAGE = """
import sys

from django.core.management import execute_from_command_line

if __name__ == "__main__":
    execute_from_command_line(sys.argv)
"""

MODELS = """
import uuid

from django.db import models
from django.db.models import Q


class Category(models.Model):
    name = models.CharField(max_length=50, unique=True)
    parent = models.ForeignKey("self", null=True, on_delete=models.SET_NULL)


class Tag(models.Model):
    label = models.CharField(max_length=30, unique=True)


class Item(models.Model):
    class Status(models.TextChoices):
        DRAFT = "d", "Draft"
        LIVE = "l", "Live"

    id = models.BigAutoField(primary_key=True)
    uid = models.UUIDField(default=uuid.uuid4, unique=True)
    sku = models.CharField(max_length=20)
    title = models.TextField(db_index=True)
    price = models.DecimalField(max_digits=10, decimal_places=2)
    qty = models.IntegerField(default=0)
    status = models.CharField(max_length=1, choices=Status.choices, default=Status.DRAFT)
    attrs = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)
    category = models.ForeignKey(Category, on_delete=models.PROTECT, related_name="items")
    tags = models.ManyToManyField(Tag)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["sku"], condition=Q(status="l"), name="item_live_sku"),
            models.CheckConstraint(condition=Q(price__gte=0), name="item_price_nonneg"),
            models.UniqueConstraint(fields=["category", "title"], name="item_cat_title"),
        ]
        indexes = [
            models.Index(fields=["status", "-created"], name="item_status_created"),
            models.Index(fields=["price"], condition=Q(qty__gt=0), name="item_price_instock"),
        ]


class Line(models.Model):
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="lines")
    n = models.PositiveIntegerField()

    class Meta:
        unique_together = [("item", "n")]
"""

SECOND_MIGRATION = """
from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    dependencies = [("shop", "0001_initial")]

    operations = [
        migrations.RemoveConstraint(model_name="item", name="item_cat_title"),
        migrations.RemoveIndex(model_name="item", name="item_price_instock"),
        migrations.RenameField(model_name="item", old_name="qty", new_name="quantity"),
        migrations.AlterField(
            model_name="item", name="sku", field=models.CharField(max_length=40)
        ),
        migrations.AddField(
            model_name="item", name="weight", field=models.FloatField(null=True)
        ),
        migrations.AddIndex(
            model_name="item",
            index=models.Index(
                fields=["price"], condition=Q(quantity__gt=0), name="item_price_instock"
            ),
        ),
        migrations.AddConstraint(
            model_name="item",
            constraint=models.CheckConstraint(
                condition=Q(quantity__gte=0), name="item_quantity_nonneg"
            ),
        ),
    ]
"""

TESTS = """
from django.db import IntegrityError, transaction
from django.test import TestCase, TransactionTestCase

from shop.models import Category, Tag


class ShopTests(TestCase):
    @classmethod
    def setUpTestData(cls):
        cls.category = Category.objects.create(name="Books")

    def test_rolled_back_between_tests(self):
        Tag.objects.create(label="x")
        with self.assertRaises(IntegrityError), transaction.atomic():
            Tag.objects.create(label="x")
        self.assertEqual(Tag.objects.count(), 1)

    def test_sees_class_data(self):
        self.assertEqual(Category.objects.get().name, "Books")
        self.assertEqual(Tag.objects.count(), 0)


class ShopTransactionTests(TransactionTestCase):
    def test_flushed_after(self):
        Tag.objects.create(label="y")
        self.assertEqual(Tag.objects.count(), 1)
"""

# The ORM driver: each step raises AssertionError on a wrong answer; ``main`` prints a JSON
# line of results the test checks too.
DRIVE = '''
import datetime
import decimal
import json
import os
import sys
import threading
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")
django.setup()

from django.core.exceptions import ValidationError
from django.db import DatabaseError, IntegrityError, connections, transaction
from django.db.models import (
    Count, Exists, F, OuterRef, ProtectedError, Q, Subquery, Sum, Max,
)
from django.utils import timezone

from shop.models import Category, Item, Line, Tag


def crud():
    books = Category.objects.create(name="Books")
    games = Category.objects.create(name="Games", parent=books)
    for i in range(10):
        Item.objects.create(
            sku=f"S{i}", title=f"Item {i}", price=decimal.Decimal("1.50") * (i + 1), qty=i,
            status="l" if i % 2 else "d",
            attrs={"color": "red" if i % 3 == 0 else "blue", "size": i, "tags": ["a"]},
            category=books if i < 5 else games,
        )
    new, hot = Tag.objects.create(label="new"), Tag.objects.create(label="hot")
    Item.objects.get(sku="S1").tags.add(new, hot)
    item = Item.objects.get(sku="S3")
    assert isinstance(item.uid, uuid.UUID) and item.price == decimal.Decimal("6.00")
    assert item.attrs == {"color": "red", "size": 3, "tags": ["a"]}, item.attrs
    assert item.created.tzinfo is not None
    item.title = "Item three"
    item.save()
    assert Item.objects.get(uid=item.uid).title == "Item three"


def lookups():
    counts = {
        "icontains": Item.objects.filter(title__icontains="ITEM 1").count(),
        "startswith": Item.objects.filter(title__startswith="Item").count(),
        "in": Item.objects.filter(sku__in=["S1", "S2", "nope"]).count(),
        "range": Item.objects.filter(qty__range=(2, 4)).count(),
        "year": Item.objects.filter(created__year=timezone.localdate().year).count(),
        "date": Item.objects.filter(created__date=timezone.localdate()).count(),
        "json_key": Item.objects.filter(attrs__color="red").count(),
        "json_gte": Item.objects.filter(attrs__size__gte=5).count(),
        "has_key": Item.objects.filter(attrs__has_key="color").count(),
        "contains": Item.objects.filter(attrs__contains={"color": "blue"}).count(),
        "json_index": Item.objects.filter(attrs__tags__0="a").count(),
    }
    assert counts == {
        "icontains": 1, "startswith": 10, "in": 2, "range": 3, "year": 10, "date": 10,
        "json_key": 4, "json_gte": 5, "has_key": 10, "contains": 6, "json_index": 10,
    }, counts


def aggregates():
    agg = Item.objects.aggregate(n=Count("id"), total=Sum("qty"), top=Max("price"))
    assert agg == {"n": 10, "total": 45, "top": decimal.Decimal("15.00")}, agg
    # GROUP BY the primary key, selecting the category's other columns.
    cats = Category.objects.annotate(n=Count("items")).order_by("name")
    assert [(c.name, c.n) for c in cats] == [("Books", 5), ("Games", 5)]
    top = Item.objects.filter(category=OuterRef("pk")).order_by("-price")
    live = Item.objects.filter(category=OuterRef("pk"), status="l")
    rows = Category.objects.annotate(
        top=Subquery(top.values("sku")[:1]), live=Exists(live)
    ).order_by("name")
    assert [(c.top, c.live) for c in rows] == [("S4", True), ("S9", True)]
    Item.objects.filter(sku="S1").update(qty=F("qty") + 10)
    assert Item.objects.get(sku="S1").qty == 11
    items = list(Item.objects.select_related("category__parent").order_by("id"))
    assert items[7].category.parent.name == "Books"
    items = list(Item.objects.prefetch_related("tags").order_by("id"))
    assert sorted(t.label for t in items[1].tags.all()) == ["hot", "new"]


def atomic():
    with transaction.atomic():
        Tag.objects.create(label="outer")
        try:
            with transaction.atomic():
                Tag.objects.create(label="inner")
                Tag.objects.create(label="outer")
        except IntegrityError:
            pass
        with transaction.atomic():
            Tag.objects.create(label="inner2")
    labels = set(Tag.objects.values_list("label", flat=True))
    assert {"outer", "inner2"} <= labels and "inner" not in labels, labels


def for_update():
    locked, release = threading.Event(), threading.Event()

    def hold():
        with transaction.atomic():
            list(Item.objects.select_for_update().filter(sku__in=["S1", "S2"]))
            locked.set()
            release.wait(20)
        connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    assert locked.wait(20)
    try:
        try:
            with transaction.atomic():
                list(Item.objects.select_for_update(nowait=True).filter(sku="S1"))
            nowait = "no error"
        except DatabaseError as e:
            nowait = e.__cause__.sqlstate
        with transaction.atomic():
            free = Item.objects.select_for_update(skip_locked=True).filter(
                sku__in=["S1", "S2", "S3"]
            )
            skipped = sorted(free.values_list("sku", flat=True))
    finally:
        release.set()
        holder.join()
    assert (nowait, skipped) == ("55P03", ["S3"]), (nowait, skipped)


def bulk():
    Tag.objects.bulk_create([Tag(label=f"b{i}") for i in range(5)])
    Tag.objects.bulk_create([Tag(label=f"b{i}") for i in range(3, 8)], ignore_conflicts=True)
    assert Tag.objects.filter(label__startswith="b").count() == 8
    books = Category.objects.get(name="Books")
    rows = [Category(name="Books", parent=None), Category(name="Toys", parent=books)]
    done = Category.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["name"], update_fields=["parent"]
    )
    assert all(c.pk for c in done)
    assert Category.objects.get(name="Toys").parent == books
    tag, created = Tag.objects.get_or_create(label="goc")
    again, created_again = Tag.objects.get_or_create(label="goc")
    assert created and not created_again and again.pk == tag.pk
    cat, created = Category.objects.update_or_create(name="Toys", defaults={"parent": None})
    assert not created and cat.parent is None


def constraints():
    books = Category.objects.get(name="Books")
    live = Item.objects.filter(status="l").first()
    # The conditional UniqueConstraint (a partial unique index) binds only live items.
    Item.objects.create(sku=live.sku, title="draft twin", price=1, category=books)
    try:
        with transaction.atomic():
            Item.objects.create(
                sku=live.sku, title="live twin", price=1, status="l", category=books
            )
        raise AssertionError("live duplicate accepted")
    except IntegrityError as e:
        assert e.__cause__.diag.constraint_name == "item_live_sku", e
    try:
        Item(sku=live.sku, title="t", price=1, status="l", category=books).validate_constraints()
        raise AssertionError("validate_constraints passed")
    except ValidationError:
        pass
    try:
        with transaction.atomic():
            Item.objects.filter(sku="S1").update(price=-1)
        raise AssertionError("negative price accepted")
    except IntegrityError as e:
        assert e.__cause__.sqlstate == "23514", e
    line = Line.objects.create(item=live, n=1)
    try:
        books.delete()
        raise AssertionError("PROTECT did not protect")
    except ProtectedError:
        pass
    live.delete()
    assert not Line.objects.filter(pk=line.pk).exists()


def after_load():
    """After loaddata: the sequences were reset past the loaded ids."""
    top = Tag.objects.aggregate(m=Max("id"))["m"]
    tag = Tag.objects.create(label="after load")
    assert tag.pk > top, (tag.pk, top)
    assert Item.objects.count() == 10, Item.objects.count()


def after_second():
    """After the second migration: the renamed column and the new check are there."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT sum(quantity) FROM shop_item")
        total = cur.fetchone()[0]
        try:
            with transaction.atomic():
                cur.execute("UPDATE shop_item SET quantity = -1")
            raise AssertionError("check not added")
        except IntegrityError:
            pass
    print(json.dumps({"total": int(total)}))


if __name__ == "__main__":
    for step in sys.argv[1:]:
        globals()[step]()
    print(json.dumps({"ok": sys.argv[1:]}))
'''


@pytest.fixture(scope="module")
def project(sql_server: SqlServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Django project's directory (settings pointing at the module's server)."""
    root = tmp_path_factory.mktemp("django")
    files = {
        "manage.py": MANAGE,
        "drive.py": DRIVE,
        "proj/__init__.py": "",
        "proj/settings.py": SETTINGS,
        "shop/__init__.py": "",
        "shop/models.py": MODELS,
        "shop/tests.py": TESTS,
        "shop/migrations/__init__.py": "",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def _run(
    project: Path, server: SqlServer, *args: str, check: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python <args>`` in the project directory, against ``server``."""
    environ = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "proj.settings",
        "PERCOLATOR_HOST": server.host,
        "PERCOLATOR_PORT": str(server.port),
        "PERCOLATOR_USER": server.user,
        **env,
    }
    done = subprocess.run(
        [sys.executable, *args],
        cwd=project,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def _manage(project: Path, server: SqlServer, *args: str, **kw: object) -> str:
    return _run(project, server, "manage.py", *args, **kw).stdout  # type: ignore[arg-type]


def _drive(project: Path, server: SqlServer, *steps: str) -> list[dict[str, object]]:
    out = _run(project, server, "drive.py", *steps).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_migrate(project: Path, sql_server: SqlServer) -> None:
    _manage(project, sql_server, "makemigrations", "shop")
    sql = _manage(project, sql_server, "sqlmigrate", "shop", "0001")
    assert (
        'CREATE UNIQUE INDEX "item_live_sku" ON "shop_item" ("sku") WHERE "status" = \'l\'' in sql
    )
    assert "varchar_pattern_ops" in sql or "text_pattern_ops" in sql
    assert "DEFERRABLE INITIALLY DEFERRED" in sql
    _manage(project, sql_server, "migrate")
    shown = _manage(project, sql_server, "showmigrations", "shop")
    assert "[X] 0001_initial" in shown


def test_orm(project: Path, sql_server: SqlServer) -> None:
    steps = ["crud", "lookups", "aggregates", "atomic", "for_update", "bulk", "constraints"]
    assert _drive(project, sql_server, *steps)[-1] == {"ok": steps}


def test_dumpdata_flush_loaddata(project: Path, sql_server: SqlServer) -> None:
    fixture = project / "fixture.json"
    _manage(project, sql_server, "dumpdata", "shop", "--output", str(fixture))
    # Loaded back over the same rows (an update of each), then into emptied tables.
    _manage(project, sql_server, "loaddata", str(fixture))
    _manage(project, sql_server, "flush", "--no-input")
    out = _manage(project, sql_server, "loaddata", str(fixture))
    assert f"Installed {len(json.loads(fixture.read_text()))} object(s)" in out
    _drive(project, sql_server, "after_load")
    # sqlsequencereset prints the statements loaddata ran.
    reset = _manage(project, sql_server, "sqlsequencereset", "shop")
    assert "setval(pg_get_serial_sequence" in reset


def test_inspectdb(project: Path, sql_server: SqlServer) -> None:
    models = _manage(project, sql_server, "inspectdb", "shop_item", "shop_line")
    assert "id = models.BigAutoField(primary_key=True)" in models
    assert "uid = models.UUIDField(unique=True)" in models
    assert "price = models.DecimalField(max_digits=10, decimal_places=2)" in models
    assert "attrs = models.JSONField()" in models
    assert "category = models.ForeignKey('ShopCategory', models.DO_NOTHING)" in models
    assert "unique_together = (('item', 'n'),)" in models


def test_second_migration_and_back(project: Path, sql_server: SqlServer) -> None:
    (project / "shop/migrations/0002_second.py").write_text(
        textwrap.dedent(SECOND_MIGRATION).lstrip()
    )
    sql = _manage(project, sql_server, "sqlmigrate", "shop", "0002")
    assert 'RENAME COLUMN "qty" TO "quantity"' in sql
    _manage(project, sql_server, "migrate", "shop")
    # 0 + ... + 9, with S1 raised from 1 to 11 and then deleted (test_orm).
    assert _drive(project, sql_server, "after_second")[0] == {"total": 44}
    _manage(project, sql_server, "migrate", "shop", "0001")
    assert "[ ] 0002_second" in _manage(project, sql_server, "showmigrations", "shop")
    _manage(project, sql_server, "migrate", "shop")


def test_runner_keepdb(project: Path, sql_server: SqlServer) -> None:
    """``manage.py test --keepdb`` with TEST NAME set to the deployment's database: Django
    finds it in pg_database and uses it, as it is: empty it first (TransactionTestCase then
    flushes its tables after each test)."""
    _manage(project, sql_server, "flush", "--no-input")
    out = _run(
        project, sql_server, "manage.py", "test", "shop", "--keepdb", "--noinput",
        TEST_DB_NAME="postgres",
    )  # fmt: skip
    assert "Ran 3 tests" in out.stderr and "OK" in out.stderr, out.stderr
    # Without --keepdb Django creates test_postgres: refused, one database per deployment.
    refused = _run(project, sql_server, "manage.py", "test", "shop", "--noinput", check=False)
    assert refused.returncode != 0
    assert "CREATE DATABASE" in refused.stdout + refused.stderr
