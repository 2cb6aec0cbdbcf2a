#include "route.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using tpjson::Value;

namespace tproute {

namespace {

// saved_stdout is the protocol's stdout; fd 1 itself points at stderr so
// that nothing but the response can reach the caller's stdout.
int saved_stdout = -1;
const char *route_name = "route";

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
            std::fprintf(stderr, "%s route: write stdout: %s\n", route_name, std::strerror(errno));
            std::exit(1);
        }
        p += n;
        left -= size_t(n);
    }
}

int usage() {
    std::fprintf(stderr, "usage: route describe\n       route build --case CASE.json --workdir DIR\n");
    return 2;
}

}  // namespace

void fail(const std::string &reason) {
    throw Failure{"failed", reason};
}

void unsupported(const std::string &reason) {
    throw Failure{"unsupported", reason};
}

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
        std::fprintf(stderr, "%s route: exec %s: %s\n", route_name, args[0], std::strerror(errno));
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
    out.write(data.data(), std::streamsize(data.size()));
    out.close();
    if (!out) {
        fail("write " + path + ": " + std::strerror(errno));
    }
}

bool regular_file(const std::string &path) {
    struct stat st;
    return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void make_dir(const std::string &dir) {
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) {
        if (mkdir(dir.c_str(), 0777) != 0) {
            fail("mkdir " + dir + ": " + std::strerror(errno));
        }
    } else if (!S_ISDIR(st.st_mode)) {
        fail(dir + ": exists and is not a directory");
    }
}

std::set<std::string> cpu_flags() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, 5, "flags") != 0 || line.find(':') == std::string::npos) {
            continue;
        }
        std::istringstream words(line.substr(line.find(':') + 1));
        std::set<std::string> flags;
        for (std::string w; words >> w;) {
            flags.insert(w);
        }
        return flags;
    }
    fail("no flags line in /proc/cpuinfo: the build cannot tell what this CPU offers");
}

std::string first_line(const std::string &s) {
    return s.substr(0, s.find('\n'));
}

tpjson::Value response(const std::string &status, const std::string &reason) {
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

tpjson::Value failure_response(const std::string &status, const std::string &reason, const tpjson::Value &toolchain,
                               const tpjson::Value &commands) {
    Value v = response(status, reason);
    v.set("toolchain", toolchain);
    v.set("commands", commands);
    return v;
}

int route_main(int argc, char **argv, const char *name, const std::function<Value()> &describe,
               const std::function<Value(const std::string &, const std::string &)> &build) {
    route_name = name;
    saved_stdout = fcntl(1, F_DUPFD_CLOEXEC, 3);
    if (saved_stdout < 0 || dup2(2, 1) < 0) {
        std::fprintf(stderr, "%s route: redirect stdout: %s\n", name, std::strerror(errno));
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
        std::string a = args[i];
        std::string val;
        bool inline_val = false;
        if (size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
            val = a.substr(eq + 1);
            a = a.substr(0, eq);
            inline_val = true;
        }
        std::string *dst = a == "--case" ? &case_path : a == "--workdir" ? &workdir : nullptr;
        if (!dst) {
            std::fprintf(stderr, "%s route: unknown argument %s\n", name, args[i].c_str());
            return usage();
        }
        if (!inline_val) {
            if (i + 1 >= args.size()) {
                std::fprintf(stderr, "%s route: %s needs a value\n", name, a.c_str());
                return usage();
            }
            val = args[++i];
        }
        *dst = val;
    }
    if (case_path.empty() || workdir.empty()) {
        std::fprintf(stderr, "%s route: build needs --case and --workdir\n", name);
        return usage();
    }
    emit(build(case_path, workdir));
    return 0;
}

}  // namespace tproute
