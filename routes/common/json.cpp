#include "json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tpjson {

Value Value::boolean(bool v) {
    Value x;
    x.kind = Bool;
    x.b = v;
    return x;
}

Value Value::number(double v) {
    Value x;
    x.kind = Number;
    x.num = v;
    return x;
}

Value Value::string(const std::string &v) {
    Value x;
    x.kind = String;
    x.str = v;
    return x;
}

Value Value::array() {
    Value x;
    x.kind = Array;
    return x;
}

Value Value::object() {
    Value x;
    x.kind = Object;
    return x;
}

const Value *Value::get(const std::string &key) const {
    if (kind != Object) {
        return nullptr;
    }
    for (const auto &m : obj) {
        if (m.first == key) {
            return &m.second;
        }
    }
    return nullptr;
}

Value &Value::set(const std::string &key, Value v) {
    for (auto &m : obj) {
        if (m.first == key) {
            m.second = std::move(v);
            return *this;
        }
    }
    obj.emplace_back(key, std::move(v));
    return *this;
}

Value &Value::push(Value v) {
    arr.push_back(std::move(v));
    return *this;
}

const char *kind_name(Value::Kind k) {
    switch (k) {
    case Value::Null:
        return "null";
    case Value::Bool:
        return "boolean";
    case Value::Number:
        return "number";
    case Value::String:
        return "string";
    case Value::Array:
        return "array";
    case Value::Object:
        return "object";
    }
    return "?";
}

namespace {

// Deep nesting is never legitimate in a case file; the limit keeps the
// recursive parser's stack bounded.
constexpr int kMaxDepth = 64;

class Parser {
public:
    explicit Parser(const std::string &s)
        : s_(s) {
    }

    Value document() {
        ws();
        Value v = value(0);
        ws();
        if (i_ != s_.size()) {
            fail("unexpected data after the document");
        }
        return v;
    }

private:
    const std::string &s_;
    size_t i_ = 0;

    [[noreturn]] void fail(const std::string &msg) const {
        throw ParseError(msg, i_);
    }

    void ws() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
            i_++;
        }
    }

    bool eat(char c) {
        if (i_ < s_.size() && s_[i_] == c) {
            i_++;
            return true;
        }
        return false;
    }

    void expect_word(const char *w) {
        size_t n = std::strlen(w);
        if (s_.compare(i_, n, w) != 0) {
            fail(std::string("invalid literal, want ") + w);
        }
        i_ += n;
    }

    Value value(int depth) {
        if (depth > kMaxDepth) {
            fail("nesting deeper than " + std::to_string(kMaxDepth));
        }
        if (i_ >= s_.size()) {
            fail("unexpected end of input");
        }
        switch (s_[i_]) {
        case '{':
            return object(depth);
        case '[':
            return array(depth);
        case '"':
            return Value::string(string());
        case 't':
            expect_word("true");
            return Value::boolean(true);
        case 'f':
            expect_word("false");
            return Value::boolean(false);
        case 'n':
            expect_word("null");
            return Value::null();
        default:
            if (s_[i_] == '-' || (s_[i_] >= '0' && s_[i_] <= '9')) {
                return number();
            }
            fail(std::string("unexpected character '") + s_[i_] + "'");
        }
    }

    Value object(int depth) {
        i_++;  // '{'
        Value v = Value::object();
        ws();
        if (eat('}')) {
            return v;
        }
        for (;;) {
            ws();
            if (i_ >= s_.size() || s_[i_] != '"') {
                fail("want a member name");
            }
            size_t at = i_;
            std::string key = string();
            if (v.get(key) != nullptr) {
                i_ = at;
                fail("duplicate member \"" + key + "\"");
            }
            ws();
            if (!eat(':')) {
                fail("want ':'");
            }
            ws();
            Value m = value(depth + 1);
            v.obj.emplace_back(std::move(key), std::move(m));
            ws();
            if (eat('}')) {
                return v;
            }
            if (!eat(',')) {
                fail("want ',' or '}'");
            }
        }
    }

    Value array(int depth) {
        i_++;  // '['
        Value v = Value::array();
        ws();
        if (eat(']')) {
            return v;
        }
        for (;;) {
            ws();
            v.arr.push_back(value(depth + 1));
            ws();
            if (eat(']')) {
                return v;
            }
            if (!eat(',')) {
                fail("want ',' or ']'");
            }
        }
    }

    static bool digit(char c) {
        return c >= '0' && c <= '9';
    }

    Value number() {
        size_t start = i_;
        eat('-');
        if (eat('0')) {
            // A leading zero stands alone.
        } else if (i_ < s_.size() && digit(s_[i_]) ) {
            while (i_ < s_.size() && digit(s_[i_])) {
                i_++;
            }
        } else {
            fail("invalid number");
        }
        if (eat('.')) {
            if (i_ >= s_.size() || !digit(s_[i_])) {
                fail("invalid number: want digits after '.'");
            }
            while (i_ < s_.size() && digit(s_[i_])) {
                i_++;
            }
        }
        if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
            i_++;
            if (!eat('+')) {
                eat('-');
            }
            if (i_ >= s_.size() || !digit(s_[i_])) {
                fail("invalid number: want exponent digits");
            }
            while (i_ < s_.size() && digit(s_[i_])) {
                i_++;
            }
        }
        std::string text = s_.substr(start, i_ - start);
        double d = std::strtod(text.c_str(), nullptr);
        if (!std::isfinite(d)) {
            i_ = start;
            fail("number out of range");
        }
        return Value::number(d);
    }

    unsigned hex4() {
        if (i_ + 4 > s_.size()) {
            fail("truncated \\u escape");
        }
        unsigned v = 0;
        for (int k = 0; k < 4; k++) {
            char c = s_[i_++];
            v <<= 4;
            if (c >= '0' && c <= '9') {
                v |= unsigned(c - '0');
            } else if (c >= 'a' && c <= 'f') {
                v |= unsigned(c - 'a' + 10);
            } else if (c >= 'A' && c <= 'F') {
                v |= unsigned(c - 'A' + 10);
            } else {
                i_--;
                fail("invalid hex digit in \\u escape");
            }
        }
        return v;
    }

    static void utf8(std::string &out, unsigned cp) {
        if (cp < 0x80) {
            out += char(cp);
        } else if (cp < 0x800) {
            out += char(0xC0 | (cp >> 6));
            out += char(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += char(0xE0 | (cp >> 12));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        } else {
            out += char(0xF0 | (cp >> 18));
            out += char(0x80 | ((cp >> 12) & 0x3F));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        }
    }

    std::string string() {
        i_++;  // '"'
        std::string out;
        for (;;) {
            if (i_ >= s_.size()) {
                fail("unterminated string");
            }
            unsigned char c = (unsigned char)s_[i_];
            if (c == '"') {
                i_++;
                return out;
            }
            if (c < 0x20) {
                fail("control character in string");
            }
            if (c != '\\') {
                out += char(c);
                i_++;
                continue;
            }
            i_++;
            if (i_ >= s_.size()) {
                fail("unterminated escape");
            }
            char e = s_[i_++];
            switch (e) {
            case '"':
            case '\\':
            case '/':
                out += e;
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case 'n':
                out += '\n';
                break;
            case 'r':
                out += '\r';
                break;
            case 't':
                out += '\t';
                break;
            case 'u': {
                unsigned cp = hex4();
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (!(eat('\\') && eat('u'))) {
                        fail("unpaired high surrogate");
                    }
                    unsigned lo = hex4();
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        fail("invalid low surrogate");
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    fail("unpaired low surrogate");
                }
                utf8(out, cp);
                break;
            }
            default:
                i_--;
                fail(std::string("invalid escape '\\") + e + "'");
            }
        }
    }
};

// utf8_len returns the length of the well-formed UTF-8 sequence at s[i], or
// 0 when the bytes there are not one.
size_t utf8_len(const std::string &s, size_t i) {
    unsigned char c = (unsigned char)s[i];
    size_t n;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (i + n > s.size()) {
        return 0;
    }
    for (size_t k = 1; k < n; k++) {
        unsigned char t = (unsigned char)s[i + k];
        if ((t & 0xC0) != 0x80) {
            return 0;
        }
        cp = (cp << 6) | (t & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
        return 0;
    }
    return n;
}

void write_string(std::string &out, const std::string &s) {
    out += '"';
    for (size_t i = 0; i < s.size();) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out += '\\';
            out += char(c);
            i++;
        } else if (c == '\n') {
            out += "\\n";
            i++;
        } else if (c == '\t') {
            out += "\\t";
            i++;
        } else if (c == '\r') {
            out += "\\r";
            i++;
        } else if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
            i++;
        } else if (c < 0x80) {
            out += char(c);
            i++;
        } else if (size_t n = utf8_len(s, i)) {
            out.append(s, i, n);
            i += n;
        } else {
            // Compiler messages may carry arbitrary bytes; keep the document
            // valid by replacing each bad byte.
            out += "\\ufffd";
            i++;
        }
    }
    out += '"';
}

void write_value(std::string &out, const Value &v) {
    switch (v.kind) {
    case Value::Null:
        out += "null";
        break;
    case Value::Bool:
        out += v.b ? "true" : "false";
        break;
    case Value::Number: {
        char buf[40];
        if (!std::isfinite(v.num)) {
            out += "null";
            break;
        }
        if (v.num == std::trunc(v.num) && std::fabs(v.num) < 9007199254740992.0) {
            std::snprintf(buf, sizeof buf, "%lld", (long long)v.num);
        } else {
            std::snprintf(buf, sizeof buf, "%.17g", v.num);
        }
        out += buf;
        break;
    }
    case Value::String:
        write_string(out, v.str);
        break;
    case Value::Array:
        out += '[';
        for (size_t i = 0; i < v.arr.size(); i++) {
            if (i) {
                out += ", ";
            }
            write_value(out, v.arr[i]);
        }
        out += ']';
        break;
    case Value::Object:
        out += '{';
        for (size_t i = 0; i < v.obj.size(); i++) {
            if (i) {
                out += ", ";
            }
            write_string(out, v.obj[i].first);
            out += ": ";
            write_value(out, v.obj[i].second);
        }
        out += '}';
        break;
    }
}

}  // namespace

Value parse(const std::string &text) {
    return Parser(text).document();
}

std::string write(const Value &v) {
    std::string out;
    write_value(out, v);
    return out;
}

}  // namespace tpjson
