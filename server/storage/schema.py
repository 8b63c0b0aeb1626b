"""The tables and server-side functions of one Postgres shard, and their migrations.

Per shard:

``percolator_lock``
    At most one lock per cell (primary key (tbl, rkey, col)): the owner's start_ts, its primary
    cell, TTL, the kind of write, the value to be written (Percolator's ``data`` at start_ts,
    kept in the lock until commit) and, from version 4, the row's lock key (``hash``), so that
    server-side bulk operations on a transaction's locks take the same row locks as the rest.
    Indexed by (start_ts, tbl, rkey) where start_ts > 0 (every lock; version 7 made it partial
    so that only statements saying so use it): the oldest lock of a table.
``percolator_write``
    Write records (unique (tbl, rkey, col, commit_ts DESC), so the newest version at or before a
    timestamp is the first index entry): start_ts, kind, and for a PUT the value, copied from the
    lock by the commit, server-side. From version 4 also indexed by (tbl, commit_ts, rkey, col)
    for PUT and DELETE records: a table's changes in commit order (change streams).
``percolator_gc``
    The shard's GC safe point; a prewrite at or below it fails.
``percolator_watch``
    Which observers a committed write of (tbl, col) notifies; replicated on every shard, so a
    commit finds its watches locally (one probe of a tiny table).
``percolator_notify``
    Dirty (observer, tbl, rkey) notifications, on the shard of their row, apart from the cells
    (the paper's separate locality group): the newest notifying commit_ts, the row hash (the
    key workers split the notify space by), and the retry state of failed runs.
``percolator_observer_stats``
    Run counters per observer (used on the first shard only).
``percolator_meta``
    The schema version (``SCHEMA_VERSION``); ``MIGRATIONS[v]`` brings a shard from ``v - 1`` to
    ``v``, so a shard of any older version is upgraded step by step on first use.

Mutating functions first take ``pg_advisory_xact_lock`` on every distinct row they touch, in
ascending key order (no deadlocks), in a statement of their own: in READ COMMITTED each later
statement of the function then takes a snapshot that sees whatever the previous holder of the
lock committed. That makes every batch atomic per row, the Bigtable contract, and closes the
check-then-insert races that READ COMMITTED otherwise allows (a prewrite and a rollback of the
same transaction both passing their checks).

Notify rows follow the same rule: the commit that sets one, and ``clear`` and ``defer`` that
remove or update them, hold the row's advisory lock first, so a worker's batch never deadlocks
with commits. Bulk maintenance (``retry_parked``, dropping an observer's notifications) takes
rows with ``FOR UPDATE SKIP LOCKED`` instead: it never waits for a row lock, so it cannot close
a cycle either.
"""

from __future__ import annotations

from percolator.server.storage.packed import COLUMN_BITS, MAX_KEY_LENGTH, NO_VALUE

SCHEMA_VERSION = 10
MIGRATION_LOCK_KEY = 0x5045_5243_4F4C_0001
"""Advisory lock held while creating or migrating the schema (one migrator at a time)."""

_KEY_COLUMNS = """
    tbl text COLLATE "C" NOT NULL,
    rkey bytea NOT NULL,
    col text COLLATE "C" NOT NULL"""

_V1_TABLES = [
    f"""CREATE TABLE percolator_lock ({_KEY_COLUMNS},
    start_ts bigint NOT NULL,
    primary_tbl text COLLATE "C" NOT NULL,
    primary_rkey bytea NOT NULL,
    primary_col text COLLATE "C" NOT NULL,
    ttl_ms integer NOT NULL,
    kind smallint NOT NULL,
    value bytea,
    PRIMARY KEY (tbl, rkey, col))""",
    "CREATE INDEX percolator_lock_start_ts ON percolator_lock (start_ts)",
    # Every prewrite inserts a row here and every commit deletes it: vacuum it often.
    """ALTER TABLE percolator_lock SET (autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000, autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 2000)""",
    f"""CREATE TABLE percolator_write ({_KEY_COLUMNS},
    commit_ts bigint NOT NULL,
    start_ts bigint NOT NULL,
    kind smallint NOT NULL,
    value bytea)""",
    """CREATE UNIQUE INDEX percolator_write_key
    ON percolator_write (tbl, rkey, col, commit_ts DESC)""",
    """CREATE TABLE percolator_gc (
    id integer PRIMARY KEY CHECK (id = 1),
    safe_point bigint NOT NULL)""",
    "INSERT INTO percolator_gc VALUES (1, 0)",
]

# Kinds, as stored (WriteKind): 1 PUT, 2 DELETE, 3 ROLLBACK, 4 LOCK.
# Prewrite failure codes returned: 1 WRITE_CONFLICT, 2 LOCKED, 3 ROLLED_BACK, 4 TOO_OLD,
# 5 DUPLICATE (version 4).
# Commit failure codes returned: 1 LOCK_MISSING, 2 ROLLED_BACK.

_LOCK_ROWS = """
    PERFORM pg_advisory_xact_lock(h) FROM (SELECT DISTINCT unnest(p_hash) AS h ORDER BY 1) s;"""

_CELLS = """unnest(p_tbl, p_row, p_col) WITH ORDINALITY AS k(tbl, rkey, col, i)"""

_FUNCTIONS = [
    f"""CREATE OR REPLACE FUNCTION percolator_rollback(
    p_start_ts bigint, p_marker boolean,
    p_tbl text[], p_row bytea[], p_col text[], p_hash bigint[])
RETURNS TABLE (idx bigint)
LANGUAGE plpgsql
-- Per-cell index probes: a generic plan would hash-join against a scan of the
-- churning lock table, whose statistics say it is empty.
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
#variable_conflict use_column
BEGIN{_LOCK_ROWS}
    RETURN QUERY
    WITH k AS (
        SELECT k.*, EXISTS (SELECT 1 FROM percolator_write w
            WHERE w.tbl = k.tbl AND w.rkey = k.rkey AND w.col = k.col
            AND w.commit_ts >= p_start_ts AND w.start_ts = p_start_ts AND w.kind <> 3
        ) AS committed
        FROM {_CELLS}
    ), del AS (
        DELETE FROM percolator_lock l USING k
        WHERE l.tbl = k.tbl AND l.rkey = k.rkey AND l.col = k.col
        AND l.start_ts = p_start_ts AND NOT k.committed
    ), mark AS (
        INSERT INTO percolator_write (tbl, rkey, col, commit_ts, start_ts, kind, value)
        SELECT k.tbl, k.rkey, k.col, p_start_ts, p_start_ts, 3, NULL FROM k
        WHERE p_marker AND NOT k.committed
        ON CONFLICT DO NOTHING
    )
    SELECT k.i FROM k WHERE k.committed;
END $$""",
    """CREATE OR REPLACE FUNCTION percolator_check_txn_status(
    p_tbl text, p_row bytea, p_col text, p_hash bigint,
    p_start_ts bigint, p_now_ts bigint, p_rollback_if_missing boolean)
RETURNS TABLE (state integer, commit_ts bigint, l_ptbl text, l_prow bytea, l_pcol text,
    l_ttl integer, l_kind smallint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    rec record;
    lk record;
BEGIN
    PERFORM pg_advisory_xact_lock(p_hash);
    SELECT w.commit_ts, w.kind INTO rec FROM percolator_write w
        WHERE w.tbl = p_tbl AND w.rkey = p_row AND w.col = p_col
        AND w.commit_ts >= p_start_ts AND w.start_ts = p_start_ts LIMIT 1;
    IF FOUND THEN
        IF rec.kind = 3 THEN
            RETURN QUERY SELECT 2, NULL::bigint, NULL::text, NULL::bytea, NULL::text,
                NULL::integer, NULL::smallint;
        ELSE
            RETURN QUERY SELECT 1, rec.commit_ts, NULL::text, NULL::bytea, NULL::text,
                NULL::integer, NULL::smallint;
        END IF;
        RETURN;
    END IF;
    SELECT * INTO lk FROM percolator_lock l
        WHERE l.tbl = p_tbl AND l.rkey = p_row AND l.col = p_col AND l.start_ts = p_start_ts;
    IF FOUND THEN
        IF (lk.start_ts >> 18) + lk.ttl_ms >= (p_now_ts >> 18) THEN
            RETURN QUERY SELECT 3, NULL::bigint, lk.primary_tbl, lk.primary_rkey,
                lk.primary_col, lk.ttl_ms, lk.kind;
            RETURN;
        END IF;
        DELETE FROM percolator_lock l
            WHERE l.tbl = p_tbl AND l.rkey = p_row AND l.col = p_col
            AND l.start_ts = p_start_ts;
    ELSIF NOT p_rollback_if_missing THEN
        RETURN QUERY SELECT 4, NULL::bigint, NULL::text, NULL::bytea, NULL::text,
            NULL::integer, NULL::smallint;
        RETURN;
    END IF;
    INSERT INTO percolator_write (tbl, rkey, col, commit_ts, start_ts, kind, value)
        VALUES (p_tbl, p_row, p_col, p_start_ts, p_start_ts, 3, NULL)
        ON CONFLICT DO NOTHING;
    RETURN QUERY SELECT 2, NULL::bigint, NULL::text, NULL::bytea, NULL::text,
        NULL::integer, NULL::smallint;
END $$""",
]

# Single-cell twins of prewrite and commit: the commonest batches (a one-cell transaction, the
# primary's commit) run as a few cached single-row statements instead of set-based CTEs over
# arrays, about three times cheaper. Same semantics and result codes.
_SINGLE_CELL_FUNCTIONS = [
    """CREATE OR REPLACE FUNCTION percolator_prewrite_one(
    p_start_ts bigint, p_ptbl text, p_prow bytea, p_pcol text, p_ttl integer,
    p_tbl text, p_row bytea, p_col text, p_kind smallint, p_value bytea, p_hash bigint)
RETURNS TABLE (status integer, conflict_ts bigint, l_start_ts bigint, l_ptbl text,
    l_prow bytea, l_pcol text, l_ttl integer, l_kind smallint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    lk percolator_lock%ROWTYPE;
    rolled boolean;
    newer bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(p_hash);
    IF p_start_ts <= (SELECT safe_point FROM percolator_gc WHERE id = 1) THEN
        RETURN QUERY SELECT 4, NULL::bigint, NULL::bigint, NULL::text, NULL::bytea, NULL::text,
            NULL::integer, NULL::smallint;
        RETURN;
    END IF;
    SELECT * INTO lk FROM percolator_lock l
        WHERE l.tbl = p_tbl AND l.rkey = p_row AND l.col = p_col;
    IF FOUND THEN
        IF lk.start_ts <> p_start_ts THEN
            RETURN QUERY SELECT 2, NULL::bigint, lk.start_ts, lk.primary_tbl, lk.primary_rkey,
                lk.primary_col, lk.ttl_ms, lk.kind;
        END IF;
        RETURN;
    END IF;
    SELECT bool_or(w.kind = 3 AND w.start_ts = p_start_ts AND w.commit_ts = p_start_ts),
        max(w.commit_ts) INTO rolled, newer
        FROM percolator_write w
        WHERE w.tbl = p_tbl AND w.rkey = p_row AND w.col = p_col AND w.commit_ts >= p_start_ts;
    IF newer IS NOT NULL THEN
        RETURN QUERY SELECT CASE WHEN rolled THEN 3 ELSE 1 END, newer, NULL::bigint,
            NULL::text, NULL::bytea, NULL::text, NULL::integer, NULL::smallint;
        RETURN;
    END IF;
    INSERT INTO percolator_lock VALUES (p_tbl, p_row, p_col, p_start_ts, p_ptbl, p_prow,
        p_pcol, p_ttl, p_kind, CASE WHEN p_kind = 1 THEN p_value END);
END $$""",
    """CREATE OR REPLACE FUNCTION percolator_commit_one(
    p_start_ts bigint, p_commit_ts bigint, p_tbl text, p_row bytea, p_col text, p_hash bigint)
RETURNS integer
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    found_kind smallint;
BEGIN
    PERFORM pg_advisory_xact_lock(p_hash);
    WITH del AS (
        DELETE FROM percolator_lock l
        WHERE l.tbl = p_tbl AND l.rkey = p_row AND l.col = p_col AND l.start_ts = p_start_ts
        RETURNING l.kind, l.value
    )
    INSERT INTO percolator_write (tbl, rkey, col, commit_ts, start_ts, kind, value)
    SELECT p_tbl, p_row, p_col, p_commit_ts, p_start_ts, del.kind, del.value FROM del;
    IF FOUND THEN
        RETURN 0;
    END IF;
    SELECT w.kind INTO found_kind FROM percolator_write w
        WHERE w.tbl = p_tbl AND w.rkey = p_row AND w.col = p_col
        AND w.commit_ts >= p_start_ts AND w.start_ts = p_start_ts LIMIT 1;
    IF NOT FOUND THEN
        RETURN 1;
    END IF;
    RETURN CASE WHEN found_kind = 3 THEN 2 ELSE 0 END;
END $$""",
]

# Batches of single-cell operations of different transactions (statement_batcher.py): a loop
# over the single-cell functions, each cell with its own arguments. The caller orders the cells
# by row lock key, so two such batches never wait on each other in a cycle.
_BATCHED_SINGLE_CELL_FUNCTIONS = [
    """CREATE OR REPLACE FUNCTION percolator_prewrite_each(
    p_start_ts bigint[], p_ptbl text[], p_prow bytea[], p_pcol text[], p_ttl integer[],
    p_tbl text[], p_row bytea[], p_col text[], p_kind smallint[], p_value bytea[],
    p_hash bigint[])
RETURNS TABLE (idx integer, status integer, conflict_ts bigint, l_start_ts bigint,
    l_ptbl text, l_prow bytea, l_pcol text, l_ttl integer, l_kind smallint)
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. cardinality(p_tbl) LOOP
        RETURN QUERY SELECT i, f.* FROM percolator_prewrite_one(p_start_ts[i], p_ptbl[i],
            p_prow[i], p_pcol[i], p_ttl[i], p_tbl[i], p_row[i], p_col[i], p_kind[i],
            p_value[i], p_hash[i]) f;
    END LOOP;
END $$""",
    """CREATE OR REPLACE FUNCTION percolator_commit_each(
    p_start_ts bigint[], p_commit_ts bigint[], p_tbl text[], p_row bytea[], p_col text[],
    p_hash bigint[])
RETURNS TABLE (idx integer, status integer)
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. cardinality(p_tbl) LOOP
        RETURN QUERY SELECT i, percolator_commit_one(p_start_ts[i], p_commit_ts[i], p_tbl[i],
            p_row[i], p_col[i], p_hash[i]);
    END LOOP;
END $$""",
]

# Version 2: the heartbeat takes its row's lock like every other mutation. As a bare UPDATE it
# could interleave with check_txn_status, which reads the lock, finds it expired and deletes it:
# the heartbeat's UPDATE landed in between, so it reported the lock extended while the check
# rolled the transaction back on the TTL it had read before.
_V2_HEARTBEAT = [
    """CREATE OR REPLACE FUNCTION percolator_heartbeat(
    p_tbl text, p_row bytea, p_col text, p_hash bigint, p_start_ts bigint, p_ttl integer)
RETURNS integer
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    ttl integer;
BEGIN
    PERFORM pg_advisory_xact_lock(p_hash);
    UPDATE percolator_lock l SET ttl_ms = GREATEST(l.ttl_ms, p_ttl)
        WHERE l.tbl = p_tbl AND l.rkey = p_row AND l.col = p_col AND l.start_ts = p_start_ts
        RETURNING l.ttl_ms INTO ttl;
    RETURN ttl;
END $$""",
]

# Version 3: notifications for observers (DESIGN.md section 6). The commit sets them in the
# same statement that writes the record, so a notification exists exactly when a watched write
# is committed, whoever commits it (the committer, or a reader rolling a secondary forward).
_V3_NOTIFY_TABLES = [
    """CREATE TABLE percolator_watch (
    tbl text COLLATE "C" NOT NULL,
    col text COLLATE "C" NOT NULL,
    observer text COLLATE "C" NOT NULL,
    PRIMARY KEY (tbl, col, observer))""",
    "CREATE INDEX percolator_watch_observer ON percolator_watch (observer)",
    """CREATE TABLE percolator_notify (
    observer text COLLATE "C" NOT NULL,
    tbl text COLLATE "C" NOT NULL,
    rkey bytea NOT NULL,
    ts bigint NOT NULL,
    hash bigint NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    retry_at_ms bigint NOT NULL DEFAULT 0,
    parked boolean NOT NULL DEFAULT false,
    last_error text,
    PRIMARY KEY (observer, tbl, rkey))""",
    # The workers' scan: a range of hashes in (hash, observer, tbl, rkey) order, keyset-paged.
    """CREATE INDEX percolator_notify_scan ON percolator_notify (hash, observer, tbl, rkey)
    WHERE NOT parked""",
    # Parked rows are few; listing them (oldest first) and unparking them should not scan the
    # pending ones.
    "CREATE INDEX percolator_notify_parked ON percolator_notify (observer, ts) WHERE parked",
    # Every watched commit inserts or updates a row and every observer run deletes one.
    """ALTER TABLE percolator_notify SET (autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000, autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 2000)""",
    """CREATE TABLE percolator_observer_stats (
    observer text COLLATE "C" PRIMARY KEY,
    runs bigint NOT NULL DEFAULT 0,
    commits bigint NOT NULL DEFAULT 0,
    conflicts bigint NOT NULL DEFAULT 0,
    failures bigint NOT NULL DEFAULT 0,
    last_error text,
    last_error_ms bigint)""",
]

_V3_NOTIFY_FUNCTIONS = [
    # Same signature and result codes as version 1; the write-record insert is unchanged but
    # for RETURNING the kind. A PUT or DELETE then upserts one notify row per watch of the cell:
    # when nobody watches it, that is one probe of the watch table's primary key.
    """CREATE OR REPLACE FUNCTION percolator_commit_one(
    p_start_ts bigint, p_commit_ts bigint, p_tbl text, p_row bytea, p_col text, p_hash bigint)
RETURNS integer
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    found_kind smallint;
    done_kind smallint;
BEGIN
    PERFORM pg_advisory_xact_lock(p_hash);
    WITH del AS (
        DELETE FROM percolator_lock l
        WHERE l.tbl = p_tbl AND l.rkey = p_row AND l.col = p_col AND l.start_ts = p_start_ts
        RETURNING l.kind, l.value
    )
    INSERT INTO percolator_write (tbl, rkey, col, commit_ts, start_ts, kind, value)
    SELECT p_tbl, p_row, p_col, p_commit_ts, p_start_ts, del.kind, del.value FROM del
    RETURNING kind INTO done_kind;
    IF FOUND THEN
        IF done_kind IN (1, 2) THEN
            INSERT INTO percolator_notify AS n (observer, tbl, rkey, ts, hash)
            SELECT w.observer, p_tbl, p_row, p_commit_ts, p_hash FROM percolator_watch w
            WHERE w.tbl = p_tbl AND w.col = p_col
            ON CONFLICT (observer, tbl, rkey) DO UPDATE
            SET ts = GREATEST(n.ts, excluded.ts), attempts = 0, retry_at_ms = 0,
                parked = false, last_error = NULL;
            IF FOUND THEN
                -- Delivered when the transaction commits (and once per transaction, however
                -- many rows a batch notified): workers LISTEN instead of polling.
                PERFORM pg_notify('percolator_notify', '');
            END IF;
        END IF;
        RETURN 0;
    END IF;
    SELECT w.kind INTO found_kind FROM percolator_write w
        WHERE w.tbl = p_tbl AND w.rkey = p_row AND w.col = p_col
        AND w.commit_ts >= p_start_ts AND w.start_ts = p_start_ts LIMIT 1;
    IF NOT FOUND THEN
        RETURN 1;
    END IF;
    RETURN CASE WHEN found_kind = 3 THEN 2 ELSE 0 END;
END $$""",
    # The workers' scan, keyset-paged after (p_hash, p_observer, p_tbl, p_row) unless
    # p_observer is NULL. A function for its SET: the table churns and its statistics may say
    # it is empty, for which the planner picks a bitmap scan and a sort of the whole hash range;
    # this is always a walk of the scan index that stops after p_limit rows.
    """CREATE OR REPLACE FUNCTION percolator_find_notifications(
    p_from bigint, p_to bigint, p_now_ms bigint, p_limit integer,
    p_hash bigint, p_observer text, p_tbl text, p_row bytea)
RETURNS TABLE (observer text, tbl text, rkey bytea, ts bigint, hash bigint, attempts integer)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
AS $$
#variable_conflict use_column
BEGIN
    IF p_observer IS NULL THEN
        RETURN QUERY SELECT n.observer, n.tbl, n.rkey, n.ts, n.hash, n.attempts
            FROM percolator_notify n
            WHERE NOT n.parked AND n.hash >= p_from AND n.hash <= p_to
            AND n.retry_at_ms <= p_now_ms
            ORDER BY n.hash, n.observer, n.tbl, n.rkey LIMIT p_limit;
    ELSE
        RETURN QUERY SELECT n.observer, n.tbl, n.rkey, n.ts, n.hash, n.attempts
            FROM percolator_notify n
            WHERE NOT n.parked AND n.hash >= p_from AND n.hash <= p_to
            AND n.retry_at_ms <= p_now_ms
            AND (n.hash, n.observer, n.tbl, n.rkey) > (p_hash, p_observer, p_tbl, p_row)
            ORDER BY n.hash, n.observer, n.tbl, n.rkey LIMIT p_limit;
    END IF;
END $$""",
    # An observer ran with a snapshot at below_ts: it saw every write committed before it. A
    # newer write (ts >= below_ts) keeps its notification.
    f"""CREATE OR REPLACE FUNCTION percolator_clear_notifications(
    p_observer text[], p_tbl text[], p_row bytea[], p_below_ts bigint[], p_hash bigint[])
RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
BEGIN{_LOCK_ROWS}
    DELETE FROM percolator_notify n
    USING unnest(p_observer, p_tbl, p_row, p_below_ts) AS k(observer, tbl, rkey, below_ts)
    WHERE n.observer = k.observer AND n.tbl = k.tbl AND n.rkey = k.rkey
    AND n.ts < k.below_ts;
END $$""",
    # A failed run of the change at ts; ignored when a newer write has raised the ts since
    # (that change starts with fresh attempts).
    f"""CREATE OR REPLACE FUNCTION percolator_defer_notifications(
    p_observer text[], p_tbl text[], p_row bytea[], p_ts bigint[], p_retry_at_ms bigint[],
    p_error text[], p_park boolean[], p_hash bigint[])
RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
BEGIN{_LOCK_ROWS}
    UPDATE percolator_notify n
    SET attempts = n.attempts + 1, retry_at_ms = k.retry_at_ms, last_error = k.error,
        parked = k.park
    FROM unnest(p_observer, p_tbl, p_row, p_ts, p_retry_at_ms, p_error, p_park)
        AS k(observer, tbl, rkey, ts, retry_at_ms, error, park)
    WHERE n.observer = k.observer AND n.tbl = k.tbl AND n.rkey = k.rkey AND n.ts <= k.ts;
END $$""",
]

# Version 4: distributed transactions (a Spark job's locks committed or rolled back server-side,
# with no pass over the data) and change streams.
_V4_TABLES = [
    # The row's lock key (sharding.row_hash), which Postgres cannot compute: commit_locks and
    # rollback_locks take the advisory lock of each row they move, like every other mutation,
    # and commit_locks gives a notify row its hash. NULL in locks prewritten before version 4.
    "ALTER TABLE percolator_lock ADD COLUMN hash bigint",
    # (start_ts, tbl, hash) instead of (start_ts): a transaction's locks are still a range of
    # it, "does transaction s hold a lock in table t" is one probe (oldest_lock), and the
    # bulk moves page through a transaction's locks by (tbl, hash).
    "DROP INDEX percolator_lock_start_ts",
    "CREATE INDEX percolator_lock_start_ts ON percolator_lock (start_ts, tbl, hash)",
    # A table's changes in (commit_ts, rkey, col) order: scan_changes walks it, keyset-paged,
    # also within one commit_ts (a Spark job commits millions of cells at one). Rollback and
    # LOCK records are no changes and stay out of it.
    """CREATE INDEX percolator_write_changes ON percolator_write (tbl, commit_ts, rkey, col)
    WHERE kind IN (1, 2)""",
]

# The chunk of a bulk move (commit_locks, rollback_locks): the first p_limit locks of
# p_start_ts after the cursor (p_after_tbl, p_after_row) in key order, completed to whole rows,
# so that the next chunk starts after the returned cursor (last_tbl, last_row), NULL when none
# is left. Version 7 walks the primary key from the cursor and stops after p_limit locks of the
# transaction (LIMIT), then completes the last row (equality on tbl and rkey): each chunk reads
# about its own locks, whatever number came before. The (start_ts, tbl, rkey) index of version
# 6 was meant for this, but a generic plan with "start_ts = p" started every chunk at the
# transaction's first entry, and an upper bound given as a row comparison ((tbl, rkey) <= ...)
# does not stop a btree scan whose first column is equal throughout: both re-read the entries
# of every earlier or later chunk, quadratic (a 3-million-lock commit slowed to 16,000 locks/s).
# The subquery fences the walk (OFFSET 0: the start_ts test stays outside it, so no other index
# applies). The chunk's cells are named exactly, then their rows' advisory locks taken
# (ascending, a statement of their own), so a lock prewritten meanwhile is never moved without
# its row lock; it is left to readers. So are locks without a hash (prewritten before version
# 4). Under the row locks, each named lock is found again by a probe per cell and deleted by
# ctid: a join of the lock table with the cells could walk the whole lock table per cell in a
# generic plan.
_BULK_DECLARE = """    last_tbl text;
    last_row bytea;
    last_col text;
    k_tbl text[];
    k_row bytea[];
    k_col text[];
    k_hash bigint[];
    k_ctid tid[];
    n_moved integer;"""
_BULK_CHUNK_TEMPLATE = """    SELECT array_agg(s.tbl ORDER BY s.tbl, s.rkey, s.col),
        array_agg(s.rkey ORDER BY s.tbl, s.rkey, s.col),
        array_agg(s.col ORDER BY s.tbl, s.rkey, s.col),
        array_agg(s.hash ORDER BY s.tbl, s.rkey, s.col)
        INTO k_tbl, k_row, k_col, k_hash FROM (
            SELECT w.tbl, w.rkey, w.col, w.hash FROM (
                SELECT l.tbl, l.rkey, l.col, l.start_ts, l.hash FROM percolator_lock l
                WHERE (l.tbl, l.rkey) > (p_after_tbl, p_after_row){upto}
                ORDER BY l.tbl, l.rkey, l.col OFFSET 0
            ) w WHERE w.start_ts = p_start_ts AND w.hash IS NOT NULL
            ORDER BY w.tbl, w.rkey, w.col LIMIT p_limit
        ) s;
    IF cardinality(k_tbl) = p_limit THEN
        -- The rest of the last row, so that the next chunk starts after it.
        last_tbl := k_tbl[p_limit];
        last_row := k_row[p_limit];
        last_col := k_col[p_limit];
        SELECT k_tbl || array_agg(l.tbl), k_row || array_agg(l.rkey),
            k_col || array_agg(l.col), k_hash || array_agg(l.hash)
            INTO k_tbl, k_row, k_col, k_hash FROM percolator_lock l
            WHERE l.tbl = last_tbl AND l.rkey = last_row AND l.col > last_col
            AND l.start_ts = p_start_ts AND l.hash IS NOT NULL;
    END IF;
    IF k_tbl IS NULL THEN
        RETURN QUERY SELECT 0, NULL::text, NULL::bytea;
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(h) FROM (SELECT DISTINCT unnest(k_hash) AS h ORDER BY 1) s;
    SELECT array_agg(x.ctid) INTO k_ctid
        FROM unnest(k_tbl, k_row, k_col) AS k(tbl, rkey, col)
        JOIN LATERAL (SELECT l.ctid FROM percolator_lock l
            WHERE l.tbl = k.tbl AND l.rkey = k.rkey AND l.col = k.col
            AND l.start_ts = p_start_ts LIMIT 1) x ON true;"""


def _bulk_chunk(bounded: bool) -> str:
    """The first step of a bulk move: the chunk's locks (whole rows, in key order) after the
    cursor (p_after_tbl, p_after_row) and, when ``bounded``, up to the row (p_upto_tbl,
    p_upto_row) included."""
    upto = " AND (l.tbl, l.rkey) <= (p_upto_tbl, p_upto_row)" if bounded else ""
    return _BULK_CHUNK_TEMPLATE.replace("{upto}", upto)


_BULK_CHUNK = _bulk_chunk(bounded=False)
_UPTO_PARAMETERS = ",\n    p_upto_tbl text, p_upto_row bytea"


# Commit every lock of a transaction (its secondaries, after the primary's commit), one
# chunk per call: _BULK_CHUNK picks it, then as percolator_commit_one does
# per cell, lock -> write record in one statement with the notifications of watched
# PUT/DELETE cells (one notify row per observer and row: an upsert may not touch a row
# twice). A reader rolling one of these cells forward meanwhile holds the same row lock:
# whichever comes second finds the lock gone and moves nothing.
def _commit_locks_function(bounded: bool) -> str:
    return f"""CREATE OR REPLACE FUNCTION percolator_commit_locks(
p_start_ts bigint, p_commit_ts bigint, p_limit integer, p_after_tbl text, p_after_row bytea{
        _UPTO_PARAMETERS if bounded else ""
    })
RETURNS TABLE (moved integer, next_tbl text, next_row bytea)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off
SET enable_mergejoin = off SET max_parallel_workers_per_gather = 0
AS $$
#variable_conflict use_column
DECLARE
{_BULK_DECLARE}
n_notified integer;
BEGIN
{_bulk_chunk(bounded)}
WITH del AS (
    DELETE FROM percolator_lock l WHERE l.ctid = ANY (k_ctid) AND l.start_ts = p_start_ts
    RETURNING l.tbl, l.rkey, l.col, l.kind, l.value, l.hash
), ins AS (
    INSERT INTO percolator_write (tbl, rkey, col, commit_ts, start_ts, kind, value)
    SELECT d.tbl, d.rkey, d.col, p_commit_ts, p_start_ts, d.kind, d.value FROM del d
    ORDER BY d.tbl, d.rkey, d.col
), noted AS (
    INSERT INTO percolator_notify AS n (observer, tbl, rkey, ts, hash)
    SELECT DISTINCT ON (w.observer, d.tbl, d.rkey) w.observer, d.tbl, d.rkey,
        p_commit_ts, d.hash
    FROM del d JOIN percolator_watch w ON w.tbl = d.tbl AND w.col = d.col
    WHERE d.kind IN (1, 2)
    ON CONFLICT (observer, tbl, rkey) DO UPDATE
    SET ts = GREATEST(n.ts, excluded.ts), attempts = 0, retry_at_ms = 0,
        parked = false, last_error = NULL
    RETURNING 1
)
SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM noted)
    INTO n_moved, n_notified;
IF n_notified > 0 THEN
    PERFORM pg_notify('percolator_notify', '');
END IF;
RETURN QUERY SELECT n_moved, last_tbl, last_row;
END $$"""


_COMMIT_LOCKS_FUNCTION = _commit_locks_function(bounded=False)

_TOTAL_AS_ANALYZED = """
    SELECT c.reltuples INTO total FROM pg_class c WHERE c.oid = 'percolator_write'::regclass;"""
# Version 8: tuples per page as last analyzed, times the pages there are now (as the planner
# estimates). Right after a bulk load the analyzed count was far too low, and the sample
# became the whole table (1.8 s instead of 47 ms at 3,000,000 records).
_TOTAL_AS_NOW = """
    SELECT CASE WHEN c.reltuples > 0 AND c.relpages > 0 THEN c.reltuples / c.relpages
        ELSE 100 END * pg_relation_size(c.oid) / current_setting('block_size')::float8
        INTO total FROM pg_class c WHERE c.oid = 'percolator_write'::regclass;"""


def _sample_row_keys_function(total: str) -> str:
    """percolator_sample_row_keys, with ``total`` the statement estimating the write table's
    records (into ``total``)."""
    return f"""CREATE OR REPLACE FUNCTION percolator_sample_row_keys(
    p_tbl text, p_n integer, p_exact_cells integer, p_sample_rows integer)
RETURNS TABLE (points bytea[], row_keys bigint)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    fractions float8[];
    cells bigint;
    total float8;
    pct float8;
BEGIN
    fractions := ARRAY(SELECT i::float8 / p_n FROM generate_series(1, p_n - 1) AS i);
    SELECT count(*) INTO cells FROM (SELECT 1 FROM percolator_write w
        WHERE w.tbl = p_tbl LIMIT p_exact_cells) s;
    IF cells < p_exact_cells THEN
        RETURN QUERY SELECT percentile_disc(fractions) WITHIN GROUP (ORDER BY d.rkey),
            count(*) FROM (SELECT DISTINCT w.rkey FROM percolator_write w
                WHERE w.tbl = p_tbl AND w.kind IN (1, 2)) d;
        RETURN;
    END IF;
{total}
    pct := LEAST(100.0, 100.0 * p_sample_rows / GREATEST(total, 1.0));
    RETURN QUERY SELECT percentile_disc(fractions) WITHIN GROUP (ORDER BY d.rkey),
        (count(*) * 100.0 / pct)::bigint
        FROM (SELECT DISTINCT w.rkey FROM percolator_write w TABLESAMPLE SYSTEM (pct)
            WHERE w.tbl = p_tbl AND w.kind IN (1, 2)) d;
END $$"""


# Remove every lock of a transaction whose primary was rolled back, one chunk per call (no
# rollback records: the primary's tells any reader, and a late prewrite of a secondary is
# an orphan lock that the first reader meeting it rolls back).
def _rollback_locks_function(bounded: bool) -> str:
    return f"""CREATE OR REPLACE FUNCTION percolator_rollback_locks(
p_start_ts bigint, p_limit integer, p_after_tbl text, p_after_row bytea{
        _UPTO_PARAMETERS if bounded else ""
    })
RETURNS TABLE (moved integer, next_tbl text, next_row bytea)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off
SET enable_mergejoin = off SET max_parallel_workers_per_gather = 0
AS $$
#variable_conflict use_column
DECLARE
{_BULK_DECLARE}
BEGIN
{_bulk_chunk(bounded)}
DELETE FROM percolator_lock l WHERE l.ctid = ANY (k_ctid) AND l.start_ts = p_start_ts;
GET DIAGNOSTICS n_moved = ROW_COUNT;
RETURN QUERY SELECT n_moved, last_tbl, last_row;
END $$"""


_ROLLBACK_LOCKS_FUNCTION = _rollback_locks_function(bounded=False)

# The lock of the table with the smallest start_ts (LOCK-kind locks excluded: they never
# commit a change), by a skip scan of the (start_ts, tbl, ...) index: walk the distinct
# start_ts of all locks upwards, one probe each, until one has a lock in the table. Cheap
# whatever the number of locks a transaction holds; the steps are the transactions older
# than the answer. One statement: one snapshot, in which each cell is a lock or a write
# record (closed timestamps rely on it).
_OLDEST_LOCK_FUNCTION = """CREATE OR REPLACE FUNCTION percolator_oldest_lock(p_tbl text)
RETURNS TABLE (start_ts bigint, rkey bytea, col text, primary_tbl text, primary_rkey bytea,
    primary_col text, ttl_ms integer, kind smallint)
LANGUAGE sql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off
AS $$
WITH RECURSIVE t(ts, hit) AS (
    SELECT s.ts, EXISTS (SELECT 1 FROM percolator_lock l
        WHERE l.start_ts = s.ts AND l.start_ts > 0 AND l.tbl = p_tbl AND l.kind <> 4)
    FROM (SELECT min(l.start_ts) AS ts FROM percolator_lock l WHERE l.start_ts > 0) s
    UNION ALL
    SELECT n.ts, EXISTS (SELECT 1 FROM percolator_lock l
        WHERE l.start_ts = n.ts AND l.start_ts > 0 AND l.tbl = p_tbl AND l.kind <> 4)
    FROM t, LATERAL (SELECT min(l.start_ts) AS ts FROM percolator_lock l
        WHERE l.start_ts > t.ts AND l.start_ts > 0) n
    WHERE NOT t.hit AND t.ts IS NOT NULL
)
SELECT l.start_ts, l.rkey, l.col, l.primary_tbl, l.primary_rkey, l.primary_col, l.ttl_ms, l.kind
FROM t, LATERAL (SELECT * FROM percolator_lock l
    WHERE l.start_ts = t.ts AND l.start_ts > 0 AND l.tbl = p_tbl AND l.kind <> 4 LIMIT 1) l
WHERE t.hit
$$"""

_V4_FUNCTIONS = [
    # As in version 1, but the lock keeps the row's hash, and our own lock holding another
    # write (kind or value) is DUPLICATE: the parts of a distributed transaction prewrite
    # independently, and two of them writing one cell differently (one primary key in two
    # partitions) must fail instead of the second silently keeping the first's value. The same
    # write again is still a success (a retried part). An ordinary transaction sends each cell
    # once per prewrite, with one mutation per cell, so it never meets this case.
    """CREATE OR REPLACE FUNCTION percolator_prewrite_one(
    p_start_ts bigint, p_ptbl text, p_prow bytea, p_pcol text, p_ttl integer,
    p_tbl text, p_row bytea, p_col text, p_kind smallint, p_value bytea, p_hash bigint)
RETURNS TABLE (status integer, conflict_ts bigint, l_start_ts bigint, l_ptbl text,
    l_prow bytea, l_pcol text, l_ttl integer, l_kind smallint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    lk percolator_lock%ROWTYPE;
    rolled boolean;
    newer bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(p_hash);
    IF p_start_ts <= (SELECT safe_point FROM percolator_gc WHERE id = 1) THEN
        RETURN QUERY SELECT 4, NULL::bigint, NULL::bigint, NULL::text, NULL::bytea, NULL::text,
            NULL::integer, NULL::smallint;
        RETURN;
    END IF;
    SELECT * INTO lk FROM percolator_lock l
        WHERE l.tbl = p_tbl AND l.rkey = p_row AND l.col = p_col;
    IF FOUND THEN
        IF lk.start_ts <> p_start_ts THEN
            RETURN QUERY SELECT 2, NULL::bigint, lk.start_ts, lk.primary_tbl, lk.primary_rkey,
                lk.primary_col, lk.ttl_ms, lk.kind;
        ELSIF lk.kind <> p_kind
            OR lk.value IS DISTINCT FROM (CASE WHEN p_kind = 1 THEN p_value END) THEN
            RETURN QUERY SELECT 5, NULL::bigint, lk.start_ts, lk.primary_tbl, lk.primary_rkey,
                lk.primary_col, lk.ttl_ms, lk.kind;
        END IF;
        RETURN;
    END IF;
    SELECT bool_or(w.kind = 3 AND w.start_ts = p_start_ts AND w.commit_ts = p_start_ts),
        max(w.commit_ts) INTO rolled, newer
        FROM percolator_write w
        WHERE w.tbl = p_tbl AND w.rkey = p_row AND w.col = p_col AND w.commit_ts >= p_start_ts;
    IF newer IS NOT NULL THEN
        RETURN QUERY SELECT CASE WHEN rolled THEN 3 ELSE 1 END, newer, NULL::bigint,
            NULL::text, NULL::bytea, NULL::text, NULL::integer, NULL::smallint;
        RETURN;
    END IF;
    INSERT INTO percolator_lock VALUES (p_tbl, p_row, p_col, p_start_ts, p_ptbl, p_prow,
        p_pcol, p_ttl, p_kind, CASE WHEN p_kind = 1 THEN p_value END, p_hash);
END $$""",
    _COMMIT_LOCKS_FUNCTION,
    _ROLLBACK_LOCKS_FUNCTION,
    _OLDEST_LOCK_FUNCTION,
    # Split points of a table's rows on this shard: percentile_disc over its distinct row keys
    # (p_n - 1 points), and how many row keys they stand for. Up to p_exact_cells write records
    # the keys are read exactly (an index-only walk of the table's part of the key index);
    # above, from a TABLESAMPLE SYSTEM of about p_sample_rows records of the whole write table.
    _sample_row_keys_function(_TOTAL_AS_ANALYZED),
]

# Version 6: the bulk moves walk a transaction's locks in (tbl, rkey) order and write each
# chunk's records in key order, so a table loaded by one big transaction (a Spark job) lies in
# percolator_write's heap in key order, as a load by COPY does. In hash order, every page of
# a later range scan fetched its rows from heap pages all over the table: reads of such a table
# took three times as long as after a CLUSTER (measured on 100,000 rows).
_V6_BULK_IN_KEY_ORDER = [
    "DROP INDEX percolator_lock_start_ts",
    "CREATE INDEX percolator_lock_start_ts ON percolator_lock (start_ts, tbl, rkey)",
    "DROP FUNCTION IF EXISTS percolator_commit_locks(bigint, bigint, integer, text, bigint)",
    "DROP FUNCTION IF EXISTS percolator_rollback_locks(bigint, integer, text, bigint)",
    _COMMIT_LOCKS_FUNCTION,
    _ROLLBACK_LOCKS_FUNCTION,
]


# Version 7: the lock table's start_ts index becomes partial (below), and set-based prewrite
# and commit of many cells (of one transaction, or of several coalesced by
# statement_batcher.py). The loops of version 1 call the single-cell function per
# cell, and each call reads its arguments out of the arrays, which costs more the longer the
# arrays: 90 us a cell in a batch of 64, 400 us in a batch of 4,096. These cost 15-25 us a
# cell from 8 cells up. The cells of one call must be distinct (the caller falls back to the
# loops otherwise: the loops see a cell's earlier occurrence, one statement cannot).
#
# Arguments that are the same for every cell (a transaction's start_ts, primary and TTL, often
# its table and kind) may come as arrays of one element: the driver encodes each array element
# on its own, so that halves the work of sending a transaction's cells. (An element of a
# longer array is never NULL in those columns, so coalesce tells the two apart.)
#
# Plans are generic (plan_cache_mode): a custom plan per call costs about 0.2 ms of planning,
# more than the whole statement for a few cells. A generic plan does not know the arrays'
# length and the lock table churns, so its statistics may say it is empty: a join of the lock
# table with the cells could then walk the whole lock table once per cell. So the lock table
# is only probed from a LATERAL subquery per cell, and the commit deletes the locks it found
# by ctid: between the statements it holds the rows' advisory locks, which every writer of a
# lock takes first.
def _commit_many_function(*, guard: bool) -> str:
    """``percolator_commit_many``: set-based commit of distinct cells. Version 10 adds
    ``p_guard``: a cell is then committed only if the lock of its transaction's primary is still
    there (the primary commits in the same statement, so its secondaries on this shard go with
    it or not at all)."""
    guard_argument = ", p_guard boolean DEFAULT false" if guard else ""
    guard_condition = _PRIMARY_LOCK_PRESENT if guard else ""
    return f"""CREATE OR REPLACE FUNCTION percolator_commit_many(
    p_start_ts bigint[], p_commit_ts bigint[], p_tbl text[], p_row bytea[], p_col text[],
    p_hash bigint[]{guard_argument})
RETURNS TABLE (idx integer, status integer)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off
SET enable_mergejoin = off SET max_parallel_workers_per_gather = 0
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    tids tid[];
    c_tbl text[];
    c_row bytea[];
    c_col text[];
    c_start bigint[];
    c_commit bigint[];
    c_kind smallint[];
    c_value bytea[];
    c_hash bigint[];
    n_notified integer;
BEGIN{_LOCK_ROWS}
    SELECT array_agg(l.ctid), array_agg(k.tbl), array_agg(k.rkey), array_agg(k.col),
        array_agg(k.start_ts), array_agg(k.commit_ts), array_agg(l.kind), array_agg(l.value),
        array_agg(k.hash)
        INTO tids, c_tbl, c_row, c_col, c_start, c_commit, c_kind, c_value, c_hash
        FROM (
            SELECT coalesce(u.start_ts, p_start_ts[1]) AS start_ts,
                coalesce(u.commit_ts, p_commit_ts[1]) AS commit_ts,
                coalesce(u.tbl, p_tbl[1]) AS tbl, u.rkey, u.col, u.hash
            FROM unnest(p_start_ts, p_commit_ts, p_tbl, p_row, p_col, p_hash)
                AS u(start_ts, commit_ts, tbl, rkey, col, hash)
        ) k
        JOIN LATERAL (
            SELECT l.ctid, l.kind, l.value FROM percolator_lock l
            WHERE l.tbl = k.tbl AND l.rkey = k.rkey AND l.col = k.col
            AND l.start_ts = k.start_ts{guard_condition} LIMIT 1
        ) l ON true;
    IF tids IS NOT NULL THEN
        DELETE FROM percolator_lock WHERE ctid = ANY (tids);
        INSERT INTO percolator_write (tbl, rkey, col, commit_ts, start_ts, kind, value)
            SELECT * FROM unnest(c_tbl, c_row, c_col, c_commit, c_start, c_kind, c_value)
            ORDER BY 1, 2, 3;
        INSERT INTO percolator_notify AS n (observer, tbl, rkey, ts, hash)
            SELECT DISTINCT ON (w.observer, c.tbl, c.rkey) w.observer, c.tbl, c.rkey,
                c.commit_ts, c.hash
            FROM unnest(c_tbl, c_row, c_col, c_commit, c_kind, c_hash)
                AS c(tbl, rkey, col, commit_ts, kind, hash)
            JOIN percolator_watch w ON w.tbl = c.tbl AND w.col = c.col
            WHERE c.kind IN (1, 2)
            ORDER BY w.observer, c.tbl, c.rkey, c.commit_ts DESC
            ON CONFLICT (observer, tbl, rkey) DO UPDATE
            SET ts = GREATEST(n.ts, excluded.ts), attempts = 0, retry_at_ms = 0,
                parked = false, last_error = NULL;
        GET DIAGNOSTICS n_notified = ROW_COUNT;
        IF n_notified > 0 THEN
            PERFORM pg_notify('percolator_notify', '');
        END IF;
    END IF;
    IF coalesce(cardinality(tids), 0) < cardinality(p_row) THEN
        RETURN QUERY SELECT k.i::integer, CASE WHEN f.kind IS NULL THEN 1 ELSE 2 END
            FROM (
                SELECT coalesce(u.start_ts, p_start_ts[1]) AS start_ts,
                    coalesce(u.tbl, p_tbl[1]) AS tbl, u.rkey, u.col, u.i
                FROM unnest(p_start_ts, p_tbl, p_row, p_col) WITH ORDINALITY
                    AS u(start_ts, tbl, rkey, col, i)
            ) k
            LEFT JOIN LATERAL (
                SELECT w.kind FROM percolator_write w
                WHERE w.tbl = k.tbl AND w.rkey = k.rkey AND w.col = k.col
                AND w.commit_ts >= k.start_ts AND w.start_ts = k.start_ts LIMIT 1
            ) f ON true
            WHERE f.kind IS NULL OR f.kind = 3;
    END IF;
END $$"""


_PRIMARY_LOCK_PRESENT = """
            AND (NOT p_guard OR EXISTS (
                SELECT FROM percolator_lock p
                WHERE p.tbl = l.primary_tbl AND p.rkey = l.primary_rkey
                AND p.col = l.primary_col AND p.start_ts = l.start_ts))"""


_V7_SET_BASED = [
    # Partial, so that only statements naming "start_ts > 0" (the oldest lock) can use it. A
    # probe of one cell's lock by (tbl, rkey, col) otherwise could too, as a walk of the whole
    # index: with the lock table's statistics saying "empty" (it churns) a generic plan took
    # it, and each probe read every lock.
    "DROP INDEX percolator_lock_start_ts",
    """CREATE INDEX percolator_lock_start_ts ON percolator_lock (start_ts, tbl, rkey)
    WHERE start_ts > 0""",
    _COMMIT_LOCKS_FUNCTION,
    _ROLLBACK_LOCKS_FUNCTION,
    _OLDEST_LOCK_FUNCTION,
    f"""CREATE OR REPLACE FUNCTION percolator_prewrite_many(
    p_start_ts bigint[], p_ptbl text[], p_prow bytea[], p_pcol text[], p_ttl integer[],
    p_tbl text[], p_row bytea[], p_col text[], p_kind smallint[], p_value bytea[],
    p_hash bigint[])
RETURNS TABLE (idx integer, status integer, conflict_ts bigint, l_start_ts bigint,
    l_ptbl text, l_prow bytea, l_pcol text, l_ttl integer, l_kind smallint)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off
SET enable_mergejoin = off SET max_parallel_workers_per_gather = 0
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN{_LOCK_ROWS}
    RETURN QUERY
    WITH c AS (
        SELECT k.*, l.start_ts AS l_start_ts, l.primary_tbl, l.primary_rkey, l.primary_col,
            l.ttl_ms, l.kind AS l_kind, w.newer,
            CASE WHEN k.start_ts <= (SELECT safe_point FROM percolator_gc WHERE id = 1) THEN 4
                WHEN l.start_ts IS NOT NULL THEN
                    CASE WHEN l.start_ts <> k.start_ts THEN 2
                        WHEN l.kind <> k.kind OR l.value IS DISTINCT FROM
                            (CASE WHEN k.kind = 1 THEN k.value END) THEN 5
                        ELSE 0 END
                WHEN w.newer IS NOT NULL THEN CASE WHEN w.rolled THEN 3 ELSE 1 END
            END AS status
        FROM (
            SELECT coalesce(u.start_ts, p_start_ts[1]) AS start_ts,
                coalesce(u.ptbl, p_ptbl[1]) AS ptbl, coalesce(u.prow, p_prow[1]) AS prow,
                coalesce(u.pcol, p_pcol[1]) AS pcol, coalesce(u.ttl, p_ttl[1]) AS ttl,
                coalesce(u.tbl, p_tbl[1]) AS tbl, u.rkey, u.col,
                coalesce(u.kind, p_kind[1]) AS kind, u.value, u.hash, u.i
            FROM unnest(p_start_ts, p_ptbl, p_prow, p_pcol, p_ttl, p_tbl, p_row, p_col, p_kind,
                p_value, p_hash) WITH ORDINALITY
                AS u(start_ts, ptbl, prow, pcol, ttl, tbl, rkey, col, kind, value, hash, i)
        ) k
        LEFT JOIN LATERAL (
            -- LIMIT: a probe per cell; flattened into a join, it scanned every lock per cell.
            SELECT * FROM percolator_lock l
            WHERE l.tbl = k.tbl AND l.rkey = k.rkey AND l.col = k.col LIMIT 1
        ) l ON true
        LEFT JOIN LATERAL (
            SELECT bool_or(w.kind = 3 AND w.start_ts = k.start_ts
                AND w.commit_ts = k.start_ts) AS rolled, max(w.commit_ts) AS newer
            FROM percolator_write w
            WHERE w.tbl = k.tbl AND w.rkey = k.rkey AND w.col = k.col
            AND w.commit_ts >= k.start_ts
        ) w ON true
    ), ins AS (
        INSERT INTO percolator_lock (tbl, rkey, col, start_ts, primary_tbl, primary_rkey,
            primary_col, ttl_ms, kind, value, hash)
        SELECT c.tbl, c.rkey, c.col, c.start_ts, c.ptbl, c.prow, c.pcol, c.ttl, c.kind,
            CASE WHEN c.kind = 1 THEN c.value END, c.hash
        FROM c WHERE c.status IS NULL
        ORDER BY c.tbl, c.rkey, c.col
    )
    SELECT c.i::integer, c.status, CASE WHEN c.status IN (1, 3) THEN c.newer END,
        c.l_start_ts, c.primary_tbl, c.primary_rkey, c.primary_col, c.ttl_ms, c.l_kind
    FROM c WHERE c.status > 0;
END $$""",
    _commit_many_function(guard=False),
]

_V8_PACKED_SCAN = [
    # The page's cells must come off the write index in key order: the aggregates take them in
    # the order the limited subquery yields them (an ORDER BY in each aggregate would sort the
    # page three more times, which halved the throughput). With statistics that did not know a
    # freshly loaded range yet, the planner instead sorted the whole range for every page
    # (17 s instead of 2 s to read 1,000,000 rows), so sorts and bitmap scans are off. The
    # column codes are a CASE over the names as literals, cheaper per cell than
    # array_position; the statement is therefore built per call, and planned per call.
    #
    # The lock probe of a full page stops at the page's last row (whose key the last layout
    # word's length cuts off the keys): right after a bulk commit the lock index holds the
    # dead entries of every moved lock until vacuum, and a probe to the end of the range
    # walked them all on every page. The last page probes to the end of the range, where new
    # rows may be locked that have no write record yet.
    f"""CREATE OR REPLACE FUNCTION percolator_scan_packed(
    p_tbl text, p_start bytea, p_end bytea, p_ts bigint, p_cols text[], p_limit integer)
RETURNS TABLE (cells bigint, keys bytea, vals bytea, layout bytea, safe_point bigint,
    first_lock bytea)
LANGUAGE plpgsql STABLE
SET enable_sort = off SET enable_bitmapscan = off SET enable_seqscan = off
SET max_parallel_workers_per_gather = 0
AS $$
#variable_conflict use_column
DECLARE
    codes text := (SELECT string_agg(format('WHEN %L THEN %s', c, i - 1), ' ')
        FROM unnest(p_cols) WITH ORDINALITY AS u(c, i));
    bounds text := CASE WHEN p_end IS NULL THEN 'rkey >= $2' ELSE 'rkey >= $2 AND rkey < $3' END;
    n bigint;
    k bytea;
    v bytea;
    lay bytea;
    upto bytea;
    key_len bigint;
BEGIN
    EXECUTE format($q$
WITH w AS (
    SELECT DISTINCT ON (rkey, col) rkey, col, kind, value FROM percolator_write
    WHERE tbl = $1 AND %1$s AND col = ANY($5) AND commit_ts <= $4 AND kind NOT IN (3, 4)
    ORDER BY rkey, col, commit_ts DESC LIMIT $6
)
SELECT count(*), coalesce(string_agg(rkey, ''), ''::bytea),
    coalesce(string_agg(value, '') FILTER (WHERE kind = 1), ''::bytea),
    coalesce(string_agg(int8send(length(rkey)::bigint << {COLUMN_BITS} | CASE
        WHEN kind = 1 THEN length(value)::bigint << 32 | CASE col %2$s END
        ELSE {NO_VALUE} END), ''), ''::bytea)
FROM w$q$, bounds, codes)
        INTO n, k, v, lay USING p_tbl, p_start, p_end, p_ts, p_cols, p_limit;
    IF n = p_limit THEN
        -- The last cell's key length: bits 12-31 of its layout word, the last 4 bytes.
        key_len := (((get_byte(lay, length(lay) - 4)::bigint << 24)
            | (get_byte(lay, length(lay) - 3) << 16) | (get_byte(lay, length(lay) - 2) << 8)
            | get_byte(lay, length(lay) - 1)) >> {COLUMN_BITS}) & {MAX_KEY_LENGTH};
        upto := substring(k FROM length(k) - key_len::integer + 1);
        bounds := 'rkey >= $2 AND rkey <= $7';
    END IF;
    RETURN QUERY EXECUTE format($q$
SELECT $8::bigint, $9::bytea, $10::bytea, $11::bytea,
    (SELECT safe_point FROM percolator_gc WHERE id = 1),
    (SELECT rkey FROM percolator_lock
        WHERE tbl = $1 AND %1$s AND col = ANY($5) AND start_ts <= $4 AND kind <> 4
        ORDER BY rkey, col LIMIT 1)$q$, bounds)
        USING p_tbl, p_start, p_end, p_ts, p_cols, p_limit, upto, n, k, v, lay;
END $$""",
]

_V8_PARALLEL_BULK_MOVES = [
    # A bulk move of many locks runs as several cursors over disjoint key ranges at once, each
    # its own chain of chunks: the overloads with an upper bound, and where to cut.
    _commit_locks_function(bounded=True),
    _rollback_locks_function(bounded=True),
    # Up to p_parts - 1 distinct rows that cut a transaction's locks on this shard into about
    # equal parts, none when it has fewer than p_min_locks: a walk of its entries in the
    # (start_ts, tbl, rkey) index.
    """CREATE OR REPLACE FUNCTION percolator_lock_splits(
    p_start_ts bigint, p_parts integer, p_min_locks integer)
RETURNS TABLE (tbl text, rkey bytea)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
AS $$
#variable_conflict use_column
DECLARE
    n bigint := (SELECT count(*) FROM percolator_lock l
        WHERE l.start_ts = p_start_ts AND l.start_ts > 0);
BEGIN
    IF n < p_min_locks OR p_parts < 2 THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT DISTINCT s.tbl, s.rkey FROM (
        SELECT l.tbl, l.rkey, row_number() OVER () AS i FROM (
            SELECT l.tbl, l.rkey FROM percolator_lock l
            WHERE l.start_ts = p_start_ts AND l.start_ts > 0
            ORDER BY l.start_ts, l.tbl, l.rkey
        ) l
    ) s
    WHERE s.i % (n / p_parts) = 0 AND s.i / (n / p_parts) < p_parts;
END $$""",
]

# Version 9: a prewrite's conflict check may start later than its start_ts, per cell (p_since:
# a READ COMMITTED statement that read the cell at a later snapshot, while holding its row
# lock, may overwrite versions committed between start_ts and that snapshot). NULL or 0 means
# start_ts (greatest() skips NULLs), so the default keeps the arguments of version 8 working:
# an older server still connected while a newer one migrates the shard prewrites as before.
# p_since of one element holds for every cell, as the shared arguments of version 7 do; it is
# told apart by its cardinality, not by coalesce, since NULL is a valid element here.
# The old overloads are dropped, so a call never resolves to an ambiguous pair. The rollback
# record check still looks at the window from start_ts: only the conflict's lower bound moves,
# inside the same index probe (a FILTER on its aggregate), so the plan shapes of version 7
# stay (per-cell LATERAL probes, generic plans).
_PREWRITE_ARGUMENTS = """
    p_start_ts bigint[], p_ptbl text[], p_prow bytea[], p_pcol text[], p_ttl integer[],
    p_tbl text[], p_row bytea[], p_col text[], p_kind smallint[], p_value bytea[],
    p_hash bigint[]"""
"""The array arguments of prewrite_each and prewrite_many up to version 8 (the DROPs below
name them; version 9 adds p_since after them)."""

_V9_PREWRITE_SINCE = [
    f"DROP FUNCTION IF EXISTS percolator_prewrite_each({_PREWRITE_ARGUMENTS})",
    f"DROP FUNCTION IF EXISTS percolator_prewrite_many({_PREWRITE_ARGUMENTS})",
    """DROP FUNCTION IF EXISTS percolator_prewrite_one(bigint, text, bytea, text, integer,
    text, bytea, text, smallint, bytea, bigint)""",
    """CREATE OR REPLACE FUNCTION percolator_prewrite_one(
    p_start_ts bigint, p_ptbl text, p_prow bytea, p_pcol text, p_ttl integer,
    p_tbl text, p_row bytea, p_col text, p_kind smallint, p_value bytea, p_hash bigint,
    p_since bigint DEFAULT NULL)
RETURNS TABLE (status integer, conflict_ts bigint, l_start_ts bigint, l_ptbl text,
    l_prow bytea, l_pcol text, l_ttl integer, l_kind smallint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    lk percolator_lock%ROWTYPE;
    rolled boolean;
    newer bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(p_hash);
    IF p_start_ts <= (SELECT safe_point FROM percolator_gc WHERE id = 1) THEN
        RETURN QUERY SELECT 4, NULL::bigint, NULL::bigint, NULL::text, NULL::bytea, NULL::text,
            NULL::integer, NULL::smallint;
        RETURN;
    END IF;
    SELECT * INTO lk FROM percolator_lock l
        WHERE l.tbl = p_tbl AND l.rkey = p_row AND l.col = p_col;
    IF FOUND THEN
        IF lk.start_ts <> p_start_ts THEN
            RETURN QUERY SELECT 2, NULL::bigint, lk.start_ts, lk.primary_tbl, lk.primary_rkey,
                lk.primary_col, lk.ttl_ms, lk.kind;
        ELSIF lk.kind <> p_kind
            OR lk.value IS DISTINCT FROM (CASE WHEN p_kind = 1 THEN p_value END) THEN
            RETURN QUERY SELECT 5, NULL::bigint, lk.start_ts, lk.primary_tbl, lk.primary_rkey,
                lk.primary_col, lk.ttl_ms, lk.kind;
        END IF;
        RETURN;
    END IF;
    SELECT bool_or(w.kind = 3 AND w.start_ts = p_start_ts AND w.commit_ts = p_start_ts),
        max(w.commit_ts) FILTER (WHERE w.commit_ts >= greatest(p_start_ts, p_since))
        INTO rolled, newer
        FROM percolator_write w
        WHERE w.tbl = p_tbl AND w.rkey = p_row AND w.col = p_col AND w.commit_ts >= p_start_ts;
    IF rolled OR newer IS NOT NULL THEN
        RETURN QUERY SELECT CASE WHEN rolled THEN 3 ELSE 1 END, newer, NULL::bigint,
            NULL::text, NULL::bytea, NULL::text, NULL::integer, NULL::smallint;
        RETURN;
    END IF;
    INSERT INTO percolator_lock VALUES (p_tbl, p_row, p_col, p_start_ts, p_ptbl, p_prow,
        p_pcol, p_ttl, p_kind, CASE WHEN p_kind = 1 THEN p_value END, p_hash);
END $$""",
    f"""CREATE OR REPLACE FUNCTION percolator_prewrite_each({_PREWRITE_ARGUMENTS},
    p_since bigint[] DEFAULT NULL)
RETURNS TABLE (idx integer, status integer, conflict_ts bigint, l_start_ts bigint,
    l_ptbl text, l_prow bytea, l_pcol text, l_ttl integer, l_kind smallint)
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. cardinality(p_tbl) LOOP
        RETURN QUERY SELECT i, f.* FROM percolator_prewrite_one(p_start_ts[i], p_ptbl[i],
            p_prow[i], p_pcol[i], p_ttl[i], p_tbl[i], p_row[i], p_col[i], p_kind[i],
            p_value[i], p_hash[i],
            p_since[CASE WHEN cardinality(p_since) = 1 THEN 1 ELSE i END]) f;
    END LOOP;
END $$""",
    f"""CREATE OR REPLACE FUNCTION percolator_prewrite_many({_PREWRITE_ARGUMENTS},
    p_since bigint[] DEFAULT NULL)
RETURNS TABLE (idx integer, status integer, conflict_ts bigint, l_start_ts bigint,
    l_ptbl text, l_prow bytea, l_pcol text, l_ttl integer, l_kind smallint)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off
SET enable_mergejoin = off SET max_parallel_workers_per_gather = 0
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN{_LOCK_ROWS}
    RETURN QUERY
    WITH c AS (
        SELECT k.*, l.start_ts AS l_start_ts, l.primary_tbl, l.primary_rkey, l.primary_col,
            l.ttl_ms, l.kind AS l_kind, w.newer,
            CASE WHEN k.start_ts <= (SELECT safe_point FROM percolator_gc WHERE id = 1) THEN 4
                WHEN l.start_ts IS NOT NULL THEN
                    CASE WHEN l.start_ts <> k.start_ts THEN 2
                        WHEN l.kind <> k.kind OR l.value IS DISTINCT FROM
                            (CASE WHEN k.kind = 1 THEN k.value END) THEN 5
                        ELSE 0 END
                WHEN w.rolled THEN 3
                WHEN w.newer IS NOT NULL THEN 1
            END AS status
        FROM (
            SELECT coalesce(u.start_ts, p_start_ts[1]) AS start_ts,
                coalesce(u.ptbl, p_ptbl[1]) AS ptbl, coalesce(u.prow, p_prow[1]) AS prow,
                coalesce(u.pcol, p_pcol[1]) AS pcol, coalesce(u.ttl, p_ttl[1]) AS ttl,
                coalesce(u.tbl, p_tbl[1]) AS tbl, u.rkey, u.col,
                coalesce(u.kind, p_kind[1]) AS kind, u.value, u.hash,
                CASE WHEN cardinality(p_since) = 1 THEN p_since[1] ELSE u.since END AS since,
                u.i
            FROM unnest(p_start_ts, p_ptbl, p_prow, p_pcol, p_ttl, p_tbl, p_row, p_col, p_kind,
                p_value, p_hash, p_since) WITH ORDINALITY
                AS u(start_ts, ptbl, prow, pcol, ttl, tbl, rkey, col, kind, value, hash, since,
                    i)
        ) k
        LEFT JOIN LATERAL (
            -- LIMIT: a probe per cell; flattened into a join, it scanned every lock per cell.
            SELECT * FROM percolator_lock l
            WHERE l.tbl = k.tbl AND l.rkey = k.rkey AND l.col = k.col LIMIT 1
        ) l ON true
        LEFT JOIN LATERAL (
            SELECT bool_or(w.kind = 3 AND w.start_ts = k.start_ts
                AND w.commit_ts = k.start_ts) AS rolled,
                max(w.commit_ts) FILTER (WHERE w.commit_ts >= greatest(k.start_ts, k.since))
                    AS newer
            FROM percolator_write w
            WHERE w.tbl = k.tbl AND w.rkey = k.rkey AND w.col = k.col
            AND w.commit_ts >= k.start_ts
        ) w ON true
    ), ins AS (
        INSERT INTO percolator_lock (tbl, rkey, col, start_ts, primary_tbl, primary_rkey,
            primary_col, ttl_ms, kind, value, hash)
        SELECT c.tbl, c.rkey, c.col, c.start_ts, c.ptbl, c.prow, c.pcol, c.ttl, c.kind,
            CASE WHEN c.kind = 1 THEN c.value END, c.hash
        FROM c WHERE c.status IS NULL
        ORDER BY c.tbl, c.rkey, c.col
    )
    SELECT c.i::integer, c.status, CASE WHEN c.status IN (1, 3) THEN c.newer END,
        c.l_start_ts, c.primary_tbl, c.primary_rkey, c.primary_col, c.ttl_ms, c.l_kind
    FROM c WHERE c.status > 0;
END $$""",
]

_V10_GUARDED_COMMIT = [
    """DROP FUNCTION IF EXISTS percolator_commit_many(bigint[], bigint[], text[], bytea[],
    text[], bigint[])""",
    _commit_many_function(guard=True),
]

MIGRATIONS: dict[int, list[str]] = {
    1: _V1_TABLES + _FUNCTIONS + _SINGLE_CELL_FUNCTIONS + _BATCHED_SINGLE_CELL_FUNCTIONS,
    2: _V2_HEARTBEAT,
    3: _V3_NOTIFY_TABLES + _V3_NOTIFY_FUNCTIONS,
    4: _V4_TABLES + _V4_FUNCTIONS,
    # Version 5 re-created the bulk moves with chunks bounded on all three index columns;
    # version 6 replaces the same functions, so a shard going through 5 gets them there.
    5: [],
    6: _V6_BULK_IN_KEY_ORDER,
    7: _V7_SET_BASED,
    8: [*_V8_PACKED_SCAN, *_V8_PARALLEL_BULK_MOVES, _sample_row_keys_function(_TOTAL_AS_NOW)],
    9: _V9_PREWRITE_SINCE,
    10: _V10_GUARDED_COMMIT,
}
"""Statements that bring a shard from version ``v - 1`` to ``v``."""
