// node-postgres against the Percolator SQL server: prints one "name=value" line per check,
// which tests/server/test_client_node.py asserts.
const { Client, Pool } = require("pg");

async function main() {
  const config = {
    host: process.env.PGHOST, port: Number(process.env.PGPORT),
    user: process.env.PGUSER, database: "postgres",
  };
  const out = (name, value) => console.log(`${name}=${JSON.stringify(value)}`);
  const client = new Client(config);
  await client.connect();
  await client.query("CREATE TABLE node_t (id int PRIMARY KEY, name text, amount numeric(8,2), at timestamptz)");
  // Parameterized queries go through the extended protocol with text parameters.
  const inserted = await client.query(
    "INSERT INTO node_t VALUES ($1, $2, $3, $4), ($5, $6, $7, $8) RETURNING id",
    [1, "ada", "12.50", new Date("2024-01-02T03:04:05Z"), 2, "bob", null, null]);
  out("inserted", inserted.rows.map((r) => r.id));
  out("rowCount", inserted.rowCount);
  const row = (await client.query("SELECT name, amount, at FROM node_t WHERE id = $1", [1])).rows[0];
  out("row", [row.name, row.amount, row.at.toISOString()]);
  // Transactions.
  await client.query("BEGIN");
  await client.query("UPDATE node_t SET name = $1 WHERE id = $2", ["carl", 2]);
  await client.query("ROLLBACK");
  out("after_rollback", (await client.query("SELECT name FROM node_t WHERE id = 2")).rows[0].name);
  // Errors carry the SQLSTATE and leave the connection usable.
  try {
    await client.query("INSERT INTO node_t (id, name) VALUES (1, 'dup')");
  } catch (e) {
    out("unique_code", e.code);
  }
  try {
    await client.query("SELECT nosuch FROM node_t");
  } catch (e) {
    out("undefined_column_code", e.code);
  }
  // Multi-statement simple query.
  const multi = await client.query("SELECT 1 AS a; SELECT 2 AS b");
  out("multi", multi.map((r) => r.rows[0]));
  // Prepared (named) statement executed twice.
  const named = { name: "by_id", text: "SELECT name FROM node_t WHERE id = $1" };
  out("named", [(await client.query({ ...named, values: [1] })).rows[0].name,
                (await client.query({ ...named, values: [2] })).rows[0].name]);
  // Row mode and types of result columns.
  const typed = await client.query({ text: "SELECT 1::int8 AS big, true AS flag, 'x'::text AS s", rowMode: "array" });
  out("typed", typed.rows[0]);
  out("oids", typed.fields.map((f) => f.dataTypeID));
  await client.end();
  // A pool of connections running concurrently.
  const pool = new Pool({ ...config, max: 4 });
  const counts = await Promise.all([1, 2, 3, 4, 5, 6].map((i) =>
    pool.query("SELECT count(*)::int AS n FROM node_t WHERE id <= $1", [i])));
  out("pool", counts.map((r) => r.rows[0].n));
  await pool.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
