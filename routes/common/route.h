// What every C++ route shares: the protocol's stdout discipline, failures
// as statuses, child processes, files, and the describe/build command line
// (docs/protocol.md).
#ifndef TILEPIPE_ROUTES_COMMON_ROUTE_H
#define TILEPIPE_ROUTES_COMMON_ROUTE_H

#include "json.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace tproute {

// Failure ends a build with a protocol status (failed or unsupported) and
// a reason; route_main's build catches it into the response.
struct Failure {
    std::string status;
    std::string reason;
};

[[noreturn]] void fail(const std::string &reason);
[[noreturn]] void unsupported(const std::string &reason);

struct Run {
    int exit = -1;
    std::string out;
};

// run executes argv in dir ("" for the current directory) with stdin from
// /dev/null and stdout captured (capture) or sent to stderr. exit is the
// exit status, 128+N for signal N, or 127 when argv[0] could not be
// started.
Run run(const std::vector<std::string> &argv, const std::string &dir, bool capture);

// command_json is {"argv": [...], "exit": N}, as the build response lists
// the commands a build ran.
tpjson::Value command_json(const std::vector<std::string> &argv, int exit);

std::string read_file(const std::string &path);
void write_file(const std::string &path, const std::string &data);
// regular_file: path is a regular file, not a symlink.
bool regular_file(const std::string &path);
// make_dir creates dir unless it is already a directory.
void make_dir(const std::string &dir);
std::string first_line(const std::string &s);

// cpu_flags is the flags of the first CPU of /proc/cpuinfo: what the
// operating system says this CPU offers, the set replay checks a build's
// requires_cpu against. A build that cannot read it fails.
std::set<std::string> cpu_flags();

// response is an object route's build answer (protocol 1) with status and
// reason set and every other field present and empty.
tpjson::Value response(const std::string &status, const std::string &reason);

// failure_response is response(status, reason) keeping the toolchain and
// the commands a build had recorded before it stopped.
tpjson::Value failure_response(const std::string &status, const std::string &reason, const tpjson::Value &toolchain,
                               const tpjson::Value &commands);

// route_main runs "NAME describe" or "NAME build --case CASE --workdir DIR"
// and writes the one JSON answer to the real stdout; everything else the
// process prints (compilers' diagnostics) goes to stderr. Only usage errors
// exit non-zero.
int route_main(int argc, char **argv, const char *name, const std::function<tpjson::Value()> &describe,
               const std::function<tpjson::Value(const std::string &case_path, const std::string &workdir)> &build);

}  // namespace tproute

#endif
