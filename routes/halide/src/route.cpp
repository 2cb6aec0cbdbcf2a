// The halide route: builds tilepipe cases into Halide AOT objects.
//
// It speaks the route protocol of docs/protocol.md:
//
//   route describe
//   route build --case CASE.json --workdir DIR
//
// Each case becomes one Halide pipeline specialized on the case's exact
// shape (every extent and stride is a compile-time constant), scheduled by
// hand (no autoscheduler) and compiled for the host with strict_float, since
// every case tilepipe sends today has the strict FP32 policy. A generated C
// file, entry.c, adapts the protocol's entry ABI (one raw pointer per
// signature param) to the Halide calling convention (halide_buffer_t).
//
// stdout carries exactly one JSON document; everything else (Halide's and
// cc's diagnostics) goes to stderr. Only usage errors exit non-zero.
#include "Halide.h"
#include "json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using tpjson::Value;

namespace {

#if defined(HALIDE_VERSION_MAJOR)
#define TP_STR2(x) #x
#define TP_STR(x) TP_STR2(x)
const char *const kHalideVersion = "Halide " TP_STR(HALIDE_VERSION_MAJOR) "." TP_STR(HALIDE_VERSION_MINOR) "." TP_STR(HALIDE_VERSION_PATCH);
#elif defined(TP_HALIDE_VERSION)
// Halide 14's headers carry no version macros; the Makefile reads the
// version from the installed package's CMake config.
const char *const kHalideVersion = "Halide " TP_HALIDE_VERSION;
#else
const char *const kHalideVersion = "Halide (unknown version)";
#endif

#ifndef TP_HALIDE_INCLUDE
#define TP_HALIDE_INCLUDE "/usr/include/halide14"
#endif

const char *const kOps[] = {"gemm", "add", "sum", "softmax", "rmsnorm", "layernorm"};
const char *const kFunction = "tp_halide_kernel";
const char *const kEntry = "tilepipe_entry";

// A dimension or tensor beyond this would overflow Halide's int32 indexing.
constexpr long long kMaxElems = (1LL << 31) - 1;

// Failure is thrown for a case the route cannot build; status says whether
// the route declines it (unsupported) or the build went wrong (failed).
struct Failure {
    std::string status;
    std::string reason;
};

[[noreturn]] void fail(const std::string &reason) {
    throw Failure{"failed", reason};
}

[[noreturn]] void unsupported(const std::string &reason) {
    throw Failure{"unsupported", reason};
}

struct Param {
    std::string name, role, dtype;
    std::vector<int> shape;
};

struct Case {
    std::string id, op, dtype, policy;
    std::vector<std::pair<std::string, int>> dims;
    double eps = 1e-5;
    int threads = 0;  // 0: leave Halide's default
    std::vector<Param> signature;
    Value signature_json;

    int dim(const std::string &name) const {
        for (const auto &d : dims) {
            if (d.first == name) {
                return d.second;
            }
        }
        return 0;
    }
};

std::string shape_string(const std::vector<int> &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); i++) {
        out += (i ? ", " : "") + std::to_string(s[i]);
    }
    return out + "]";
}

bool known_op(const std::string &op) {
    for (const char *k : kOps) {
        if (op == k) {
            return true;
        }
    }
    return false;
}

std::vector<std::string> op_dims(const std::string &op) {
    if (op == "gemm") {
        return {"M", "N", "K"};
    }
    return {"M", "N"};
}

// ---- case decoding ----

const Value &member(const Value &obj, const std::string &key, Value::Kind kind, const std::string &where) {
    const Value *v = obj.get(key);
    if (v == nullptr) {
        fail(where + ": missing \"" + key + "\"");
    }
    if (v->kind != kind) {
        fail(where + ": \"" + key + "\": want a " + tpjson::kind_name(kind) + ", got a " + tpjson::kind_name(v->kind));
    }
    return *v;
}

int integer(const Value &v, const std::string &what, long long lo, long long hi) {
    if (!v.is_number() || v.num != std::floor(v.num) || v.num < double(lo) || v.num > double(hi)) {
        fail(what + ": want an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + tpjson::write(v));
    }
    return int(v.num);
}

Param decode_param(const Value &v, size_t i) {
    std::string where = "case: signature[" + std::to_string(i) + "]";
    if (!v.is_object()) {
        fail(where + ": want an object, got a " + std::string(tpjson::kind_name(v.kind)));
    }
    Param p;
    p.name = member(v, "name", Value::String, where).str;
    p.role = member(v, "role", Value::String, where).str;
    p.dtype = member(v, "dtype", Value::String, where).str;
    const Value &shape = member(v, "shape", Value::Array, where);
    for (size_t k = 0; k < shape.arr.size(); k++) {
        p.shape.push_back(integer(shape.arr[k], where + ".shape[" + std::to_string(k) + "]", 0, kMaxElems));
    }
    return p;
}

Case decode_case(const Value &v) {
    if (!v.is_object()) {
        fail("case: want a JSON object");
    }
    Case c;
    c.id = member(v, "id", Value::String, "case").str;
    c.op = member(v, "op", Value::String, "case").str;
    c.dtype = member(v, "dtype", Value::String, "case").str;
    c.policy = member(v, "policy", Value::String, "case").str;
    const Value &dims = member(v, "dims", Value::Object, "case");
    for (const auto &d : dims.obj) {
        c.dims.emplace_back(d.first, integer(d.second, "case: dims." + d.first, 1, kMaxElems));
    }
    if (const Value *params = v.get("params"); params != nullptr && !params->is_null()) {
        if (!params->is_object()) {
            fail("case: \"params\": want an object, got a " + std::string(tpjson::kind_name(params->kind)));
        }
        if (const Value *eps = params->get("eps"); eps != nullptr) {
            if (!eps->is_number() || !(eps->num > 0 && eps->num < 1)) {
                fail("case: params.eps: want a number in (0, 1), got " + tpjson::write(*eps));
            }
            c.eps = eps->num;
        }
    }
    if (const Value *t = v.get("threads"); t != nullptr && !t->is_null()) {
        c.threads = integer(*t, "case: threads", 1, 4096);
    }
    c.signature_json = member(v, "signature", Value::Array, "case");
    for (size_t i = 0; i < c.signature_json.arr.size(); i++) {
        c.signature.push_back(decode_param(c.signature_json.arr[i], i));
    }
    return c;
}

// implemented is the signature this route implements for c's op and dims
// (docs/protocol.md, the op table).
std::vector<Param> implemented(const Case &c) {
    int M = c.dim("M"), N = c.dim("N"), K = c.dim("K");
    auto in = [](const char *name, std::vector<int> shape) { return Param{name, "input", "f32", std::move(shape)}; };
    auto out = [](const char *name, std::vector<int> shape) { return Param{name, "output", "f32", std::move(shape)}; };
    if (c.op == "gemm") {
        return {in("A", {M, K}), in("B", {K, N}), out("C", {M, N})};
    } else if (c.op == "add") {
        return {in("A", {M, N}), in("B", {M, N}), out("C", {M, N})};
    } else if (c.op == "sum") {
        return {in("X", {M, N}), out("Y", {M})};
    } else if (c.op == "softmax") {
        return {in("X", {M, N}), out("Y", {M, N})};
    } else if (c.op == "rmsnorm") {
        return {in("X", {M, N}), in("W", {N}), out("Y", {M, N})};
    } else if (c.op == "layernorm") {
        return {in("X", {M, N}), in("W", {N}), in("B", {N}), out("Y", {M, N})};
    }
    return {};
}

std::string names(const std::vector<Param> &ps) {
    std::string out;
    for (size_t i = 0; i < ps.size(); i++) {
        out += (i ? ", " : "") + ps[i].name;
    }
    return out;
}

// check_case declines what the route does not implement and fails a case
// whose dims or signature disagree with the op.
void check_case(const Case &c) {
    if (!known_op(c.op)) {
        unsupported("op \"" + c.op + "\" is not implemented by the halide route (ops: gemm, add, sum, softmax, rmsnorm, layernorm)");
    }
    if (c.dtype != "f32") {
        unsupported("dtype \"" + c.dtype + "\" is not implemented (only f32)");
    }
    if (c.policy != "strict") {
        unsupported("numeric policy \"" + c.policy + "\" is not implemented (only strict)");
    }
    std::vector<std::string> want = op_dims(c.op);
    for (const auto &n : want) {
        if (c.dim(n) == 0) {
            fail("case: dims: op " + c.op + " needs " + n);
        }
    }
    if (c.dims.size() != want.size()) {
        std::string list;
        for (const auto &d : c.dims) {
            list += (list.empty() ? "" : ", ") + d.first;
        }
        fail("case: dims: op " + c.op + " takes " + std::to_string(want.size()) + " dims, got " + list);
    }
    std::vector<Param> impl = implemented(c);
    for (const Param &p : impl) {
        long long n = 1;
        for (int d : p.shape) {
            n *= d;
        }
        if (n > kMaxElems) {
            unsupported("tensor " + p.name + " has " + std::to_string(n) + " elements; Halide indexes with int32");
        }
    }
    const auto &got = c.signature;
    if (got.size() != impl.size()) {
        fail("signature mismatch: case lists " + std::to_string(got.size()) + " params (" + names(got) + "), route implements " +
             std::to_string(impl.size()) + " (" + names(impl) + ")");
    }
    for (size_t i = 0; i < impl.size(); i++) {
        const Param &g = got[i], &w = impl[i];
        std::string at = "signature mismatch: param " + std::to_string(i) + " (" + w.name + ")";
        if (g.name != w.name) {
            fail(at + ": name \"" + g.name + "\", route implements \"" + w.name + "\"");
        }
        if (g.role != w.role) {
            fail(at + ": role \"" + g.role + "\", route implements \"" + w.role + "\"");
        }
        if (g.dtype != w.dtype) {
            fail(at + ": dtype \"" + g.dtype + "\", route implements \"" + w.dtype + "\"");
        }
        if (g.shape != w.shape) {
            fail(at + ": shape " + shape_string(g.shape) + ", route implements " + shape_string(w.shape));
        }
    }
}

// ---- Halide pipelines ----

using namespace Halide;

// A Plan is one case's pipeline plus what entry.c needs: the Halide
// extents of each signature param (innermost first) in signature order.
struct Plan {
    Pipeline pipeline;
    std::vector<Argument> args;
    std::vector<std::vector<int>> extents;
    Value schedule = Value::object();
};

// Every extent and stride is a constant, so Halide specializes all
// addressing and checks the caller's buffers against exactly this shape.
ImageParam input(const std::string &name, const std::vector<int> &extents) {
    ImageParam p(Float(32), int(extents.size()), name);
    int stride = 1;
    for (size_t d = 0; d < extents.size(); d++) {
        p.dim(int(d)).set_bounds(0, extents[d]).set_stride(stride);
        stride *= extents[d];
    }
    return p;
}

void constrain_output(Func f, const std::vector<int> &extents) {
    OutputImageParam o = f.output_buffer();
    int stride = 1;
    for (size_t d = 0; d < extents.size(); d++) {
        o.dim(int(d)).set_bounds(0, extents[d]).set_stride(stride);
        stride *= extents[d];
    }
}

// Schedule knobs shared by the ops.
struct Knobs {
    int vec;      // natural float vector width of the target
    int threads;  // the case's thread count (at least 1)
};

// rows_per_task sizes a parallel task of a row op: about kTaskElems
// elements, yet at least 4 tasks per thread when the rows allow it.
int rows_per_task(int M, int N, const Knobs &k) {
    constexpr int kTaskElems = 16384;
    int r = std::max(1, kTaskElems / N);
    r = std::min(r, std::max(1, M / (4 * k.threads)));
    return std::min(r, M);
}

enum class Combine { Add, Max };

Expr combine(Combine op, Expr a, Expr b) {
    return op == Combine::Add ? a + b : max(a, b);
}

// A RowReduce reduces g(x, y) over x in [0, N) for each row y. part holds
// `lanes` interleaved partial results (lane u takes x = u, u+lanes, ...),
// so the main loop runs on whole vectors with independent accumulators;
// total folds the lanes in order and then the scalar tail x >= N/lanes*lanes.
// The reassociation is explicit in the algorithm, so it holds under
// strict_float too.
struct RowReduce {
    Func part, total;
    Var u;
    RVar r;
    bool has_r = false;
    int lanes = 1;
};

RowReduce row_reduce(const std::string &name, Combine op, int N, int lanes, const std::function<Expr(Expr, Expr)> &g) {
    RowReduce rr;
    rr.part = Func(name + "_part");
    rr.total = Func(name);
    rr.u = Var(name + "_u");
    rr.lanes = lanes;
    Var u = rr.u, y(name + "_y");
    int whole = N / lanes;
    int tail = N - whole * lanes;
    rr.part(u, y) = g(u, y);
    if (whole > 1) {
        RDom r(1, whole - 1, name + "_r");
        rr.part(u, y) = combine(op, rr.part(u, y), g(r * lanes + u, y));
        rr.r = RVar(r.x);
        rr.has_r = true;
    }
    rr.total(y) = rr.part(0, y);
    if (lanes > 1) {
        RDom l(1, lanes - 1, name + "_l");
        rr.total(y) = combine(op, rr.total(y), rr.part(l, y));
    }
    if (tail > 0) {
        RDom t(whole * lanes, tail, name + "_t");
        rr.total(y) = combine(op, rr.total(y), g(t, y));
    }
    return rr;
}

// reduce_lanes: four vectors of accumulators hide the add latency; fall
// back to one vector, then to scalar, for narrow rows.
int reduce_lanes(int N, const Knobs &k) {
    if (N >= 4 * k.vec) {
        return 4 * k.vec;
    }
    if (N >= k.vec) {
        return k.vec;
    }
    return 1;
}

void schedule_reduce(RowReduce &rr, Func at, const Var &at_var, const Knobs &k) {
    rr.part.compute_at(at, at_var);
    rr.total.compute_at(at, at_var);
    if (rr.lanes < k.vec) {
        return;
    }
    Var uo(rr.u.name() + "o"), ui(rr.u.name() + "i");
    rr.part.split(rr.u, uo, ui, k.vec).vectorize(ui).unroll(uo);
    if (rr.has_r) {
        // lanes is a multiple of vec, so the split of u is exact.
        rr.part.update(0).split(rr.u, uo, ui, k.vec).reorder(ui, uo, rr.r).vectorize(ui).unroll(uo);
    }
}

// RowFrame is the common frame of the row ops: output Y(x, y) (or Y(y) for
// sum), row blocks in parallel, x vectorized.
struct RowFrame {
    Var x{"x"}, y{"y"}, yo{"yo"}, yi{"yi"};
    int v = 1, R = 1, lanes = 1;
};

RowFrame row_frame(int M, int N, const Knobs &k) {
    RowFrame f;
    f.v = N >= k.vec ? k.vec : 1;
    f.R = rows_per_task(M, N, k);
    f.lanes = reduce_lanes(N, k);
    return f;
}

void schedule_rows(Func Y, RowFrame &f, bool vectorize_x) {
    // The default tail strategy of an output's pure split is ShiftInwards:
    // a last partial block recomputes rows of the one before and never
    // steps past the buffer (R <= M, v <= N hold by construction).
    Y.split(f.y, f.yo, f.yi, f.R).parallel(f.yo);
    if (vectorize_x && f.v > 1) {
        Y.vectorize(f.x, f.v);
    }
}

Value row_schedule(const RowFrame &f, const Knobs &k, const std::string &algorithm) {
    Value s = Value::object();
    s.set("algorithm", Value::string(algorithm));
    s.set("parallel", Value::string("row blocks"));
    s.set("rows_per_task", Value::number(f.R));
    s.set("vector", Value::number(f.v));
    s.set("reduce_lanes", Value::number(f.lanes));
    s.set("reduce_vector", Value::number(f.lanes >= k.vec ? k.vec : 1));
    s.set("tail", Value::string("shift_inwards rows and columns; scalar reduction tail"));
    return s;
}

// pick_tile returns the first (largest) candidate that fits in n and whose
// ShiftInwards tiles recompute at most 1/8 more than n; else the last.
int pick_tile(int n, const std::vector<int> &candidates) {
    for (int t : candidates) {
        if (t <= n && (long long)((n + t - 1) / t) * t * 8 <= 9LL * n) {
            return t;
        }
    }
    return std::min(n, candidates.back());
}

Plan plan_gemm(int M, int N, int K, const Knobs &k) {
    Plan p;
    ImageParam A = input("A", {K, M});
    ImageParam B = input("B", {N, K});
    Var x("x"), y("y");
    RDom r(0, K, "k");
    Func prod("prod"), C("C");
    prod(x, y) = 0.0f;
    prod(x, y) += A(r, y) * B(x, r);
    C(x, y) = prod(x, y);
    constrain_output(C, {N, M});

    // Register-blocked tiles in the manner of Halide's own CPU matmul
    // schedule: a UY x TX block of C accumulates over all of K in
    // registers (UY * TX/v vector accumulators), tiles run in parallel.
    // Tile sizes shrink to fit narrow or short matrices so that the
    // ShiftInwards tails never reach outside C.
    int v = N >= k.vec ? k.vec : 1;
    int TX = v > 1 ? pick_tile(N, {3 * v, 2 * v, v}) : std::min(N, 24);
    int UY = std::min(M, 4);
    int TY = pick_tile(M, {64, 32, 16, 8, UY});
    int UK = K % 2 == 0 ? 2 : 1;
    // Each tile copies its K x TX panel of B into a dense buffer first:
    // B's own rows are N floats apart, which for power-of-two N maps the
    // panel onto a few cache sets. The copy pays off once it is reused by
    // enough rows of A.
    bool pack = v > 1 && TY >= 16;
    Var xi("xi"), yi("yi"), yii("yii"), xy("xy");
    C.tile(x, y, xi, yi, TX, TY).fuse(x, y, xy).parallel(xy).split(yi, yi, yii, UY).unroll(yii);
    if (pack) {
        Func panel = B.in();
        panel.compute_at(C, xy).vectorize(panel.args()[0], v);
    }
    prod.compute_at(C, yi).unroll(y);
    prod.update().reorder(x, y, r).unroll(y);
    if (v > 1) {
        C.vectorize(xi, v).unroll(xi);
        prod.vectorize(x, v);
        prod.update().vectorize(x, v).unroll(x);
    } else {
        C.unroll(xi);
    }
    if (UK > 1) {
        prod.update().unroll(r, UK);
    }
    p.pipeline = Pipeline(C);
    p.args = {A, B};
    p.extents = {{K, M}, {N, K}, {N, M}};
    Value s = Value::object();
    s.set("algorithm", Value::string("register-blocked tiles, fp32 accumulation over all of K"));
    s.set("parallel", Value::string("fused tile index"));
    s.set("tile_x", Value::number(TX));
    s.set("tile_y", Value::number(TY));
    s.set("block_y", Value::number(UY));
    s.set("vector", Value::number(v));
    s.set("unroll_k", Value::number(UK));
    s.set("pack_b", Value::boolean(pack));
    s.set("tail", Value::string("shift_inwards tiles"));
    p.schedule = s;
    return p;
}

Plan plan_add(int M, int N, const Knobs &k) {
    // Both inputs and the output are dense and identically laid out, so the
    // pipeline sees them flat: one long vectorizable loop, whatever N is.
    Plan p;
    int T = M * N;
    ImageParam A = input("A", {T});
    ImageParam B = input("B", {T});
    Var i("i"), io("io"), ii("ii");
    Func C("C");
    C(i) = A(i) + B(i);
    constrain_output(C, {T});
    constexpr int kChunk = 16384;
    int v = T >= k.vec ? k.vec : 1;
    int CH = v > 1 ? std::min(kChunk, T / v * v) : std::min(kChunk, T);
    C.split(i, io, ii, CH).parallel(io);
    if (v > 1) {
        C.vectorize(ii, v);
    }
    p.pipeline = Pipeline(C);
    p.args = {A, B};
    p.extents = {{T}, {T}, {T}};
    Value s = Value::object();
    s.set("algorithm", Value::string("elementwise over the flat buffer"));
    s.set("layout", Value::string("flat"));
    s.set("parallel", Value::string("chunks"));
    s.set("chunk", Value::number(CH));
    s.set("vector", Value::number(v));
    s.set("tail", Value::string("shift_inwards"));
    p.schedule = s;
    return p;
}

Plan plan_sum(int M, int N, const Knobs &k) {
    Plan p;
    ImageParam X = input("X", {N, M});
    RowFrame f = row_frame(M, N, k);
    RowReduce s = row_reduce("row_sum", Combine::Add, N, f.lanes, [&](Expr x, Expr y) { return X(x, y); });
    Func Y("Y");
    Y(f.y) = s.total(f.y);
    constrain_output(Y, {M});
    schedule_rows(Y, f, false);
    schedule_reduce(s, Y, f.yi, k);
    p.pipeline = Pipeline(Y);
    p.args = {X};
    p.extents = {{N, M}, {M}};
    p.schedule = row_schedule(f, k, "row sums: vector partial sums, lanes folded in order, scalar tail");
    return p;
}

Plan plan_softmax(int M, int N, const Knobs &k) {
    Plan p;
    ImageParam X = input("X", {N, M});
    RowFrame f = row_frame(M, N, k);
    RowReduce mx = row_reduce("row_max", Combine::Max, N, f.lanes, [&](Expr x, Expr y) { return X(x, y); });
    Func e("e"), Y("Y");
    Var ex("ex"), ey("ey");
    e(ex, ey) = exp(X(ex, ey) - mx.total(ey));
    RowReduce s = row_reduce("row_sum", Combine::Add, N, f.lanes, [&](Expr x, Expr y) { return e(x, y); });
    Y(f.x, f.y) = e(f.x, f.y) / s.total(f.y);
    constrain_output(Y, {N, M});
    schedule_rows(Y, f, true);
    schedule_reduce(mx, Y, f.yi, k);
    schedule_reduce(s, Y, f.yi, k);
    // exp runs once per element: its row is kept for the sum and the
    // normalization.
    e.compute_at(Y, f.yi).store_at(Y, f.yo);
    if (f.v > 1) {
        e.vectorize(ex, f.v);
    }
    p.pipeline = Pipeline(Y);
    p.args = {X};
    p.extents = {{N, M}, {N, M}};
    p.schedule = row_schedule(f, k, "three passes per row: max, exp and sum, divide");
    p.schedule.set("exp", Value::string("Halide exp (libm expf under strict_float)"));
    return p;
}

Plan plan_rmsnorm(int M, int N, float eps, const Knobs &k) {
    Plan p;
    ImageParam X = input("X", {N, M});
    ImageParam W = input("W", {N});
    RowFrame f = row_frame(M, N, k);
    RowReduce ss = row_reduce("row_sumsq", Combine::Add, N, f.lanes, [&](Expr x, Expr y) {
        Expr v = X(x, y);
        return v * v;
    });
    Func rs("rsqrt_ms"), Y("Y");
    Var ry("ry");
    rs(ry) = 1.0f / sqrt(ss.total(ry) / float(N) + eps);
    Y(f.x, f.y) = X(f.x, f.y) * rs(f.y) * W(f.x);
    constrain_output(Y, {N, M});
    schedule_rows(Y, f, true);
    schedule_reduce(ss, Y, f.yi, k);
    rs.compute_at(Y, f.yi);
    p.pipeline = Pipeline(Y);
    p.args = {X, W};
    p.extents = {{N, M}, {N}, {N, M}};
    p.schedule = row_schedule(f, k, "two passes per row: sum of squares, scale");
    p.schedule.set("rsqrt", Value::string("1/sqrt"));
    return p;
}

Plan plan_layernorm(int M, int N, float eps, const Knobs &k) {
    Plan p;
    ImageParam X = input("X", {N, M});
    ImageParam W = input("W", {N});
    ImageParam B = input("B", {N});
    RowFrame f = row_frame(M, N, k);
    RowReduce s1 = row_reduce("row_sum", Combine::Add, N, f.lanes, [&](Expr x, Expr y) { return X(x, y); });
    Func mean("mean"), var("var"), rs("rsqrt_var"), Y("Y");
    Var my("my"), vy("vy"), ry("ry");
    mean(my) = s1.total(my) / float(N);
    RowReduce s2 = row_reduce("row_sqdev", Combine::Add, N, f.lanes, [&](Expr x, Expr y) {
        Expr d = X(x, y) - mean(y);
        return d * d;
    });
    var(vy) = s2.total(vy) / float(N);
    rs(ry) = 1.0f / sqrt(var(ry) + eps);
    Y(f.x, f.y) = (X(f.x, f.y) - mean(f.y)) * rs(f.y) * W(f.x) + B(f.x);
    constrain_output(Y, {N, M});
    schedule_rows(Y, f, true);
    schedule_reduce(s1, Y, f.yi, k);
    schedule_reduce(s2, Y, f.yi, k);
    mean.compute_at(Y, f.yi);
    var.compute_at(Y, f.yi);
    rs.compute_at(Y, f.yi);
    p.pipeline = Pipeline(Y);
    p.args = {X, W, B};
    p.extents = {{N, M}, {N}, {N}, {N, M}};
    p.schedule = row_schedule(f, k, "three passes per row: mean, biased variance of (x-mean), normalize");
    p.schedule.set("rsqrt", Value::string("1/sqrt"));
    return p;
}

Plan plan(const Case &c, const Knobs &k) {
    int M = c.dim("M"), N = c.dim("N");
    float eps = float(c.eps);
    if (c.op == "gemm") {
        return plan_gemm(M, N, c.dim("K"), k);
    } else if (c.op == "add") {
        return plan_add(M, N, k);
    } else if (c.op == "sum") {
        return plan_sum(M, N, k);
    } else if (c.op == "softmax") {
        return plan_softmax(M, N, k);
    } else if (c.op == "rmsnorm") {
        return plan_rmsnorm(M, N, eps, k);
    }
    return plan_layernorm(M, N, eps, k);
}

// ---- entry.c ----

std::string c_comment(const std::string &s) {
    std::string out;
    for (char ch : s) {
        out += (ch == '*' || ch == '/' || (unsigned char)ch < 0x20) ? '_' : ch;
    }
    return out;
}

std::string entry_source(const Case &c, const Plan &p) {
    std::ostringstream o;
    o << "/* tilepipe halide route: entry for case " << c_comment(c.id) << " (generated). */\n"
      << "#include <stddef.h>\n"
      << "#include <stdint.h>\n"
      << "#include \"HalideRuntime.h\"\n"
      << "#include \"kernel.h\"\n\n"
      << "int " << kEntry << "(void *const *buffers) {\n";
    // The thread pool size is not baked in: the Halide runtime reads
    // HL_NUM_THREADS, which replay sets for every visit.
    for (size_t i = 0; i < p.extents.size(); i++) {
        const auto &ext = p.extents[i];
        o << "    /* " << c.signature[i].name << " " << shape_string(c.signature[i].shape) << " */\n";
        o << "    halide_dimension_t d" << i << "[" << ext.size() << "] = {";
        long long stride = 1;
        for (size_t d = 0; d < ext.size(); d++) {
            o << (d ? ", " : "") << "{0, " << ext[d] << ", " << stride << ", 0}";
            stride *= ext[d];
        }
        o << "};\n";
        o << "    halide_buffer_t b" << i << " = {0};\n"
          << "    b" << i << ".host = (uint8_t *)buffers[" << i << "];\n"
          << "    b" << i << ".type.code = halide_type_float;\n"
          << "    b" << i << ".type.bits = 32;\n"
          << "    b" << i << ".type.lanes = 1;\n"
          << "    b" << i << ".dimensions = " << ext.size() << ";\n"
          << "    b" << i << ".dim = d" << i << ";\n";
    }
    o << "    return " << kFunction << "(";
    for (size_t i = 0; i < p.extents.size(); i++) {
        o << (i ? ", " : "") << "&b" << i;
    }
    o << ");\n}\n";
    return o.str();
}

// ---- processes and files ----

// saved_stdout is the protocol's stdout; fd 1 itself points at stderr so
// that nothing but the response can reach the caller's stdout.
int saved_stdout = -1;

struct Run {
    int exit = -1;
    std::string out;
};

// run executes argv in dir with stdin closed and stdout captured (capture)
// or sent to stderr. exit is the exit status, 128+N for signal N, or 127
// when argv[0] could not be started.
Run run(const std::vector<std::string> &argv, const std::string &dir, bool capture) {
    Run r;
    int fds[2] = {-1, -1};
    if (capture && pipe(fds) != 0) {
        fail(std::string("pipe: ") + std::strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) {
        fail(std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
        if (capture) {
            dup2(fds[1], 1);
            close(fds[0]);
            close(fds[1]);
        } else {
            dup2(2, 1);
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) {
            dup2(devnull, 0);
        }
        if (!dir.empty() && chdir(dir.c_str()) != 0) {
            _exit(127);
        }
        std::vector<char *> args;
        for (const auto &a : argv) {
            args.push_back(const_cast<char *>(a.c_str()));
        }
        args.push_back(nullptr);
        execvp(args[0], args.data());
        std::fprintf(stderr, "halide route: exec %s: %s\n", args[0], std::strerror(errno));
        _exit(127);
    }
    if (capture) {
        close(fds[1]);
        char buf[4096];
        ssize_t n;
        while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
            if (n > 0) {
                r.out.append(buf, size_t(n));
            }
        }
        close(fds[0]);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            fail(std::string("waitpid: ") + std::strerror(errno));
        }
    }
    r.exit = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

Value command_json(const std::vector<std::string> &argv, int exit) {
    Value a = Value::array();
    for (const auto &s : argv) {
        a.push(Value::string(s));
    }
    Value c = Value::object();
    c.set("argv", a);
    c.set("exit", Value::number(exit));
    return c;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        fail("read " + path + ": " + std::strerror(errno));
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const std::string &path, const std::string &data) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << data;
    out.close();
    if (!out) {
        fail("write " + path + ": " + std::strerror(errno));
    }
}

bool regular_file(const std::string &path) {
    struct stat st;
    return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void prepare_workdir(const std::string &dir) {
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) {
        if (mkdir(dir.c_str(), 0777) != 0) {
            fail("workdir " + dir + ": " + std::strerror(errno));
        }
    } else if (!S_ISDIR(st.st_mode)) {
        fail("workdir " + dir + ": not a directory");
    }
}

std::string first_line(const std::string &s) {
    return s.substr(0, s.find('\n'));
}

// ---- responses ----

void emit(const Value &v) {
    std::string text = tpjson::write(v) + "\n";
    const char *p = text.data();
    size_t left = text.size();
    while (left > 0) {
        ssize_t n = write(saved_stdout, p, left);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            std::perror("halide route: write stdout");
            std::exit(1);
        }
        p += n;
        left -= size_t(n);
    }
}

Value describe() {
    Value ops = Value::array();
    for (const char *op : kOps) {
        ops.push(Value::string(op));
    }
    Value v = Value::object();
    v.set("protocol", Value::number(1));
    v.set("name", Value::string("halide"));
    v.set("kind", Value::string("object"));
    v.set("version", Value::string(kHalideVersion));
    v.set("available", Value::boolean(true));
    v.set("reason", Value::string(""));
    v.set("ops", ops);
    return v;
}

Value response(const std::string &status, const std::string &reason) {
    Value v = Value::object();
    v.set("protocol", Value::number(1));
    v.set("status", Value::string(status));
    v.set("reason", Value::string(reason));
    v.set("kind", Value::string("object"));
    v.set("files", Value::array());
    v.set("entry", Value::null());
    v.set("link", Value::array());
    v.set("process", Value::null());
    v.set("schedule", Value::object());
    v.set("toolchain", Value::object());
    v.set("commands", Value::array());
    return v;
}

Value build(const std::string &case_path, const std::string &workdir) {
    Value commands = Value::array();
    Value toolchain = Value::object();
    toolchain.set("compiler", Value::string(kHalideVersion));
    try {
        Value cj;
        try {
            cj = tpjson::parse(read_file(case_path));
        } catch (const tpjson::ParseError &e) {
            fail("case " + case_path + ": invalid JSON: " + e.what());
        }
        Case c = decode_case(cj);
        check_case(c);
        prepare_workdir(workdir);

        Target host = get_host_target();
        Target target = host.with_feature(Target::StrictFloat);
        toolchain.set("target", Value::string(target.to_string()));
        toolchain.set("host_target", Value::string(host.to_string()));

        Knobs k;
        k.vec = std::max(1, target.natural_vector_size<float>());
        k.threads = c.threads > 0 ? c.threads : 1;
        Plan p = plan(c, k);
        // Threads size the parallel tasks here; at run time the pool size
        // comes from HL_NUM_THREADS, which replay sets for every visit.
        p.schedule.set("tiling_threads", c.threads > 0 ? Value::number(c.threads) : Value::string("halide default"));
        p.schedule.set("runtime_threads", Value::string("HL_NUM_THREADS"));
        p.schedule.set("strict_float", Value::boolean(true));
        p.schedule.set("function", Value::string(kFunction));
        if (c.op == "rmsnorm" || c.op == "layernorm") {
            p.schedule.set("eps", Value::number(c.eps));
        }

        std::string base = workdir + "/";
        p.pipeline.compile_to(
            {
                {OutputFileType::object, base + "kernel.o"},
                {OutputFileType::c_header, base + "kernel.h"},
                {OutputFileType::stmt, base + "kernel.stmt"},
                {OutputFileType::llvm_assembly, base + "kernel.ll"},
                {OutputFileType::assembly, base + "kernel.s"},
            },
            p.args, kFunction, target);

        write_file(base + "entry.c", entry_source(c, p));
        std::vector<std::string> version_argv = {"cc", "--version"};
        Run version = run(version_argv, workdir, true);
        commands.push(command_json(version_argv, version.exit));
        toolchain.set("cc", Value::string(first_line(version.out)));
        std::vector<std::string> cc_argv = {"cc", "-O2", "-c", "entry.c", "-o", "entry.o", "-I" TP_HALIDE_INCLUDE};
        Run cc = run(cc_argv, workdir, false);
        commands.push(command_json(cc_argv, cc.exit));
        if (cc.exit != 0) {
            fail("cc -c entry.c exited " + std::to_string(cc.exit) + " (its messages are on stderr)");
        }

        const std::pair<const char *, const char *> products[] = {
            {"kernel.o", "object"}, {"entry.o", "object"}, {"entry.c", "source"}, {"kernel.h", "header"},
            {"kernel.stmt", "stmt"}, {"kernel.ll", "llvm"},  {"kernel.s", "asm"},
        };
        Value files = Value::array();
        for (const auto &pr : products) {
            if (!regular_file(base + pr.first)) {
                fail(std::string("product ") + pr.first + " is missing after the build");
            }
            Value f = Value::object();
            f.set("path", Value::string(pr.first));
            f.set("role", Value::string(pr.second));
            files.push(f);
        }
        Value entry = Value::object();
        entry.set("symbol", Value::string(kEntry));
        entry.set("params", c.signature_json);
        Value link = Value::array();
        for (const char *l : {"-lpthread", "-ldl", "-lm"}) {
            link.push(Value::string(l));
        }
        Value v = response("built", "");
        v.set("files", files);
        v.set("entry", entry);
        v.set("link", link);
        v.set("schedule", p.schedule);
        v.set("toolchain", toolchain);
        v.set("commands", commands);
        return v;
    } catch (const Failure &f) {
        Value v = response(f.status, f.reason);
        v.set("toolchain", toolchain);
        v.set("commands", commands);
        return v;
    } catch (const Halide::Error &e) {
        Value v = response("failed", std::string("halide: ") + e.what());
        v.set("toolchain", toolchain);
        v.set("commands", commands);
        return v;
    } catch (const std::exception &e) {
        Value v = response("failed", e.what());
        v.set("toolchain", toolchain);
        v.set("commands", commands);
        return v;
    }
}

int usage() {
    std::fprintf(stderr, "usage: route describe\n       route build --case CASE.json --workdir DIR\n");
    return 2;
}

}  // namespace

int main(int argc, char **argv) {
    saved_stdout = fcntl(1, F_DUPFD_CLOEXEC, 3);
    if (saved_stdout < 0 || dup2(2, 1) < 0) {
        std::perror("halide route: redirect stdout");
        return 1;
    }
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 1 && args[0] == "describe") {
        emit(describe());
        return 0;
    }
    if (args.empty() || args[0] != "build") {
        return usage();
    }
    std::string case_path, workdir;
    for (size_t i = 1; i < args.size(); i++) {
        std::string *dst = nullptr;
        std::string a = args[i];
        std::string val;
        bool inline_val = false;
        if (size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
            val = a.substr(eq + 1);
            a = a.substr(0, eq);
            inline_val = true;
        }
        if (a == "--case") {
            dst = &case_path;
        } else if (a == "--workdir") {
            dst = &workdir;
        } else {
            std::fprintf(stderr, "halide route: unknown argument %s\n", args[i].c_str());
            return usage();
        }
        if (!inline_val) {
            if (i + 1 >= args.size()) {
                std::fprintf(stderr, "halide route: %s needs a value\n", a.c_str());
                return usage();
            }
            val = args[++i];
        }
        *dst = val;
    }
    if (case_path.empty() || workdir.empty()) {
        std::fprintf(stderr, "halide route: build needs --case and --workdir\n");
        return usage();
    }
    emit(build(case_path, workdir));
    return 0;
}
