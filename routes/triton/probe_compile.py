"""Probe (issue 11): compile a Triton kernel on the GPU machine, keep its
cubin, and write what a C launcher needs: the kernel symbol, grid, block,
dynamic shared memory and the parameter list after Triton's
specialisation, read from the PTX entry itself (the ground truth of what
cuLaunchKernel must be given).

usage: python3 probe_compile.py OUTDIR
"""
import json
import os
import re
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def entry_params(ptx, name):
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
    if not m:
        raise SystemExit("no .entry %s in the PTX" % name)
    return re.findall(r"\.param\s+\.(\w+)\s+(?:\.ptr\s+\.global\s+\.align\s+\d+\s+)?([\w$]+)", m.group(1))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    n = 1000003  # a tail: not a multiple of the block
    block = 1024
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = 2 * torch.arange(n, device="cuda", dtype=torch.float32)
    o = torch.full((n,), float("nan"), device="cuda")
    grid = (triton.cdiv(n, block),)
    k = add_kernel[grid](x, y, o, n, BLOCK=block)
    torch.cuda.synchronize()
    assert torch.equal(o, 3 * torch.arange(n, device="cuda", dtype=torch.float32)), "triton launch wrong"
    md = k.metadata
    meta = {f: getattr(md, f) for f in ("name", "num_warps", "num_ctas", "shared", "global_scratch_size",
                                         "global_scratch_align", "profile_scratch_size", "profile_scratch_align",
                                         "cluster_dims", "target") if hasattr(md, f)}
    meta["target"] = str(meta.get("target"))
    ptx = k.asm["ptx"]
    params = entry_params(ptx, md.name)
    with open(os.path.join(out, "add.cubin"), "wb") as f:
        f.write(k.asm["cubin"])
    with open(os.path.join(out, "add.ptx"), "w") as f:
        f.write(ptx)
    # Python arguments that survive specialisation, in order: the
    # constexpr BLOCK is gone; the PTX says what is left.
    names = ["x", "y", "out", "n"]
    lines = ["kernel %s" % md.name, "grid %d 1 1" % grid[0], "block %d 1 1" % (32 * md.num_warps),
             "shared %d" % md.shared, "n %d" % n]
    for i, (ty, pname) in enumerate(params):
        if i < 3:
            lines.append("param ptr %s" % names[i])
        elif i == 3:
            lines.append("param %s %d" % ("i32" if ty in ("u32", "s32", "b32") else ty, n))
        else:
            lines.append("param scratch %s" % ty)
    with open(os.path.join(out, "add.launch"), "w") as f:
        f.write("\n".join(lines) + "\n")
    json.dump({"metadata": meta, "ptx_params": params, "triton": triton.__version__, "torch": torch.__version__},
              open(os.path.join(out, "add.json"), "w"), indent=1)
    print(json.dumps({"metadata": meta, "ptx_params": params}, indent=1))
    print(open(os.path.join(out, "add.launch")).read())


if __name__ == "__main__":
    main()
