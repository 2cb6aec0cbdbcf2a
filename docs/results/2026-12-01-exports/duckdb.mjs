import { DuckDBInstance } from '@duckdb/node-api';
const d = process.argv[2];
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
for (const q of [
  `SELECT version() AS duckdb`,
  `SELECT "case", route, median(batch_per_op_ns) AS median_per_op FROM '${d}/samples.parquet' GROUP BY ALL ORDER BY ALL`,
  `SELECT "case", route, ratio, ratio_lo, ratio_hi, verdict FROM '${d}/summaries.csv' WHERE ratio IS NOT NULL`,
]) {
  const r = await c.runAndReadAll(q);
  console.log(q);
  console.log(JSON.stringify(r.getRowObjectsJson()));
}
