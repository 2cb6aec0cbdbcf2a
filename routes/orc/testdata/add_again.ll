; tilepipe orc route test fixture: a second copy of add.ll, so that two modules define the entry
; add M=3 N=7 f32, protocol entry ABI: buffers[0] = A, [1] = B, [2] = C.
target triple = "x86_64-pc-linux-gnu"

define i32 @tp_add(i8** %buffers) {
entry:
  %pa = getelementptr i8*, i8** %buffers, i64 0
  %pb = getelementptr i8*, i8** %buffers, i64 1
  %pc = getelementptr i8*, i8** %buffers, i64 2
  %a8 = load i8*, i8** %pa
  %b8 = load i8*, i8** %pb
  %c8 = load i8*, i8** %pc
  %a = bitcast i8* %a8 to float*
  %b = bitcast i8* %b8 to float*
  %c = bitcast i8* %c8 to float*
  br label %loop

loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %ai = getelementptr float, float* %a, i64 %i
  %bi = getelementptr float, float* %b, i64 %i
  %ci = getelementptr float, float* %c, i64 %i
  %x = load float, float* %ai
  %y = load float, float* %bi
  %s = fadd float %x, %y
  store float %s, float* %ci
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, 21
  br i1 %done, label %exit, label %loop

exit:
  ret i32 0
}
