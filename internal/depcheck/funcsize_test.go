package depcheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 28's shape, kept: no non-test function over maxFuncLines lines
// (func to its closing brace), and their mean under maxMeanLines.
const (
	maxFuncLines = 80
	maxMeanLines = 20.0
)

// funcSizes is the length in lines of every function declared in src
// (file name for messages), keyed "file:line name".
func funcSizes(fset *token.FileSet, name string, src any) (map[string]int, error) {
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	sizes := map[string]int{}
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start := fset.Position(fd.Pos())
		sizes[fmt.Sprintf("%s:%d %s", name, start.Line, fd.Name.Name)] = fset.Position(fd.End()).Line - start.Line + 1
	}
	return sizes, nil
}

// tooLong: the functions of sizes over maxFuncLines, as messages.
func tooLong(sizes map[string]int) []string {
	var p []string
	for k, n := range sizes {
		if n > maxFuncLines {
			p = append(p, fmt.Sprintf("%s: %d lines, want at most %d (split it along what it does)", k, n, maxFuncLines))
		}
	}
	return p
}

// TestFunctionSize: every non-test function of the module (testdata and
// docs/ aside) is at most maxFuncLines long, and their mean is under
// maxMeanLines.
func TestFunctionSize(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	all := map[string]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, p)
		if d.IsDir() && p != root && (d.Name() == "testdata" || r == "docs" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sizes, err := funcSizes(fset, r, b)
		if err == nil {
			for k, n := range sizes {
				all[k] = n
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 500 {
		t.Fatalf("%d functions found under %s: the walk is not of the module", len(all), root)
	}
	for _, p := range tooLong(all) {
		t.Error(p)
	}
	total := 0
	for _, n := range all {
		total += n
	}
	mean := float64(total) / float64(len(all))
	t.Logf("%d functions, %d lines, mean %.1f", len(all), total, mean)
	if mean >= maxMeanLines {
		t.Errorf("%d functions, mean %.1f lines: want under %.0f", len(all), mean, maxMeanLines)
	}
}

// TestFunctionSizeFinds: an 81-line function is named, with its file,
// line and length; an 80-line one is not.
func TestFunctionSizeFinds(t *testing.T) {
	body := func(n int) string { return strings.Repeat("\tx++\n", n-2) }
	src := "package p\n\nvar x int\n\nfunc ok() {\n" + body(80) + "}\n\nfunc long() {\n" + body(81) + "}\n"
	sizes, err := funcSizes(token.NewFileSet(), "p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	got := tooLong(sizes)
	want := "p.go:86 long: 81 lines, want at most 80 (split it along what it does)"
	if len(got) != 1 || got[0] != want {
		t.Errorf("tooLong = %q, want [%q]", got, want)
	}
}
