// The orc route: builds tilepipe cases by compiling LLVM IR with LLVM's ORC
// JIT (LLJIT, in this process) and keeps the object the JIT emitted.
//
// It speaks the route protocol of docs/protocol.md:
//
//   route describe
//   route build --case CASE.json --workdir DIR
//
// IR comes from one of two places:
//   - built in: the halide route beside this program builds the case and
//     leaves Halide's LLVM IR (kernel.ll: the pipeline and Halide's
//     runtime) and its generated entry adapter (entry.c), which clang-14
//     turns into IR (entry.ll);
//   - external: CASE.json's "ir" ({"files": [...], "abi": FILE}), from
//     tilepipe capture --ir FILE --abi FILE.
// Every module is added to one LLJIT. An ObjectTransformLayer transform
// copies each object buffer the JIT's compiler emits, before the JIT links
// it in memory: those bytes are what the route returns as its objects, and
// what prepare links unchanged. The route then looks the entry up in the
// JIT, runs it once on the case's inputs (CASE.json "inputs") and writes
// the outputs for tilepipe to check against the oracle.
//
// The JIT runs without a platform (no static-initializer scraping), so each
// object is exactly LLVM's codegen of its module, with its .init_array and
// .fini_array sections intact for the static link.
//
// stdout carries exactly one JSON document; everything else goes to
// stderr. Only usage errors exit non-zero.
#include "route.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectTransformLayer.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using tpjson::Value;
using namespace tproute;

namespace {

const char *const kVersion = "LLVM " LLVM_VERSION_STRING " ORC LLJIT";

#ifndef TP_HALIDE_INCLUDE
#define TP_HALIDE_INCLUDE "/usr/include/halide14"
#endif
#ifndef TP_CLANG
#define TP_CLANG "clang-14"
#endif

std::string llvm_message(llvm::Error e) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << e;
    return os.str();
}

std::string base_name(const std::string &p) {
    size_t s = p.rfind('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

std::string stem(const std::string &p) {
    std::string b = base_name(p);
    size_t dot = b.find('.');
    return dot == std::string::npos ? b : b.substr(0, dot);
}

// self_dir is the directory of this program (routes/orc); the halide route
// is its sibling routes/halide/route.
std::string self_dir() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) {
        return ".";
    }
    buf[n] = 0;
    std::string p(buf);
    return p.substr(0, p.rfind('/'));
}

std::string halide_route() {
    return self_dir() + "/../halide/route";
}

// which finds prog on PATH ("" when absent).
std::string which(const std::string &prog) {
    const char *path = std::getenv("PATH");
    std::stringstream ss(path ? path : "/usr/bin:/bin");
    std::string d;
    while (std::getline(ss, d, ':')) {
        std::string p = (d.empty() ? "." : d) + "/" + prog;
        if (access(p.c_str(), X_OK) == 0) {
            return p;
        }
    }
    return "";
}

// ---- JSON helpers ----

const Value &member(const Value &v, const std::string &key, Value::Kind kind, const std::string &where) {
    const Value *m = v.get(key);
    if (!m || m->kind != kind) {
        fail(where + ": " + key + ": want a " + tpjson::kind_name(kind));
    }
    return *m;
}

std::string string_member(const Value &v, const std::string &key, const std::string &where) {
    return member(v, key, Value::String, where).str;
}

// ---- the case ----

struct Param {
    std::string name, role, dtype;
    std::vector<long long> shape;
    size_t bytes = 0;
};

struct Case {
    std::string id, op, dtype;
    Value dims, signature_json, ir;
    std::vector<Param> signature;
    std::map<std::string, std::string> inputs;  // name -> path
    int threads = 0;
};

size_t dtype_size(const std::string &d, const std::string &where) {
    if (d == "f32") {
        return 4;
    }
    if (d == "f16" || d == "bf16") {
        return 2;
    }
    if (d == "i64") {
        return 8;
    }
    fail(where + ": dtype " + d + ": want f32, f16, bf16 or i64");
}

Case decode_case(const Value &v, const std::string &path) {
    Case c;
    std::string where = "case " + path;
    c.id = string_member(v, "id", where);
    c.op = string_member(v, "op", where);
    c.dtype = string_member(v, "dtype", where);
    c.dims = member(v, "dims", Value::Object, where);
    c.signature_json = member(v, "signature", Value::Array, where);
    for (const Value &p : c.signature_json.arr) {
        Param q;
        q.name = string_member(p, "name", where + ": signature");
        q.role = string_member(p, "role", where + ": signature");
        q.dtype = string_member(p, "dtype", where + ": signature");
        size_t n = 1;
        for (const Value &d : member(p, "shape", Value::Array, where + ": signature").arr) {
            q.shape.push_back((long long)d.num);
            n *= size_t(d.num);
        }
        q.bytes = n * dtype_size(q.dtype, where + ": signature " + q.name);
        c.signature.push_back(q);
    }
    if (const Value *t = v.get("threads"); t && t->is_number()) {
        c.threads = int(t->num);
    }
    if (const Value *in = v.get("inputs"); in && in->is_array()) {
        for (const Value &e : in->arr) {
            c.inputs[string_member(e, "name", where + ": inputs")] = string_member(e, "path", where + ": inputs");
        }
    }
    if (const Value *ir = v.get("ir"); ir && ir->is_object()) {
        c.ir = *ir;
    }
    return c;
}

// ---- CPU features ----

// kCpuinfo names each LLVM x86 feature the JIT may use by its
// /proc/cpuinfo flag, so that replay can refuse an object built for
// features its CPU lacks. Host features missing from this table, or whose
// flag this machine's /proc/cpuinfo lacks, are turned off for the JIT (and
// listed as disabled), so the object never depends on a feature replay
// cannot check.
const std::map<std::string, std::string> kCpuinfo = {
    {"64bit", "lm"}, {"adx", "adx"}, {"aes", "aes"}, {"amx-bf16", "amx_bf16"}, {"amx-int8", "amx_int8"},
    {"amx-tile", "amx_tile"}, {"avx", "avx"}, {"avx2", "avx2"}, {"avx512bf16", "avx512_bf16"},
    {"avx512bitalg", "avx512_bitalg"}, {"avx512bw", "avx512bw"}, {"avx512cd", "avx512cd"},
    {"avx512dq", "avx512dq"}, {"avx512f", "avx512f"}, {"avx512fp16", "avx512_fp16"},
    {"avx512ifma", "avx512ifma"}, {"avx512vbmi", "avx512vbmi"}, {"avx512vbmi2", "avx512_vbmi2"},
    {"avx512vl", "avx512vl"}, {"avx512vnni", "avx512_vnni"}, {"avx512vpopcntdq", "avx512_vpopcntdq"},
    {"avxvnni", "avx_vnni"}, {"bmi", "bmi1"}, {"bmi2", "bmi2"}, {"cldemote", "cldemote"},
    {"clflushopt", "clflushopt"}, {"clwb", "clwb"}, {"cmov", "cmov"}, {"crc32", "sse4_2"}, {"cx16", "cx16"},
    {"cx8", "cx8"}, {"f16c", "f16c"}, {"fma", "fma"}, {"fsgsbase", "fsgsbase"}, {"fxsr", "fxsr"},
    {"gfni", "gfni"}, {"invpcid", "invpcid"}, {"lzcnt", "abm"}, {"mmx", "mmx"}, {"movbe", "movbe"},
    {"movdir64b", "movdir64b"}, {"movdiri", "movdiri"}, {"pclmul", "pclmulqdq"}, {"pku", "pku"},
    {"popcnt", "popcnt"}, {"prfchw", "3dnowprefetch"}, {"rdpid", "rdpid"}, {"rdrnd", "rdrand"},
    {"rdseed", "rdseed"}, {"sahf", "lahf_lm"}, {"serialize", "serialize"}, {"sha", "sha_ni"},
    {"sse", "sse"}, {"sse2", "sse2"}, {"sse3", "pni"}, {"sse4.1", "sse4_1"}, {"sse4.2", "sse4_2"},
    {"ssse3", "ssse3"}, {"tsxldtrk", "tsxldtrk"}, {"vaes", "vaes"}, {"vpclmulqdq", "vpclmulqdq"},
    {"wbnoinvd", "wbnoinvd"}, {"x87", "fpu"}, {"xsave", "xsave"}, {"xsavec", "xsavec"},
    {"xsaveopt", "xsaveopt"}, {"xsaves", "xsaves"},
};

struct Features {
    std::string cpu;
    std::vector<std::string> enabled, disabled;  // LLVM names
    std::set<std::string> cpuinfo;               // replay's requirement
};

Features host_features() {
    Features f;
    f.cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> m;
    if (!llvm::sys::getHostCPUFeatures(m)) {
        fail("LLVM cannot read this host's CPU features (sys::getHostCPUFeatures)");
    }
    // CPUID can show a feature the kernel does not offer (a hypervisor's
    // CPUID with xsaves, which Linux left out of /proc/cpuinfo): replay
    // checks against /proc/cpuinfo, so that is what the JIT may use.
    const std::set<std::string> offered = cpu_flags();
    for (const auto &e : m) {
        if (!e.second) {
            continue;
        }
        std::string name = e.first().str();
        auto it = kCpuinfo.find(name);
        if (it == kCpuinfo.end() || !offered.count(it->second)) {
            f.disabled.push_back(name);
        } else {
            f.enabled.push_back(name);
            f.cpuinfo.insert(it->second);
        }
    }
    std::sort(f.enabled.begin(), f.enabled.end());
    std::sort(f.disabled.begin(), f.disabled.end());
    return f;
}

// ---- the JIT ----

struct Emitted {
    std::string module;  // the module's stem, e.g. kernel
    std::string bytes;
};

struct JitResult {
    std::vector<Emitted> objects;
    std::string triple;
    int ret = 0;
};

// check_entry_ir finds symbol among the modules' definitions and checks
// its type against the protocol's int SYMBOL(void *const *buffers).
void check_entry_ir(const std::vector<std::unique_ptr<llvm::Module>> &mods, const std::vector<std::string> &files,
                    const std::string &symbol) {
    int defs = 0;
    for (size_t i = 0; i < mods.size(); i++) {
        llvm::Function *f = mods[i]->getFunction(symbol);
        if (!f || f->isDeclaration()) {
            continue;
        }
        defs++;
        llvm::FunctionType *t = f->getFunctionType();
        bool ok = t->getReturnType()->isIntegerTy(32) && t->getNumParams() == 1 && t->getParamType(0)->isPointerTy() &&
                  !t->isVarArg() && f->hasExternalLinkage();
        if (!ok) {
            std::string ty;
            llvm::raw_string_ostream os(ty);
            t->print(os);
            fail("abi: entry " + symbol + " in " + files[i] + " has type " + os.str() + (f->hasExternalLinkage() ? "" : " (not external)") +
                 ", want i32 (ptr): int " + symbol + "(void *const *buffers)");
        }
    }
    std::string list;
    for (const auto &f : files) {
        list += (list.empty() ? "" : ", ") + f;
    }
    if (defs == 0) {
        fail("abi: entry " + symbol + " is not defined by the IR (" + list + ")");
    }
    if (defs > 1) {
        fail("abi: entry " + symbol + " is defined by " + std::to_string(defs) + " IR modules (" + list +
             "), want exactly 1");
    }
}

// check_entry_objects: exactly one emitted object defines symbol as a
// global function, the symbol prepare's harness will call.
void check_entry_objects(const std::vector<Emitted> &objs, const std::string &symbol) {
    int defs = 0;
    for (const Emitted &e : objs) {
        auto of = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(e.bytes, e.module));
        if (!of) {
            fail("object of module " + e.module + ": " + llvm_message(of.takeError()));
        }
        for (const auto &s : (*of)->symbols()) {
            auto name = s.getName();
            auto flags = s.getFlags();
            auto type = s.getType();
            if (!name || !flags || !type) {
                llvm::consumeError(name.takeError());
                llvm::consumeError(flags.takeError());
                llvm::consumeError(type.takeError());
                continue;
            }
            if (*name == symbol && !(*flags & llvm::object::SymbolRef::SF_Undefined) &&
                (*flags & llvm::object::SymbolRef::SF_Global) && *type == llvm::object::SymbolRef::ST_Function) {
                defs++;
            }
        }
    }
    if (defs != 1) {
        fail("abi: entry " + symbol + " is defined as a global function by " + std::to_string(defs) +
             " of the JIT's objects, want exactly 1");
    }
}

JitResult jit(const std::vector<std::string> &files, const std::string &symbol, const Features &feat,
              std::vector<std::vector<unsigned char>> &buffers) {
    JitResult r;
    std::vector<std::unique_ptr<llvm::LLVMContext>> ctxs;
    std::vector<std::unique_ptr<llvm::Module>> mods;
    std::set<std::string> stems;
    for (const auto &f : files) {
        auto ctx = std::make_unique<llvm::LLVMContext>();
        llvm::SMDiagnostic err;
        auto m = llvm::parseIRFile(f, err, *ctx);
        if (!m) {
            std::string msg;
            llvm::raw_string_ostream os(msg);
            err.print("orc", os, false);
            fail("ir " + f + ": " + os.str());
        }
        std::string s = stem(f);
        if (!stems.insert(s).second) {
            fail("ir " + f + ": two modules named " + s + "; give the IR files distinct names");
        }
        m->setModuleIdentifier(s);
        ctxs.push_back(std::move(ctx));
        mods.push_back(std::move(m));
    }
    check_entry_ir(mods, files, symbol);

    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) {
        fail("JIT target: " + llvm_message(jtmb.takeError()));
    }
    jtmb->setCPU(feat.cpu);
    llvm::SubtargetFeatures sf;
    for (const auto &e : feat.enabled) {
        sf.AddFeature(e, true);
    }
    for (const auto &d : feat.disabled) {
        sf.AddFeature(d, false);
    }
    jtmb->getFeatures() = sf;
    jtmb->setRelocationModel(llvm::Reloc::PIC_);
    jtmb->setCodeModel(llvm::CodeModel::Small);
    jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    // ELF constructors and destructors go to .init_array/.fini_array, as
    // in a static compiler's object (the JIT default is .ctors/.dtors).
    jtmb->getOptions().UseInitArray = true;
    r.triple = jtmb->getTargetTriple().str();

    auto j = llvm::orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(std::move(*jtmb))
                 .setPlatformSetUp([](llvm::orc::LLJIT &) { return llvm::Error::success(); })
                 .create();
    if (!j) {
        fail("LLJIT: " + llvm_message(j.takeError()));
    }
    std::vector<Emitted> *objs = &r.objects;
    (*j)->getObjTransformLayer().setTransform(
        [objs](std::unique_ptr<llvm::MemoryBuffer> obj) -> llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> {
            std::string id = obj->getBufferIdentifier().str();
            size_t cut = id.find("-jitted-objectbuffer");
            objs->push_back({cut == std::string::npos ? id : id.substr(0, cut), obj->getBuffer().str()});
            return obj;
        });
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess((*j)->getDataLayout().getGlobalPrefix());
    if (!gen) {
        fail("JIT process symbols: " + llvm_message(gen.takeError()));
    }
    (*j)->getMainJITDylib().addGenerator(std::move(*gen));
    for (size_t i = 0; i < mods.size(); i++) {
        if (auto err = (*j)->addIRModule(llvm::orc::ThreadSafeModule(std::move(mods[i]), std::move(ctxs[i])))) {
            fail("JIT add " + files[i] + ": " + llvm_message(std::move(err)));
        }
    }
    auto sym = (*j)->lookup(symbol);
    if (!sym) {
        fail("JIT lookup " + symbol + ": " + llvm_message(sym.takeError()));
    }
    // Every module is compiled now, also those the entry does not reach,
    // so that each IR file has its object.
    for (const auto &m : stems) {
        bool have = false;
        for (const auto &o : r.objects) {
            have = have || o.module == m;
        }
        if (!have) {
            fail("JIT: module " + m + " was not compiled by the entry's lookup (no symbol of it is reachable from " +
                 symbol + "); pass only the IR the entry needs");
        }
    }
    check_entry_objects(r.objects, symbol);

    std::vector<void *> ptrs;
    for (auto &b : buffers) {
        ptrs.push_back(b.data());
    }
    auto fn = reinterpret_cast<int (*)(void *const *)>(sym->getAddress());
    r.ret = fn(ptrs.data());
    // The JIT'd code stays mapped until the process exits: runtimes such as
    // Halide's leave worker threads parked in it after the call returns.
    (void)j->release();
    return r;
}

// ---- responses ----

// halide_describe asks the sibling halide route for its ops.
Value halide_describe() {
    Run r = run({halide_route(), "describe"}, "", true);
    if (r.exit != 0) {
        fail("halide route " + halide_route() + " describe exited " + std::to_string(r.exit));
    }
    try {
        return tpjson::parse(r.out);
    } catch (const tpjson::ParseError &e) {
        fail("halide route describe: " + std::string(e.what()));
    }
}

Value describe() {
    Value v = Value::object();
    v.set("protocol", Value::number(1));
    v.set("name", Value::string("orc"));
    v.set("kind", Value::string("object"));
    v.set("version", Value::string(kVersion));
    std::string reason;
    Value ops = Value::array();
    try {
        Value h = halide_describe();
        if (const Value *o = h.get("ops"); o && o->is_array()) {
            ops = *o;
        }
    } catch (const Failure &f) {
        reason = "built-in IR comes from the halide route: " + f.reason;
    }
    if (reason.empty() && which(TP_CLANG).empty()) {
        reason = std::string(TP_CLANG) + " not found on PATH (it compiles the Halide entry adapter to IR)";
    }
    v.set("available", Value::boolean(reason.empty()));
    v.set("reason", Value::string(reason));
    v.set("ops", ops);
    v.set("validates", Value::boolean(true));
    v.set("accepts_ir", Value::boolean(true));
    return v;
}

struct Source {
    std::vector<std::string> ir;  // IR files, link order
    std::string symbol;
    Value link = Value::array();
    Value schedule = Value::object();
    std::vector<std::pair<std::string, std::string>> files;  // extra products (path, role)
};

// external_source checks the ABI file against the case and copies the IR
// into the workdir, so that the capture stores the exact IR that ran.
Source external_source(const Case &c, const std::string &base) {
    Source s;
    std::string abi_path = string_member(c.ir, "abi", "case: ir");
    Value abi;
    try {
        abi = tpjson::parse(read_file(abi_path));
    } catch (const tpjson::ParseError &e) {
        fail("abi " + abi_path + ": invalid JSON: " + e.what());
    }
    std::string where = "abi " + abi_path;
    std::string op = string_member(abi, "op", where), dtype = string_member(abi, "dtype", where);
    const Value &dims = member(abi, "dims", Value::Object, where);
    if (op != c.op || dtype != c.dtype || tpjson::write(dims) != tpjson::write(c.dims)) {
        unsupported("the external IR (" + abi_path + ") implements " + op + " " + tpjson::write(dims) + " " + dtype +
                    ", not this case");
    }
    const Value &params = member(abi, "params", Value::Array, where);
    if (tpjson::write(params) != tpjson::write(c.signature_json)) {
        fail(where + ": params " + tpjson::write(params) + " differ from the case signature " +
             tpjson::write(c.signature_json));
    }
    s.symbol = string_member(abi, "symbol", where);
    if (const Value *l = abi.get("link"); l && l->is_array()) {
        s.link = *l;
    }
    make_dir(base + "ir");
    for (const Value &f : member(c.ir, "files", Value::Array, "case: ir").arr) {
        if (!f.is_string()) {
            fail("case: ir: files: want strings");
        }
        std::string dst = "ir/" + base_name(f.str);
        write_file(base + dst, read_file(f.str));
        s.ir.push_back(base + dst);
        s.files.push_back({dst, "llvm"});
    }
    write_file(base + "abi.json", read_file(abi_path));
    s.files.push_back({"abi.json", "other"});
    s.schedule.set("ir", Value::string("external"));
    return s;
}

// halide_source lets the halide route build the case, then compiles its
// entry adapter to IR with clang.
Source halide_source(const std::string &case_path, const std::string &base, Value &commands, Value &toolchain) {
    Source s;
    std::string hdir = base + "halide";
    make_dir(hdir);
    std::vector<std::string> hargv = {halide_route(), "build", "--case", case_path, "--workdir", hdir};
    Run h = run(hargv, "", true);
    commands.push(command_json(hargv, h.exit));
    if (h.exit != 0) {
        fail("halide route exited " + std::to_string(h.exit));
    }
    Value hr;
    try {
        hr = tpjson::parse(h.out);
    } catch (const tpjson::ParseError &e) {
        fail("halide route: stdout: " + std::string(e.what()));
    }
    std::string status = string_member(hr, "status", "halide route");
    if (status != "built") {
        throw Failure{status, "halide: " + string_member(hr, "reason", "halide route")};
    }
    if (const Value *t = hr.get("toolchain"); t && t->is_object()) {
        toolchain.set("ir_from", *t);
    }
    s.symbol = string_member(member(hr, "entry", Value::Object, "halide route"), "symbol", "halide route: entry");
    s.link = member(hr, "link", Value::Array, "halide route");
    if (const Value *sc = hr.get("schedule"); sc && sc->is_object()) {
        s.schedule = *sc;
    }
    s.schedule.set("ir", Value::string("halide route: kernel.ll (pipeline and runtime), entry.c via " TP_CLANG));

    std::vector<std::string> vargv = {TP_CLANG, "--version"};
    Run ver = run(vargv, base, true);
    commands.push(command_json(vargv, ver.exit));
    toolchain.set("clang", Value::string(first_line(ver.out)));
    std::vector<std::string> cargv = {TP_CLANG, "-O2", "-S", "-emit-llvm", "-I" TP_HALIDE_INCLUDE, "-Ihalide",
                                      "halide/entry.c", "-o", "entry.ll"};
    Run cl = run(cargv, base, false);
    commands.push(command_json(cargv, cl.exit));
    if (cl.exit != 0) {
        fail(std::string(TP_CLANG) + " -emit-llvm halide/entry.c exited " + std::to_string(cl.exit) +
             " (its messages are on stderr)");
    }
    s.ir = {hdir + "/kernel.ll", base + "entry.ll"};
    s.files = {{"halide/kernel.ll", "llvm"}, {"entry.ll", "llvm"}, {"halide/entry.c", "source"},
               {"halide/kernel.stmt", "stmt"}};
    return s;
}

Value build(const std::string &case_path, const std::string &workdir) {
    Value commands = Value::array();
    Value toolchain = Value::object();
    toolchain.set("compiler", Value::string(kVersion));
    try {
        Value cj;
        try {
            cj = tpjson::parse(read_file(case_path));
        } catch (const tpjson::ParseError &e) {
            fail("case " + case_path + ": invalid JSON: " + e.what());
        }
        Case c = decode_case(cj, case_path);
        make_dir(workdir);
        std::string base = workdir + "/";

        Source src = c.ir.is_object() ? external_source(c, base) : halide_source(case_path, base, commands, toolchain);

        // The validation run reads the inputs tilepipe wrote; outputs start
        // as NaN so that an element the entry does not write cannot pass.
        std::vector<std::vector<unsigned char>> buffers;
        for (const Param &p : c.signature) {
            std::vector<unsigned char> b(std::max<size_t>(p.bytes, 1), 0xff);
            if (p.role == "input") {
                auto it = c.inputs.find(p.name);
                if (it == c.inputs.end()) {
                    fail("case " + case_path + ": inputs: no file for input " + p.name +
                         " (the orc route runs its JIT once and needs every input)");
                }
                std::string data = read_file(it->second);
                if (data.size() != p.bytes) {
                    fail("input " + p.name + " (" + it->second + "): " + std::to_string(data.size()) + " bytes, want " +
                         std::to_string(p.bytes));
                }
                std::memcpy(b.data(), data.data(), data.size());
            }
            buffers.push_back(std::move(b));
        }
        // The Halide runtime sizes its thread pool from HL_NUM_THREADS.
        if (c.threads > 0) {
            setenv("HL_NUM_THREADS", std::to_string(c.threads).c_str(), 1);
        }

        Features feat = host_features();
        JitResult jr = jit(src.ir, src.symbol, feat, buffers);
        if (jr.ret != 0) {
            fail("validation run: entry " + src.symbol + " returned " + std::to_string(jr.ret));
        }

        Value files = Value::array();
        auto add = [&](const std::string &path, const std::string &role, const std::string &param = "") {
            if (!regular_file(base + path)) {
                fail("product " + path + " is missing after the build");
            }
            Value f = Value::object();
            f.set("path", Value::string(path));
            f.set("role", Value::string(role));
            if (!param.empty()) {
                f.set("param", Value::string(param));
            }
            files.push(f);
        };
        if (jr.objects.size() != src.ir.size()) {
            fail("JIT emitted " + std::to_string(jr.objects.size()) + " objects for " + std::to_string(src.ir.size()) +
                 " modules");
        }
        Value objects = Value::array();
        for (const std::string &ir : src.ir) {
            std::string m = stem(ir);
            for (const Emitted &e : jr.objects) {
                if (e.module == m) {
                    write_file(base + m + ".orc.o", e.bytes);
                    add(m + ".orc.o", "object");
                    Value o = Value::object();
                    o.set("path", Value::string(m + ".orc.o"));
                    o.set("module", Value::string(base_name(ir)));
                    objects.push(o);
                }
            }
        }
        for (const auto &f : src.files) {
            add(f.first, f.second);
        }
        make_dir(base + "out");
        for (size_t i = 0; i < c.signature.size(); i++) {
            const Param &p = c.signature[i];
            if (p.role != "output") {
                continue;
            }
            std::string path = "out/" + p.name + ".bin";
            write_file(base + path, std::string(buffers[i].begin(), buffers[i].begin() + p.bytes));
            add(path, "output", p.name);
        }

        toolchain.set("jit", Value::string("LLJIT in-process, no platform (objects as codegen emits them)"));
        toolchain.set("triple", Value::string(jr.triple));
        toolchain.set("cpu", Value::string(feat.cpu));
        Value en = Value::array(), dis = Value::array(), req = Value::array();
        for (const auto &e : feat.enabled) {
            en.push(Value::string("+" + e));
        }
        for (const auto &d : feat.disabled) {
            dis.push(Value::string("-" + d));
        }
        for (const auto &r : feat.cpuinfo) {
            req.push(Value::string(r));
        }
        toolchain.set("features", en);
        toolchain.set("disabled_features", dis);
        toolchain.set("opt_level", Value::string("Aggressive (O3)"));
        toolchain.set("reloc", Value::string("pic"));
        toolchain.set("code_model", Value::string("small"));
        toolchain.set("objects", objects);

        Value entry = Value::object();
        entry.set("symbol", Value::string(src.symbol));
        entry.set("params", c.signature_json);
        Value v = response("built", "");
        v.set("files", files);
        v.set("entry", entry);
        v.set("link", src.link);
        v.set("schedule", src.schedule);
        v.set("toolchain", toolchain);
        v.set("commands", commands);
        v.set("requires_cpu", req);
        return v;
    } catch (const Failure &f) {
        return failure_response(f.status, f.reason, toolchain, commands);
    } catch (const std::exception &e) {
        return failure_response("failed", e.what(), toolchain, commands);
    }
}

}  // namespace

int main(int argc, char **argv) {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    return tproute::route_main(argc, argv, "orc", describe, build);
}
