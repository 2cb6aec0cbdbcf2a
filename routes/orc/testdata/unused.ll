; tilepipe orc route test fixture: a module the entry never calls, so the
; JIT never compiles it and the route must refuse the build.
target triple = "x86_64-pc-linux-gnu"

define i32 @tp_unused() {
  ret i32 1
}
