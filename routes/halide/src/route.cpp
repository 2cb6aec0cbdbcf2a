// The halide route: builds tilepipe cases into Halide AOT objects.
//
// It speaks the route protocol of docs/protocol.md:
//
//   route describe
//   route build --case CASE.json --workdir DIR
//
// Each case becomes one Halide pipeline specialized on the case's exact
// shape (every extent and stride is a compile-time constant), scheduled by
// hand (no autoscheduler, the schedule recorded in the response) and
// compiled for the host with strict_float, since the route implements only
// the strict policy. Half storage (f16, bf16) is widened to FP32 on load,
// computed in FP32 and rounded to nearest even on store. Ops with two
// outputs define them in one Pipeline (a Tuple-valued Func), so one entry
// call writes both. A generated C file, entry.c, adapts the protocol's
// entry ABI (one raw pointer per signature param) to the Halide calling
// convention (halide_buffer_t).
//
// stdout carries exactly one JSON document; everything else (Halide's and
// cc's diagnostics) goes to stderr. Only usage errors exit non-zero.
//
// Built with -DTP_HALIDE_CUDA it is the halide-cuda route (kCUDA below).
#include "Halide.h"
#include "route.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using tpjson::Value;
using namespace tproute;

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

const char *const kFunction = "tp_halide_kernel";
const char *const kEntry = "tilepipe_entry";

// Built with -DTP_HALIDE_CUDA this source is the halide-cuda route (issue
// 30): the same algorithms, scheduled for the GPU (Halide's CUDA target,
// objects built on the capture machine, whose PTX the driver loads at the
// first call), with an entry that takes device buffers and a stream.
#ifdef TP_HALIDE_CUDA
constexpr bool kCUDA = true;
const char *const kRouteName = "halide-cuda";
#else
constexpr bool kCUDA = false;
const char *const kRouteName = "halide";
#endif

// A dimension or tensor beyond this would overflow Halide's int32 indexing.
constexpr long long kMaxElems = (1LL << 31) - 1;

// Failure is thrown for a case the route cannot build; status says whether
// the route declines it (unsupported) or the build went wrong (failed).
struct Param {
    std::string name, role, dtype;
    std::vector<int> shape;
};

struct Case {
    std::string id, op, dtype, policy;
    std::string device = "cpu";
    std::string ranking;  // topk and sort: stable or standard
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

// OpInfo is one row of docs/protocol.md's op table as this route
// implements it.
struct OpInfo {
    const char *name;
    std::vector<std::string> dims;
    bool half;     // f16 and bf16 storage (FP32 arithmetic) as well as f32
    bool ranking;  // takes the case's ranking contract
};

const std::vector<OpInfo> &op_table() {
    static const std::vector<OpInfo> t = {
        {"gemm", {"M", "N", "K"}, true, false},
        {"gemm_relu", {"M", "N", "K"}, true, false},
        {"gemm_gelu", {"M", "N", "K"}, true, false},
        {"bmm", {"B", "M", "N", "K"}, true, false},
        {"gemv", {"M", "K"}, true, false},
        {"add", {"M", "N"}, true, false},
        {"gelu_add", {"M", "N"}, true, false},
        {"sigmoid_pair", {"M", "N"}, true, false},
        {"gelu_pair", {"M", "N"}, true, false},
        {"swiglu", {"M", "N"}, true, false},
        {"rope", {"M", "N", "R"}, true, false},
        {"sum", {"M", "N"}, false, false},
        {"max", {"M", "N"}, false, false},
        {"softmax", {"M", "N"}, false, false},
        {"rmsnorm", {"M", "N"}, true, false},
        {"layernorm", {"M", "N"}, true, false},
        {"residual_layernorm", {"M", "N"}, true, false},
        {"cross_entropy", {"M", "N"}, false, false},
        {"scan_ordered", {"M", "N"}, false, false},
        {"scan", {"M", "N"}, false, false},
        {"argmax", {"M", "N"}, false, false},
        {"topk", {"M", "N", "K"}, false, true},
        {"sort", {"M", "N"}, false, true},
        {"embedding", {"V", "D", "M"}, false, false},
        {"attention", {"B", "Hq", "Hkv", "Q", "K", "D", "Dv"}, false, false},
    };
    return t;
}

const OpInfo *find_op(const std::string &op) {
    for (const OpInfo &o : op_table()) {
        if (op == o.name) {
            return &o;
        }
    }
    return nullptr;
}

// The ops the halide-cuda route schedules for the GPU.
const std::vector<std::string> kCUDAOps = {"add", "gelu_add", "sigmoid_pair", "gelu_pair", "swiglu", "sum", "max", "softmax", "rmsnorm", "layernorm", "gemm"};

bool route_has(const std::string &op) {
    return !kCUDA || std::find(kCUDAOps.begin(), kCUDAOps.end(), op) != kCUDAOps.end();
}

// topk and sort rank every element against every other one of its row:
// M*N^2 compares. At 2^30 a call takes about 0.25 s on this route's AVX-512
// host with 2 threads (measured: M=1, N=16384 about 35 ms; M=16, N=16384,
// 2^32 compares, about 0.9 s), so larger cases are declined. Every row
// length the protocol allows (N <= 16384) fits for a few rows.
constexpr long long kMaxRankCompares = 1LL << 30;

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
    if (const Value *r = v.get("ranking"); r != nullptr && !r->is_null()) {
        if (!r->is_string()) {
            fail("case: \"ranking\": want a string, got a " + std::string(tpjson::kind_name(r->kind)));
        }
        c.ranking = r->str;
    }
    if (const Value *d = v.get("device"); d != nullptr && !d->is_null()) {
        if (!d->is_string()) {
            fail("case: \"device\": want a string, got a " + std::string(tpjson::kind_name(d->kind)));
        }
        c.device = d->str;
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
    const std::string F = c.dtype;
    auto in = [&](const char *name, std::vector<int> shape) { return Param{name, "input", F, std::move(shape)}; };
    auto out = [&](const char *name, std::vector<int> shape) { return Param{name, "output", F, std::move(shape)}; };
    auto in64 = [](const char *name, std::vector<int> shape) { return Param{name, "input", "i64", std::move(shape)}; };
    auto out64 = [](const char *name, std::vector<int> shape) { return Param{name, "output", "i64", std::move(shape)}; };
    const std::string &op = c.op;
    if (op == "gemm" || op == "gemm_relu" || op == "gemm_gelu") {
        return {in("A", {M, K}), in("B", {K, N}), out("C", {M, N})};
    } else if (op == "bmm") {
        int B = c.dim("B");
        return {in("A", {B, M, K}), in("B", {B, K, N}), out("C", {B, M, N})};
    } else if (op == "gemv") {
        return {in("A", {M, K}), in("X", {K}), out("Y", {M})};
    } else if (op == "add" || op == "gelu_add") {
        return {in("A", {M, N}), in("B", {M, N}), out("C", {M, N})};
    } else if (op == "sigmoid_pair" || op == "gelu_pair") {
        return {in("X", {M, N}), out("Y", {M, N}), out("D", {M, N})};
    } else if (op == "swiglu") {
        return {in("G", {M, N}), in("U", {M, N}), out("Y", {M, N})};
    } else if (op == "rope") {
        int R = c.dim("R");
        return {in("X", {M, N}), in("COS", {M, R / 2}), in("SIN", {M, R / 2}), out("Y", {M, N})};
    } else if (op == "sum" || op == "max") {
        return {in("X", {M, N}), out("Y", {M})};
    } else if (op == "softmax" || op == "scan_ordered" || op == "scan") {
        return {in("X", {M, N}), out("Y", {M, N})};
    } else if (op == "rmsnorm") {
        return {in("X", {M, N}), in("W", {N}), out("Y", {M, N})};
    } else if (op == "layernorm") {
        return {in("X", {M, N}), in("W", {N}), in("B", {N}), out("Y", {M, N})};
    } else if (op == "residual_layernorm") {
        return {in("X", {M, N}), in("R", {M, N}), in("W", {N}), in("B", {N}), out("Y", {M, N}), out("H", {M, N})};
    } else if (op == "cross_entropy") {
        return {in("X", {M, N}), in64("T", {M}), out("L", {M})};
    } else if (op == "argmax") {
        return {in("X", {M, N}), out("V", {M}), out64("I", {M})};
    } else if (op == "topk") {
        return {in("X", {M, N}), out("V", {M, K}), out64("I", {M, K})};
    } else if (op == "sort") {
        return {in("X", {M, N}), out("V", {M, N}), out64("I", {M, N})};
    } else if (op == "embedding") {
        return {in("E", {c.dim("V"), c.dim("D")}), in64("I", {M}), out("Y", {M, c.dim("D")})};
    } else if (op == "attention") {
        int B = c.dim("B"), Hq = c.dim("Hq"), Hkv = c.dim("Hkv"), Q = c.dim("Q"), D = c.dim("D"), Dv = c.dim("Dv");
        return {in("Q", {B, Hq, Q, D}), in("K", {B, Hkv, K, D}), in("V", {B, Hkv, K, Dv}), out("O", {B, Hq, Q, Dv})};
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

std::string op_list() {
    std::string out;
    for (const OpInfo &o : op_table()) {
        if (route_has(o.name)) {
            out += (out.empty() ? "" : ", ") + std::string(o.name);
        }
    }
    return out;
}

// check_op_dims fails a case whose dims break the op's own constraints
// (the oracle rejects these before any route sees them) and declines sizes
// this route will not build.
void check_op_dims(const Case &c) {
    const std::string &op = c.op;
    if (op == "rope" && (c.dim("R") % 2 != 0 || c.dim("R") > c.dim("N"))) {
        fail("case: dims: rope wants an even R <= N, got R=" + std::to_string(c.dim("R")) + ", N=" + std::to_string(c.dim("N")));
    }
    if (op == "topk" && c.dim("K") > c.dim("N")) {
        fail("case: dims: topk wants K <= N, got K=" + std::to_string(c.dim("K")) + ", N=" + std::to_string(c.dim("N")));
    }
    if (op == "attention") {
        if (c.dim("Hq") % c.dim("Hkv") != 0) {
            fail("case: dims: attention wants Hq a multiple of Hkv, got Hq=" + std::to_string(c.dim("Hq")) + ", Hkv=" + std::to_string(c.dim("Hkv")));
        }
        if (c.dim("Q") > c.dim("K")) {
            fail("case: dims: attention wants Q <= K, got Q=" + std::to_string(c.dim("Q")) + ", K=" + std::to_string(c.dim("K")));
        }
    }
    if (op == "topk" || op == "sort") {
        long long M = c.dim("M"), N = c.dim("N");
        if (M * N * N > kMaxRankCompares) {
            unsupported(op + " ranks each element against its whole row (O(N^2) per row); M*N^2 = " + std::to_string(M * N * N) +
                        " compares exceeds this route's limit of " + std::to_string(kMaxRankCompares));
        }
    }
}

// check_case declines what the route does not implement and fails a case
// whose dims or signature disagree with the op.
void check_case(const Case &c) {
    const OpInfo *info = find_op(c.op);
    if (c.device != (kCUDA ? "cuda" : "cpu")) {
        unsupported(std::string(kRouteName) + " builds for " + (kCUDA ? "cuda" : "cpu") + ", the case runs on " + c.device);
    }
    if (info == nullptr || !route_has(c.op)) {
        unsupported("op \"" + c.op + "\" is not implemented by the " + kRouteName + " route (ops: " + op_list() + ")");
    }
    if (kCUDA && c.dtype == "bf16") {
        // Measured: Halide 14's PTX back end (LLVM 14 NVPTX) aborts on bf16
        // loads ("LLVM ERROR: Copy one register into another with a
        // different width").
        unsupported("dtype \"bf16\": Halide 14's CUDA back end (LLVM 14 NVPTX) cannot compile bf16 loads");
    }
    if (c.dtype != "f32" && !(info->half && (c.dtype == "f16" || c.dtype == "bf16"))) {
        unsupported("dtype \"" + c.dtype + "\" is not implemented for " + c.op + " (" + (info->half ? "f32, f16, bf16" : "only f32") + ")");
    }
    if (c.policy != "strict") {
        unsupported("numeric policy \"" + c.policy + "\" is not implemented (only strict)");
    }
    if (info->ranking) {
        if (c.ranking != "stable" && c.ranking != "standard") {
            fail("case: ranking: op " + c.op + " wants \"stable\" or \"standard\", got \"" + c.ranking + "\"");
        }
    } else if (!c.ranking.empty()) {
        fail("case: ranking: op " + c.op + " has no ranking contract, got \"" + c.ranking + "\"");
    }
    const std::vector<std::string> &want = info->dims;
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
    check_op_dims(c);
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

// storage is the Halide type of a protocol dtype.
Type storage(const std::string &dtype) {
    if (dtype == "f16") {
        return Float(16);
    }
    if (dtype == "bf16") {
        return BFloat(16);
    }
    if (dtype == "i64") {
        return Int(64);
    }
    return Float(32);
}

// Every extent and stride is a constant, so Halide specializes all
// addressing and checks the caller's buffers against exactly this shape.
ImageParam input(const std::string &name, Type t, const std::vector<int> &extents) {
    ImageParam p(t, int(extents.size()), name);
    int stride = 1;
    for (size_t d = 0; d < extents.size(); d++) {
        p.dim(int(d)).set_bounds(0, extents[d]).set_stride(stride);
        stride *= extents[d];
    }
    return p;
}

// constrain_output pins every output buffer of f (one per Tuple element;
// Halide ties the bounds of the others to the first's, so they get only
// their strides).
void constrain_output(Func f, const std::vector<int> &extents) {
    std::vector<OutputImageParam> outs = f.output_buffers();
    for (size_t i = 0; i < outs.size(); i++) {
        int stride = 1;
        for (size_t d = 0; d < extents.size(); d++) {
            if (i == 0) {
                outs[i].dim(int(d)).set_bounds(0, extents[d]);
            }
            outs[i].dim(int(d)).set_stride(stride);
            stride *= extents[d];
        }
    }
}

// widen loads storage into FP32 arithmetic (exact for f16 and bf16); the
// narrowing cast back to storage on output rounds to nearest even.
Expr widen(Expr e) {
    return e.type() == Float(32) ? e : cast<float>(e);
}

// Schedule knobs shared by the ops.
struct Knobs {
    int vec;           // natural float vector width of the target
    int threads;       // the case's thread count (at least 1)
    Type F;            // the case's storage type for float tensors
    bool gpu = false;  // the halide-cuda route: GPU schedules
};

// kGPUThreads is a GPU block's threads along a row (or a tile's side
// squared for gemm).
constexpr int kGPUThreads = 256;

// rows_per_task sizes a parallel task of a row op: about kTaskElems
// elements, yet at least 4 tasks per thread when the rows allow it.
int rows_per_task(int M, int N, const Knobs &k) {
    constexpr int kTaskElems = 16384;
    int r = std::max(1, kTaskElems / N);
    r = std::min(r, std::max(1, M / (4 * k.threads)));
    return std::min(r, M);
}

// The tanh-form GELU and its derivative, written out operation by
// operation: strict_float keeps exactly this evaluation order.
const float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
const float kGeluA = 0.044715f;

Expr gelu(Expr x) {
    Expr t = tanh(kGeluC * (x + kGeluA * (x * x * x)));
    return (0.5f * x) * (1.0f + t);
}

Expr gelu_grad(Expr x) {
    Expr t = tanh(kGeluC * (x + kGeluA * (x * x * x)));
    return 0.5f * (1.0f + t) + (0.5f * x) * ((1.0f - t * t) * (kGeluC * (1.0f + (3.0f * kGeluA) * (x * x))));
}

Expr sigmoid(Expr x) {
    return 1.0f / (1.0f + exp(-x));
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
    if (k.gpu) {
        return std::min(N, kGPUThreads);  // one partial a thread of the row's block
    }
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
    if (k.gpu) {
        // Each thread of the row's block accumulates its strided partial
        // (lane u takes x = u, u + lanes, ...); one thread folds the lanes
        // in order, then the tail.
        rr.part.gpu_threads(rr.u);
        if (rr.has_r) {
            rr.part.update(0).gpu_threads(rr.u);
        }
        return;
    }
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

void schedule_rows(Func Y, RowFrame &f, bool vectorize_x, const Knobs &k) {
    if (k.gpu) {
        // A block a row; a 2-D output's columns over the block's threads.
        Y.split(f.y, f.yo, f.yi, 1).gpu_blocks(f.yo);
        if (vectorize_x) {
            Var xo("xo"), xi("xi");
            Y.split(f.x, xo, xi, kGPUThreads, TailStrategy::GuardWithIf).gpu_threads(xi);
        }
        return;
    }
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


enum class Epilogue { None, Relu, Gelu };

// plan_matmul is gemm, its fused epilogues, and bmm (batched: a third,
// outermost dimension fused into the parallel tile loop).
Plan plan_matmul(int Bt, int M, int N, int K, bool batched, Epilogue epi, const Knobs &k) {
    Plan p;
    std::vector<int> aext = {K, M}, bext = {N, K}, cext = {N, M};
    if (batched) {
        aext.push_back(Bt);
        bext.push_back(Bt);
        cext.push_back(Bt);
    }
    ImageParam A = input("A", k.F, aext);
    ImageParam B = input("B", k.F, bext);
    Var x("x"), y("y"), b("b");
    auto at = [&](Expr i, Expr j) {
        std::vector<Expr> v{i, j};
        if (batched) {
            v.push_back(b);
        }
        return v;
    };
    RDom r(0, K, "k");
    Func prod("prod"), C("C");
    prod(at(x, y)) = 0.0f;
    prod(at(x, y)) += widen(A(at(r, y))) * widen(B(at(x, r)));
    Expr acc = prod(at(x, y));
    // The epilogue runs on each accumulator as it leaves the register
    // block, before the (possibly narrowing) store.
    if (epi == Epilogue::Relu) {
        acc = max(0.0f, 0.125f * acc + 0.25f);
    } else if (epi == Epilogue::Gelu) {
        acc = gelu(0.125f * acc + 0.25f);
    }
    C(at(x, y)) = cast(k.F, acc);
    constrain_output(C, cext);
    if (k.gpu && !batched) {
        // Naive: a thread an element of C, its K products summed in order
        // in a register, 16 x 16 threads a block.
        Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
        C.gpu_tile(x, y, xo, yo, xi, yi, 16, 16, TailStrategy::GuardWithIf);
        prod.compute_at(C, xi);
        p.pipeline = Pipeline(C);
        p.args = {A, B};
        p.extents = {aext, bext, cext};
        Value s = Value::object();
        s.set("algorithm", Value::string("a thread an element of C, K in order in FP32 (no shared-memory tiling, no tensor cores)"));
        s.set("gpu_tile", Value::string("16 x 16"));
        p.schedule = s;
        return p;
    }

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
    // B's own rows are N elements apart, which for power-of-two N maps the
    // panel onto a few cache sets. The copy pays off once it is reused by
    // enough rows of A.
    bool pack = v > 1 && TY >= 16;
    Var xi("xi"), yi("yi"), yii("yii"), xy("xy"), xyb("xyb");
    C.tile(x, y, xi, yi, TX, TY).fuse(x, y, xy);
    Var task = xy;
    if (batched) {
        C.fuse(xy, b, xyb);
        task = xyb;
    }
    C.parallel(task).split(yi, yi, yii, UY).unroll(yii);
    if (pack) {
        Func panel = B.in();
        panel.compute_at(C, task).vectorize(panel.args()[0], v);
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
    p.extents = {aext, bext, cext};
    Value s = Value::object();
    s.set("algorithm", Value::string("register-blocked tiles, fp32 accumulation over all of K"));
    s.set("parallel", Value::string(batched ? "fused tile and batch index" : "fused tile index"));
    s.set("tile_x", Value::number(TX));
    s.set("tile_y", Value::number(TY));
    s.set("block_y", Value::number(UY));
    s.set("vector", Value::number(v));
    s.set("unroll_k", Value::number(UK));
    s.set("pack_b", Value::boolean(pack));
    s.set("tail", Value::string("shift_inwards tiles"));
    if (epi != Epilogue::None) {
        s.set("epilogue", Value::string(epi == Epilogue::Relu ? "max(0, 0.125*acc + 0.25) fused into the output store"
                                                              : "tanh-gelu(0.125*acc + 0.25) fused into the output store (libm tanhf)"));
    }
    p.schedule = s;
    return p;
}

// plan_pointwise: the elementwise ops. Inputs and outputs are dense and
// identically laid out, so the pipeline sees them flat: one long
// vectorizable loop, whatever N is. Two-output ops define one Tuple-valued
// Func, so a single loop writes both outputs.
Plan plan_pointwise(const std::string &op, int M, int N, const Knobs &k) {
    Plan p;
    int T = M * N;
    Var i("i"), io("io"), ii("ii");
    Func C(op == "add" || op == "gelu_add" ? "C" : "Y");
    std::string algorithm;
    if (op == "add" || op == "gelu_add" || op == "swiglu") {
        bool sw = op == "swiglu";
        ImageParam A = input(sw ? "G" : "A", k.F, {T});
        ImageParam B = input(sw ? "U" : "B", k.F, {T});
        Expr a = widen(A(i)), b = widen(B(i));
        if (op == "add") {
            C(i) = cast(k.F, a + b);
            algorithm = "a + b";
        } else if (op == "gelu_add") {
            C(i) = cast(k.F, gelu(a + b));
            algorithm = "tanh-gelu(a + b), libm tanhf";
        } else {
            C(i) = cast(k.F, (a * sigmoid(a)) * b);
            algorithm = "(g * sigmoid(g)) * u, sigmoid = 1/(1+exp(-g)), libm expf";
        }
        p.args = {A, B};
        p.extents = {{T}, {T}, {T}};
    } else {
        ImageParam X = input("X", k.F, {T});
        Expr x = widen(X(i));
        if (op == "sigmoid_pair") {
            Expr s = sigmoid(x);
            C(i) = Tuple(cast(k.F, s), cast(k.F, s * (1.0f - s)));
            algorithm = "s = 1/(1+exp(-x)) (libm expf); Y = s, D = s*(1-s)";
        } else {
            C(i) = Tuple(cast(k.F, gelu(x)), cast(k.F, gelu_grad(x)));
            algorithm = "tanh-gelu and its analytic derivative, libm tanhf";
        }
        p.args = {X};
        p.extents = {{T}, {T}, {T}};
    }
    constrain_output(C, {T});
    if (k.gpu) {
        C.gpu_tile(i, io, ii, kGPUThreads, TailStrategy::GuardWithIf);
        p.pipeline = Pipeline(C);
        Value s = Value::object();
        s.set("algorithm", Value::string("elementwise over the flat buffer: " + algorithm));
        s.set("gpu", Value::string("one thread an element, 256 a block"));
        s.set("tail", Value::string("guard_with_if"));
        p.schedule = s;
        return p;
    }
    constexpr int kChunk = 16384;
    int v = T >= k.vec ? k.vec : 1;
    int CH = v > 1 ? std::min(kChunk, T / v * v) : std::min(kChunk, T);
    C.split(i, io, ii, CH).parallel(io);
    if (v > 1) {
        C.vectorize(ii, v);
    }
    p.pipeline = Pipeline(C);
    Value s = Value::object();
    s.set("algorithm", Value::string("elementwise over the flat buffer: " + algorithm));
    s.set("layout", Value::string("flat"));
    s.set("parallel", Value::string("chunks"));
    s.set("chunk", Value::number(CH));
    s.set("vector", Value::number(v));
    s.set("tail", Value::string("shift_inwards"));
    if (op == "sigmoid_pair" || op == "gelu_pair") {
        s.set("outputs", Value::string("one Tuple-valued Func: both outputs written in one loop"));
    }
    p.schedule = s;
    return p;
}

Plan plan_rope(int M, int N, int R, const Knobs &k) {
    Plan p;
    int H = R / 2;
    ImageParam X = input("X", k.F, {N, M});
    ImageParam Cs = input("COS", k.F, {H, M});
    ImageParam Sn = input("SIN", k.F, {H, M});
    RowFrame f = row_frame(M, N, k);
    Func Y("Y");
    // The pair index is clamped so that bounds inference sees in-range
    // reads for tail columns too; there the select takes the copy.
    Expr i = min(f.x / 2, H - 1);
    Expr xe = widen(X(2 * i, f.y)), xo = widen(X(2 * i + 1, f.y));
    Expr c = widen(Cs(i, f.y)), s = widen(Sn(i, f.y));
    Expr rot = select(f.x % 2 == 0, xe * c - xo * s, xe * s + xo * c);
    Y(f.x, f.y) = select(f.x < R, cast(k.F, rot), X(f.x, f.y));
    constrain_output(Y, {N, M});
    schedule_rows(Y, f, true, k);
    p.pipeline = Pipeline(Y);
    p.args = {X, Cs, Sn};
    p.extents = {{N, M}, {H, M}, {H, M}, {N, M}};
    p.schedule = row_schedule(f, k, "one pass: x < R rotate pairs (x[2i]*c - x[2i+1]*s, x[2i]*s + x[2i+1]*c), x >= R copy bits");
    p.schedule.set("rotary_width", Value::number(R));
    return p;
}

Plan plan_row_reduce(const std::string &op, int M, int N, const Knobs &k) {
    Plan p;
    ImageParam X = input("X", Float(32), {N, M});
    RowFrame f = row_frame(M, N, k);
    bool mx = op == "max";
    RowReduce s = row_reduce(mx ? "row_max" : "row_sum", mx ? Combine::Max : Combine::Add, N, f.lanes, [&](Expr x, Expr y) { return X(x, y); });
    Func Y("Y");
    Y(f.y) = s.total(f.y);
    constrain_output(Y, {M});
    schedule_rows(Y, f, false, k);
    schedule_reduce(s, Y, f.yi, k);
    p.pipeline = Pipeline(Y);
    p.args = {X};
    p.extents = {{N, M}, {M}};
    p.schedule = row_schedule(f, k, mx ? "row maxima: vector partial maxima, lanes folded, scalar tail"
                                       : "row sums: vector partial sums, lanes folded in order, scalar tail");
    return p;
}

Plan plan_gemv(int M, int K, const Knobs &k) {
    Plan p;
    ImageParam A = input("A", k.F, {K, M});
    ImageParam X = input("X", k.F, {K});
    RowFrame f = row_frame(M, K, k);
    RowReduce s = row_reduce("dot", Combine::Add, K, f.lanes, [&](Expr x, Expr y) { return widen(A(x, y)) * widen(X(x)); });
    Func Y("Y");
    Y(f.y) = cast(k.F, s.total(f.y));
    constrain_output(Y, {M});
    schedule_rows(Y, f, false, k);
    schedule_reduce(s, Y, f.yi, k);
    p.pipeline = Pipeline(Y);
    p.args = {A, X};
    p.extents = {{K, M}, {K}, {M}};
    p.schedule = row_schedule(f, k, "row dot products: vector partial sums of a*x, lanes folded in order, scalar tail");
    return p;
}

Plan plan_softmax(int M, int N, const Knobs &k) {
    Plan p;
    ImageParam X = input("X", Float(32), {N, M});
    RowFrame f = row_frame(M, N, k);
    RowReduce mx = row_reduce("row_max", Combine::Max, N, f.lanes, [&](Expr x, Expr y) { return X(x, y); });
    Func e("e"), Y("Y");
    Var ex("ex"), ey("ey");
    e(ex, ey) = exp(X(ex, ey) - mx.total(ey));
    RowReduce s = row_reduce("row_sum", Combine::Add, N, f.lanes, [&](Expr x, Expr y) { return e(x, y); });
    Y(f.x, f.y) = e(f.x, f.y) / s.total(f.y);
    constrain_output(Y, {N, M});
    schedule_rows(Y, f, true, k);
    schedule_reduce(mx, Y, f.yi, k);
    schedule_reduce(s, Y, f.yi, k);
    // exp runs once per element: its row is kept for the sum and the
    // normalization.
    if (!k.gpu) {
        e.compute_at(Y, f.yi).store_at(Y, f.yo);
        if (f.v > 1) {
            e.vectorize(ex, f.v);
        }
    }
    p.pipeline = Pipeline(Y);
    p.args = {X};
    p.extents = {{N, M}, {N, M}};
    p.schedule = row_schedule(f, k, "three passes per row: max, exp and sum, divide");
    p.schedule.set("exp", Value::string("Halide exp (libm expf under strict_float)"));
    return p;
}

Plan plan_cross_entropy(int M, int N, const Knobs &k) {
    Plan p;
    ImageParam X = input("X", Float(32), {N, M});
    ImageParam T = input("T", Int(64), {M});
    RowFrame f = row_frame(M, N, k);
    RowReduce mx = row_reduce("row_max", Combine::Max, N, f.lanes, [&](Expr x, Expr y) { return X(x, y); });
    RowReduce s = row_reduce("row_sumexp", Combine::Add, N, f.lanes, [&](Expr x, Expr y) { return exp(X(x, y) - mx.total(y)); });
    // Targets are in [0, N) (tilepipe rejects others before any route
    // runs); the clamp only tells bounds inference so and never changes
    // the index read.
    Expr t = cast<int>(clamp(T(f.y), cast<int64_t>(0), cast<int64_t>(N - 1)));
    Func L("L");
    L(f.y) = log(s.total(f.y)) + (mx.total(f.y) - X(t, f.y));
    constrain_output(L, {M});
    schedule_rows(L, f, false, k);
    schedule_reduce(mx, L, f.yi, k);
    schedule_reduce(s, L, f.yi, k);
    p.pipeline = Pipeline(L);
    p.args = {X, T};
    p.extents = {{N, M}, {M}, {M}};
    p.schedule = row_schedule(f, k, "two passes per row: max, sum of exp(x - max); L = log(sum) + (max - x[t])");
    p.schedule.set("target_index", Value::string("clamp(T, 0, N-1) for bounds inference; T is in range"));
    p.schedule.set("exp_log", Value::string("Halide exp, log (libm expf, logf under strict_float)"));
    return p;
}

// plan_norm: rmsnorm, layernorm and residual_layernorm. The residual sum
// H = X + R is formed in FP32 once per row; Y normalizes that FP32 sum and
// H is stored (rounded to storage) beside Y by the same Tuple-valued Func.
Plan plan_norm(const std::string &op, int M, int N, float eps, const Knobs &k) {
    Plan p;
    bool rms = op == "rmsnorm", res = op == "residual_layernorm";
    ImageParam X = input("X", k.F, {N, M});
    ImageParam Rs = input("R", k.F, {N, M});
    ImageParam W = input("W", k.F, {N});
    ImageParam B = input("B", k.F, {N});
    RowFrame f = row_frame(M, N, k);
    Func h("h"), Y("Y");
    Var hx("hx"), hy("hy");
    if (res) {
        h(hx, hy) = widen(X(hx, hy)) + widen(Rs(hx, hy));
    } else {
        h(hx, hy) = widen(X(hx, hy));
    }
    Func mean("mean"), rs("rsqrt"), var("var");
    Var my("my"), vy("vy"), ry("ry");
    std::vector<RowReduce> reds;
    if (rms) {
        RowReduce ss = row_reduce("row_sumsq", Combine::Add, N, f.lanes, [&](Expr x, Expr y) {
            Expr v = h(x, y);
            return v * v;
        });
        rs(ry) = 1.0f / sqrt(ss.total(ry) / float(N) + eps);
        Y(f.x, f.y) = cast(k.F, h(f.x, f.y) * rs(f.y) * widen(W(f.x)));
        reds.push_back(ss);
    } else {
        RowReduce s1 = row_reduce("row_sum", Combine::Add, N, f.lanes, [&](Expr x, Expr y) { return h(x, y); });
        mean(my) = s1.total(my) / float(N);
        RowReduce s2 = row_reduce("row_sqdev", Combine::Add, N, f.lanes, [&](Expr x, Expr y) {
            Expr d = h(x, y) - mean(y);
            return d * d;
        });
        var(vy) = s2.total(vy) / float(N);
        rs(ry) = 1.0f / sqrt(var(ry) + eps);
        Expr y = cast(k.F, (h(f.x, f.y) - mean(f.y)) * rs(f.y) * widen(W(f.x)) + widen(B(f.x)));
        if (res) {
            Y(f.x, f.y) = Tuple(y, cast(k.F, h(f.x, f.y)));
        } else {
            Y(f.x, f.y) = y;
        }
        reds.push_back(s1);
        reds.push_back(s2);
    }
    constrain_output(Y, {N, M});
    schedule_rows(Y, f, true, k);
    for (RowReduce &r : reds) {
        schedule_reduce(r, Y, f.yi, k);
    }
    if (res) {
        // The sum is read by both reductions and the output: keep its row.
        h.compute_at(Y, f.yi);
        if (f.v > 1) {
            h.vectorize(hx, f.v);
        }
    }
    if (!rms) {
        mean.compute_at(Y, f.yi);
        var.compute_at(Y, f.yi);
    }
    rs.compute_at(Y, f.yi);
    p.pipeline = Pipeline(Y);
    if (rms) {
        p.args = {X, W};
        p.extents = {{N, M}, {N}, {N, M}};
        p.schedule = row_schedule(f, k, "two passes per row: sum of squares, scale");
    } else if (res) {
        p.args = {X, Rs, W, B};
        p.extents = {{N, M}, {N, M}, {N}, {N}, {N, M}, {N, M}};
        p.schedule = row_schedule(f, k, "h = x + r in fp32 kept per row; three passes: mean, biased variance of (h-mean), normalize; Y and H from one Tuple-valued Func");
    } else {
        p.args = {X, W, B};
        p.extents = {{N, M}, {N}, {N}, {N, M}};
        p.schedule = row_schedule(f, k, "three passes per row: mean, biased variance of (x-mean), normalize");
    }
    p.schedule.set("rsqrt", Value::string("1/sqrt"));
    return p;
}

// plan_scan_ordered: the inclusive prefix sum as a sequential left fold,
// one RDom over the row in order; strict_float forbids reassociation, so
// every element is bitwise the FP32 fold y[j] = y[j-1] + x[j].
Plan plan_scan_ordered(int M, int N, const Knobs &k) {
    Plan p;
    ImageParam X = input("X", Float(32), {N, M});
    RowFrame f = row_frame(M, N, k);
    Func Y("Y");
    Y(f.x, f.y) = X(f.x, f.y);
    bool rows_vec = false;
    if (N > 1) {
        RDom r(1, N - 1, "j");
        Y(r, f.y) = Y(r - 1, f.y) + X(r, f.y);
        // Rows are independent: the fold of R rows runs in lockstep, one
        // row per vector lane, each lane still strictly sequential.
        Var yv("yv");
        Stage u = Y.update();
        u.split(f.y, f.yo, f.yi, f.R, TailStrategy::GuardWithIf);
        if (f.R >= k.vec) {
            rows_vec = true;
            u.split(f.yi, f.yi, yv, k.vec, TailStrategy::GuardWithIf).reorder(yv, r, f.yi, f.yo).vectorize(yv);
        }
        u.parallel(f.yo);
    }
    constrain_output(Y, {N, M});
    schedule_rows(Y, f, true, k);
    p.pipeline = Pipeline(Y);
    p.args = {X};
    p.extents = {{N, M}, {N, M}};
    p.schedule = row_schedule(f, k, "sequential left fold per row (RDom over the row in order), bitwise reproducible");
    p.schedule.set("reduce_lanes", Value::number(1));
    p.schedule.set("reduce_vector", Value::number(1));
    p.schedule.set("fold_rows_per_vector", Value::number(rows_vec ? k.vec : 1));
    return p;
}

// plan_scan: a blocked scan. The row is cut into blocks of BS; each block
// is folded sequentially on its own (blocks side by side in vector lanes),
// the block totals are folded into exclusive offsets, and
// y[j] = offset[block] + local[j]: a different association from the left
// fold, which the scan contract allows.
Plan plan_scan(int M, int N, const Knobs &k) {
    Plan p;
    ImageParam X = input("X", Float(32), {N, M});
    RowFrame f = row_frame(M, N, k);
    int BS = std::max(1, std::min(256, int(std::ceil(std::sqrt(double(N))))));
    int NB = (N + BS - 1) / BS;
    Func xs("xs"), L("block_fold"), O("block_offset"), Y("Y");
    Var i("i"), iy("iy"), b("b"), j("j"), ly("ly"), ob("ob"), oy("oy");
    // Positions past the row in the last block fold zeros; they are never
    // output.
    xs(i, iy) = select(i < N, X(min(i, N - 1), iy), 0.0f);
    L(b, j, ly) = xs(b * BS + j, ly);
    if (BS > 1) {
        RDom rj(1, BS - 1, "rj");
        L(b, rj, ly) = L(b, rj - 1, ly) + xs(b * BS + rj, ly);
    }
    O(ob, oy) = 0.0f;
    if (NB > 1) {
        RDom rb(1, NB - 1, "rb");
        O(rb, oy) = O(rb - 1, oy) + L(rb - 1, BS - 1, oy);
    }
    Y(f.x, f.y) = O(f.x / BS, f.y) + L(f.x / BS, f.x % BS, f.y);
    constrain_output(Y, {N, M});
    schedule_rows(Y, f, true, k);
    L.compute_at(Y, f.yi);
    O.compute_at(Y, f.yi);
    int vb = NB >= k.vec ? k.vec : 1;
    if (vb > 1) {
        L.vectorize(b, vb);
        if (BS > 1) {
            L.update().vectorize(b, vb);
        }
    }
    p.pipeline = Pipeline(Y);
    p.args = {X};
    p.extents = {{N, M}, {N, M}};
    p.schedule = row_schedule(f, k, "blocked scan: sequential fold within each block (blocks in vector lanes), sequential fold of block totals into offsets, y = offset + local");
    p.schedule.set("block", Value::number(BS));
    p.schedule.set("blocks", Value::number(NB));
    p.schedule.set("block_vector", Value::number(vb));
    p.schedule.set("reduce_lanes", Value::number(1));
    p.schedule.set("reduce_vector", Value::number(vb));
    return p;
}

// plan_argmax: one RDom over the row in order; an element replaces the
// running best only if it is strictly greater, so the first index of the
// maximum wins (and -0 vs +0 compare equal: the first stays). The scan
// carries only the index and rereads the best value from X, so V is a copy
// of that element's bits. (A (value, index) Tuple update miscompiles in
// Halide 14 under strict_float: the index element reads the value element
// after it was stored.)
Plan plan_argmax(int M, int N, const Knobs &k) {
    Plan p;
    ImageParam X = input("X", Float(32), {N, M});
    RowFrame f = row_frame(M, N, k);
    Func best("best"), A("argmax");
    Var by("by");
    // The clamp tells bounds inference the index stays in the row; it
    // always does.
    auto at_best = [&](Expr y) { return X(clamp(best(y), 0, N - 1), y); };
    best(by) = 0;
    RDom r;
    if (N > 1) {
        r = RDom(1, N - 1, "j");
        best(by) = select(X(r, by) > at_best(by), r, best(by));
    }
    A(f.y) = Tuple(at_best(f.y), cast<int64_t>(best(f.y)));
    constrain_output(A, {M});
    schedule_rows(A, f, false, k);
    best.compute_at(A, f.yo);
    bool rows_vec = false;
    if (N > 1 && f.R >= k.vec) {
        // Rows are independent: R rows scan in lockstep, one per vector
        // lane, each lane still in index order.
        rows_vec = true;
        Var bo("byo"), bv("byv");
        best.update().split(by, bo, bv, k.vec, TailStrategy::GuardWithIf).reorder(bv, r.x, bo).vectorize(bv);
    }
    p.pipeline = Pipeline(A);
    p.args = {X};
    p.extents = {{N, M}, {M}, {M}};
    p.schedule = row_schedule(f, k, "sequential scan per row keeping the index of the best so far, replaced only on a strict >: first index of the maximum; V = X[row, index]");
    p.schedule.set("reduce_lanes", Value::number(1));
    p.schedule.set("reduce_vector", Value::number(1));
    p.schedule.set("rows_per_vector", Value::number(rows_vec ? k.vec : 1));
    return p;
}

// plan_rank_select: topk (descending, first K) and sort (ascending, all N)
// by rank counting, which is stable by construction:
//   rank(i) = #{j : x_j before x_i}, where x_j is before x_i if it is
//   strictly better, or equal with j < i,
// then each element is scattered to position rank(i). The ranks are a
// permutation of [0, N), so every output position is written once. O(N^2)
// compares per row (check_op_dims bounds M*N^2).
Plan plan_rank_select(bool descending, int M, int N, int Kk, const Knobs &k) {
    Plan p;
    ImageParam X = input("X", Float(32), {N, M});
    RowFrame f = row_frame(M, N, k);
    f.R = rows_per_task(M, std::min(N * N, 1 << 24), k);
    Func rank("rank"), S("scatter"), Out("VI");
    Var i("i"), ry("ry"), s("s"), sy("sy");
    RDom j(0, N, "j");
    Expr xj = X(j, ry), xi = X(i, ry);
    Expr before = (descending ? xj > xi : xj < xi) || (xj == xi && j < i);
    rank(i, ry) = 0;
    rank(i, ry) += select(before, 1, 0);
    S(s, sy) = Tuple(0.0f, cast<int64_t>(0));
    RDom e(0, N, "e");
    // The clamp is for bounds inference only: ranks are in [0, N), and
    // the predicate keeps the K best.
    Expr re = rank(e, sy);
    if (Kk < N) {
        e.where(re < Kk);
    }
    S(clamp(re, 0, Kk - 1), sy) = Tuple(X(e, sy), cast<int64_t>(e));
    Out(f.x, f.y) = Tuple(S(f.x, f.y)[0], S(f.x, f.y)[1]);
    constrain_output(Out, {Kk, M});
    Out.split(f.y, f.yo, f.yi, f.R).parallel(f.yo);
    S.compute_at(Out, f.yi);
    rank.compute_at(Out, f.yi);
    int v = N >= k.vec ? k.vec : 1;
    if (v > 1) {
        Var io("io"), ii("ii");
        rank.vectorize(i, v);
        rank.update().reorder(i, j).split(i, io, ii, v, TailStrategy::GuardWithIf).vectorize(ii);
    }
    p.pipeline = Pipeline(Out);
    p.args = {X};
    p.extents = {{N, M}, {Kk, M}, {Kk, M}};
    Value sc = Value::object();
    sc.set("algorithm", Value::string(std::string("stable rank counting (O(N^2) compares per row), then scatter to position rank; ") +
                                      (descending ? "descending, first K" : "ascending")));
    sc.set("ranking", Value::string("stable (which also meets standard)"));
    sc.set("parallel", Value::string("row blocks"));
    sc.set("rows_per_task", Value::number(f.R));
    sc.set("rank_vector", Value::number(v));
    sc.set("scatter_index", Value::string("clamp(rank, 0, K-1) for bounds inference; ranks are a permutation"));
    sc.set("limits", Value::string("M*N^2 <= " + std::to_string(kMaxRankCompares)));
    p.schedule = sc;
    return p;
}

Plan plan_embedding(int V, int D, int M, const Knobs &k) {
    Plan p;
    ImageParam E = input("E", Float(32), {D, V});
    ImageParam I = input("I", Int(64), {M});
    RowFrame f = row_frame(M, D, k);
    Func Y("Y");
    // Ids are in [0, V) (tilepipe rejects others before any route runs);
    // the clamp only tells bounds inference so.
    Expr id = cast<int>(clamp(I(f.y), cast<int64_t>(0), cast<int64_t>(V - 1)));
    Y(f.x, f.y) = E(f.x, id);
    constrain_output(Y, {D, M});
    schedule_rows(Y, f, true, k);
    p.pipeline = Pipeline(Y);
    p.args = {E, I};
    p.extents = {{D, V}, {M}, {D, M}};
    p.schedule = row_schedule(f, k, "row gather: Y[m] = E[I[m]], a bit copy");
    p.schedule.set("id_index", Value::string("clamp(I, 0, V-1) for bounds inference; ids are in range"));
    p.schedule.set("reduce_lanes", Value::number(1));
    p.schedule.set("reduce_vector", Value::number(1));
    return p;
}

// plan_attention: causal GQA/MQA attention in two passes per query row:
// scores S = (q . k) * 1/sqrt(D) for the keys the query sees (k <= q + K -
// Q, the bottom-right mask), their max, p = exp(S - max) and its sum l,
// then O = (sum_k p * v) / l. Query head h reads KV head h / (Hq/Hkv).
Plan plan_attention(int Bt, int Hq, int Hkv, int Qn, int Kn, int D, int Dv, const Knobs &k) {
    Plan p;
    ImageParam Qt = input("Q", Float(32), {D, Qn, Hq, Bt});
    ImageParam Kt = input("K", Float(32), {D, Kn, Hkv, Bt});
    ImageParam Vt = input("V", Float(32), {Dv, Kn, Hkv, Bt});
    int G = Hq / Hkv, off = Kn - Qn;
    float scale = float(1.0 / std::sqrt(double(D)));
    Var dv("dv"), q("q"), h("h"), b("b"), kk("kk");
    Func S("score"), P("prob"), mx("row_max"), l("row_sum"), acc("acc"), O("O");
    RDom rd(0, D, "d");
    S(kk, q, h, b) = 0.0f;
    // Vector tails of the score row run past K: the key index is clamped
    // so they read a real key; those lanes are never used.
    S(kk, q, h, b) += Qt(rd, q, h, b) * Kt(rd, min(kk, Kn - 1), h / G, b);
    RDom rk(0, Kn, "k");
    rk.where(rk <= q + off);
    Expr sc = S(rk, q, h, b) * scale;
    mx(q, h, b) = -std::numeric_limits<float>::infinity();
    mx(q, h, b) = max(mx(q, h, b), sc);
    P(kk, q, h, b) = exp(S(kk, q, h, b) * scale - mx(q, h, b));
    l(q, h, b) = 0.0f;
    l(q, h, b) += P(rk, q, h, b);
    RDom rv(0, Kn, "kv");
    rv.where(rv <= q + off);
    acc(dv, q, h, b) = 0.0f;
    acc(dv, q, h, b) += P(rv, q, h, b) * Vt(min(dv, Dv - 1), rv, h / G, b);
    O(dv, q, h, b) = acc(dv, q, h, b) / l(q, h, b);
    constrain_output(O, {Dv, Qn, Hq, Bt});

    Var hb("hb"), task("task");
    O.fuse(h, b, hb).fuse(q, hb, task).parallel(task);
    int v = k.vec;
    for (Func fn : {S, P, mx, l, acc}) {
        fn.compute_at(O, task);
    }
    if (Kn >= v) {
        S.vectorize(kk, v);
        S.update().reorder(kk, rd).vectorize(kk, v);
        P.vectorize(kk, v);
    }
    if (Dv >= v) {
        O.vectorize(dv, v);
        acc.vectorize(dv, v);
        acc.update().reorder(dv, rv).vectorize(dv, v);
    }
    p.pipeline = Pipeline(O);
    p.args = {Qt, Kt, Vt};
    p.extents = {{D, Qn, Hq, Bt}, {D, Kn, Hkv, Bt}, {Dv, Kn, Hkv, Bt}, {Dv, Qn, Hq, Bt}};
    Value s = Value::object();
    s.set("algorithm", Value::string("two passes per query row: scores (fp32 dot over D, sequential) * 1/sqrt(D), max over visible keys, p = exp(s - max) and its sum, O = (sum p*v) / sum p"));
    s.set("mask", Value::string("bottom-right causal: key k visible to query q iff k <= q + K - Q (RDom where)"));
    s.set("gqa", Value::string("query head h reads KV head h / (Hq/Hkv)"));
    s.set("scale", Value::number(scale));
    s.set("parallel", Value::string("fused (query, head, batch)"));
    s.set("vector_keys", Value::number(Kn >= v ? v : 1));
    s.set("vector_dv", Value::number(Dv >= v ? v : 1));
    s.set("exp", Value::string("Halide exp (libm expf under strict_float)"));
    p.schedule = s;
    return p;
}

Plan plan(const Case &c, const Knobs &k) {
    const std::string &op = c.op;
    int M = c.dim("M"), N = c.dim("N");
    float eps = float(c.eps);
    if (op == "gemm" || op == "gemm_relu" || op == "gemm_gelu") {
        Epilogue e = op == "gemm_relu" ? Epilogue::Relu : op == "gemm_gelu" ? Epilogue::Gelu : Epilogue::None;
        return plan_matmul(1, M, N, c.dim("K"), false, e, k);
    } else if (op == "bmm") {
        return plan_matmul(c.dim("B"), M, N, c.dim("K"), true, Epilogue::None, k);
    } else if (op == "gemv") {
        return plan_gemv(M, c.dim("K"), k);
    } else if (op == "add" || op == "gelu_add" || op == "swiglu" || op == "sigmoid_pair" || op == "gelu_pair") {
        return plan_pointwise(op, M, N, k);
    } else if (op == "rope") {
        return plan_rope(M, N, c.dim("R"), k);
    } else if (op == "sum" || op == "max") {
        return plan_row_reduce(op, M, N, k);
    } else if (op == "softmax") {
        return plan_softmax(M, N, k);
    } else if (op == "rmsnorm" || op == "layernorm" || op == "residual_layernorm") {
        return plan_norm(op, M, N, eps, k);
    } else if (op == "cross_entropy") {
        return plan_cross_entropy(M, N, k);
    } else if (op == "scan_ordered") {
        return plan_scan_ordered(M, N, k);
    } else if (op == "scan") {
        return plan_scan(M, N, k);
    } else if (op == "argmax") {
        return plan_argmax(M, N, k);
    } else if (op == "topk") {
        return plan_rank_select(true, M, N, c.dim("K"), k);
    } else if (op == "sort") {
        return plan_rank_select(false, M, N, N, k);
    } else if (op == "embedding") {
        return plan_embedding(c.dim("V"), c.dim("D"), M, k);
    } else if (op == "attention") {
        return plan_attention(c.dim("B"), c.dim("Hq"), c.dim("Hkv"), c.dim("Q"), c.dim("K"), c.dim("D"), c.dim("Dv"), k);
    }
    fail("internal: no plan for op " + op);
}

// ---- entry.c ----

std::string c_comment(const std::string &s) {
    std::string out;
    for (char ch : s) {
        out += (ch == '*' || ch == '/' || (unsigned char)ch < 0x20) ? '_' : ch;
    }
    return out;
}

// type_code and type_bits give halide_buffer_t's type for a protocol dtype.
const char *type_code(const std::string &dtype) {
    if (dtype == "i64") {
        return "halide_type_int";
    }
    if (dtype == "bf16") {
        return "halide_type_bfloat";
    }
    return "halide_type_float";
}

// host_target is Halide's host target, less what this CPU cannot run:
// Halide 14 takes any CPU with AVX512-BF16 (AMD Zen 4 too) for Sapphire
// Rapids and emits AVX512-FP16 instructions, which Zen 4 lacks (an
// illegal instruction in every f16 case there).
static Target host_target() {
    Target t = get_host_target();
    if (t.has_feature(Target::AVX512_SapphireRapids) && !tproute::cpu_flags().count("avx512_fp16")) {
        t = t.without_feature(Target::AVX512_SapphireRapids);
    }
    return t;
}

int type_bits(const std::string &dtype) {
    if (dtype == "i64") {
        return 64;
    }
    if (dtype == "f16" || dtype == "bf16") {
        return 16;
    }
    return 32;
}

// buffers_and_call writes the entry's body after its setup: a
// halide_buffer_t per signature param over buffers[i] (host memory, or
// device memory of the CUDA runtime for the halide-cuda route), the
// extents and strides the pipeline was specialized to, then the call.
void buffers_and_call(std::ostringstream &o, const Case &c, const Plan &p, bool device) {
    for (size_t i = 0; i < p.extents.size(); i++) {
        const auto &ext = p.extents[i];
        o << "    /* " << c.signature[i].name << " " << shape_string(c.signature[i].shape) << (device ? ", on the device" : "") << " */\n";
        o << "    halide_dimension_t d" << i << "[" << ext.size() << "] = {";
        long long stride = 1;
        for (size_t d = 0; d < ext.size(); d++) {
            o << (d ? ", " : "") << "{0, " << ext[d] << ", " << stride << ", 0}";
            stride *= ext[d];
        }
        o << "};\n";
        o << "    halide_buffer_t b" << i << " = {0};\n";
        if (device) {
            o << "    b" << i << ".device = (uint64_t)(uintptr_t)buffers[" << i << "];\n"
              << "    b" << i << ".device_interface = halide_cuda_device_interface();\n";
        } else {
            o << "    b" << i << ".host = (uint8_t *)buffers[" << i << "];\n";
        }
        o << "    b" << i << ".type.code = " << type_code(c.signature[i].dtype) << ";\n"
          << "    b" << i << ".type.bits = " << type_bits(c.signature[i].dtype) << ";\n"
          << "    b" << i << ".type.lanes = 1;\n"
          << "    b" << i << ".dimensions = " << ext.size() << ";\n"
          << "    b" << i << ".dim = d" << i << ";\n";
    }
    o << "    return " << kFunction << "(";
    for (size_t i = 0; i < p.extents.size(); i++) {
        o << (i ? ", " : "") << "&b" << i;
    }
    o << ");\n}\n";
}

// entry_source_cuda is the halide-cuda route's entry: the CUDA timer's
// ABI (device pointers in signature order, and a stream), each wrapped in
// a halide_buffer_t on the device, with Halide's CUDA runtime pointed at
// the timer's context (the current one) and the call's stream, set once
// through its hooks (HalideRuntimeCuda.h), never a context of its own.
std::string entry_source_cuda(const Case &c, const Plan &p) {
    std::ostringstream o;
    o << "/* tilepipe halide-cuda route: entry for case " << c_comment(c.id) << " (generated). */\n"
      << "#include <dlfcn.h>\n#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n"
      << "#include \"HalideRuntime.h\"\n#include \"HalideRuntimeCuda.h\"\n#include \"kernel.h\"\n\n"
      << "static void *tp_stream;\n"
      << "static int (*tp_ctx_get_current)(void **);\n\n"
      << "static int tp_acquire(void *uc, void **ctx, bool create) {\n"
      << "    (void)uc;\n    (void)create;\n"
      << "    return tp_ctx_get_current(ctx) == 0 && *ctx ? 0 : -1;\n}\n\n"
      << "static int tp_release(void *uc) {\n    (void)uc;\n    return 0;\n}\n\n"
      << "static int tp_get_stream(void *uc, void *ctx, void **stream) {\n"
      << "    (void)uc;\n    (void)ctx;\n    *stream = tp_stream;\n    return 0;\n}\n\n"
      << "int " << kEntry << "(void *const *buffers, void *stream) {\n"
      << "    if (!tp_ctx_get_current) {\n"
      << "        /* The timer loaded the driver and made its context current. */\n"
      << "        void *lib = dlopen(\"libcuda.so.1\", RTLD_LAZY | RTLD_NOLOAD);\n"
      << "        if (!lib)\n            return 90;\n"
      << "        tp_ctx_get_current = (int (*)(void **))dlsym(lib, \"cuCtxGetCurrent\");\n"
      << "        if (!tp_ctx_get_current)\n            return 91;\n"
      << "        halide_set_cuda_acquire_context(tp_acquire);\n"
      << "        halide_set_cuda_release_context(tp_release);\n"
      << "        halide_set_cuda_get_stream(tp_get_stream);\n"
      << "    }\n"
      << "    tp_stream = stream;\n";
    buffers_and_call(o, c, p, true);
    return o.str();
}

std::string entry_source(const Case &c, const Plan &p) {
    if (kCUDA) {
        return entry_source_cuda(c, p);
    }
    std::ostringstream o;
    o << "/* tilepipe halide route: entry for case " << c_comment(c.id) << " (generated). */\n"
      << "#include <stddef.h>\n"
      << "#include <stdint.h>\n"
      << "#include \"HalideRuntime.h\"\n"
      << "#include \"kernel.h\"\n\n"
      << "int " << kEntry << "(void *const *buffers) {\n";
    // The thread pool size is not baked in: the Halide runtime reads
    // HL_NUM_THREADS, which replay sets for every visit.
    buffers_and_call(o, c, p, false);
    return o.str();
}

// ---- responses ----

Value describe() {
    Value ops = Value::array();
    for (const OpInfo &o : op_table()) {
        if (route_has(o.name)) {
            ops.push(Value::string(o.name));
        }
    }
    Value v = Value::object();
    v.set("protocol", Value::number(1));
    v.set("name", Value::string(kRouteName));
    if (kCUDA) {
        Value devices = Value::array();
        devices.push(Value::string("cuda"));
        v.set("devices", devices);
    }
    v.set("kind", Value::string("object"));
    v.set("version", Value::string(kHalideVersion));
    v.set("available", Value::boolean(true));
    v.set("reason", Value::string(""));
    v.set("ops", ops);
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
        make_dir(workdir);

        Target host = host_target();
        Target target = host.with_feature(Target::StrictFloat);
        if (kCUDA) {
            // PTX for compute capability 8.6 (Halide 14's newest), which the
            // driver compiles for the GPU at hand when the module loads.
            target = target.with_feature(Target::CUDA).with_feature(Target::CUDACapability86);
        }
        toolchain.set("target", Value::string(target.to_string()));
        toolchain.set("host_target", Value::string(host.to_string()));

        Knobs k;
        k.vec = std::max(1, target.natural_vector_size<float>());
        k.threads = c.threads > 0 ? c.threads : 1;
        k.F = storage(c.dtype);
        k.gpu = kCUDA;
        Plan p = plan(c, k);
        // Threads size the parallel tasks here; at run time the pool size
        // comes from HL_NUM_THREADS, which replay sets for every visit.
        p.schedule.set("tiling_threads", c.threads > 0 ? Value::number(c.threads) : Value::string("halide default"));
        p.schedule.set("runtime_threads", Value::string("HL_NUM_THREADS"));
        p.schedule.set("strict_float", Value::boolean(true));
        p.schedule.set("function", Value::string(kFunction));
        p.schedule.set("storage", Value::string(c.dtype == "f32" ? "f32" : c.dtype + " storage, fp32 arithmetic, round-to-nearest-even stores"));
        if (c.op == "rmsnorm" || c.op == "layernorm" || c.op == "residual_layernorm") {
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
        return failure_response(f.status, f.reason, toolchain, commands);
    } catch (const Halide::Error &e) {
        return failure_response("failed", std::string("halide: ") + e.what(), toolchain, commands);
    } catch (const std::exception &e) {
        return failure_response("failed", e.what(), toolchain, commands);
    }
}

}  // namespace

int main(int argc, char **argv) {
    return tproute::route_main(argc, argv, kRouteName, describe, build);
}
