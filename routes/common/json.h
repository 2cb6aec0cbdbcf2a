// A small JSON reader and writer for the route protocol (docs/protocol.md).
//
// Case files are tiny and written by tilepipe, but the reader still follows
// RFC 8259 strictly (no trailing commas, no comments, \u escapes with
// surrogate pairs) so that a malformed case is reported, never guessed at.
#ifndef TILEPIPE_ROUTES_COMMON_JSON_H
#define TILEPIPE_ROUTES_COMMON_JSON_H

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tpjson {

// ParseError carries the byte offset of the first bad input byte.
struct ParseError : std::runtime_error {
    size_t offset;
    ParseError(const std::string &msg, size_t off)
        : std::runtime_error(msg + " at byte " + std::to_string(off)), offset(off) {
    }
};

struct Value {
    enum Kind { Null, Bool, Number, String, Array, Object };
    Kind kind = Null;
    bool b = false;
    double num = 0;
    std::string str;
    std::vector<Value> arr;
    // Object members keep their order, so written documents read like the
    // protocol's examples.
    std::vector<std::pair<std::string, Value>> obj;

    Value() = default;
    static Value null() { return Value(); }
    static Value boolean(bool v);
    static Value number(double v);
    static Value string(const std::string &v);
    static Value array();
    static Value object();

    bool is_null() const { return kind == Null; }
    bool is_number() const { return kind == Number; }
    bool is_string() const { return kind == String; }
    bool is_array() const { return kind == Array; }
    bool is_object() const { return kind == Object; }

    // get returns the member named key, or nullptr when this is not an object
    // or has no such member.
    const Value *get(const std::string &key) const;

    // set replaces the member named key or appends it.
    Value &set(const std::string &key, Value v);
    Value &push(Value v);
};

// parse reads exactly one JSON document (surrounding whitespace allowed).
// It throws ParseError.
Value parse(const std::string &text);

// write renders v compactly; integral numbers print without a fraction.
std::string write(const Value &v);

// kind_name names a Kind for messages ("string", "array", ...).
const char *kind_name(Value::Kind k);

}  // namespace tpjson

#endif
