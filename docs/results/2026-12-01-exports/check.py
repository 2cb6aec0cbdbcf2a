# Issue 13 evidence: tilepipe's exports and tensors read by the field's
# Python tools (pyarrow, pandas, DuckDB where installed).
import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq, pyarrow.ipc as ipc
d = sys.argv[1]
print("pyarrow", pa.__version__)
s = pq.read_table(f"{d}/export/samples.parquet")
print("samples.parquet:", s.num_rows, "rows;", s.schema.names)
import pandas as pd
print("pandas", pd.__version__)
df = s.to_pandas()
print(df.groupby(["case", "route"]).batch_per_op_ns.median().to_string())
sm = pd.read_parquet(f"{d}/export/summaries.parquet")
print(sm[["case", "route", "median_ns", "ratio", "ratio_lo", "ratio_hi", "interval_level", "verdict"]].to_string())
m = df.groupby(["case", "route"]).batch_per_op_ns.median()
for _, r in sm[sm.median_ns.notna()].iterrows():
    assert m[(r["case"], r["route"])] == r["median_ns"], (r["case"], r["route"])
print("medians of batch_per_op_ns == summaries' median_ns: yes")
print("the mixed-kind trap avoided: per_op_ns is not in the export; single_ns median",
      df[df.kind == "single"].single_ns.median(), "vs batch", df[df.kind == "batch"].batch_per_op_ns.median())
c = pd.read_csv(f"{d}/export/summaries.csv")
print("summaries.csv rows:", len(c))
t = ipc.open_file(f"{d}/A-bf16.arrow").read_all()
f = t.schema.field("tensor")
print("tensor field type:", f.type, "metadata:", f.metadata)
print("schema metadata dtype:", t.schema.metadata[b"tilepipe.dtype"])
a = t.column("tensor").chunk(0).to_numpy_ndarray()[0]
print("as stored:", a.dtype, a.shape, a.ravel()[:4])
if f.metadata.get(b"tilepipe.dtype") == b"bf16":
    v = (a.astype(np.uint32) << 16).view(np.float32)
    print("decoded bf16:", v.ravel()[:4], "finite:", bool(np.isfinite(v).all()), "max |x|:", float(np.abs(v).max()))
    wrong = a.astype(np.float16)
    print("what cast(float16) of the bits would give:", wrong.ravel()[:4])
try:
    import duckdb
    print("duckdb", duckdb.__version__)
    print(duckdb.sql(f"SELECT \"case\", route, median(batch_per_op_ns) AS med FROM '{d}/export/samples.parquet' GROUP BY ALL ORDER BY ALL"))
except ImportError as e:
    print("duckdb: not installed here:", e)
